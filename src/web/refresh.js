// Refreshes the page's content every 5 seconds without reloading it: fetches the same
// address and swaps the <main> element's children. It waits while a form field has
// the focus or a <details> is open, so nobody loses what they were typing.
(function () {
  const main = document.getElementById("content");
  if (!main || main.dataset.refresh !== "yes") return;
  async function refresh() {
    const busy = document.activeElement && main.contains(document.activeElement) &&
      ["INPUT", "SELECT", "TEXTAREA"].includes(document.activeElement.tagName);
    if (busy || main.querySelector("details[open]")) return;
    try {
      const response = await fetch(location.href, { credentials: "same-origin" });
      if (!response.ok) return;
      const page = new DOMParser().parseFromString(await response.text(), "text/html");
      const fresh = page.getElementById("content");
      if (!fresh) return;
      // Images are fetched again by their own address, a new one each time.
      fresh.querySelectorAll("img").forEach((img) => {
        img.src = img.getAttribute("src").split("?")[0] + "?t=" + Date.now();
      });
      main.replaceChildren(...fresh.childNodes);
    } catch (e) {
      // The server is away for a moment: the page stays as it is.
    }
  }
  setInterval(refresh, 5000);
})();

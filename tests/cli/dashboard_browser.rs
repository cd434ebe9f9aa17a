//! The dashboard in a real headless Chromium (through chromedriver), for what a
//! person does: find a failed record, retry it, pause a tier.

use std::process::{Command, Stdio};

use crate::dashboard::{free_port, served, wait_for_port};
use crate::harness::{Backend, Running, Schedule};

/// Kills a process group when dropped (a test that panics included).
struct KillGroup(u32);

impl Drop for KillGroup {
    fn drop(&mut self) {
        // SAFETY: kill(2) on a process group this test started.
        unsafe { libc::kill(-(self.0 as i32), libc::SIGKILL) };
    }
}

/// chromedriver, on a free port, and the headless Chromium it starts; both go when
/// this is dropped, the test failed or not, and so does the folder they were given
/// for their temporary files (`TMPDIR`): Chromium makes its profile and sockets there,
/// and, killed, never removes them (they piled up in /tmp, three a run).
pub(crate) struct Driver {
    _driver: Running,
    _group: KillGroup,
    /// Last: removed once both are gone.
    _temporary: tempfile::TempDir,
    port: u16,
}

impl Driver {
    pub(crate) fn start() -> Driver {
        let port = free_port();
        let temporary = tempfile::tempdir().unwrap();
        // chromedriver leads a process group of its own, and the browser it starts is
        // in it: the whole group goes with the test.
        let driver = Running::spawn(std::os::unix::process::CommandExt::process_group(
            Command::new("chromedriver")
                .arg(format!("--port={port}"))
                .env("TMPDIR", temporary.path())
                .stdout(Stdio::null())
                .stderr(Stdio::null()),
            0,
        ));
        let group = KillGroup(driver.id());
        wait_for_port(port);
        Driver {
            _driver: driver,
            _group: group,
            _temporary: temporary,
            port,
        }
    }

    /// A headless browser session.
    pub(crate) async fn connect(&self) -> fantoccini::Client {
        // fantoccini's client carries TLS it does not need here; rustls wants a provider.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut caps = serde_json::Map::new();
        caps.insert(
            "goog:chromeOptions".into(),
            serde_json::json!({"args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,1700"]}),
        );
        fantoccini::ClientBuilder::rustls()
            .expect("a TLS setup")
            .capabilities(caps)
            .connect(&format!("http://127.0.0.1:{}", self.port))
            .await
            .expect("chromedriver answers")
    }
}

// A click returns before the next page is there: wait for what only it has.
pub(crate) async fn click(browser: &fantoccini::Client, what: fantoccini::Locator<'_>) {
    browser.find(what).await.unwrap().click().await.unwrap();
}
/// The text of `what` once it is there. An element found on the page a click is
/// leaving goes stale when the next one replaces it: it is found again on the new one.
pub(crate) async fn text_when_there(
    browser: &fantoccini::Client,
    what: fantoccini::Locator<'_>,
) -> String {
    for _ in 0..50 {
        let element = browser.wait().for_element(what).await.unwrap();
        match element.text().await {
            Ok(text) => return text,
            Err(fantoccini::error::CmdError::Standard(e))
                if e.error == fantoccini::error::ErrorStatus::StaleElementReference =>
            {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            Err(e) => panic!("reading {what:?}: {e}"),
        }
    }
    panic!("{what:?} went stale 50 times in a row")
}

/// What a person does, in a real browser: find a failed record through the search,
/// retry it and see it become SUCCESS with one more attempt; pause a tier from the
/// overview and see `backlog run` refuse to tick it. Saves a screenshot of the
/// overview to target/dashboard-overview.png.
#[test]
fn in_a_real_browser() {
    let (env, _server, port) = served(Backend::Sqlite, &[]);
    let driver = Driver::start();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let screenshot = runtime.block_on(async {
        use fantoccini::{Client, Locator};
        let browser = driver.connect().await;
        async fn rows(browser: &Client) -> usize {
            browser
                .find_all(Locator::Css("table.attempts tbody tr"))
                .await
                .unwrap()
                .len()
        }
        let base = format!("http://127.0.0.1:{port}");
        browser.goto(&base).await.unwrap();
        let search = browser.find(Locator::Css("input[name=id]")).await.unwrap();
        search.send_keys("2").await.unwrap();
        click(&browser, Locator::Css("form.search button")).await;
        browser
            .wait()
            .for_element(Locator::Css("form[action='/record/retry']"))
            .await
            .unwrap();
        assert_eq!(
            text_when_there(&browser, Locator::Css("h1")).await,
            "Record 2 ERROR"
        );
        assert_eq!(rows(&browser).await, 1);
        std::fs::write(env.path("fixed"), "").unwrap();
        click(&browser, Locator::XPath("//button[text()='Retry now']")).await;
        let notice = text_when_there(&browser, Locator::Css(".notice")).await;
        assert!(
            notice.starts_with("retried 1 record: succeeded 1"),
            "{notice}"
        );
        assert_eq!(
            text_when_there(&browser, Locator::Css("h1")).await,
            "Record 2 SUCCESS"
        );
        assert_eq!(rows(&browser).await, 2, "the retry's attempt is kept");

        // With `rate = "auto"` (each request reads the file) the overview has its section.
        env.write_schedule(&Schedule {
            handler_extra: "rate = \"auto\"",
            ..Schedule::default()
        });
        browser.goto(&base).await.unwrap();
        let rates = text_when_there(&browser, Locator::Css("#adapted-rates")).await;
        assert_eq!(rates, "Adapted rates rate = \"auto\"");
        click(&browser, Locator::Css("details.pause summary")).await;
        click(&browser, Locator::Css("details.pause option[value='1d']")).await;
        browser
            .find(Locator::Css("details.pause input[name=reason]"))
            .await
            .unwrap()
            .send_keys("partner maintenance")
            .await
            .unwrap();
        click(
            &browser,
            Locator::XPath("//details//button[text()='Pause']"),
        )
        .await;
        let notice = text_when_there(&browser, Locator::Css(".notice")).await;
        assert_eq!(notice, "Paused tier 1 (1d).");
        let png = browser.screenshot().await.unwrap();
        browser.close().await.unwrap();
        png
    });
    env.backlog(&["run", "--window", "1d"])
        .assert()
        .success()
        .stdout(predicates::str::contains("not ticking, paused since"))
        .stdout(predicates::str::contains(": partner maintenance;"));
    let target = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target");
    std::fs::create_dir_all(&target).unwrap();
    std::fs::write(target.join("dashboard-overview.png"), screenshot).unwrap();
}

/// The failures page's filter by error text, in a real browser: type a text, press
/// Filter, see only the failures that hold it; group them by error and follow a
/// group's link back to its failures.
#[test]
fn failures_filtered_and_grouped_by_error_in_a_real_browser() {
    let (_env, _server, port) = crate::dashboard_triage::failed_and_served(Backend::Sqlite, &[]);
    let driver = Driver::start();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        use fantoccini::Locator;
        let browser = driver.connect().await;
        browser
            .goto(&format!("http://127.0.0.1:{port}/failures"))
            .await
            .unwrap();
        let listed = text_when_there(&browser, Locator::Css("p.listed")).await;
        assert!(listed.starts_with("Failures 1–4 of 4"), "{listed}");
        browser
            .find(Locator::Css("input[name=error_contains]"))
            .await
            .unwrap()
            .send_keys("REFUSED")
            .await
            .unwrap();
        click(&browser, Locator::XPath("//button[text()='Filter']")).await;
        // The list of those failures only, once the filtered page is there.
        let mut listed = String::new();
        for _ in 0..50 {
            listed = text_when_there(&browser, Locator::Css("p.listed")).await;
            if listed.starts_with("Failures 1–2 of 2") {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        assert!(listed.starts_with("Failures 1–2 of 2"), "{listed}");
        let url = browser.current_url().await.unwrap();
        assert!(url.as_str().contains("error_contains=REFUSED"), "{url}");

        click(&browser, Locator::Css("a.groups")).await;
        assert_eq!(
            text_when_there(&browser, Locator::Css("h1")).await,
            "Failures by error"
        );
        let group = text_when_there(&browser, Locator::Css("table.errors tbody tr")).await;
        assert!(
            group.starts_with("connection refused by partner 2"),
            "{group}"
        );
        click(&browser, Locator::Css("table.errors tbody a")).await;
        for _ in 0..50 {
            if browser.current_url().await.unwrap().path() == "/failures" {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        let listed = text_when_there(&browser, Locator::Css("p.listed")).await;
        assert!(listed.starts_with("Failures 1–2 of 2"), "{listed}");
        browser.close().await.unwrap();
    });
}

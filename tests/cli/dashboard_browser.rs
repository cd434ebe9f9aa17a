//! The dashboard in a real headless Chromium (through chromedriver), for what a
//! person does: find a failed record, retry it, pause a tier.

use std::process::{Command, Stdio};

use chrono::DurationRound;

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

/// The overview's history in a real browser, on a backlog with a week of ticks: the
/// four charts of every tier are drawn (each image loads, with its title, axes with
/// units and legend), a tier without ticks says why in words instead, and a screenshot
/// of the section goes to target/dashboard-history.png (docs/dashboard.png).
#[test]
fn history_charts_in_a_real_browser() {
    let now = chrono::Utc::now()
        .duration_trunc(chrono::Duration::seconds(1))
        .unwrap();
    let (env, _ticks) = crate::history::week_of_ticks(Backend::Sqlite, now);
    let log = std::fs::File::create(env.path("serve.log")).unwrap();
    let (_server, port) = crate::dashboard::serve(
        env.command()
            .arg("serve")
            .env_remove("BACKLOG_TOKEN")
            .stderr(log),
    );
    let svg = |path: &str| crate::dashboard::get(port, path).body;
    let hourly = svg("/plots/history/all/hourly.svg");
    for text in [
        "Records handled and failed per hour, last 7 days (UTC)",
        "records per hour",
        "date (UTC)",
        "\nhandled\n",
        "\nfailed\n",
    ] {
        assert!(hourly.contains(text), "{text} in {hourly}");
    }
    let daily = svg("/plots/history/all/daily.svg");
    assert!(
        daily.contains("records per day") && daily.contains("date (UTC)"),
        "{daily}"
    );
    let pending = svg("/plots/history/1/pending.svg");
    assert!(
        pending.contains("pending records") && pending.contains("largest of the hour"),
        "{pending}"
    );
    let times = svg("/plots/history/1/times.svg");
    for text in ["handler time (ms, log scale)", "\np50\n", "\np95\n"] {
        assert!(times.contains(text), "{text} in {times}");
    }
    let none = svg("/plots/history/3/hourly.svg");
    assert!(
        none.contains("No tick of tier 3 (14d) has run in the last 7 days."),
        "{none}"
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let driver = Driver::start();
    let screenshot = runtime.block_on(async {
        use fantoccini::Locator;
        let browser = driver.connect().await;
        let loaded = async |browser: &fantoccini::Client| -> Vec<serde_json::Value> {
            for _ in 0..50 {
                let sizes = browser
                    .execute(
                        "return Array.from(document.querySelectorAll('.history img')).map(i => i.complete ? i.naturalWidth : 0)",
                        vec![],
                    )
                    .await
                    .unwrap();
                let sizes = sizes.as_array().cloned().unwrap_or_default();
                if sizes.len() == 4 && sizes.iter().all(|w| w.as_u64().unwrap_or(0) > 0) {
                    return sizes;
                }
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            panic!("the history's four charts did not load");
        };
        browser
            .goto(&format!("http://127.0.0.1:{port}/#history"))
            .await
            .unwrap();
        assert_eq!(loaded(&browser).await.len(), 4);
        let shown = text_when_there(&browser, Locator::Css("nav.history-tiers strong")).await;
        assert_eq!(shown, "every tier");
        let caption = text_when_there(&browser, Locator::Css(".history figcaption")).await;
        assert_eq!(
            caption,
            "Records handled and failed per hour, last 7 days (UTC), every tier"
        );
        // The screenshot first: the charts of every tier, the section at the top.
        browser
            .execute(
                "document.getElementById('history').scrollIntoView()",
                vec![],
            )
            .await
            .unwrap();
        let png = browser.screenshot().await.unwrap();
        click(&browser, Locator::LinkText("tier 3 (14d)")).await;
        for _ in 0..50 {
            if browser.current_url().await.unwrap().query() == Some("history=3") {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        loaded(&browser).await;
        let sources = browser
            .execute(
                "return Array.from(document.querySelectorAll('.history img')).map(i => i.getAttribute('src'))",
                vec![],
            )
            .await
            .unwrap();
        assert_eq!(sources[0], "/plots/history/3/hourly.svg", "{sources}");
        let shown = text_when_there(&browser, Locator::Css("nav.history-tiers strong")).await;
        assert_eq!(shown, "tier 3 (14d)");
        browser.close().await.unwrap();
        png
    });
    let target = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target");
    std::fs::create_dir_all(&target).unwrap();
    std::fs::write(target.join("dashboard-history.png"), screenshot).unwrap();
}

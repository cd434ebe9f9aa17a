//! The dashboard's records page (counts, keyset paging), its in-flight list, and its
//! actions on many records (retry, snooze, give up through a confirm page): plain HTTP
//! on every backend, and a real headless Chromium for what a person does.

use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::dashboard::{csrf, get, location, request};
use crate::dashboard_browser::{Driver, click, text_when_there};
use crate::harness::{Backend, Env, PROGRESSIVE_TIERS, Running, Schedule};

/// Fails every record; while the file `slow` exists, first waits for the file `go`
/// (a tick that holds its records for as long as a test looks at them).
const FAILING_HANDLER: &str = r#"#!/bin/sh
cat > /dev/null
if [ -e slow ]; then
  while [ ! -e go ]; do sleep 0.1; done
fi
exit 1
"#;

/// Records 1 to `n` in tier 1's band (a minute apart, record 1 the youngest), a
/// schedule that gives up as `DEAD`, a failing handler, and `backlog serve`.
pub(crate) fn backlog_served(backend: Backend, n: i64) -> (Env, Running, u16) {
    let env = Env::on(backend);
    env.create_table("TEXT");
    let aged: Vec<(i64, i64)> = (1..=n).map(|id| (id, 60 * id)).collect();
    env.insert_aged_at(chrono::Utc::now(), &aged, |t| {
        t.format("%Y-%m-%d %H:%M:%S").to_string().into()
    });
    env.write_schedule(&Schedule {
        tiers: PROGRESSIVE_TIERS,
        ..Schedule::default()
    });
    let file = std::fs::read_to_string(env.path("backlog.toml")).unwrap();
    std::fs::write(
        env.path("backlog.toml"),
        file.replace(
            "inserted_at_format = \"auto\"",
            "inserted_at_format = \"auto\"\ngiven_up = \"DEAD\"",
        ),
    )
    .unwrap();
    env.write_handler("handler.sh", FAILING_HANDLER);
    let (server, port) = crate::dashboard::serve(
        env.command()
            .arg("serve")
            .env_remove("BACKLOG_TOKEN")
            .stderr(Stdio::null()),
    );
    (env, server, port)
}

/// The address of the link of class `class` on a page, unescaped.
fn link(page: &str, class: &str) -> Option<String> {
    let at = page.find(&format!("<a class=\"{class}\" href=\""))? + class.len() + 18;
    let end = at + page[at..].find('"')?;
    Some(page[at..end].replace("&amp;", "&"))
}

fn listed(page: &str) -> usize {
    page.split("<table class=\"records\">")
        .nth(1)
        .map_or(0, |t| t.matches("<a href=\"/record?id=").count())
}

/// The records page counts a tier's records by status and lists those of a status a
/// page at a time, newest first, the next page starting after the last one shown.
fn records_are_counted_and_paged_by_a_cursor(backend: Backend) {
    let (env, _server, port) = backlog_served(backend, 5);
    env.execute("UPDATE \"BACKLOG\" SET \"STATUS\" = 'ERROR' WHERE \"ID\" IN (1, 2, 3)");
    let first = get(port, "/records?tier=1d&status=ERROR&per=2");
    assert_eq!(first.code, 200, "{}", first.body);
    for count in [
        "<td>ERROR</td><td class=\"num\">3</td>",
        "<td><a href=\"/records?tier=1d&amp;status=NEW&amp;per=2\">NEW</a></td><td class=\"num\">2</td>",
    ] {
        let count = count.replace(
            "<td>ERROR</td>",
            "<td><a href=\"/records?tier=1d&amp;status=ERROR&amp;per=2\">ERROR</a></td>",
        );
        assert!(first.body.contains(&count), "{count}: {}", first.body);
    }
    assert_eq!(listed(&first.body), 2);
    assert!(
        first.body.find("?id=1\"").unwrap() < first.body.find("?id=2\"").unwrap(),
        "newest first"
    );
    let next = link(&first.body, "next").expect("a next page");
    assert!(
        next.contains("&after_at=t%3A") && next.contains("&after_id=i%3A2"),
        "{next}"
    );
    let second = get(port, &next);
    assert_eq!(listed(&second.body), 1, "{}", second.body);
    assert!(second.body.contains("<a href=\"/record?id=3\">"));
    assert!(link(&second.body, "next").is_none(), "the band's end");
    // A status no tick reads is counted, not listed; a tier that is none is refused.
    env.execute("UPDATE \"BACKLOG\" SET \"STATUS\" = 'SUCCESS' WHERE \"ID\" = 4");
    assert!(
        get(port, "/records?tier=1d&status=SUCCESS")
            .body
            .contains("SUCCESS records are counted only")
    );
    assert_eq!(get(port, "/records?tier=2d").code, 400);
    // The overview links each tier's counts here.
    assert!(
        get(port, "/")
            .body
            .contains("href=\"/records?tier=1d&amp;status=ERROR\"")
    );
}

/// The in-flight list shows what a tick holds while its handler runs (a record's claim
/// on a server, a span on SQLite) and nothing once it is over.
fn in_flight_lists_what_a_tick_holds(backend: Backend) {
    let (env, _server, port) = backlog_served(backend, 2);
    assert!(
        get(port, "/in-flight")
            .body
            .contains("no tick has run on this table yet")
    );
    std::fs::write(env.path("slow"), "").unwrap();
    let tick = Running::spawn(
        env.command()
            .args(["run", "--window", "1d"])
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    let page = loop {
        let page = get(port, "/in-flight").body;
        if page.contains("<table class=\"held\">") {
            break page;
        }
        assert!(Instant::now() < deadline, "nothing shown in flight: {page}");
        std::thread::sleep(Duration::from_millis(100));
    };
    if backend == Backend::Sqlite {
        assert!(page.contains("SQLite holds spans, not records"), "{page}");
    } else {
        assert!(page.contains("<a href=\"/record?id=1\">1</a>"), "{page}");
    }
    std::fs::write(env.path("go"), "").unwrap();
    assert!(tick.wait().status.success());
    let after = get(port, "/in-flight").body;
    assert!(!after.contains("<table class=\"held\">"), "{after}");
    // (Its failures are kept from the ticks until tier 1's 5-minute slot ends, shown
    // apart: not asserted, as a tick near the slot's end keeps them for no time.)
    assert!(after.contains("Failures kept from the ticks"), "{after}");
}

crate::on_every_backend!(
    records_are_counted_and_paged_by_a_cursor,
    in_flight_lists_what_a_tick_holds,
);

/// A bulk action needs the page's CSRF token; giving up is refused (and not offered)
/// where the schedule sets no given-up status.
#[test]
fn bulk_actions_need_their_token() {
    let (env, _server, port) = crate::dashboard::served(Backend::Sqlite, &[]);
    let page = get(port, "/failures?tier=1d").body;
    assert!(
        page.contains("value=\"snooze\"") && !page.contains("value=\"give-up\""),
        "{page}"
    );
    let token = csrf(&page);
    let body = "from=failures&tier=1d&action=snooze&until=2h";
    assert_eq!(request(port, "POST", "/bulk", &[], body).code, 403);
    let wrong = format!("{body}&csrf=0123456789abcdef0123456789abcdef");
    assert_eq!(request(port, "POST", "/bulk", &[], &wrong).code, 403);
    let forged = format!("{body}&confirm=yes&ids=2");
    assert_eq!(request(port, "POST", "/bulk", &[], &forged).code, 403);
    let give_up = request(
        port,
        "POST",
        "/bulk",
        &[],
        &format!("from=failures&tier=1d&action=give-up&csrf={token}"),
    );
    assert_eq!(give_up.code, 400, "{}", give_up.body);
    assert!(
        give_up.body.contains("sets no table.given_up"),
        "{}",
        give_up.body
    );
    let snoozed = request(
        port,
        "POST",
        "/bulk",
        &[],
        &format!("{body}&confirm=yes&ids=2&csrf={token}"),
    );
    assert_eq!(snoozed.code, 303, "{}", snoozed.body);
    assert!(
        get(port, &location(&snoozed))
            .body
            .contains("snoozed 1 record until")
    );
    assert_eq!(
        env.with_status("ERROR"),
        1,
        "a snoozed record stays pending"
    );
}

/// Opens `page`, types `text` into the bulk form's field `field`, presses `button`,
/// and returns the title of the confirm page it leads to.
async fn bulk_form(
    browser: &fantoccini::Client,
    page: &str,
    field: &str,
    text: &str,
    button: &str,
) -> String {
    use fantoccini::Locator;
    browser.goto(page).await.unwrap();
    let css = format!("div.bulk input[name={field}]");
    let input = browser.find(Locator::Css(&css)).await.unwrap();
    input.send_keys(text).await.unwrap();
    let xpath = format!("//button[text()='{button}']");
    click(browser, Locator::XPath(&xpath)).await;
    text_when_there(browser, Locator::Css("h1")).await
}

/// In a real browser: the records page's counts and pages, a tick's hold in the
/// in-flight list, then a snooze from the records page and a give-up from the failures
/// page, each through its confirm page, and the table afterwards.
#[test]
fn bulk_actions_in_a_real_browser() {
    let (env, _server, port) = backlog_served(Backend::Sqlite, 5);
    env.backlog(&["run", "--window", "1d"]).assert().success();
    assert_eq!(env.with_status("ERROR"), 5);
    let driver = Driver::start();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        use fantoccini::Locator;
        let browser = driver.connect().await;
        let base = format!("http://127.0.0.1:{port}");
        let rows = || async {
            browser
                .find_all(Locator::Css("table.records tbody tr"))
                .await
                .unwrap()
                .len()
        };
        browser
            .goto(&format!("{base}/records?tier=1d&status=ERROR&per=2"))
            .await
            .unwrap();
        let counts = text_when_there(&browser, Locator::Css("table.counts tbody")).await;
        assert!(counts.contains("ERROR 5"), "{counts}");
        let mut seen = rows().await;
        assert_eq!(seen, 2);
        for expected in [2, 1] {
            click(&browser, Locator::Css("a.next")).await;
            browser
                .wait()
                .for_element(Locator::Css("a.first"))
                .await
                .unwrap();
            assert_eq!(rows().await, expected);
            seen += expected;
        }
        assert_eq!(seen, 5);
        assert!(
            browser.find(Locator::Css("a.next")).await.is_err(),
            "the band's end"
        );

        // A tick whose handler waits holds its span while the page looks.
        std::fs::write(env.path("slow"), "").unwrap();
        let tick = Running::spawn(
            env.command()
                .args(["run", "--window", "1d", "--retry-failed"])
                .stdout(Stdio::null())
                .stderr(Stdio::null()),
        );
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            browser.goto(&format!("{base}/in-flight")).await.unwrap();
            if browser.find(Locator::Css("table.held")).await.is_ok() {
                break;
            }
            assert!(Instant::now() < deadline, "no hold shown");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let held = text_when_there(&browser, Locator::Css("table.held tbody")).await;
        assert!(
            held.contains(&format!("/{}/", tick.id())),
            "the tick's name: {held}"
        );
        std::fs::write(env.path("go"), "").unwrap();
        std::fs::remove_file(env.path("slow")).unwrap();
        assert!(tick.wait().status.success());

        // Snooze the tier's failed records from the records page.
        let page = format!("{base}/records?tier=1d&status=ERROR");
        let title = bulk_form(&browser, &page, "until", "2h", "Snooze…").await;
        assert_eq!(title, "Snooze 5 records?");
        click(&browser, Locator::Css("button.danger")).await;
        let notice = text_when_there(&browser, Locator::Css(".notice")).await;
        assert!(notice.starts_with("snoozed 5 records until"), "{notice}");

        // Give up on the records of tier 1's failures from the failures page.
        let page = format!("{base}/failures?tier=1d");
        let title = bulk_form(&browser, &page, "reason", "partner gone", "Give up (DEAD)…").await;
        assert_eq!(title, "Give up 5 records?");
        assert_eq!(
            env.with_status("ERROR"),
            5,
            "snoozed, still pending; nothing given up yet"
        );
        click(&browser, Locator::Css("button.danger")).await;
        let notice = text_when_there(&browser, Locator::Css(".notice")).await;
        assert!(notice.starts_with("gave up on 5 records"), "{notice}");
        browser.close().await.unwrap();
    });
    assert_eq!(env.with_status("DEAD"), 5);
    let attempts = env.backlog(&["show", "1"]).output().unwrap();
    let shown = String::from_utf8_lossy(&attempts.stdout);
    assert!(shown.contains("partner gone"), "{shown}");
}

//! The dashboard as a person on call meets it: records given up on are reachable
//! (the overview's row of those older than every tier, the records page, the failures
//! page's outcomes); a filter offers only the actions that fit what it picks; a bad
//! value typed into a form gets a page that names the field and what to write; and
//! `serve --help` says what the dashboard does. (A part of `dashboard_bulk.rs`, whose
//! served backlog it shares.)

use crate::dashboard::{csrf, get, request};
use crate::dashboard_bulk::backlog_served;
use crate::harness::{Backend, Env};

const DAY: i64 = 86_400;

fn insert(env: &Env, records: &[(i64, i64)]) {
    env.insert_aged_at(chrono::Utc::now(), records, |t| {
        t.format("%Y-%m-%d %H:%M:%S").to_string().into()
    });
}

/// The ids a records page lists, in its order.
fn ids(page: &str) -> Vec<String> {
    let Some(table) = page.split("<table class=\"records\">").nth(1) else {
        return Vec::new();
    };
    table
        .split("<a href=\"/record?id=")
        .skip(1)
        .map(|s| s[..s.find('"').unwrap()].to_string())
        .collect()
}

/// Which bulk actions a page offers.
fn offered(page: &str) -> Vec<&'static str> {
    ["retry", "snooze", "give-up"]
        .into_iter()
        .filter(|a| page.contains(&format!("name=\"action\" value=\"{a}\"")))
        .collect()
}

/// Records given up past the last tier are linked from the overview's row of those
/// older than every tier, listed by the records page (`tier=older`, by status), and
/// their attempts are an outcome the failures page offers; their pages offer a retry
/// only, which takes them.
fn given_up_records_can_be_browsed_and_retried(backend: Backend) {
    let (env, _server, port) = backlog_served(backend, 2);
    insert(&env, &[(10, 400 * DAY), (11, 500 * DAY)]);
    env.backlog(&["run", "--window", "360d"]).assert().success();
    assert_eq!(env.with_status("DEAD"), 2);
    insert(&env, &[(12, 450 * DAY)]);

    let overview = get(port, "/").body;
    for link in [
        "href=\"/records?tier=older&amp;status=DEAD\">2</a>",
        "href=\"/records?tier=older&amp;status=NEW\">1</a>",
    ] {
        assert!(overview.contains(link), "{link}: {overview}");
    }
    let dead = get(port, "/records?tier=older&status=DEAD");
    assert_eq!(dead.code, 200, "{}", dead.body);
    assert!(
        dead.body.contains("older than every tier (over 360d)"),
        "{}",
        dead.body
    );
    assert_eq!(ids(&dead.body), ["10", "11"], "newest first");
    assert_eq!(offered(&dead.body), ["retry"], "{}", dead.body);
    // Without a status, the pending records: those a snooze or a give-up takes.
    let pending = get(port, "/records?tier=older").body;
    assert_eq!(ids(&pending), ["12"], "{pending}");
    assert_eq!(offered(&pending), ["retry", "snooze", "give-up"]);
    assert!(pending.contains("<option value=\"older\" selected>over 360d (no tier)</option>"));

    let failures = get(port, "/failures").body;
    assert!(
        failures.contains("<option value=\"given_up\">given_up</option>"),
        "{failures}"
    );
    let given_up = get(port, "/failures?outcome=given_up").body;
    assert!(given_up.contains("Failures 1–2 of 2"), "{given_up}");
    assert_eq!(offered(&given_up), ["retry"], "{given_up}");

    // A retry takes them; a snooze, asked for by hand, takes none and says why.
    let token = csrf(&dead.body);
    let retry = request(
        port,
        "POST",
        "/bulk",
        &[],
        &format!("from=records&tier=older&status=DEAD&action=retry&csrf={token}"),
    );
    assert!(
        retry.body.contains("<h1>Retry 2 records?</h1>"),
        "{}",
        retry.body
    );
    assert!(
        retry.body.contains("name=\"ids\" value=\"10,11\""),
        "{}",
        retry.body
    );
    let snooze = request(
        port,
        "POST",
        "/bulk",
        &[],
        &format!("from=records&tier=older&status=DEAD&action=snooze&until=2h&csrf={token}"),
    );
    assert!(
        snooze.body.contains("<h1>Nothing to snooze</h1>"),
        "{}",
        snooze.body
    );
    assert!(
        snooze
            .body
            .contains("None of the 2 records the filter picks is fit for it"),
        "{}",
        snooze.body
    );
    assert!(!snooze.body.contains("name=\"confirm\""), "{}", snooze.body);
}

crate::on_every_backend!(given_up_records_can_be_browsed_and_retried);

/// A value a person types that cannot be taken gets a 400 page that names the field
/// and what to write, on every form and filter; never "Cannot read the backlog".
#[test]
fn bad_input_names_its_field_and_the_fix() {
    let (env, _server, port) = backlog_served(Backend::Sqlite, 2);
    env.backlog(&["run", "--window", "1d"]).assert().success();
    let token = csrf(&get(port, "/records?tier=1d").body);
    let post =
        |path: &str, body: &str| request(port, "POST", path, &[], &format!("{body}&csrf={token}"));
    let cases = [
        (
            post(
                "/bulk",
                "from=records&tier=1d&status=ERROR&action=snooze&until=",
            ),
            "Snooze until is empty: write a span from now, like 2h, or a time, like 2026-11-23T18:00:00Z",
        ),
        (
            post(
                "/bulk",
                "from=records&tier=1d&action=snooze&until=&confirm=yes&ids=1",
            ),
            "Snooze until is empty",
        ),
        (
            post("/bulk", "from=failures&action=snooze&until=tomorrow"),
            "Snooze until: &quot;tomorrow&quot; is neither a span nor a time; write a span from now, like 2h",
        ),
        (
            post("/bulk", "from=failures&action=snooze&until=0s"),
            "Snooze until: &quot;0s&quot; is not after now",
        ),
        (
            post("/bulk", "from=failures&action=snooze&until=400d"),
            "Snooze until: &quot;400d&quot; is more than a year ahead",
        ),
        (
            post("/bulk", "from=records&tier=2d&action=retry"),
            "Tier: &quot;2d&quot; is no tier's window; pick one of 1d, 7d, 14d, 30d, 180d, 360d",
        ),
        (
            post("/bulk", "from=failures&action=explode"),
            "Action: &quot;explode&quot; is none of retry, snooze, give-up",
        ),
        (
            post("/pause", "window=1d&reason=x&until=soon"),
            "Meant to end: &quot;soon&quot; is neither a span nor a time",
        ),
        (
            post("/pause", "window=2d&reason=x"),
            "Tier: &quot;2d&quot; is no tier's window; pick one of 1d, 7d, 14d, 30d, 180d, 360d, or every tier",
        ),
        (
            post("/resume", "window=5m"),
            "Tier: &quot;5m&quot; is no tier's window",
        ),
        (
            get(port, "/records?tier=2d"),
            "Tier: &quot;2d&quot; is no tier's window",
        ),
        (
            get(port, "/records?tier=1d&after_at=x&after_id=i%3A1"),
            "Next page: &quot;x&quot; is not a place in a band",
        ),
        (
            get(port, "/failures?tier=soon"),
            "Tier: &quot;soon&quot; is neither a tier",
        ),
        (get(port, "/record?id=+"), "Record id is empty"),
    ];
    for (page, says) in cases {
        assert_eq!(page.code, 400, "{says}: {}", page.body);
        assert!(
            page.body.contains("<h1>Check the form</h1>"),
            "{}",
            page.body
        );
        assert!(page.body.contains(says), "{says}: {}", page.body);
    }
    assert!(!get(port, "/").body.contains(">Resume<"), "nothing paused");
    assert_eq!(env.with_status("ERROR"), 2, "nothing snoozed or retried");
}

/// `serve --help` names every action the dashboard takes.
#[test]
fn serve_help_names_its_actions() {
    let env = Env::new();
    let help = env.backlog(&["serve", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    for action in ["retry", "snooze", "give up", "pause", "resume"] {
        assert!(help.contains(action), "{action}: {help}");
    }
}

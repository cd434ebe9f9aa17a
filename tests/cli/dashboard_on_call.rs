//! The dashboard as a person on call meets it: a bad value typed into a form gets a
//! page that names the field and what to write; and `serve --help` says what the
//! dashboard does. (A part of `dashboard_bulk.rs`, whose served backlog it shares.)

use super::backlog_served;
use crate::dashboard::{csrf, get, request};
use crate::harness::{Backend, Env};

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

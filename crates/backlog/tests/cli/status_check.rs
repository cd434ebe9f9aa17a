//! `status --check`, as a monitoring system runs it: its states, a new install, a pause,
//! and its exit codes.

use crate::harness::{Backend, NOW};
use crate::on_every_backend;
use crate::operate::flaky;

/// `status --check`: OK when every tier ticked lately; CRITICAL when a tier's last
/// tick is older than twice its period or failed; failures past a threshold.
fn status_check_answers_a_monitoring_system(backend: Backend) {
    const ONE_TIER: &str = "\n[[tier]]\nwindow = \"1d\"\nevery = \"1h\"\n";
    let env = flaky(backend, ONE_TIER);
    env.backlog(&["status", "--check", "--now", NOW])
        .assert()
        .code(1)
        .stdout("BACKLOG WARNING: table BACKLOG: no tier has ticked yet; are its crontab lines (`backlog crontab --install`) or daemon running?\n");
    env.run_window("1d");
    env.backlog(&["status", "--check", "--now", "2026-11-21T12:30:00Z"])
        .assert()
        .success()
        .stdout("BACKLOG OK: table BACKLOG: every tier ticks on time\n");
    env.backlog(&[
        "status",
        "--check",
        "--now",
        "2026-11-21T12:30:00Z",
        "--warn-failures",
        "0",
    ])
    .assert()
    .code(1)
    .stdout(predicates::str::contains(
        "1 failed attempts in the last 24 hours, over 0",
    ));
    let out = env
        .backlog(&[
            "status",
            "--check",
            "--now",
            "2026-11-21T14:30:00Z",
            "--json",
        ])
        .assert()
        .code(2);
    let json: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(json["level"], "CRITICAL");
    assert_eq!(
        json["line"],
        "BACKLOG CRITICAL: table BACKLOG: tier 1 (1d) last ticked 2h 30m ago, over twice its period of 1h; is its crontab line or daemon running?"
    );
}

/// `status --check` right after an install: a tier whose first slot (after the first
/// tick of any tier) has not come is on time, not "never ticked"; once it passed, it
/// is. A paused tier is a warning naming the pause, never an OK; a command line the
/// check cannot run exits 3, UNKNOWN to a monitoring system (2 would read CRITICAL).
fn status_check_knows_a_new_install_and_a_pause(backend: Backend) {
    const TWO_TIERS: &str = "\n[[tier]]\nwindow = \"1d\"\nevery = \"5m\"\n\n[[tier]]\nwindow = \"7d\"\nevery = \"12h\"\n";
    let env = flaky(backend, TWO_TIERS);
    env.run_window("1d");
    env.backlog(&["status", "--check", "--now", "2026-11-21T12:03:00Z"])
        .assert()
        .success()
        .stdout("BACKLOG OK: table BACKLOG: every tier ticks on time\n");
    // Tier 2's first slot after 12:00 is midnight; past it (and its grace) it is late.
    env.backlog(&["status", "--check", "--now", "2026-11-22T01:30:00Z"])
        .assert()
        .code(2)
        .stdout(predicates::str::contains("tier 1 (1d) last ticked"));
    env.backlog(&[
        "status",
        "--check",
        "--now",
        "2026-11-22T01:30:00Z",
        "--json",
    ])
    .assert()
    .code(2)
    .stdout(predicates::str::contains(
        "tier 2 never ticked; are its crontab lines or daemon running?",
    ));
    env.backlog(&["pause", "--window", "1d", "--reason", "partner down"])
        .assert()
        .success();
    let out = env
        .backlog(&["status", "--check", "--now", "2026-11-21T12:03:00Z"])
        .assert()
        .code(1);
    let line = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(
        line.starts_with("BACKLOG WARNING: table BACKLOG: tier 1 (1d) is paused since ")
            && line.contains(": partner down; `backlog resume --window 1d` lifts it"),
        "{line}"
    );
    // A pause of every tier is said once, whatever each tier's own.
    env.backlog(&["pause", "--reason", "migration"])
        .assert()
        .success();
    let out = env
        .backlog(&["status", "--check", "--now", "2026-11-21T12:03:00Z"])
        .assert()
        .code(1);
    let line = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(
        line.starts_with("BACKLOG WARNING: table BACKLOG: every tier is paused since ")
            && line.contains(": migration; `backlog resume` lifts it")
            && line.matches("paused").count() == 1,
        "{line}"
    );
    env.backlog(&["status", "--check", "--warn-failures", "many"])
        .assert()
        .code(3)
        .stderr(predicates::str::contains("invalid value 'many'"));
    env.backlog(&["status", "--check", "--no-such-flag"])
        .assert()
        .code(3);
    env.backlog(&["status", "--no-such-flag"]).assert().code(2);
}

on_every_backend!(
    status_check_answers_a_monitoring_system,
    status_check_knows_a_new_install_and_a_pause,
);

/// A check whose database cannot be reached is CRITICAL (2), naming it: a monitoring
/// system knows 0 to 3, and a backlog nobody can read is not being worked.
#[test]
fn status_check_of_an_unreachable_database_is_critical() {
    let env = crate::harness::Env::new();
    std::fs::write(
        env.path("backlog.toml"),
        r#"[database]
url = "postgres://backlog@127.0.0.1:1/orders"

[table]
name = "BACKLOG"
id = "ID"
status = "STATUS"
inserted_at = "DATE_INSERTED"

[handler]
command = ["./handler.sh"]

[[tier]]
window = "1d"
every = "5m"
"#,
    )
    .unwrap();
    let out = env.backlog(&["status", "--check"]).assert().code(2);
    let line = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(
        line.starts_with("BACKLOG CRITICAL: table BACKLOG: ") && line.contains("127.0.0.1:1"),
        "{line}"
    );
    assert_eq!(line.lines().count(), 1, "{line}");
}

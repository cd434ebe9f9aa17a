//! `status --check`, as a monitoring system runs it: its states, a new install, a pause,
//! and its exit codes.

use crate::harness::{Backend, NOW};
use crate::on_every_backend;
use crate::operate::{flaky, stdout};
use predicates::prelude::PredicateBooleanExt;

/// `status --check`: OK when every tier ticked lately; CRITICAL when a tier's last
/// tick is older than twice its period or failed; failures past a threshold.
fn status_check_answers_a_monitoring_system(backend: Backend) {
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
        "1 failed attempt in the last 24 hours, over 0",
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
/// tick of any tier) has not come is not late, and the OK line says when it is due,
/// not that every tier ticks on time; once the slot passed it is a warning, and
/// critical once it is later than its period. A paused tier is a warning naming the pause, never an OK; a command line the
/// check cannot run exits 3, UNKNOWN to a monitoring system (2 would read CRITICAL).
fn status_check_knows_a_new_install_and_a_pause(backend: Backend) {
    const TWO_TIERS: &str = "\n[[tier]]\nwindow = \"1d\"\nevery = \"5m\"\n\n[[tier]]\nwindow = \"7d\"\nevery = \"12h\"\n";
    let env = flaky(backend, TWO_TIERS);
    env.run_window("1d");
    env.backlog(&["status", "--check", "--now", "2026-11-21T12:03:00Z"])
        .assert()
        .success()
        .stdout("BACKLOG OK: table BACKLOG: tier 1 (1d) ticks on time; tier 2 (7d) has not ticked yet, first due in 11h 57m (2026-11-22T00:00:00Z)\n");
    let out = env
        .backlog(&[
            "status",
            "--check",
            "--now",
            "2026-11-21T12:03:00Z",
            "--json",
        ])
        .assert()
        .success();
    let json: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(
        json["findings"],
        serde_json::json!([[
            "OK",
            "tier 2 (7d) has not ticked yet, first due in 11h 57m (2026-11-22T00:00:00Z)"
        ]])
    );
    // Tier 2's first slot after 12:00 is midnight; past it (and its grace) it is late.
    let late = "tier 2 (7d) never ticked, though first due 1h 30m ago (2026-11-22T00:00:00Z); is its crontab line or daemon running?";
    let out = env
        .backlog(&[
            "status",
            "--check",
            "--now",
            "2026-11-22T01:30:00Z",
            "--json",
        ])
        .assert()
        .code(2);
    let json: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(json["level"], "CRITICAL", "tier 1 is late: {json}");
    assert!(
        json["findings"]
            .as_array()
            .unwrap()
            .contains(&serde_json::json!(["WARNING", late])),
        "{json}"
    );
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
        .stdout(predicates::str::starts_with("BACKLOG UNKNOWN: "))
        .stderr(predicates::str::contains("invalid value 'many'"));
    env.backlog(&["status", "--check", "--no-such-flag"])
        .assert()
        .code(3)
        .stdout(predicates::str::starts_with("BACKLOG UNKNOWN: "));
    // A schedule file it cannot find or read is one line on stdout too, and exit 3.
    env.backlog(&["status", "--check", "--schedule", "nope.toml"])
        .assert()
        .code(3)
        .stdout(predicates::str::starts_with(
            "BACKLOG UNKNOWN: nope.toml: no such schedule file",
        ));
    env.backlog(&["status", "--no-such-flag"]).assert().code(2);
}

/// One tier, a day's band ticked hourly.
const ONE_TIER: &str = "\n[[tier]]\nwindow = \"1d\"\nevery = \"1h\"\n";

/// The same, with `[check]` paging once new work waits half an hour.
const ONE_TIER_CHECKED: &str = "\n[[tier]]\nwindow = \"1d\"\nevery = \"1h\"\n\n[check]\ncritical_waiting = \"30m\"\nwarn_pending = 2\n";

/// The finding of a record never tried waiting 2h 1m in tier 1, over `limit`.
fn waiting(limit: &str) -> String {
    format!(
        "new records wait for their first try: the oldest never tried, in tier 1 (1d), has waited 2h 1m, over {limit}; is the tier ticking, and reaching its whole band?"
    )
}

/// Records 1 and 2 new two hours ago by the table's own inserted-at column, record 3
/// a minute ago; the handler fails record 2.
fn two_hours_behind(backend: Backend, tiers: &'static str) -> crate::harness::Env {
    let env = crate::harness::Env::on(backend);
    env.create_table("TEXT");
    env.insert_aged(&[(1, 2 * 3600), (2, 2 * 3600 + 60), (3, 60)], |t| {
        t.format("%Y-%m-%d %H:%M:%S").to_string().into()
    });
    env.write_schedule(&crate::harness::Schedule {
        tiers,
        ..crate::harness::Schedule::default()
    });
    env.write_handler(
        "handler.sh",
        "#!/bin/sh\ncat > /dev/null\n[ \"$BACKLOG_RECORD_ID\" = 2 ] && exit 1\nexit 0\n",
    );
    env
}

/// `--critical-waiting` pages for new records no tick has tried for two hours (CRITICAL,
/// 2), `--warn-waiting` warns; once a tick tried them (record 2 failed: ERROR, tried)
/// nothing waits. `--warn-pending` and `--critical-pending` count the pending records
/// of the tiers' bands.
fn status_check_pages_for_new_work_waiting_and_pending_records(backend: Backend) {
    let env = two_hours_behind(backend, ONE_TIER);
    let check = |flags: &[&str]| {
        let mut args = vec!["status", "--check", "--now", NOW];
        args.extend_from_slice(flags);
        env.backlog(&args)
    };
    let out = check(&["--critical-waiting", "30m"]).assert().code(2);
    assert_eq!(
        stdout(out),
        format!("BACKLOG CRITICAL: table BACKLOG: {}\n", waiting("30m"))
    );
    check(&["--warn-waiting", "1h", "--critical-waiting", "3h"])
        .assert()
        .code(1)
        .stdout(predicates::str::contains(waiting("1h")));
    // Under the bound: the tiers' other news only.
    check(&["--critical-waiting", "3h"])
        .assert()
        .code(1)
        .stdout(predicates::str::contains("wait for their first try").not());
    check(&["--warn-pending", "2", "--critical-pending", "3"])
        .assert()
        .code(1)
        .stdout(predicates::str::contains(
            "3 pending records in the tiers' bands, over 2",
        ));
    check(&["--critical-pending", "2"])
        .assert()
        .code(2)
        .stdout(predicates::str::contains(
            "3 pending records in the tiers' bands, over 2",
        ));

    env.run_window("1d");
    // Tried: 1 and 3 succeeded, 2 failed and is pending (ERROR) but no longer new.
    check(&["--critical-waiting", "30m", "--critical-pending", "1"])
        .assert()
        .success()
        .stdout("BACKLOG OK: table BACKLOG: every tier ticks on time\n");
    check(&["--warn-pending", "0"])
        .assert()
        .code(1)
        .stdout(predicates::str::contains(
            "1 pending record in the tiers' bands, over 0",
        ));
}

/// `[check]` in the schedule file sets the same thresholds; a flag overrides its key.
fn status_check_reads_its_thresholds_from_the_schedule_file(backend: Backend) {
    let env = two_hours_behind(backend, ONE_TIER_CHECKED);
    let out = env
        .backlog(&["status", "--check", "--now", NOW, "--json"])
        .assert()
        .code(2);
    let json: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(
        json["line"],
        format!("BACKLOG CRITICAL: table BACKLOG: {}", waiting("30m"))
    );
    let findings = json["findings"].to_string();
    assert!(
        findings.contains("3 pending records in the tiers' bands, over 2"),
        "{findings}"
    );
    // The flag's bound, not the file's: waiting two hours is under three.
    env.backlog(&[
        "status",
        "--check",
        "--now",
        NOW,
        "--critical-waiting",
        "3h",
    ])
    .assert()
    .code(1)
    .stdout(predicates::str::contains(
        "3 pending records in the tiers' bands, over 2",
    ))
    .stdout(predicates::str::contains("wait for their first try").not());
}

on_every_backend!(
    status_check_answers_a_monitoring_system,
    status_check_knows_a_new_install_and_a_pause,
    status_check_pages_for_new_work_waiting_and_pending_records,
    status_check_reads_its_thresholds_from_the_schedule_file,
);

/// A waiting threshold with no pending status a record has before its first try
/// (every one is written by a try) cannot be judged: UNKNOWN (3), naming the flag and
/// the fix in the file.
#[test]
fn a_waiting_threshold_needs_a_status_new_records_have() {
    let env = crate::harness::Env::on(Backend::Sqlite);
    env.create_table("TEXT");
    env.write_schedule(&crate::harness::Schedule {
        handler_extra: "exit_codes = { 75 = \"NEW\" }",
        tiers: ONE_TIER,
        ..crate::harness::Schedule::default()
    });
    env.backlog(&["status", "--check", "--warn-waiting", "1h"])
        .assert()
        .code(3)
        .stdout(predicates::str::starts_with("BACKLOG UNKNOWN: "))
        .stderr(predicates::str::contains(
            "--warn-waiting: no status of table.pending (NEW, ERROR) is one a record has before its first try",
        ));
}

/// `/readyz` judges by `[check]` too: a critical threshold passed is not ready (503,
/// the finding: counts and ages, no record's data); a warning is ready, and said.
#[test]
fn readyz_says_what_the_check_thresholds_find() {
    let (env, _server, port) = crate::dashboard::served(Backend::Sqlite, &[]);
    let probe = || crate::dashboard::request(port, "GET", "/readyz", &[], "");
    let ready = probe();
    assert_eq!((ready.code, ready.body.as_str()), (200, "ready\n"));
    // A record new two hours ago that no tick tried.
    env.insert_aged_at(chrono::Utc::now(), &[(10, 2 * 3600 + 60)], |t| {
        t.format("%Y-%m-%d %H:%M:%S").to_string().into()
    });
    let with_check = |check: &'static str| {
        env.write_schedule(&crate::harness::Schedule {
            tiers: check,
            ..crate::harness::Schedule::default()
        })
    };
    with_check(concat!(
        "\n[[tier]]\nwindow = \"1d\"\nevery = \"5m\"\n",
        "\n[check]\nwarn_waiting = \"30m\"\ncritical_waiting = \"1h\"\n"
    ));
    let unready = probe();
    assert_eq!(unready.code, 503, "{}", unready.body);
    assert!(
        unready
            .body
            .starts_with("backlog: new records wait for their first try: the oldest never tried, in tier 1 (1d), has waited 2h 1m, over 1h;"),
        "{}",
        unready.body
    );
    with_check(concat!(
        "\n[[tier]]\nwindow = \"1d\"\nevery = \"5m\"\n",
        "\n[check]\nwarn_waiting = \"30m\"\n"
    ));
    let warned = probe();
    assert_eq!(warned.code, 200, "{}", warned.body);
    assert!(
        warned
            .body
            .starts_with("ready; warning: new records wait for their first try: the oldest never tried, in tier 1 (1d), has waited 2h 1m, over 30m;"),
        "{}",
        warned.body
    );
}

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

/// A tier that never ticked past its first slot, the other tier on time: a warning
/// while it is late by less than its period, critical past it (as a last tick older
/// than twice the period is).
#[test]
fn a_tier_that_never_ticked_is_critical_once_later_than_its_period() {
    const TWO_TIERS: &str = "\n[[tier]]\nwindow = \"1d\"\nevery = \"5m\"\n\n[[tier]]\nwindow = \"7d\"\nevery = \"12h\"\n";
    let env = flaky(Backend::Sqlite, TWO_TIERS);
    let tick_and_check = |tick: &str, check: &str| {
        env.backlog(&["run", "--window", "1d", "--now", tick])
            .assert()
            .success();
        env.backlog(&["status", "--check", "--now", check]).assert()
    };
    // The first tick at 12:00; tier 2's first slot is midnight.
    tick_and_check(NOW, "2026-11-21T12:01:00Z").success();
    tick_and_check("2026-11-22T11:39:00Z", "2026-11-22T11:40:00Z")
        .code(1)
        .stdout("BACKLOG WARNING: table BACKLOG: tier 2 (7d) never ticked, though first due 11h 40m ago (2026-11-22T00:00:00Z); is its crontab line or daemon running?\n");
    tick_and_check("2026-11-22T12:40:00Z", "2026-11-22T12:41:00Z")
        .code(2)
        .stdout("BACKLOG CRITICAL: table BACKLOG: tier 2 (7d) never ticked, though first due 12h 41m ago (2026-11-22T00:00:00Z); is its crontab line or daemon running?\n");
}

/// A schedule file that does not match its table (a column, a table that is not
/// there) cannot be judged: UNKNOWN (3), text and `--json`, as a file that does not
/// load is; a database that cannot be reached stays CRITICAL (below).
#[test]
fn status_check_of_a_file_that_does_not_match_its_table_is_unknown() {
    let env = crate::harness::Env::on(Backend::Sqlite);
    env.create_table("TEXT");
    env.write_schedule(&crate::harness::Schedule {
        tiers: ONE_TIER,
        ..crate::harness::Schedule::default()
    });
    let file = std::fs::read_to_string(env.path("backlog.toml")).unwrap();
    let db = format!("sqlite:{}", env.path("backlog.db").display());
    for (from, to, why) in [
        (
            "inserted_at = \"DATE_INSERTED\"",
            "inserted_at = \"CREATED\"",
            "table \"BACKLOG\" has no column \"CREATED\" (set table.inserted_at in the schedule file); columns: ID, STATUS, DATE_INSERTED, PAYLOAD",
        ),
        (
            "name = \"BACKLOG\"",
            "name = \"ORDERS\"",
            "no table \"ORDERS\" (set table.name in the schedule file); tables: BACKLOG",
        ),
    ] {
        assert!(file.contains(from), "{file}");
        std::fs::write(env.path("backlog.toml"), file.replacen(from, to, 1)).unwrap();
        let table = if to.starts_with("name") {
            "ORDERS"
        } else {
            "BACKLOG"
        };
        let line = format!("BACKLOG UNKNOWN: table {table}: {db}: {why}");
        env.backlog(&["status", "--check"])
            .assert()
            .code(3)
            .stdout(format!("{line}\n"));
        let out = env
            .backlog(&["status", "--check", "--json"])
            .assert()
            .code(3);
        let json: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
        assert_eq!(json["level"], "UNKNOWN");
        assert_eq!(json["line"], line.as_str());
        assert_eq!(
            json["findings"],
            serde_json::json!([["UNKNOWN", format!("{db}: {why}")]])
        );
    }
    // A file that does not load: the same object with --json, and the error's code.
    let out = env
        .backlog(&["status", "--check", "--json", "--schedule", "nope.toml"])
        .assert()
        .code(3);
    let json: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(json["level"], "UNKNOWN");
    assert_eq!(json["exit_code"], 3);
    assert!(
        json["line"]
            .as_str()
            .unwrap()
            .starts_with("BACKLOG UNKNOWN: nope.toml: no such schedule file"),
        "{json}"
    );
}

//! Giving up: with `table.given_up` set, a pending record past the last tier's window
//! gets that status at the end of a tick of the last tier, `backlog give-up` gives up
//! on records by hand, and `backlog retry` brings one back.

use crate::harness::{Backend, Env, NOW, Schedule, recording_handler};

/// Tiers whose last window is 30 days: record 4 (60 days old) outlived them.
const TIERS: &str = r#"
[[tier]]
window = "1d"
every = "5m"

[[tier]]
window = "30d"
every = "1d"
"#;

fn env_giving_up(backend: Backend, failing: &[i64]) -> Env {
    let env = Env::on(backend);
    env.classic();
    let file = Schedule {
        tiers: TIERS,
        ..Schedule::default()
    }
    .render_for(&env.url())
    .replacen(
        "inserted_at_format = \"auto\"",
        "inserted_at_format = \"auto\"\ngiven_up = \"DEAD\"",
        1,
    );
    std::fs::write(env.path("backlog.toml"), file).unwrap();
    env.write_handler("handler.sh", &recording_handler(failing));
    env
}

fn stdout(out: assert_cmd::assert::Assert) -> String {
    String::from_utf8_lossy(&out.get_output().stdout).into_owned()
}

fn a_record_past_the_last_tier_is_given_up_and_retry_brings_it_back(backend: Backend) {
    let env = env_giving_up(backend, &[4]);
    // A tick of another tier leaves it alone; the last tier's gives it up at its end.
    env.run_window("1d");
    assert_eq!(env.statuses()[3], (4, "NEW".into()));
    let show = stdout(env.backlog(&["show", "4", "--now", NOW]).assert().success());
    assert!(
        show.contains("never tried again (older than the last window); the last tier's next tick gives it up (DEAD)"),
        "{show}"
    );
    // A dry run of the last tier says what it would give up on, and changes nothing.
    let dry = env
        .backlog(&["run", "--window", "30d", "--now", NOW, "--dry-run"])
        .assert()
        .success();
    let dry = String::from_utf8_lossy(&dry.get_output().stderr).into_owned();
    assert!(
        dry.contains(
            "dry run, would hand over 1 record; would give up on 1 past the last tier (DEAD)"
        ),
        "{dry}"
    );
    assert_eq!(env.statuses()[3], (4, "NEW".into()));
    let out = env.run_window("30d");
    assert!(
        out.contains("selected 1, succeeded 1, failed 0")
            && out.contains("; gave up on 1 past the last tier (DEAD)"),
        "{out}"
    );
    assert_eq!(
        env.take_calls(),
        [1, 2, 3],
        "4 was never handed to the handler"
    );
    assert_eq!(env.statuses()[3], (4, "DEAD".into()));
    let show = stdout(env.backlog(&["show", "4", "--now", NOW]).assert().success());
    assert!(show.contains("4 of BACKLOG: DEAD"), "{show}");
    assert!(
        show.contains("given up: no tier tries it again; `backlog retry 4` brings it back"),
        "{show}"
    );
    assert!(
        show.contains("given_up DEAD (given up: still pending past the last tier (30d))"),
        "{show}"
    );
    let status = stdout(env.backlog(&["status", "--now", NOW]).assert().success());
    assert!(status.contains("DEAD"), "status counts it: {status}");
    assert!(
        !status.contains("failed attempts"),
        "giving up is no failure: {status}"
    );
    // A retry takes it like a pending record: it fails again (back in the schedule,
    // ERROR), and the next tick of the last tier gives it up again.
    env.backlog(&["retry", "4"]).assert().success();
    assert_eq!(env.take_calls(), [4]);
    assert_eq!(env.statuses()[3], (4, "ERROR".into()));
    let out = env
        .backlog(&["run", "--window", "30d", "--now", "2026-11-22T12:00:00Z"])
        .assert()
        .success();
    assert!(stdout(out).contains("; gave up on 1 past the last tier (DEAD)"));
    assert_eq!(env.statuses()[3], (4, "DEAD".into()));
    assert_eq!(
        env.lines(&format!(
            "SELECT bands FROM {} WHERE window_secs = 0 ORDER BY id",
            env.own("backlog_runs")
        )),
        ["give-up", "retry", "give-up"]
    );
}

fn backlog_give_up_gives_up_on_records_by_hand(backend: Backend) {
    let env = env_giving_up(backend, &[]);
    let out = stdout(
        env.backlog(&["give-up", "1", "2", "--reason", "the customer cancelled"])
            .assert()
            .success(),
    );
    assert!(
        out.starts_with(
            "gave up on 2 records of BACKLOG: now DEAD (`backlog retry` brings them back); run "
        ),
        "{out}"
    );
    assert_eq!(
        env.statuses()[..2],
        [(1, "DEAD".into()), (2, "DEAD".into())]
    );
    let show = stdout(env.backlog(&["show", "1", "--now", NOW]).assert().success());
    assert!(show.contains(": the customer cancelled)"), "{show}");
    env.run_window("1d");
    assert!(env.take_calls().is_empty(), "no tick takes them");
    env.backlog(&["retry", "1"]).assert().success();
    assert_eq!(env.take_calls(), [1]);
    assert_eq!(env.statuses()[0], (1, "SUCCESS".into()));
    env.backlog(&["give-up", "1"])
        .assert()
        .code(2)
        .stderr(predicates::str::ends_with(
            "backlog: nothing to give up: \"1\": SUCCESS is not pending (a give-up takes records of NEW, ERROR)\n",
        ));
}

/// With `give_up_after = 2`, the second failure in a row gives a record up; a success
/// clears its count, and so does giving up, so that a retry starts it again.
fn a_record_is_given_up_at_its_nth_failure_in_a_row(backend: Backend) {
    let env = env_giving_up(backend, &[]);
    let file = std::fs::read_to_string(env.path("backlog.toml")).unwrap();
    std::fs::write(
        env.path("backlog.toml"),
        file.replacen(
            "given_up = \"DEAD\"",
            "given_up = \"DEAD\"\ngive_up_after = 2",
            1,
        ),
    )
    .unwrap();
    // 1 always fails; 2 fails while the file fail-2 is there.
    env.write_handler(
        "handler.sh",
        "#!/bin/sh\ncat > /dev/null\necho \"$BACKLOG_RECORD_ID\" >> calls.log\ncase \"$BACKLOG_RECORD_ID\" in\n  1) exit 1 ;;\n  2) [ -e fail-2 ] && exit 1 ;;\nesac\nexit 0\n",
    );
    std::fs::write(env.path("fail-2"), "").unwrap();
    let counts = || {
        env.lines(&format!(
            "SELECT record_id || ' ' || CAST(failures AS {}) FROM {} ORDER BY record_id",
            if backend == Backend::Mysql {
                "CHAR"
            } else {
                "TEXT"
            },
            env.own("backlog_failures")
        ))
    };
    let out = env.run_window("1d");
    assert!(
        out.contains("selected 2, succeeded 0, failed 2, skipped 0"),
        "{out}"
    );
    assert_eq!(counts(), ["1 1", "2 1"]);
    std::fs::remove_file(env.path("fail-2")).unwrap();
    let out = stdout(
        env.backlog(&["run", "--window", "1d", "--now", "2026-11-21T12:05:00Z"])
            .assert()
            .success(),
    );
    assert!(
        out.contains("selected 2, succeeded 1, failed 1 (of which DEAD 1), skipped 0"),
        "{out}"
    );
    assert_eq!(
        env.statuses()[..2],
        [(1, "DEAD".into()), (2, "SUCCESS".into())]
    );
    assert!(
        counts().is_empty(),
        "cleared by giving up and by the success"
    );
    let show = stdout(env.backlog(&["show", "1", "--now", NOW]).assert().success());
    assert!(
        show.contains("error    DEAD (exit 1; given up after 2 failures in a row)"),
        "{show}"
    );
    // Brought back, it has two failures to go again.
    env.backlog(&["retry", "1"]).assert().success();
    assert_eq!(env.statuses()[0], (1, "ERROR".into()));
    assert_eq!(counts(), ["1 1"]);
}

crate::on_every_backend!(
    a_record_past_the_last_tier_is_given_up_and_retry_brings_it_back,
    backlog_give_up_gives_up_on_records_by_hand,
    a_record_is_given_up_at_its_nth_failure_in_a_row,
);

/// Without `table.given_up`, nothing is given up on: a record past the last tier stays
/// pending, and `give-up` says what to set.
#[test]
fn without_given_up_nothing_is_given_up() {
    let env = Env::new();
    env.classic();
    env.write_schedule(&Schedule {
        tiers: TIERS,
        ..Schedule::default()
    });
    env.write_handler("handler.sh", &recording_handler(&[]));
    let out = env.run_window("30d");
    assert!(!out.contains("gave up"), "{out}");
    assert_eq!(env.statuses()[3], (4, "NEW".into()));
    env.backlog(&["give-up", "4"])
        .assert()
        .code(2)
        .stderr(predicates::str::ends_with(
            "backlog.toml sets no table.given_up; name the status of a record given up on there, like given_up = \"DEAD\"\n",
        ));
}

/// A tick that gives records up raises `given_up`, once per `alert_every`, saying how
/// many and why.
#[test]
fn giving_up_raises_the_given_up_alert() {
    let hooks = crate::hooks::Hooks::start();
    let env = env_giving_up(Backend::Sqlite, &[]);
    crate::hooks::add_webhook(&env.path("backlog.toml"), &hooks.url);
    env.run_window("30d");
    let events = crate::hooks::posted(&hooks.take());
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["kind"], "given_up");
    assert_eq!(events[0]["window"], "30d");
    assert_eq!(
        events[0]["message"],
        "gave up on 1 record of BACKLOG (1 past the last tier): now DEAD; `backlog retry ID` brings one back"
    );
}

/// Giving up by hand clears a record's failures in a row: brought back, it has all of
/// `give_up_after` to go again.
#[test]
fn giving_up_by_hand_clears_the_count_of_failures() {
    let env = env_giving_up(Backend::Sqlite, &[1]);
    let file = std::fs::read_to_string(env.path("backlog.toml")).unwrap();
    std::fs::write(
        env.path("backlog.toml"),
        file.replacen(
            "given_up = \"DEAD\"",
            "given_up = \"DEAD\"\ngive_up_after = 3",
            1,
        ),
    )
    .unwrap();
    env.run_window("1d");
    env.backlog(&["run", "--window", "1d", "--now", "2026-11-21T12:05:00Z"])
        .assert()
        .success();
    assert_eq!(env.count("SELECT failures FROM backlog_failures"), 2);
    env.backlog(&["give-up", "1"]).assert().success();
    assert_eq!(env.count("SELECT count(*) FROM backlog_failures"), 0);
    env.backlog(&["retry", "1"]).assert().success();
    assert_eq!(
        env.statuses()[0],
        (1, "ERROR".into()),
        "its first failure again"
    );
}

/// A version row gone (a creation cut short between the table and its row) is written
/// again rather than read as an empty version.
#[test]
fn a_missing_version_row_is_written_again() {
    let env = env_giving_up(Backend::Sqlite, &[]);
    env.run_window("1d");
    let version = "SELECT value FROM backlog_meta WHERE key = 'schema_version'";
    let written = env.text(version);
    env.execute("DELETE FROM backlog_meta WHERE key = 'schema_version'");
    env.run_window("1d");
    assert_eq!(env.text(version), written);
}

//! One tick over the classic backlog: what it selects, how it marks, what it reports.

use std::time::{Duration, Instant};

use crate::harness::{Backend, Env, NOW, Schedule, recording_handler};
use crate::stopping::process_alive;

pub(crate) fn classic_env(backend: Backend, schedule: Schedule, failing: &[i64]) -> Env {
    let env = Env::on(backend);
    env.classic();
    env.write_schedule(&schedule);
    env.write_handler("handler.sh", &recording_handler(failing));
    env
}

pub(crate) fn statuses(list: &[(i64, &str)]) -> Vec<(i64, String)> {
    list.iter().map(|(id, s)| (*id, s.to_string())).collect()
}

fn disjoint_bands_select_each_record_in_one_tier_and_mark_it_by_exit_code(backend: Backend) {
    let env = classic_env(backend, Schedule::default(), &[2]);

    let out = env.run_window("1d");
    assert!(
        out.starts_with(
            "tier 1 (1d every 5m), ages 0 to 1d: selected 2, succeeded 1, failed 1, skipped 0 in "
        ),
        "{out}"
    );
    assert_eq!(env.take_calls(), [1, 2], "newest first");
    assert_eq!(
        env.statuses(),
        statuses(&[(1, "SUCCESS"), (2, "ERROR"), (3, "NEW"), (4, "NEW")])
    );

    let out = env.run_window("7d");
    assert!(out.starts_with("tier 2 (7d every 1h), ages over 1d up to 7d: selected 1, succeeded 1, failed 0, skipped 0"), "{out}");
    assert_eq!(env.take_calls(), [3]);

    env.run_window("180d");
    assert_eq!(env.take_calls(), [4]);
    assert_eq!(
        env.statuses(),
        statuses(&[(1, "SUCCESS"), (2, "ERROR"), (3, "SUCCESS"), (4, "SUCCESS")])
    );

    // The ERROR record is pending, but kept from every tick until the schedule tries
    // it next: once a slot. A tick in the same slot leaves it, the next slot's takes
    // it, and `--retry-failed` takes it at once.
    let out = env.run_window("1d");
    assert!(
        out.contains("selected 0, succeeded 0, failed 0, skipped 1"),
        "{out}"
    );
    let at = |now: &str, extra: &[&str]| {
        let mut args = vec!["run", "--window", "1d", "--now", now];
        args.extend(extra);
        env.backlog(&args).assert().success();
        env.take_calls()
    };
    assert_eq!(
        at("2026-11-21T12:04:00Z", &[]),
        Vec::<i64>::new(),
        "same slot"
    );
    assert_eq!(at("2026-11-21T12:05:00Z", &[]), [2], "next slot");
    assert_eq!(at("2026-11-21T12:05:30Z", &["--retry-failed"]), [2]);
    assert_eq!(at("2026-11-21T12:05:40Z", &[]), Vec::<i64>::new());
}

fn cumulative_bands_select_everything_younger_than_the_window(backend: Backend) {
    let env = classic_env(
        backend,
        Schedule {
            bands: "cumulative",
            ..Schedule::default()
        },
        &[1, 2, 3, 4],
    );
    // Each tier runs in a slot of its own (failures are kept until the next try).
    let run = |window: &str, now: &str| {
        let out = env
            .backlog(&["run", "--window", window, "--now", now])
            .assert()
            .success();
        String::from_utf8(out.get_output().stdout.clone()).unwrap()
    };
    run("1d", NOW);
    assert_eq!(env.take_calls(), [1, 2]);
    run("7d", "2026-11-21T12:05:00Z");
    assert_eq!(env.take_calls(), [1, 2, 3]);
    let out = run("180d", "2026-11-21T13:00:00Z");
    assert!(
        out.starts_with(
            "tier 5 (180d every 4d), ages 0 to 180d: selected 4, succeeded 0, failed 4"
        ),
        "{out}"
    );
    assert_eq!(env.take_calls(), [1, 2, 3, 4]);
    assert_eq!(
        env.statuses(),
        statuses(&[(1, "ERROR"), (2, "ERROR"), (3, "ERROR"), (4, "ERROR")])
    );
}

fn an_ad_hoc_window_runs_from_age_zero_and_says_so(backend: Backend) {
    let env = classic_env(backend, Schedule::default(), &[]);
    let out = env
        .backlog(&["run", "--window", "10d", "--now", NOW, "--ad-hoc"])
        .assert()
        .success();
    let out = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(
        out.starts_with("window 10d (no tier has it), ages 0 to 10d: selected 3"),
        "{out}"
    );
    assert_eq!(env.take_calls(), [1, 2, 3]);
}

fn a_dry_run_lists_the_records_and_changes_nothing(backend: Backend) {
    let env = classic_env(backend, Schedule::default(), &[]);
    let before = env.dump();
    let out = env
        .backlog(&["run", "--window", "1d", "--now", NOW, "--dry-run"])
        .assert()
        .success();
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    // The list is data, on stdout; its summary on stderr.
    assert_eq!(
        stdout,
        "1\t2026-11-21 11:52:00\tage 8m\tNEW\n2\t2026-11-21 07:00:00\tage 5h\tNEW\n"
    );
    assert_eq!(
        String::from_utf8_lossy(&out.get_output().stderr),
        "tier 1 (1d every 5m), ages 0 to 1d: dry run, would hand over 2 records\n"
    );
    assert!(env.take_calls().is_empty());
    assert_eq!(env.dump(), before);
    assert!(!env.has_own_tables(), "a dry run creates no tables");

    // A dry run needs no handler: a missing one does not stop the preview.
    std::fs::remove_file(env.path("handler.sh")).unwrap();
    let out = env
        .backlog(&["run", "--window", "1d", "--now", NOW, "--dry-run"])
        .assert()
        .success();
    assert_eq!(String::from_utf8_lossy(&out.get_output().stdout), stdout);
}

fn json_summary_and_run_log_agree(backend: Backend) {
    let env = classic_env(backend, Schedule::default(), &[2]);
    let out = env
        .backlog(&["run", "--window", "1d", "--now", NOW, "--json"])
        .assert()
        .success();
    let summary: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(summary["tier"], 1);
    assert_eq!(summary["band"]["from"], "2026-11-20 12:00:00");
    assert_eq!(summary["band"]["to"], "2026-11-21 12:00:00");
    assert_eq!(summary["inserted_at_format"], "sqlite");
    assert_eq!(
        (
            summary["selected"].as_u64(),
            summary["succeeded"].as_u64(),
            summary["failed"].as_u64()
        ),
        (Some(2), Some(1), Some(1))
    );
    let run_id = summary["run_id"].as_i64().unwrap();
    let runs = env.own("backlog_runs");
    let logged = ["window_secs", "selected", "succeeded", "failed"]
        .map(|c| env.count(&format!("SELECT {c} FROM {runs} WHERE id = {run_id}")));
    assert_eq!(logged, [86_400, 2, 1, 1]);
    assert_eq!(
        env.text(&format!("SELECT outcome FROM {runs} WHERE id = {run_id}")),
        "done"
    );
    let status = env.backlog(&["status", "--json"]).assert().success();
    let status: serde_json::Value = serde_json::from_slice(&status.get_output().stdout).unwrap();
    assert_eq!(
        status["tiers"][0]["last_tick"]["clock"], NOW,
        "the run log keeps the tick's clock"
    );
    let claims = env.holds_left();
    assert_eq!(claims, 0, "a finished tick holds no claims");
}

fn verbose_logs_each_outcome(backend: Backend) {
    let env = classic_env(backend, Schedule::default(), &[2]);
    env.backlog(&["run", "--window", "1d", "--now", NOW, "-v"])
        .assert()
        .success()
        .stderr(predicates::str::contains("record 1: SUCCESS (exit 0)"))
        .stderr(predicates::str::contains("record 2: ERROR (exit 1)"));
}

fn the_limit_caps_a_tick_and_says_so(backend: Backend) {
    let env = classic_env(
        backend,
        Schedule {
            bands: "cumulative",
            ..Schedule::default()
        },
        &[],
    );
    let out = env
        .backlog(&["run", "--window", "7d", "--now", NOW, "--limit", "1"])
        .assert()
        .success();
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(
        stdout
            .trim_end()
            .ends_with("; limit 1 reached, the rest waits for the next tick"),
        "{stdout}"
    );
    assert_eq!(env.take_calls(), [1]);
}

/// A good, a failing (mapped to a dead-letter status), a crashing, a hanging and
/// another good record: the tick goes through all of them.
fn failing_crashing_and_hanging_handlers_do_not_stop_the_tick(backend: Backend) {
    let env = Env::on(backend);
    env.create_table("TEXT");
    env.insert_aged(&[(1, 60), (2, 120), (3, 180), (4, 240), (5, 300)], |t| {
        t.format("%Y-%m-%d %H:%M:%S").to_string().into()
    });
    env.write_schedule(&Schedule {
        timeout: "1s",
        handler_extra: "exit_codes = { 3 = \"DEAD\" }",
        ..Schedule::default()
    });
    env.write_handler(
        "handler.sh",
        r#"#!/bin/sh
cat > /dev/null
case "$BACKLOG_RECORD_ID" in
  2) echo "permanently refused" >&2; exit 3 ;;
  3) kill -SEGV $$ ;;
  4) sleep 600 & echo $! > sleeper.pid; wait ;;
esac
exit 0
"#,
    );
    let started = Instant::now();
    let out = env
        .backlog(&["run", "--window", "1d", "--now", NOW, "-v"])
        .assert()
        .success();
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "the hang was killed, not waited out"
    );
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(
        stdout.contains("selected 5, succeeded 2, failed 3 (of which DEAD 1), skipped 0"),
        "{stdout}"
    );
    assert!(
        stderr.contains("record 2: DEAD (exit 3): [stderr] permanently refused"),
        "{stderr}"
    );
    assert!(
        stderr.contains("record 3: ERROR (killed by signal 11)"),
        "{stderr}"
    );
    assert!(
        stderr.contains("record 4: ERROR (timed out after 1s, killed)"),
        "{stderr}"
    );
    assert_eq!(
        env.statuses(),
        statuses(&[
            (1, "SUCCESS"),
            (2, "DEAD"),
            (3, "ERROR"),
            (4, "ERROR"),
            (5, "SUCCESS")
        ])
    );
    let sleeper: i32 = std::fs::read_to_string(env.path("sleeper.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        !process_alive(sleeper),
        "the hanging handler's child {sleeper} was killed with its group"
    );
}

/// Polls for up to 30 s; a condition that never comes true fails the test.
pub fn wait_for(mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !condition() {
        assert!(Instant::now() < deadline, "waited 30 s for a condition");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A tier with `spread = 2` takes half its band per tick, the same half on alternate
/// ticks, and the other half on the ticks between.
fn a_spread_tier_takes_its_share_of_the_band_per_tick(backend: Backend) {
    let env = Env::on(backend);
    env.create_table("TEXT");
    let aged: Vec<(i64, i64)> = (1..=40).map(|id| (id, id * 60)).collect();
    env.insert_aged(&aged, |t| t.format("%Y-%m-%d %H:%M:%S").to_string().into());
    env.write_schedule(&Schedule {
        tiers: "\n[[tier]]\nwindow = \"1d\"\nevery = \"5m\"\nspread = 2\n",
        ..Schedule::default()
    });
    env.write_handler(
        "handler.sh",
        &recording_handler(&(1..=40).collect::<Vec<_>>()),
    );
    let tick = |now: &str| {
        let out = env
            .backlog(&["run", "--window", "1d", "--now", now])
            .assert()
            .success();
        (
            String::from_utf8_lossy(&out.get_output().stdout).into_owned(),
            env.take_calls(),
        )
    };
    let (line, first) = tick("2026-11-21T12:00:00Z");
    let (_, second) = tick("2026-11-21T12:05:00Z");
    let (_, third) = tick("2026-11-21T12:10:00Z");
    assert!(line.contains(", deferred"), "{line}");
    assert_eq!(first.len() + second.len(), 40, "two ticks cover the band");
    assert!(
        first.iter().all(|id| !second.contains(id)),
        "no record in both halves"
    );
    assert_eq!(first, third, "the same half every other tick");
    assert!(
        (10..=30).contains(&first.len()),
        "about half: {}",
        first.len()
    );
}

crate::on_every_backend!(
    disjoint_bands_select_each_record_in_one_tier_and_mark_it_by_exit_code,
    cumulative_bands_select_everything_younger_than_the_window,
    an_ad_hoc_window_runs_from_age_zero_and_says_so,
    a_dry_run_lists_the_records_and_changes_nothing,
    json_summary_and_run_log_agree,
    verbose_logs_each_outcome,
    the_limit_caps_a_tick_and_says_so,
    failing_crashing_and_hanging_handlers_do_not_stop_the_tick,
    a_spread_tier_takes_its_share_of_the_band_per_tick,
);

/// A database whose tool tables an earlier release made (version 1, records claimed
/// one by one) moves to version 11 (spans, a `lost` count, attempts and pauses, then
/// failures in a row, alerts, shared rates and breakers, a step that adds a table on
/// servers only, adapted paces, answers by code, the history's pending counts and
/// handler times) on the first tick, but not while a tick of that release still holds
/// claims: it would not see the new spans. Tables at version 4 gain
/// `backlog_failures`, `backlog_alerts`, `backlog_rates` and `backlog_breakers`;
/// tables at version 10 the run log's `pending`, its index by clock and
/// `backlog_run_times`.
#[test]
fn sqlite_tables_of_version_one_move_to_spans() {
    let env = classic_env(Backend::Sqlite, Schedule::default(), &[]);
    let version_one = "CREATE TABLE backlog_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        INSERT INTO backlog_meta VALUES ('schema_version', '1');
        CREATE TABLE backlog_claims (table_name TEXT NOT NULL, record_id NOT NULL, owner TEXT NOT NULL,
            claimed_at INTEGER NOT NULL, expires_at INTEGER NOT NULL, PRIMARY KEY (table_name, record_id));";
    env.db().execute_batch(version_one).unwrap();
    let live = format!(
        "INSERT INTO backlog_claims VALUES ('BACKLOG', 1, 'old', 0, {})",
        chrono::Utc::now().timestamp_millis() + 600_000
    );
    env.execute(&live);
    env.backlog(&["run", "--window", "1d", "--now", NOW])
        .assert()
        .code(4)
        .stderr(predicates::str::contains(
            ": a tick of an earlier backlog release holds 1 record in backlog_claims of ",
        ))
        .stderr(predicates::str::ends_with(
            "; let it finish (or wait for its lease to run out), then run again to move the tool's tables to version 11\n",
        ));
    assert_eq!(env.with_status("SUCCESS"), 0, "nothing handled");

    env.execute("UPDATE backlog_claims SET expires_at = 0");
    let out = env.run_window("1d");
    assert!(out.contains("selected 2, succeeded 2"), "{out}");
    let version = "SELECT value FROM backlog_meta WHERE key = 'schema_version'";
    assert_eq!(env.text(version), "11");
    let tables =
        "SELECT name FROM sqlite_schema WHERE name LIKE 'backlog_%' AND type = 'table' ORDER BY 1";
    let all = [
        "backlog_alerts",
        "backlog_answers",
        "backlog_attempts",
        "backlog_breakers",
        "backlog_failures",
        "backlog_holds",
        "backlog_meta",
        "backlog_paces",
        "backlog_pauses",
        "backlog_rates",
        "backlog_run_times",
        "backlog_runs",
        "backlog_takeovers",
        "backlog_tried",
    ];
    assert_eq!(env.lines(tables), all);

    // Version 4, the release before failures in a row, alerts, shared rates and
    // breakers: the next tick adds their tables.
    env.execute("DROP TABLE backlog_alerts");
    env.execute("DROP TABLE backlog_failures");
    env.execute("DROP TABLE backlog_rates");
    env.execute("DROP TABLE backlog_breakers");
    env.execute("DROP TABLE backlog_paces");
    env.execute("DROP TABLE backlog_answers");
    env.execute("DROP TABLE backlog_run_times");
    env.execute("UPDATE backlog_meta SET value = '4' WHERE key = 'schema_version'");
    env.run_window("1d");
    assert_eq!(env.text(version), "11");
    assert_eq!(env.lines(tables), all);

    // Version 10, the release before the history: the run log gains its pending
    // count and its index by clock, and the handler times their table.
    env.execute("DROP TABLE backlog_run_times");
    env.execute("DROP INDEX backlog_runs_by_clock");
    env.execute("ALTER TABLE backlog_runs DROP COLUMN pending");
    env.execute("UPDATE backlog_meta SET value = '10' WHERE key = 'schema_version'");
    env.run_window("1d");
    assert_eq!(env.text(version), "11");
    assert_eq!(env.lines(tables), all);
    let pending = "SELECT name FROM pragma_table_info('backlog_runs') WHERE name = 'pending'";
    assert_eq!(env.lines(pending), ["pending"]);
    let index = "SELECT name FROM sqlite_schema WHERE name = 'backlog_runs_by_clock'";
    assert_eq!(env.lines(index), ["backlog_runs_by_clock"]);

    // Spans of the release before `handed` (how far a tick handed its span out, for a
    // person's action to take over the rest) gain the column, at the same version.
    env.execute("DROP TABLE backlog_holds");
    env.execute(
        "CREATE TABLE backlog_holds (table_name TEXT NOT NULL, owner TEXT NOT NULL, low NOT NULL, high NOT NULL, expires_at INTEGER NOT NULL, PRIMARY KEY (table_name, owner))",
    );
    env.run_window("1d");
    let handed = "SELECT name FROM pragma_table_info('backlog_holds') WHERE name = 'handed'";
    assert_eq!(env.lines(handed), ["handed"]);
    assert_eq!(env.text(version), "11");
}

//! One tick over the classic backlog: what it selects, how it marks, what it reports.

use std::time::{Duration, Instant};

use crate::harness::{Backend, Env, NOW, Running, Schedule, recording_handler};

fn classic_env(backend: Backend, schedule: Schedule, failing: &[i64]) -> Env {
    let env = Env::on(backend);
    env.classic();
    env.write_schedule(&schedule);
    env.write_handler("handler.sh", &recording_handler(failing));
    env
}

fn statuses(list: &[(i64, &str)]) -> Vec<(i64, String)> {
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
    assert_eq!(
        stdout,
        "1\t2026-11-21 11:52:00\tage 8m\tNEW\n2\t2026-11-21 07:00:00\tage 5h\tNEW\ntier 1 (1d every 5m), ages 0 to 1d: dry run, would hand over 2 records\n"
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

fn process_alive(pid: i32) -> bool {
    // A zombie still answers kill(0); a killed child reaped by init does not exist.
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "))
}

fn sigterm_stops_taking_records_and_leaves_the_rest_pending(backend: Backend) {
    let env = Env::on(backend);
    env.create_table("TEXT");
    env.insert_aged(&[(1, 60), (2, 120), (3, 180), (4, 240)], |t| {
        t.format("%Y-%m-%d %H:%M:%S").to_string().into()
    });
    env.write_schedule(&Schedule::default());
    env.write_handler(
        "handler.sh",
        "#!/bin/sh\ncat > /dev/null\necho \"$BACKLOG_RECORD_ID\" >> calls.log\nsleep 1\n",
    );
    let tick = Running::spawn(
        env.command()
            .args(["run", "--window", "1d", "--now", NOW])
            .stdout(std::process::Stdio::piped()),
    );
    wait_for(|| std::fs::read_to_string(env.path("calls.log")).is_ok());
    let out = tick.terminate();
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.trim_end().ends_with("; stopped early by a signal"),
        "{stdout}"
    );
    let handled = env.take_calls();
    assert_eq!(
        handled,
        [1],
        "the running handler finished, no new one started"
    );
    assert_eq!(
        env.statuses(),
        statuses(&[(1, "SUCCESS"), (2, "NEW"), (3, "NEW"), (4, "NEW")])
    );
    let outcome = env.text(&format!("SELECT outcome FROM {}", env.own("backlog_runs")));
    let claims = env.holds_left();
    assert_eq!((outcome.as_str(), claims), ("stopped", 0));
}

/// A tick killed with SIGKILL: its handler dies with it, its claim on the record it
/// was handling blocks other ticks only until the lease runs out, and then every
/// record is processed. (It held only that record: a tick takes what it will start
/// soon, one lane's worth before it knows how long a handler takes.)
fn a_killed_tick_leaves_nothing_stuck(backend: Backend) {
    let env = Env::on(backend);
    env.create_table("TEXT");
    env.insert_aged(&[(1, 60), (2, 120), (3, 180)], |t| {
        t.format("%Y-%m-%d %H:%M:%S").to_string().into()
    });
    // Long enough for the next tick to start and take its page within the lease on
    // a busy machine (2 s was not, under the whole suite on two cores).
    env.write_schedule(&Schedule {
        database_extra: "claim_lease = \"4s\"",
        ..Schedule::default()
    });
    env.write_handler(
        "handler.sh",
        "#!/bin/sh\necho $$ > handler.pid\nexec sleep 600\n",
    );
    let tick = Running::spawn(env.command().args(["run", "--window", "1d", "--now", NOW]));
    wait_for(|| std::fs::read_to_string(env.path("handler.pid")).is_ok_and(|s| s.ends_with('\n')));
    let handler_pid: i32 = std::fs::read_to_string(env.path("handler.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    tick.kill();
    wait_for(|| !process_alive(handler_pid));

    env.write_handler("handler.sh", &recording_handler(&[]));
    let out = env.run_window("1d");
    assert!(
        out.contains("selected 2, succeeded 2, failed 0, skipped 1"),
        "the claim of the dead tick still holds: {out}"
    );
    std::thread::sleep(Duration::from_millis(4500));
    let out = env.run_window("1d");
    assert!(
        out.contains("selected 1, succeeded 1, failed 0, skipped 0"),
        "{out}"
    );
    assert_eq!(
        env.statuses(),
        statuses(&[(1, "SUCCESS"), (2, "SUCCESS"), (3, "SUCCESS")])
    );
    // The killed tick's run-log row, silent for a lease, was closed by a later tick.
    let outcomes = env.lines(&format!(
        "SELECT outcome FROM {} ORDER BY id",
        env.own("backlog_runs")
    ));
    assert_eq!(outcomes, ["abandoned", "done", "done"]);
    assert_eq!(env.holds_left(), 0, "the dead tick's hold is gone too");
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

/// A record whose inserted-at value cannot be read has no age: the tick leaves it
/// alone, counts it and names the first, in a dry run too; the others go through.
fn a_record_with_an_unreadable_inserted_at_value_is_left_alone(backend: Backend) {
    let env = classic_env(
        backend,
        Schedule {
            format: "sqlite",
            ..Schedule::default()
        },
        &[],
    );
    // Sorts between the band's bounds as text, but is no time.
    env.execute(r#"UPDATE "BACKLOG" SET "DATE_INSERTED" = '2026-11-21 06:61:00' WHERE "ID" = 2"#);
    let out = env
        .backlog(&["run", "--window", "1d", "--now", NOW, "--dry-run"])
        .assert()
        .success();
    let dry = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(
        dry.contains("would hand over 1 records; left alone 1 with an unreadable DATE_INSERTED value (record 2: \"2026-11-21 06:61:00\"; fix them, `backlog doctor` lists them)"),
        "{dry}"
    );
    let out = env.run_window("1d");
    assert!(
        out.contains("selected 1, succeeded 1, failed 0, skipped 0")
            && out.contains("; left alone 1 with an unreadable DATE_INSERTED value (record 2: \"2026-11-21 06:61:00\""),
        "{out}"
    );
    assert_eq!(env.take_calls(), [1]);
    assert_eq!(env.statuses()[1], (2, "NEW".to_string()));
}

/// RFC 3339 text in another UTC offset than the rest of the column, in the middle of
/// the table where the format check of its two ends does not look: text compares it
/// as written, so the band it sorts in may not be its own. The tick leaves it alone,
/// counts it, names the first and warns once, in a dry run too.
fn a_record_in_another_utc_offset_is_left_alone(backend: Backend) {
    let env = classic_env(backend, Schedule::default(), &[]);
    env.execute(
        r#"UPDATE "BACKLOG" SET "DATE_INSERTED" = replace("DATE_INSERTED", ' ', 'T') || 'Z'"#,
    );
    // 07:00Z, written five hours behind: the same instant, other text.
    env.execute(
        r#"UPDATE "BACKLOG" SET "DATE_INSERTED" = '2026-11-21T02:00:00-05:00' WHERE "ID" = 2"#,
    );
    let said = "left alone 1 whose DATE_INSERTED carries another UTC offset than the column's (record 2: \"2026-11-21T02:00:00-05:00\"; store every value in one offset, `backlog doctor` lists them)";
    let out = env
        .backlog(&["run", "--window", "1d", "--now", NOW, "--dry-run"])
        .assert()
        .success();
    let dry = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(
        dry.contains(&format!("would hand over 1 records; {said}")),
        "{dry}"
    );
    let out = env
        .backlog(&["run", "--window", "1d", "--now", NOW])
        .assert()
        .success();
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(
        stdout.contains("selected 1, succeeded 1, failed 0, skipped 0") && stdout.contains(said),
        "{stdout}"
    );
    assert_eq!(
        stderr
            .lines()
            .filter(|l| l.contains("carries another UTC offset"))
            .count(),
        1,
        "{stderr}"
    );
    assert_eq!(env.take_calls(), [1]);
    assert_eq!(env.statuses()[1], (2, "NEW".to_string()));
}

/// A band whose records have a pending status in another case (`new` where the file
/// says `NEW`) selects nothing: the tick says why, once, instead of nothing.
///
/// With an index on (status, inserted-at) and none on inserted-at, the sample is read
/// status by status through that index (a sample of the band by inserted-at would scan
/// the table): the same warning.
fn a_band_of_statuses_in_another_case_is_warned_of(backend: Backend) {
    let env = classic_env(backend, Schedule::default(), &[]);
    env.execute(r#"UPDATE "BACKLOG" SET "STATUS" = 'new'"#);
    for layout in ["inserted-at index", "(status, inserted-at) index"] {
        if layout.starts_with("(status") {
            env.execute(match backend {
                Backend::Mysql => r#"DROP INDEX "BACKLOG_BY_DATE" ON "BACKLOG""#,
                _ => r#"DROP INDEX "BACKLOG_BY_DATE""#,
            });
            env.execute(
                r#"CREATE INDEX "BACKLOG_BY_STATUS_DATE" ON "BACKLOG" ("STATUS", "DATE_INSERTED")"#,
            );
        }
        let out = env
            .backlog(&["run", "--window", "1d", "--now", NOW])
            .assert()
            .success();
        let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
        assert_eq!(stderr.lines().count(), 1, "{layout}: {stderr}");
        assert!(
            stderr.contains(
                "WARN no record of this band is pending, yet a sample of it holds statuses that differ from a pending value only in case: 2 \"new\" (the file says \"NEW\"); statuses are compared exactly"
            ),
            "{layout}: {stderr}"
        );
        assert!(env.take_calls().is_empty());
    }
}

crate::on_every_backend!(
    a_record_in_another_utc_offset_is_left_alone,
    a_band_of_statuses_in_another_case_is_warned_of,
    a_record_with_an_unreadable_inserted_at_value_is_left_alone,
    disjoint_bands_select_each_record_in_one_tier_and_mark_it_by_exit_code,
    cumulative_bands_select_everything_younger_than_the_window,
    an_ad_hoc_window_runs_from_age_zero_and_says_so,
    a_dry_run_lists_the_records_and_changes_nothing,
    json_summary_and_run_log_agree,
    verbose_logs_each_outcome,
    the_limit_caps_a_tick_and_says_so,
    failing_crashing_and_hanging_handlers_do_not_stop_the_tick,
    sigterm_stops_taking_records_and_leaves_the_rest_pending,
    a_killed_tick_leaves_nothing_stuck,
    a_spread_tier_takes_its_share_of_the_band_per_tick,
);

/// A database whose tool tables an earlier release made (version 1, records claimed
/// one by one) moves to version 8 (spans, a `lost` count, attempts and pauses, then
/// failures in a row, alerts, shared rates and breakers, a step that adds a table on
/// servers only) on the first tick, but not while a tick
/// of that release still holds claims: it would not see the new spans. Tables at
/// version 4 gain `backlog_failures`, `backlog_alerts`, `backlog_rates` and
/// `backlog_breakers`.
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
            "; let it finish (or wait for its lease to run out), then run again to move the tool's tables to version 8\n",
        ));
    assert_eq!(env.with_status("SUCCESS"), 0, "nothing handled");

    env.execute("UPDATE backlog_claims SET expires_at = 0");
    let out = env.run_window("1d");
    assert!(out.contains("selected 2, succeeded 2"), "{out}");
    let version = "SELECT value FROM backlog_meta WHERE key = 'schema_version'";
    assert_eq!(env.text(version), "8");
    let tables =
        "SELECT name FROM sqlite_schema WHERE name LIKE 'backlog_%' AND type = 'table' ORDER BY 1";
    let all = [
        "backlog_alerts",
        "backlog_attempts",
        "backlog_breakers",
        "backlog_failures",
        "backlog_holds",
        "backlog_meta",
        "backlog_pauses",
        "backlog_rates",
        "backlog_runs",
        "backlog_tried",
    ];
    assert_eq!(env.lines(tables), all);

    // Version 4, the release before failures in a row, alerts, shared rates and
    // breakers: the next tick adds their tables.
    env.execute("DROP TABLE backlog_alerts");
    env.execute("DROP TABLE backlog_failures");
    env.execute("DROP TABLE backlog_rates");
    env.execute("DROP TABLE backlog_breakers");
    env.execute("UPDATE backlog_meta SET value = '4' WHERE key = 'schema_version'");
    env.run_window("1d");
    assert_eq!(env.text(version), "8");
    assert_eq!(env.lines(tables), all);
}

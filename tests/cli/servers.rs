//! What PostgreSQL and MySQL share and SQLite has not: runners on many hosts sharing a
//! band through claims, a runner killed mid-tick, a connection the server drops. Each
//! test body runs on both servers.

use std::process::Stdio;
use std::time::Duration;

use crate::concurrency::handled_without_overlap;
use crate::harness::{Backend, Env, NOW, Running, Schedule, recording_handler};
use crate::tick::wait_for;

/// A batch handler that logs `start ID ns` and `end ID ns` around each record, as
/// `handled_without_overlap` reads them, sleeping `BACKLOG_TEST_SLEEP` seconds in
/// between.
const LOGGING_BATCH: &str = r#"#!/usr/bin/env python3
import json, os, sys, time
pause = float(os.environ.get("BACKLOG_TEST_SLEEP", "0"))
log = open("handler.log", "a", buffering=1)
for line in sys.stdin:
    rid = json.loads(line)["id"]
    log.write(f"start {rid} {time.time_ns()}\n")
    if pause:
        time.sleep(pause)
    log.write(f"end {rid} {time.time_ns()}\n")
    print(json.dumps({"id": rid, "code": 0}), flush=True)
"#;

/// A table of `n` pending records, ids 1..n, one second apart in age.
pub fn pending_records(env: &Env, n: i64) {
    env.create_table("timestamptz");
    if env.backend == Backend::Postgres {
        // Made by the server, so that large tables are quick to make.
        env.execute(&format!(
            r#"INSERT INTO "BACKLOG" SELECT g, 'NEW', TIMESTAMPTZ '{NOW}' - g * INTERVAL '1 second', 'payload ' || g
               FROM generate_series(1, {n}) g; ANALYZE "BACKLOG""#
        ));
        return;
    }
    let records: Vec<(i64, i64)> = (1..=n).map(|i| (i, i)).collect();
    env.insert_aged(&records, |t| t.into());
}

pub fn batch_schedule(env: &Env, database_extra: &'static str, handler_extra: &'static str) {
    env.write_schedule(&Schedule {
        command: r#"["./batch.py"]"#,
        handler_extra,
        database_extra,
        ..Schedule::default()
    });
    env.write_handler("batch.py", LOGGING_BATCH);
}

pub fn spawn_run(env: &Env, sleep: &str) -> std::process::Child {
    env.command()
        .args(["run", "--window", "1d", "--now", NOW, "--json"])
        .env("BACKLOG_TEST_SLEEP", sleep)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// `child`'s output once it ends; it is killed, and the test fails, if it has not
/// ended within a minute (a hung tick must fail CI, not stall it).
pub fn output_within_a_minute(mut child: std::process::Child) -> std::process::Output {
    use std::io::Read;
    fn drain(pipe: Option<impl Read + Send + 'static>) -> std::thread::JoinHandle<Vec<u8>> {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes);
            }
            bytes
        })
    }
    let (stdout, stderr) = (drain(child.stdout.take()), drain(child.stderr.take()));
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("backlog did not end within a minute");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    std::process::Output {
        status,
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
    }
}

pub fn all_success(env: &Env) -> bool {
    env.count(r#"SELECT count(*) FROM "BACKLOG" WHERE "STATUS" <> 'SUCCESS'"#) == 0
}

fn eight_runners_share_twenty_thousand_records_and_none_is_handled_twice_at_once(backend: Backend) {
    let env = Env::on(backend);
    pending_records(&env, 20_000);
    batch_schedule(&env, "", "mode = \"batch\"\nbatch_size = 50");
    let runners: Vec<_> = (0..8).map(|_| spawn_run(&env, "0")).collect();
    let summaries: Vec<serde_json::Value> = runners
        .into_iter()
        .map(|r| {
            let out = r.wait_with_output().unwrap();
            assert!(out.status.success(), "{out:?}");
            serde_json::from_slice(&out.stdout).unwrap()
        })
        .collect();
    let handled = handled_without_overlap(&env);
    assert_eq!(handled.len(), 20_000, "every record was handled");
    let handovers: u64 = handled.values().sum();
    let selected: u64 = summaries
        .iter()
        .map(|s| s["selected"].as_u64().unwrap())
        .sum();
    assert_eq!(selected, handovers, "the summaries count the handler's log");
    let logged = env.count(&format!(
        "SELECT CAST(sum(selected) AS BIGINT) FROM {}",
        env.own("backlog_runs")
    ));
    assert_eq!(
        logged as u64, handovers,
        "the run log counts the handler's log"
    );
    let busy = summaries
        .iter()
        .filter(|s| s["selected"].as_u64() > Some(0))
        .count();
    assert!(
        busy >= 2,
        "the work was shared: {busy} runners took records"
    );
    assert!(all_success(&env));
    assert_eq!(env.holds_left(), 0);
}

/// SIGKILL in the middle of a tick: the records it held wait one lease, then a later
/// tick takes them; every record ends handled and no claim is left.
fn a_runner_killed_mid_tick_leaves_no_record_lost_or_stuck(backend: Backend) {
    let env = Env::on(backend);
    pending_records(&env, 400);
    // Long enough for the next tick to start and skip within the lease on a busy
    // machine.
    batch_schedule(
        &env,
        "claim_lease = \"4s\"",
        "mode = \"batch\"\nbatch_size = 50",
    );
    let mut runner = spawn_run(&env, "0.005");
    wait_for(|| {
        std::fs::read_to_string(env.path("handler.log"))
            .is_ok_and(|log| log.lines().filter(|l| l.starts_with("end")).count() >= 100)
    });
    runner.kill().unwrap();
    runner.wait().unwrap();
    // The handler dies with its tick (PR_SET_PDEATHSIG); the log of the killed tick
    // ends with a record it started and never finished. Later ticks log afresh.
    std::thread::sleep(Duration::from_millis(300));
    std::fs::rename(env.path("handler.log"), env.path("killed.log")).unwrap();
    let done_before = env.with_status("SUCCESS");
    assert!(done_before < 400, "killed mid-tick, {done_before} marked");
    let held = env.holds_left();
    assert!(held > 0, "the dead runner's claims are still there");

    // Within the lease, the held records are skipped, each counted once; after it,
    // taken.
    let first = spawn_run(&env, "0").wait_with_output().unwrap();
    let first: serde_json::Value = serde_json::from_slice(&first.stdout).unwrap();
    assert_eq!(first["skipped"].as_i64(), Some(held), "{first}");
    assert_eq!(
        first["selected"].as_i64(),
        Some(400 - done_before - held),
        "{first}"
    );
    std::thread::sleep(Duration::from_millis(4500));
    let second = spawn_run(&env, "0").wait_with_output().unwrap();
    assert!(second.status.success());
    assert!(all_success(&env), "no record lost");
    assert_eq!(env.holds_left(), 0, "no record stuck");
    let after = handled_without_overlap(&env);
    assert_eq!(
        after.len() as i64,
        400 - done_before,
        "later ticks handled exactly the records the killed one had not marked"
    );
}

/// The server ends the tick's connections mid-tick: the tick stops, exits non-zero
/// with one clear line, keeps the marks it wrote, and a later tick does the rest.
fn a_lost_connection_stops_the_tick_and_keeps_what_was_marked(backend: Backend) {
    let env = Env::on(backend);
    pending_records(&env, 30);
    batch_schedule(
        &env,
        "claim_lease = \"2s\"",
        "mode = \"batch\"\nbatch_size = 2",
    );
    let runner = spawn_run(&env, "0.1");
    wait_for(|| env.with_status("SUCCESS") > 0);
    drop_connections(&env);
    let out = output_within_a_minute(runner);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    // Warnings of the heartbeat may come first; the error is the last line.
    let last = stderr.lines().last().unwrap_or_default();
    assert!(
        last.starts_with(&format!("backlog: {}: ", env.url()))
            && (last.ends_with("the connection to the server was lost")
                || last.ends_with("terminating connection due to administrator command")
                || last.ends_with("Connection was killed (error 1927)")),
        "{stderr}"
    );
    let marked = env.with_status("SUCCESS");
    assert!((1..30).contains(&marked), "{marked} marked before the loss");
    std::thread::sleep(Duration::from_millis(2500));
    assert!(spawn_run(&env, "0").wait().unwrap().success());
    assert!(all_success(&env));
    assert_eq!(env.holds_left(), 0);
}

/// A tick's marks go to the server on a connection of their own while the tick reads
/// the next pages (a group goes out after a second of handling here). On a table this
/// small, MariaDB read the marks' `id IN (…) FOR UPDATE` by scanning another index and
/// kept every row it scanned locked: the pages read meanwhile skipped the rest of the
/// band, and the tick ended with three of eight records never handed out.
fn pages_read_while_marks_are_written_miss_no_record(backend: Backend) {
    let env = Env::on(backend);
    pending_records(&env, 8);
    batch_schedule(&env, "", "mode = \"batch\"\nbatch_size = 1");
    let out = output_within_a_minute(spawn_run(&env, "0.2"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.contains("\"selected\":8"), "{stdout}");
    assert!(all_success(&env));
    assert_eq!(env.holds_left(), 0);
}

/// A daemon on a host whose clock is two days slow (`faketime`) goes by the database
/// server's: its slots fire, its bands hold today's records, and the run log's clock is
/// the server's, as for `backlog run`.
fn a_daemon_on_a_slow_host_goes_by_the_servers_clock(backend: Backend) {
    let env = Env::on(backend);
    env.classic_at(chrono::Utc::now());
    env.write_schedule(&Schedule {
        tiers: "\n[[tier]]\nwindow = \"1d\"\nevery = \"1h\"\n",
        ..Schedule::default()
    });
    env.write_handler("handler.sh", &recording_handler(&[]));
    // The library itself rather than the `faketime` wrapper, so that the signal to stop
    // reaches the daemon.
    let faketime = std::fs::read_dir("/usr/lib")
        .unwrap()
        .filter_map(|e| Some(e.ok()?.path().join("faketime/libfaketimeMT.so.1")))
        .find(|p| p.exists())
        .expect("libfaketime: Debian's faketime package, which .ci/run installs");
    let log = std::fs::File::create(env.path("daemon.log")).unwrap();
    let daemon = Running::spawn(
        env.command()
            .arg("daemon")
            .env("LD_PRELOAD", faketime)
            .env("FAKETIME", "-2d")
            // The monotonic clock stays true: leases and timeouts are measured on it.
            .env("FAKETIME_DONT_FAKE_MONOTONIC", "1")
            .stdout(Stdio::null())
            .stderr(log),
    );
    // Never ticked: the tier's slot counts as missed and fires at once.
    wait_for(|| env.with_status("SUCCESS") == 2);
    let out = daemon.terminate();
    let text = std::fs::read_to_string(env.path("daemon.log")).unwrap_or_default();
    assert!(out.status.success(), "{text}");
    assert_eq!(env.take_calls(), [1, 2], "{text}");
    let skew = env.count(&format!(
        "SELECT CAST(max(abs({})) AS BIGINT) FROM {}",
        match backend {
            Backend::Mysql => "TIMESTAMPDIFF(SECOND, clock, UTC_TIMESTAMP())",
            _ => "EXTRACT(EPOCH FROM clock - now())",
        },
        env.own("backlog_runs")
    ));
    assert!(
        skew < 60,
        "the run log's clock is {skew} s from the server's"
    );
}

/// A table whose only index on the inserted-at column is (status, inserted-at), as
/// many queues have: pages are read one pending status at a time through it and
/// merged, so `doctor` finds an index range where one query for both statuses would
/// sort the rest of the band at every page, and the tick hands the records over
/// newest first, each once, across pages.
fn a_status_and_age_index_serves_the_pages(backend: Backend) {
    let env = Env::on(backend);
    pending_records(&env, 2_500);
    let on = if backend == Backend::Mysql {
        r#" ON "BACKLOG""#
    } else {
        ""
    };
    env.execute(&format!(
        r#"DROP INDEX "BACKLOG_BY_DATE"{on};
           CREATE INDEX "BACKLOG_BY_STATUS_DATE" ON "BACKLOG" ("STATUS", "DATE_INSERTED");
           UPDATE "BACKLOG" SET "STATUS" = 'ERROR' WHERE "ID" % 3 = 0;
           UPDATE "BACKLOG" SET "STATUS" = 'SUCCESS' WHERE "ID" % 7 = 0"#
    ));
    if backend == Backend::Postgres {
        env.execute(r#"ANALYZE "BACKLOG""#);
    }
    let pending = env.count(r#"SELECT count(*) FROM "BACKLOG" WHERE "STATUS" <> 'SUCCESS'"#);
    batch_schedule(&env, "", "mode = \"batch\"\nbatch_size = 100");
    let out = env.backlog(&["doctor"]).assert().success();
    let doctor = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    let plan = match backend {
        Backend::Postgres => "Merge Append",
        _ => "key=BACKLOG_BY_STATUS_DATE",
    };
    assert!(
        doctor.contains("ok   the band query reads an index range") && doctor.contains(plan),
        "{doctor}"
    );
    let out = spawn_run(&env, "0").wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let log = std::fs::read_to_string(env.path("handler.log")).unwrap();
    let ids: Vec<i64> = log
        .lines()
        .filter_map(|l| l.strip_prefix("start "))
        .map(|l| l.split(' ').next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(ids.len() as i64, pending, "each pending record once");
    assert!(
        ids.windows(2).all(|w| w[0] < w[1]),
        "newest first, across pages"
    );
    assert!(all_success(&env));
}

/// Sixteen runners that keep every attempt and a record's newest one only: each group
/// of marks prunes the attempts of its records, in the marks' transaction. On MariaDB
/// two runners' prunes locked each other (error 1213) and three of sixteen runners
/// exited 4 with their handled records unwritten, while the run log counted them. Now
/// no runner fails, every record is marked, and the run log counts what was written.
fn sixteen_runners_pruning_attempts_lose_no_mark_to_a_deadlock(backend: Backend) {
    let env = Env::on(backend);
    pending_records(&env, 20_000);
    batch_schedule(
        &env,
        "",
        "mode = \"batch\"\nbatch_size = 50\n\n[history]\nrecord = \"all\"\nmax_per_record = 1",
    );
    // An older attempt of every record, so each group's prune deletes rows.
    env.execute(r#"UPDATE "BACKLOG" SET "STATUS" = 'HELD' WHERE "ID" > 1"#);
    env.run_window("1d");
    env.execute(&format!(
        r#"INSERT INTO {} (table_name, record_id, run_id, window_secs, started_ms, took_ms, status, outcome, detail, output)
           SELECT 'BACKLOG', CONCAT("ID", ''), 0, 86400, 0, 0, 'ERROR', 'error', 'seeded', '' FROM "BACKLOG";
           UPDATE "BACKLOG" SET "STATUS" = 'NEW'"#,
        env.own("backlog_attempts")
    ));
    let _ = std::fs::remove_file(env.path("handler.log"));
    let runners: Vec<_> = (0..16).map(|_| spawn_run(&env, "0")).collect();
    let mut selected = 0;
    for runner in runners {
        let out = output_within_a_minute(runner);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        selected += summary["selected"].as_i64().unwrap();
    }
    let handled = handled_without_overlap(&env);
    assert_eq!(handled.len(), 20_000, "every record was handled");
    assert!(all_success(&env), "every handled record's mark was written");
    let runs = env.own("backlog_runs");
    let logged = |column: &str| {
        env.count(&format!(
            "SELECT CAST(sum({column}) AS BIGINT) FROM {runs} WHERE id > 1"
        ))
    };
    assert_eq!(
        logged("succeeded"),
        20_000,
        "the run log counts the marks written"
    );
    assert_eq!(logged("selected"), selected);
    assert_eq!(
        env.count(&format!(
            "SELECT count(*) FROM {} WHERE detail = 'seeded'",
            env.own("backlog_attempts")
        )),
        0,
        "each record keeps its newest attempt only"
    );
    assert_eq!(env.holds_left(), 0);
}

/// The server ends the tick's connections (the marks' and the heartbeat's too), as a
/// restart or a failover would.
fn drop_connections(env: &Env) {
    match env.backend {
        Backend::Postgres => {
            let db = env.pg.as_ref().unwrap().name.clone();
            env.execute(&format!(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{db}' AND application_name IN ('backlog', 'backlog marks')"
            ));
        }
        Backend::Mysql => {
            let db = env.my.as_ref().unwrap().name.clone();
            for id in env.lines(&format!(
                "SELECT CAST(ID AS CHAR) FROM information_schema.PROCESSLIST WHERE DB = '{db}' AND ID <> CONNECTION_ID()"
            )) {
                env.execute(&format!("KILL CONNECTION {id}"));
            }
        }
        Backend::Sqlite => unreachable!("SQLite has no connection to drop"),
    }
}

crate::on_servers!(
    eight_runners_share_twenty_thousand_records_and_none_is_handled_twice_at_once,
    a_runner_killed_mid_tick_leaves_no_record_lost_or_stuck,
    a_lost_connection_stops_the_tick_and_keeps_what_was_marked,
    a_daemon_on_a_slow_host_goes_by_the_servers_clock,
    a_status_and_age_index_serves_the_pages,
    pages_read_while_marks_are_written_miss_no_record,
    sixteen_runners_pruning_attempts_lose_no_mark_to_a_deadlock,
);

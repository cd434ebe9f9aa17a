//! What PostgreSQL and MySQL share and SQLite has not: runners on many hosts sharing a
//! band through claims, a runner killed mid-tick, a connection the server drops. Each
//! test body runs on both servers.

use std::process::Stdio;
use std::time::Duration;

use crate::concurrency::handled_without_overlap;
use crate::harness::{Backend, Env, NOW, Schedule};
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
pub fn output_within_a_minute(child: std::process::Child) -> std::process::Output {
    output_within(child, Duration::from_secs(60))
}

/// `child`'s output once it ends, or the test fails once `limit` is over.
pub fn output_within(mut child: std::process::Child, limit: Duration) -> std::process::Output {
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
    let deadline = std::time::Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("backlog did not end within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    std::process::Output {
        status,
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
    }
}

/// A tick's stderr, read as it comes: a pipe read only at its end would fill.
pub fn drain(child: &mut std::process::Child) -> std::thread::JoinHandle<String> {
    use std::io::Read;
    let mut pipe = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        let mut text = String::new();
        let _ = pipe.read_to_string(&mut text);
        text
    })
}

/// The sum of a count column over the run log's rows (`succeeded`, `lost`).
pub fn run_log_sum(env: &Env, column: &str) -> i64 {
    let runs = env.own("backlog_runs");
    match env.backend {
        // PostgreSQL's sum of a bigint is a numeric.
        Backend::Postgres => env.count(&format!(
            "SELECT coalesce(sum({column}), 0)::bigint FROM {runs}"
        )),
        _ => env.count(&format!("SELECT coalesce(sum({column}), 0) FROM {runs}")),
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
    // machine (4 s was not, beside the sixteen runners' test on two cores).
    batch_schedule(
        &env,
        "claim_lease = \"8s\"",
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
    std::thread::sleep(Duration::from_millis(8500));
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
    // Enough for the tick to last seconds: with 30 it had ended (exit 0) before the
    // connections were dropped on a loaded machine.
    pending_records(&env, 200);
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
    assert!(
        (1..200).contains(&marked),
        "{marked} marked before the loss"
    );
    std::thread::sleep(Duration::from_millis(2500));
    assert!(spawn_run(&env, "0").wait().unwrap().success());
    assert!(all_success(&env));
    assert_eq!(env.holds_left(), 0);
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
    sixteen_runners_pruning_attempts_lose_no_mark_to_a_deadlock,
);

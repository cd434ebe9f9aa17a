//! `concurrency = N`: up to N records in their handlers at once within one tick, and
//! runners that share a band of slow records share the work. Checked through the
//! handler's own log (start and end times), not the tool's counters.

use std::process::{Command, Stdio};
use std::time::Duration;

use crate::concurrency::{handled_without_overlap, peak_overlap};
use crate::harness::{Backend, Env, NOW, Running, Schedule};
use crate::tick::wait_for;

/// Logs its start and end, sleeping `$SLEEP` seconds (0.3 by default) in between.
const SLOW_HANDLER: &str = r#"#!/bin/sh
cat > /dev/null
echo "start $BACKLOG_RECORD_ID $(date +%s%N)" >> handler.log
sleep "${SLEEP:-0.3}"
echo "end $BACKLOG_RECORD_ID $(date +%s%N)" >> handler.log
"#;

/// `records` pending records aged 1 to `records` minutes (all in the 1d tier), the
/// slow handler, and `handler_extra` in the `[handler]` section.
fn slow_backlog(backend: Backend, records: i64, handler_extra: &'static str) -> Env {
    let env = Env::on(backend);
    env.create_table("TEXT");
    let aged: Vec<(i64, i64)> = (1..=records).map(|id| (id, id * 60)).collect();
    env.insert_aged(&aged, |t| t.format("%Y-%m-%d %H:%M:%S").to_string().into());
    env.write_schedule(&Schedule {
        handler_extra,
        ..Schedule::default()
    });
    env.write_handler("handler.sh", SLOW_HANDLER);
    env
}

fn run_1d(env: &Env) -> Command {
    let mut cmd = env.command();
    cmd.args(["run", "--window", "1d", "--now", NOW, "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

fn summary(out: &std::process::Output) -> serde_json::Value {
    assert!(out.status.success(), "{out:?}");
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Twenty-four records of 0.3 s at concurrency 6: several run at once, never more
/// than six, each once; the summary and the run log count what the log shows.
fn concurrency_runs_that_many_handlers_at_once(backend: Backend) {
    let env = slow_backlog(backend, 24, "concurrency = 6");
    let s = summary(&run_1d(&env).output().unwrap());
    assert_eq!(
        (&s["selected"], &s["succeeded"], &s["concurrency"]),
        (&24.into(), &24.into(), &6.into())
    );
    let handled = handled_without_overlap(&env);
    assert_eq!(handled.len(), 24);
    assert!(handled.values().all(|n| *n == 1), "each once: {handled:?}");
    let peak = peak_overlap(&env);
    assert!((3..=6).contains(&peak), "{peak} handlers at once");
    let logged = env.count(&format!(
        "SELECT CAST(sum(succeeded) AS BIGINT) FROM {}",
        env.own("backlog_runs")
    ));
    assert_eq!(logged, 24);
    assert_eq!(env.with_status("SUCCESS"), 24);
}

/// SIGTERM with four handlers running: they finish and are marked, nothing else is
/// started, the rest keeps its status and no hold is left.
fn a_stop_lets_the_handlers_in_flight_finish(backend: Backend) {
    let env = slow_backlog(backend, 40, "concurrency = 4\nenv = { SLEEP = \"1\" }");
    let tick = Running::spawn(&mut run_1d(&env));
    let starts = || {
        std::fs::read_to_string(env.path("handler.log"))
            .map(|l| l.lines().filter(|l| l.starts_with("start")).count())
            .unwrap_or(0)
    };
    wait_for(|| starts() >= 4);
    let out = tick.terminate();
    // A tick a signal stopped exits 9; its one JSON object is the summary, which says
    // so, and what it left.
    assert_eq!(out.status.code(), Some(9), "{out:?}");
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(s["stopped"], true);
    assert_eq!(s["exit_code"], 9);
    let handled = handled_without_overlap(&env);
    let log = std::fs::read_to_string(env.path("handler.log")).unwrap();
    assert_eq!(
        log.lines().filter(|l| l.starts_with("end")).count(),
        handled.len(),
        "every handler started was let finish: {log}"
    );
    assert!((4..=8).contains(&handled.len()), "{handled:?}");
    assert_eq!(s["succeeded"], handled.len());
    assert_eq!(env.with_status("SUCCESS") as usize, handled.len());
    assert_eq!(env.with_status("NEW") as usize, 40 - handled.len());
    assert_eq!(env.holds_left(), 0);
}

/// Batch mode with concurrency 3: three processes, each fed its own records.
fn batch_processes_each_get_their_own_records(backend: Backend) {
    let env = slow_backlog(backend, 30, "");
    env.write_schedule(&Schedule {
        command: r#"["./batch.py"]"#,
        handler_extra: "mode = \"batch\"\nbatch_size = 2\nconcurrency = 3",
        ..Schedule::default()
    });
    env.write_handler(
        "batch.py",
        r#"#!/usr/bin/env python3
import json, os, sys, time
for line in sys.stdin:
    record = json.loads(line)
    with open("pids.log", "a") as log:
        log.write(f"{os.getpid()} {record['id']}\n")
    time.sleep(0.05)
    print(json.dumps({"id": record["id"], "code": 0}), flush=True)
"#,
    );
    let s = summary(&run_1d(&env).output().unwrap());
    assert_eq!((&s["selected"], &s["succeeded"]), (&30.into(), &30.into()));
    let log = std::fs::read_to_string(env.path("pids.log")).unwrap();
    let mut pids: Vec<&str> = log.lines().map(|l| l.split(' ').next().unwrap()).collect();
    let mut ids: Vec<&str> = log.lines().map(|l| l.split(' ').nth(1).unwrap()).collect();
    pids.sort();
    pids.dedup();
    ids.sort();
    ids.dedup();
    assert_eq!((pids.len(), ids.len()), (3, 30), "{log}");
}

crate::on_every_backend!(
    concurrency_runs_that_many_handlers_at_once,
    a_stop_lets_the_handlers_in_flight_finish,
    batch_processes_each_get_their_own_records,
    runners_share_a_band_of_slow_records,
);

/// Runners that share a band of slow records share the work: each takes only what it
/// will start soon, so every runner gets records and their handlers run side by side.
/// (PostgreSQL and MySQL: four runners × concurrency 4 over 200 records of 100 ms;
/// SQLite: two ticks of one tier overlapping.) How fast is the fleet benchmark's to
/// say (docs/benchmarks.md), not a test's on a shared machine.
fn runners_share_a_band_of_slow_records(backend: Backend) {
    let (runners, records) = match backend {
        Backend::Postgres | Backend::Mysql => (4, 200),
        Backend::Sqlite => (2, 100),
    };
    let env = slow_backlog(
        backend,
        records,
        "concurrency = 4\nenv = { SLEEP = \"0.1\" }",
    );
    let children: Vec<_> = (0..runners)
        .map(|_| run_1d(&env).spawn().unwrap())
        .collect();
    let summaries: Vec<serde_json::Value> = children
        .into_iter()
        .map(|c| summary(&c.wait_with_output().unwrap()))
        .collect();
    let handled = handled_without_overlap(&env);
    assert_eq!(handled.len() as i64, records, "every record handled");
    let selected: Vec<u64> = summaries
        .iter()
        .map(|s| s["selected"].as_u64().unwrap())
        .collect();
    assert_eq!(selected.iter().sum::<u64>(), handled.values().sum::<u64>());
    assert!(
        selected.iter().all(|n| *n >= 5),
        "every runner took part: {selected:?}"
    );
    let peak = peak_overlap(&env);
    assert!(
        peak > 4,
        "more handlers at once than one runner has lanes: {peak}"
    );
    assert_eq!(env.with_status("SUCCESS"), records);
    assert_eq!(env.holds_left(), 0);
}

/// The library's closure handler runs on several threads at once (`Fn + Sync`),
/// borrowing the caller's state.
#[test]
fn a_closure_handler_runs_on_several_threads() {
    use std::sync::atomic::{AtomicUsize, Ordering};

    let env = slow_backlog(Backend::Sqlite, 40, "");
    let config = crate::harness::load_config(&env.path("backlog.toml"));
    let now = chrono::DateTime::parse_from_rfc3339(NOW).unwrap().to_utc();
    let mut store = backlog_core::store::open(&config.database, &config.table).unwrap();
    let (running, peak, calls) = (
        AtomicUsize::new(0),
        AtomicUsize::new(0),
        AtomicUsize::new(0),
    );
    let mut handler = backlog_core::FnHandler(|_: &backlog_core::Record| {
        let now_running = running.fetch_add(1, Ordering::SeqCst) + 1;
        peak.fetch_max(now_running, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(20));
        running.fetch_sub(1, Ordering::SeqCst);
        calls.fetch_add(1, Ordering::SeqCst);
        backlog_core::Outcome::Success
    });
    let mut opts = backlog_core::TickOptions::new(Duration::from_secs(86_400), now);
    opts.concurrency = 8;
    let summary = backlog_core::process_backlog(
        &config.schedule,
        &config.table,
        store.as_mut(),
        &mut handler,
        &opts,
        &mut |_| {},
    )
    .unwrap();
    assert_eq!((summary.selected, summary.succeeded), (40, 40));
    assert_eq!(calls.load(Ordering::SeqCst), 40);
    let peak = peak.load(Ordering::SeqCst);
    assert!((2..=8).contains(&peak), "{peak} at once");
}

/// A closure that panics on one record, with workers beside it: the tick does not
/// wait for ever on the worker that panicked; it stops handing out, marks what was
/// answered, and says the handler panicked.
#[test]
fn a_panicking_closure_stops_the_tick_without_hanging() {
    let env = slow_backlog(Backend::Sqlite, 40, "");
    let config = crate::harness::load_config(&env.path("backlog.toml"));
    let now = chrono::DateTime::parse_from_rfc3339(NOW).unwrap().to_utc();
    let mut store = backlog_core::store::open(&config.database, &config.table).unwrap();
    let mut handler = backlog_core::FnHandler(|record: &backlog_core::Record| {
        assert!(record.id.to_string() != "5", "record 5 is poison");
        std::thread::sleep(Duration::from_millis(5));
        backlog_core::Outcome::Success
    });
    let mut opts = backlog_core::TickOptions::new(Duration::from_secs(86_400), now);
    opts.concurrency = 2;
    let e = backlog_core::process_backlog(
        &config.schedule,
        &config.table,
        store.as_mut(),
        &mut handler,
        &opts,
        &mut |_| {},
    )
    .unwrap_err();
    assert_eq!(e.to_string(), "the handler panicked: record 5 is poison");
    let marked = env.with_status("SUCCESS");
    assert!((4..40).contains(&marked), "{marked} marked");
    assert_eq!(env.with_status("NEW"), 40 - marked, "record 5 among them");
    assert_eq!(env.holds_left(), 0);
}

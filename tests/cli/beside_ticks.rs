//! A person's `retry`, `snooze` and `give-up` while ticks run over a slow handler: each
//! takes every record it names, those the ticks have read and not handed out at once
//! (SQLite: the tick skips them) or once their tick marked them, and waits for those
//! in a handler; no record is in two handlers at once. Checked through the handler's
//! own log.

use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::concurrency::handled_without_overlap;
use crate::harness::{Backend, Env, NOW, Running, Schedule};

/// Logs its start and end, takes `SLOW` and fails: the record stays `ERROR`.
const SLOW_FAILING_HANDLER: &str = r#"#!/bin/sh
cat > /dev/null
echo "start $BACKLOG_RECORD_ID $(date +%s%N)" >> handler.log
sleep 0.3
echo "end $BACKLOG_RECORD_ID $(date +%s%N)" >> handler.log
exit 1
"#;

const RECORDS: i64 = 12;

/// The most records the ticks hand out while a snooze or a give-up takes the rest: those
/// in their handlers when it began (a tick each), and one more each, handed out as it
/// began. On SQLite what they read and did not hand out is taken over; on a server they
/// claimed it, and hand it out before the action takes it.
fn most_handled(backend: Backend) -> usize {
    match backend {
        Backend::Sqlite => 6,
        Backend::Postgres | Backend::Mysql => RECORDS as usize,
    }
}

/// `RECORDS` records in `ERROR`, all in tier 1's band, `given_up = "DEAD"`, and the
/// slow handler.
fn failing_backlog(backend: Backend) -> Env {
    let env = Env::on(backend);
    env.create_table("TEXT");
    let aged: Vec<(i64, i64)> = (1..=RECORDS).map(|id| (id, id * 60)).collect();
    env.insert_aged(&aged, |t| t.format("%Y-%m-%d %H:%M:%S").to_string().into());
    env.execute(r#"UPDATE "BACKLOG" SET "STATUS" = 'ERROR'"#);
    let file = Schedule::default().render_for(&env.url()).replace(
        "inserted_at_format = \"auto\"\n",
        "inserted_at_format = \"auto\"\ngiven_up = \"DEAD\"\n",
    );
    std::fs::write(env.path("backlog.toml"), file).unwrap();
    env.write_handler("handler.sh", SLOW_FAILING_HANDLER);
    env
}

/// Starts three ticks of tier 1 at once and waits until a handler runs.
fn ticks_running(env: &Env) -> Vec<Running> {
    let ticks: Vec<Running> = (0..3)
        .map(|_| {
            Running::spawn(
                env.command()
                    .args(["run", "--window", "1d", "--now", NOW, "--json"])
                    .stdout(Stdio::null()),
            )
        })
        .collect();
    let started = Instant::now();
    while !std::fs::read_to_string(env.path("handler.log")).is_ok_and(|l| l.contains("start")) {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no tick started a handler"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    ticks
}

/// Runs `action` (with `--json`) while three ticks work through the backlog, and returns
/// its summary, once the ticks are done too, with the time it ended, in the handler
/// log's clock (nanoseconds).
fn beside_ticks(env: &Env, action: &[&str]) -> (serde_json::Value, u128) {
    let ticks = ticks_running(env);
    let out = env
        .backlog(action)
        .args(["--now", NOW, "--json"])
        .assert()
        .success();
    let ended = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    for tick in ticks {
        let out = tick.wait();
        assert!(out.status.success(), "{out:?}");
    }
    let summary = serde_json::from_slice(&out.get_output().stdout).unwrap();
    (summary, ended)
}

/// The handler's starts, in its log, after `at`.
fn starts_after(env: &Env, at: u128) -> Vec<String> {
    std::fs::read_to_string(env.path("handler.log"))
        .unwrap()
        .lines()
        .filter(|l| {
            l.starts_with("start ") && l.split(' ').nth(2).unwrap().parse::<u128>().unwrap() > at
        })
        .map(str::to_string)
        .collect()
}

fn retry_takes_every_record_while_ticks_run(backend: Backend) {
    let env = failing_backlog(backend);
    let (summary, _) = beside_ticks(&env, &["retry", "--status", "ERROR"]);
    assert_eq!(summary["selected"], RECORDS, "{summary}");
    assert_eq!(summary["skipped"], 0, "{summary}");
    assert_eq!(summary["busy"], serde_json::json!([]), "{summary}");
    let handled = handled_without_overlap(&env);
    assert_eq!(handled.len() as i64, RECORDS, "{handled:?}");
}

fn snooze_takes_every_record_while_ticks_run(backend: Backend) {
    let env = failing_backlog(backend);
    let (summary, ended) = beside_ticks(&env, &["snooze", "--status", "ERROR", "--for", "1h"]);
    assert_eq!(
        summary["failed"], RECORDS,
        "every record snoozed: {summary}"
    );
    assert_eq!(summary["skipped"], 0, "{summary}");
    let handled = handled_without_overlap(&env);
    assert!(handled.len() <= most_handled(backend), "{handled:?}");
    assert_eq!(
        starts_after(&env, ended),
        Vec::<String>::new(),
        "no tick hands out a snoozed record"
    );
    assert_eq!(env.with_status("ERROR"), RECORDS);
}

fn give_up_takes_every_record_while_ticks_run(backend: Backend) {
    let env = failing_backlog(backend);
    let (summary, ended) =
        beside_ticks(&env, &["give-up", "--status", "ERROR", "--reason", "test"]);
    assert_eq!(
        summary["failed"], RECORDS,
        "every record given up: {summary}"
    );
    assert_eq!(summary["skipped"], 0, "{summary}");
    let handled = handled_without_overlap(&env);
    assert!(handled.len() <= most_handled(backend), "{handled:?}");
    assert_eq!(
        starts_after(&env, ended),
        Vec::<String>::new(),
        "no tick hands out a record given up on"
    );
    assert_eq!(env.with_status("DEAD"), RECORDS);
}

crate::on_every_backend!(
    retry_takes_every_record_while_ticks_run,
    snooze_takes_every_record_while_ticks_run,
    give_up_takes_every_record_while_ticks_run,
);

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
    ticks_running_n(env, 3)
}

/// Starts `n` ticks of tier 1 at once and waits until a handler runs.
fn ticks_running_n(env: &Env, n: usize) -> Vec<Running> {
    let ticks: Vec<Running> = (0..n)
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

/// A record a tick holds in its handler past the wait (the tick stopped there, its
/// lease long): the action waits `handler.timeout` and 5 s, takes nothing, and names
/// it; the tick, woken, marks it.
fn a_record_held_past_the_wait_is_named(backend: Backend) {
    let env = Env::on(backend);
    env.create_table("TEXT");
    env.insert_aged(&[(1, 60)], |t| {
        t.format("%Y-%m-%d %H:%M:%S").to_string().into()
    });
    env.execute(r#"UPDATE "BACKLOG" SET "STATUS" = 'ERROR'"#);
    env.write_schedule(&Schedule {
        timeout: "1s",
        database_extra: "claim_lease = \"60s\"",
        ..Schedule::default()
    });
    env.write_handler("handler.sh", SLOW_FAILING_HANDLER);
    let tick = ticks_running_n(&env, 1).pop().unwrap();
    let stopped = tick.id() as i32;
    assert_eq!(unsafe { libc::kill(stopped, libc::SIGSTOP) }, 0);
    let started = Instant::now();
    let out = env
        .backlog(&["retry", "--status", "ERROR", "--now", NOW, "--json"])
        .assert()
        .success();
    let waited = started.elapsed();
    assert_eq!(unsafe { libc::kill(stopped, libc::SIGCONT) }, 0);
    let summary: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert_eq!(summary["selected"], 0, "{summary}");
    assert_eq!(summary["skipped"], 1, "{summary}");
    assert_eq!(summary["busy"], serde_json::json!(["1"]), "{summary}");
    assert!(
        stderr.contains("WARN record 1 still held by a tick after 6s (the handler's timeout and 5 s): not taken; act on it again once the tick has marked it"),
        "{stderr}"
    );
    assert!(
        (Duration::from_secs(6)..Duration::from_secs(20)).contains(&waited),
        "{waited:?}"
    );
    assert!(tick.wait().status.success());
    assert_eq!(handled_without_overlap(&env).len(), 1);
}

crate::on_every_backend!(
    retry_takes_every_record_while_ticks_run,
    snooze_takes_every_record_while_ticks_run,
    give_up_takes_every_record_while_ticks_run,
    a_record_held_past_the_wait_is_named,
);

//! Stops lose nothing: a tick stopped by a signal leaves its tier unfinished, said by
//! `status` and its check, and the next start (the daemon, `run --if-due`, another
//! runner of the fleet) takes the rest of the band at once, not at the tier's next
//! slot days later.

use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::harness::{Backend, Env, Running, Schedule};

/// Two long tiers: a record of 31 days and more is the 180-day tier's, ticked every
/// four days; nothing in its slot would take it again soon.
const LONG_TIERS: &str = r#"
[[tier]]
window = "30d"
every = "24h"

[[tier]]
window = "180d"
every = "96h"
"#;

/// Records of the 180-day tier's band, a minute apart from 31 days old.
const RECORDS: i64 = 150;

/// Appends its record id to `calls.log`, once it is done with it.
const HANDLER: &str =
    "#!/bin/sh\ncat > /dev/null\nsleep 0.05\necho \"$BACKLOG_RECORD_ID\" >> calls.log\n";

fn long_band(backend: Backend) -> Env {
    let env = Env::on(backend);
    env.create_table("TEXT");
    let aged: Vec<(i64, i64)> = (1..=RECORDS)
        .map(|id| (id, 31 * 86_400 + id * 60))
        .collect();
    env.insert_aged_at(chrono::Utc::now(), &aged, |t| {
        t.format("%Y-%m-%d %H:%M:%S").to_string().into()
    });
    env.write_schedule(&Schedule {
        tiers: LONG_TIERS,
        handler_extra: "concurrency = 2",
        ..Schedule::default()
    });
    env.write_handler("handler.sh", HANDLER);
    env
}

fn calls(env: &Env) -> Vec<i64> {
    std::fs::read_to_string(env.path("calls.log"))
        .unwrap_or_default()
        .lines()
        .map(|l| l.parse().unwrap())
        .collect()
}

fn daemon(env: &Env, log: &str) -> Running {
    let log = std::fs::File::create(env.path(log)).unwrap();
    Running::spawn(
        env.command()
            .args(["daemon", "--seed", "7"])
            .stdout(Stdio::null())
            .stderr(log),
    )
}

fn wait_within(seconds: u64, what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(seconds);
    while !condition() {
        assert!(Instant::now() < deadline, "waited {seconds} s for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `status --check`: its exit code and line.
fn check(env: &Env) -> (Option<i32>, String) {
    let out = env
        .backlog(&["status", "--check"])
        .output()
        .expect("the check runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// The daemon stopped by SIGTERM in the middle of the 180-day tier's band: the check
/// is no longer OK, and the daemon started again takes the rest at once (not four
/// days later), each record once.
fn a_daemon_stopped_mid_band_takes_the_rest_when_it_starts_again(backend: Backend) {
    let env = long_band(backend);
    let first = daemon(&env, "first.log");
    wait_within(60, "the first records handled", || calls(&env).len() >= 10);
    let out = first.terminate();
    assert!(
        out.status.success(),
        "the daemon exits 0 on SIGTERM: {out:?}"
    );
    let log = std::fs::read_to_string(env.path("first.log")).unwrap();
    assert!(log.contains("stopped early by a signal"), "{log}");
    let pending = env.with_status("NEW");
    assert!(pending > 0, "the stop left records: {log}");

    let (code, line) = check(&env);
    assert_eq!(code, Some(1), "unfinished is a warning: {line}");
    assert!(
        line.contains(&format!(
            "tier 2 (180d) is unfinished (stopped, {pending} left)"
        )),
        "{line}"
    );
    let status = env.backlog(&["status"]).output().unwrap();
    let status = String::from_utf8_lossy(&status.stdout);
    assert!(
        status.contains(&format!(
            "unfinished: tier 2 (180d) stopped, {pending} left"
        )),
        "{status}"
    );

    let second = daemon(&env, "second.log");
    wait_within(60, "every record handled after the restart", || {
        env.with_status("SUCCESS") == RECORDS
    });
    drop(second);
    let log = std::fs::read_to_string(env.path("second.log")).unwrap();
    assert!(
        log.contains("ended early (stopped); taking the rest of its band now"),
        "{log}"
    );
    let mut handled = calls(&env);
    handled.sort_unstable();
    assert_eq!(
        handled,
        (1..=RECORDS).collect::<Vec<_>>(),
        "each record once"
    );
    // OK, and what happened meanwhile said.
    let (code, line) = check(&env);
    assert_eq!(code, Some(0), "{line}");
    assert!(
        line.contains("every tier ticks on time; meanwhile tier 2 (180d): 1 tick of the last 24 hours ended early, the last ")
            && line.contains("(a signal stopped it); the ticks since finished its band"),
        "{line}"
    );
}

/// A fleet finishes one runner's stop: of two daemons on one table, the one left
/// running takes what the stopped one left, within a minute.
fn another_runner_finishes_a_stopped_runners_band(backend: Backend) {
    let env = long_band(backend);
    let first = daemon(&env, "first.log");
    wait_within(60, "the first records handled", || calls(&env).len() >= 10);
    let _second = daemon(&env, "second.log");
    wait_within(60, "the second daemon's start", || {
        std::fs::read_to_string(env.path("second.log")).is_ok_and(|l| l.contains("daemon started"))
    });
    let out = first.terminate();
    assert!(out.status.success(), "{out:?}");
    wait_within(60, "every record handled by the runner left", || {
        env.with_status("SUCCESS") == RECORDS
    });
    let (code, line) = check(&env);
    assert_eq!(code, Some(0), "{line}");
    assert!(
        line.contains("meanwhile tier 2 (180d): 1 tick of the last 24 hours ended early"),
        "{line}"
    );
}

/// `backlog run` stopped by SIGTERM exits 9 and says what it left; `--if-due`, as the
/// crontab's check lines run it, takes the rest at once though the tier's slot is days
/// away, and is not due once it did.
fn a_stopped_run_leaves_its_tier_due_for_if_due() {
    let env = long_band(Backend::Sqlite);
    let tick = Running::spawn(
        env.command()
            .args(["run", "--window", "180d", "--metrics-file", "tick.prom"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    );
    wait_within(60, "the first records handled", || calls(&env).len() >= 10);
    let out = tick.terminate();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(9), "{out:?}");
    // The metrics say stopped, not success.
    let metrics = std::fs::read_to_string(env.path("tick.prom")).unwrap();
    for sample in [
        r#"backlog_last_tick_success{table="BACKLOG",tier="180d"} 0"#,
        r#"backlog_tier_unfinished{table="BACKLOG",tier="180d"} 1"#,
        r#"backlog_tier_unfinished{table="BACKLOG",tier="30d"} 0"#,
    ] {
        assert!(metrics.contains(sample), "{sample} in\n{metrics}");
    }
    // Past the tier's next slot with nothing taking the rest: critical.
    let later = (chrono::Utc::now() + chrono::Duration::days(5)).to_rfc3339();
    let check = env
        .backlog(&["status", "--check", "--now", &later])
        .output()
        .unwrap();
    let line = String::from_utf8_lossy(&check.stdout);
    assert_eq!(check.status.code(), Some(2), "{line}");
    assert!(
        line.contains("tier 2 (180d) is unfinished (stopped, ")
            && line.contains("no tick has taken the rest by its next slot"),
        "{line}"
    );
    let pending = env.with_status("NEW");
    assert!(
        stdout.contains(&format!(
            "stopped early by a signal, {pending} records left: the next start takes them at once"
        )),
        "{stdout}"
    );
    let outcome = env.text(&format!(
        "SELECT outcome FROM {} WHERE window_secs = {} ORDER BY id DESC LIMIT 1",
        env.own("backlog_runs"),
        180 * 86_400
    ));
    assert_eq!(outcome, "stopped");

    let out = env
        .backlog(&["run", "--window", "180d", "--if-due"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("ended early (stopped); taking the rest"),
        "{out:?}"
    );
    assert_eq!(env.with_status("SUCCESS"), RECORDS);
    let out = env
        .backlog(&["run", "--window", "180d", "--if-due"])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("not due"),
        "{out:?}"
    );
}

/// A stop waits for the handlers in flight at most `handler.stop_grace`: one that
/// would run for a minute is stopped after it, its record left pending.
fn a_stop_waits_for_handlers_at_most_the_stop_grace() {
    let env = long_band(Backend::Sqlite);
    env.write_schedule(&Schedule {
        tiers: LONG_TIERS,
        timeout: "120s",
        handler_extra: "stop_grace = \"1s\"",
        ..Schedule::default()
    });
    env.write_handler(
        "handler.sh",
        "#!/bin/sh\ncat > /dev/null\necho \"$BACKLOG_RECORD_ID\" >> calls.log\nsleep 60\n",
    );
    let tick = Running::spawn(
        env.command()
            .args(["run", "--window", "180d"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    );
    wait_within(60, "the first handler started", || !calls(&env).is_empty());
    let asked = Instant::now();
    let out = tick.terminate();
    let waited = asked.elapsed();
    assert_eq!(out.status.code(), Some(9), "{out:?}");
    assert!(
        waited < Duration::from_secs(50),
        "the stop did not wait out the handler's minute: {waited:?}"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("had handler.stop_grace (1s) to finish; they are stopped now"),
        "{stderr}"
    );
    assert_eq!(env.with_status("SUCCESS"), 0);
    assert_eq!(
        env.with_status("NEW") + env.with_status("ERROR"),
        RECORDS,
        "the stopped record stays pending"
    );
}

crate::on_every_backend!(a_daemon_stopped_mid_band_takes_the_rest_when_it_starts_again);

/// The fleet's case on the servers, where runners on several hosts share a table.
mod fleet {
    use super::*;
    crate::on_servers!(another_runner_finishes_a_stopped_runners_band);
}

#[test]
fn stopped_run_leaves_its_tier_due_for_if_due() {
    a_stopped_run_leaves_its_tier_due_for_if_due();
}

#[test]
fn stop_waits_for_handlers_at_most_the_stop_grace() {
    a_stop_waits_for_handlers_at_most_the_stop_grace();
}

//! A reader that goes away (`backlog run -v 2>&1 | head -1`, `backlog status | head`)
//! never ends a tick or panics: the tool stops writing, finishes, and records the tick.

use std::io::BufRead as _;
use std::time::{Duration, Instant};

use crate::harness::{Backend, Env, NOW, Schedule};

/// Waits for `child` up to a minute: its exit code.
fn wait(mut child: std::process::Child) -> i32 {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code().unwrap_or(-1);
        }
        if start.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("backlog did not end within a minute");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn a_closed_log_pipe_does_not_end_the_tick(backend: Backend) {
    let env = Env::on(backend);
    env.classic();
    // Eight records in the 1d band, each handled in 0.2 s: the reader is gone long
    // before the tick logs its last outcome.
    let young: Vec<(i64, i64)> = (11..17).map(|id| (id, id * 60)).collect();
    env.insert_aged(&young, |t| t.format("%Y-%m-%d %H:%M:%S").to_string().into());
    env.write_schedule(&Schedule::default());
    env.write_handler(
        "handler.sh",
        "#!/bin/sh\ncat > /dev/null\nsleep 0.2\necho \"$BACKLOG_RECORD_ID\" >> calls.log\n",
    );

    // stdout and stderr the same pipe, as `2>&1 | head -1` makes them.
    let (reader, writer) = std::io::pipe().unwrap();
    let mut cmd = env.command();
    cmd.args(["run", "--window", "1d", "--now", NOW, "-v"])
        .env_remove("RUST_LOG")
        .stdout(writer.try_clone().unwrap())
        .stderr(writer);
    let child = cmd.spawn().unwrap();
    drop(cmd);
    let mut first = String::new();
    std::io::BufReader::new(reader)
        .read_line(&mut first)
        .unwrap();
    assert!(!first.is_empty(), "backlog wrote a first line");
    // The reader is gone now: every later write gets EPIPE.

    assert_eq!(
        wait(child),
        0,
        "the tick ran to its end (first line: {first:?})"
    );
    let mut calls = env.take_calls();
    calls.sort();
    assert_eq!(calls, [1, 2, 11, 12, 13, 14, 15, 16]);
    assert_eq!(
        env.statuses()
            .iter()
            .filter(|(_, s)| s == "SUCCESS")
            .count(),
        8,
        "every handled record is marked: {:?}",
        env.statuses()
    );
    assert_eq!(
        env.text(&format!("SELECT outcome FROM {}", env.own("backlog_runs"))),
        "done"
    );
    assert_eq!(env.holds_left(), 0);
}

/// Runs `args` with stdout and stderr pipes whose readers are already gone: the
/// exit code.
fn into_closed_pipes(env: &Env, args: &[&str]) -> i32 {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let mut cmd = env.command();
    cmd.args(args)
        .env_remove("RUST_LOG")
        .env_remove("BACKLOG_SCHEDULE")
        .stdout(writer.try_clone().unwrap())
        .stderr(writer);
    let child = cmd.spawn().unwrap();
    drop(cmd);
    wait(child)
}

#[test]
fn output_and_errors_into_a_closed_pipe_do_not_panic() {
    let env = Env::new();
    env.classic();
    env.write_schedule(&Schedule::default());
    env.write_handler("handler.sh", &crate::harness::recording_handler(&[]));
    let cases: &[(&[&str], i32)] = &[
        (&["status", "--now", NOW], 0),
        (&["explain", "--now", NOW, "--age", "3d"], 0),
        (&["backoff", "delays", "exponential", "0", "0", "0", "0"], 0),
        (&["crontab"], 0),
        (&["doctor"], 0),
        (&["init", "demo"], 0),
        (&["run", "--window", "1d", "--now", NOW, "-vv"], 0),
        (&["run", "--window", "1d", "--now", NOW, "--dry-run"], 0),
        // An error message into a closed stderr: the exit code still says what failed.
        (&["status", "--schedule", "nope.toml"], 3),
        (&["backoff", "delays", "no-such-strategy", "0"], 2),
    ];
    for (args, code) in cases {
        assert_eq!(into_closed_pipes(&env, args), *code, "{args:?}");
    }
    assert_eq!(
        env.count(&format!(
            "SELECT count(*) FROM {} WHERE outcome = 'done'",
            env.own("backlog_runs")
        )),
        1,
        "the tick whose logs went nowhere was recorded"
    );
}

crate::on_every_backend!(a_closed_log_pipe_does_not_end_the_tick);

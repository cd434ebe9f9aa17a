//! A batch handler's end: when the tick has no more input for it, the process reads
//! the end of its stdin and has `handler.stop_grace` to finish its own work (a flush
//! after its read loop), then SIGTERM, then SIGKILL; the records it answered keep
//! their marks whatever its end does. Checked through what the handler writes after
//! its loop, not through the tool's counters.

use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use crate::harness::{Backend, Env, NOW, Running, Schedule};
use crate::stopping::process_alive;
use crate::tick::wait_for;

/// Answers each record at once and keeps its id; only after its read loop, and a
/// moment of work, writes every id it kept and a marker to `flushed.<pid>`. A
/// handler that is killed when the tick has its answers leaves no file.
const BUFFERING_HANDLER: &str = r#"#!/usr/bin/env python3
import json, os, sys, time
pause = float(os.environ.get("ANSWER_PAUSE", "0"))
code = int(os.environ.get("ANSWER_CODE", "0"))
kept = []
for line in sys.stdin:
    rid = json.loads(line)["id"]
    if pause:
        time.sleep(pause)
    kept.append(rid)
    print(json.dumps({"id": rid, "code": code}), flush=True)
    with open("answered.log", "a") as log:
        log.write(f"{rid}\n")
time.sleep(float(os.environ.get("END_WORK", "0.5")))
with open(f"flushed.{os.getpid()}", "w") as out:
    out.write("".join(f"{rid}\n" for rid in kept) + "END\n")
"#;

/// `n` pending records, ids 1..n, all in the 1d tier, and the buffering handler with
/// `handler_extra`.
fn buffered_backlog(backend: Backend, n: i64, handler_extra: &'static str) -> Env {
    let env = Env::on(backend);
    env.create_table("TEXT");
    let aged: Vec<(i64, i64)> = (1..=n).map(|id| (id, id * 60)).collect();
    env.insert_aged(&aged, |t| t.format("%Y-%m-%d %H:%M:%S").to_string().into());
    env.write_schedule(&Schedule {
        command: r#"["./buffering.py"]"#,
        handler_extra,
        ..Schedule::default()
    });
    env.write_handler("buffering.py", BUFFERING_HANDLER);
    env
}

/// What each process flushed at its end: its ids, each file ending with the marker.
fn flushed(env: &Env) -> Vec<Vec<i64>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(env.path("")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !name.starts_with("flushed.") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines.last(),
            Some(&"END"),
            "{name} ends with the marker: {text}"
        );
        files.push(
            lines[..lines.len() - 1]
                .iter()
                .map(|l| l.parse().unwrap())
                .collect(),
        );
    }
    files
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `backlog run` of the 1d tier; it must end within `bound` (a tick that waited on
/// its handler for ever fails the test instead of stalling it).
fn run_within(env: &Env, bound: Duration) -> (Output, Duration) {
    let started = Instant::now();
    let mut tick = env
        .command()
        .args(["run", "--window", "1d", "--now", NOW])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    while tick.try_wait().unwrap().is_none() {
        if started.elapsed() > bound {
            let _ = tick.kill();
            panic!("the tick still ran after {bound:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = tick.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    (out, started.elapsed())
}

/// Ten records in batches of 3, two batches with the process at a time: the process
/// reads the end of its input after the last answer, and its flush after the loop
/// leaves every id and the marker.
fn a_batch_handler_that_flushes_after_its_read_loop_leaves_every_id_and_its_marker(
    backend: Backend,
) {
    let env = buffered_backlog(backend, 10, "mode = \"batch\"\nbatch_size = 3");
    let (out, _) = run_within(&env, Duration::from_secs(60));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("selected 10, succeeded 10"), "{stdout}");
    let files = flushed(&env);
    assert_eq!(files.len(), 1, "one process, one flush: {files:?}");
    assert_eq!(files[0], (1..=10).collect::<Vec<i64>>());
    assert!(
        !stderr(&out).contains("the batch handler"),
        "{}",
        stderr(&out)
    );
    assert_eq!(env.with_status("SUCCESS"), 10);
}

/// A stop signal mid-tick: the tick takes no more records, the batches out are
/// answered and marked, and the process still reads its end of input and flushes
/// every record it answered.
fn a_stopped_tick_still_lets_its_batch_handler_flush(backend: Backend) {
    let env = buffered_backlog(backend, 40, "mode = \"batch\"\nbatch_size = 2");
    let tick = Running::spawn(
        env.command()
            .args(["run", "--window", "1d", "--now", NOW])
            .env("ANSWER_PAUSE", "0.2")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    );
    wait_for(|| {
        std::fs::read_to_string(env.path("answered.log")).is_ok_and(|l| l.lines().count() >= 3)
    });
    let out = tick.terminate();
    // Stopped by a signal: exit 9, the rest of the band left to the next start.
    assert_eq!(out.status.code(), Some(9), "{out:?}");
    let files = flushed(&env);
    assert_eq!(files.len(), 1, "{files:?}");
    let succeeded = env.with_status("SUCCESS");
    assert!(
        (3..40).contains(&succeeded),
        "stopped early: {succeeded} succeeded"
    );
    // Every record marked was flushed, and nothing else was.
    let marked: Vec<i64> = env
        .statuses()
        .into_iter()
        .filter(|(_, s)| s == "SUCCESS")
        .map(|(id, _)| id)
        .collect();
    let mut ids = files[0].clone();
    ids.sort();
    assert_eq!(ids, marked, "{}", stderr(&out));
}

/// The breaker trips (every answer a failure): the tick hands out no more, and the
/// process still reads its end of input and flushes what it answered.
#[test]
fn a_tripped_breaker_still_lets_its_batch_handler_flush() {
    let env = buffered_backlog(
        Backend::Sqlite,
        20,
        "mode = \"batch\"\nbatch_size = 2\nstop_after_failures = 2",
    );
    let out = env
        .command()
        .args(["run", "--window", "1d", "--now", NOW])
        .env("ANSWER_CODE", "1")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(7), "{out:?}");
    let files = flushed(&env);
    assert_eq!(files.len(), 1, "{files:?}");
    let failed: Vec<i64> = env
        .statuses()
        .into_iter()
        .filter(|(_, s)| s == "ERROR")
        .map(|(id, _)| id)
        .collect();
    assert!((2..20).contains(&failed.len()), "{failed:?}");
    let mut ids = files[0].clone();
    ids.sort();
    assert_eq!(ids, failed);
}

crate::on_every_backend!(
    a_batch_handler_that_flushes_after_its_read_loop_leaves_every_id_and_its_marker,
    a_stopped_tick_still_lets_its_batch_handler_flush,
);

/// Three processes whose end work takes 3 s each end together: the tick waits about
/// one end, not three in a row.
#[test]
fn several_batch_processes_end_in_parallel() {
    let env = buffered_backlog(
        Backend::Sqlite,
        12,
        "mode = \"batch\"\nbatch_size = 2\nconcurrency = 3",
    );
    let (out, took) = {
        let started = Instant::now();
        let out = env
            .command()
            .args(["run", "--window", "1d", "--now", NOW])
            .env("END_WORK", "3")
            .output()
            .unwrap();
        (out, started.elapsed())
    };
    assert!(out.status.success(), "{out:?}");
    let files = flushed(&env);
    assert_eq!(files.len(), 3, "{files:?}");
    let mut ids: Vec<i64> = files.concat();
    ids.sort();
    assert_eq!(ids, (1..=12).collect::<Vec<i64>>());
    // In a row they take 9 s and more.
    assert!(took < Duration::from_secs(8), "{took:?}");
}

/// Answers every record, then ignores the end of its input: `exec sleep` keeps its
/// pid (which it notes), and with `trap '' TERM` (inherited by the sleep) it ignores
/// SIGTERM too.
fn eof_ignoring_handler(ignore_term: bool) -> String {
    let trap = if ignore_term { "trap '' TERM\n" } else { "" };
    format!(
        r#"#!/bin/sh
{trap}echo $$ > handler.pid
while IFS= read -r line; do
  id=${{line#*\"id\":}}
  id=${{id%%,*}}
  printf '{{"id": %s, "code": 0}}\n' "$id"
done
echo "after the loop" >&2
exec sleep 600
"#
    )
}

/// Three records handled by the handler above, with `handler_extra`; the tick must
/// end, the records keep their marks, and the handler is gone.
fn eof_ignored(ignore_term: bool, handler_extra: &'static str) -> (Output, Duration) {
    let env = Env::new();
    env.create_table("TEXT");
    env.insert_aged(&[(1, 60), (2, 120), (3, 180)], |t| {
        t.format("%Y-%m-%d %H:%M:%S").to_string().into()
    });
    env.write_schedule(&Schedule {
        command: r#"["./deaf_to_eof.sh"]"#,
        handler_extra,
        ..Schedule::default()
    });
    env.write_handler("deaf_to_eof.sh", &eof_ignoring_handler(ignore_term));
    let (out, took) = run_within(&env, Duration::from_secs(60));
    assert_eq!(
        env.with_status("SUCCESS"),
        3,
        "the answers keep their marks"
    );
    let pid: i32 = std::fs::read_to_string(env.path("handler.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(!process_alive(pid), "the handler {pid} is gone");
    (out, took)
}

#[test]
fn a_batch_handler_that_ignores_its_end_of_input_gets_sigterm_after_stop_grace() {
    let (out, took) = eof_ignored(false, "mode = \"batch\"\nstop_grace = \"1s\"");
    let stderr = stderr(&out);
    assert!(
        stderr.contains(
            "WARN tick{tier=1 window=1d}: the batch handler ./deaf_to_eof.sh did not exit within handler.stop_grace (1s) of the end of its input: stopped with SIGTERM (signal: 15 (SIGTERM)); the records it answered keep their marks; raise handler.stop_grace if its end needs longer; its stderr ended: \"after the loop\""
        ),
        "{stderr}"
    );
    assert!(took >= Duration::from_secs(1), "given its grace: {took:?}");
}

#[test]
fn a_batch_handler_that_ignores_sigterm_too_is_killed() {
    let (out, took) = eof_ignored(true, "mode = \"batch\"\nstop_grace = \"1s\"");
    let stderr = stderr(&out);
    assert!(
        stderr.contains(
            "WARN tick{tier=1 window=1d}: the batch handler ./deaf_to_eof.sh did not exit within handler.stop_grace (1s) of the end of its input, nor 2s after SIGTERM: killed with SIGKILL"
        ),
        "{stderr}"
    );
    assert!(
        took >= Duration::from_secs(3),
        "grace and SIGTERM's: {took:?}"
    );
}

/// `stop_grace = "0s"`: the end of input and SIGTERM at once, which is what was asked
/// for: no warning, and no wait.
#[test]
fn stop_grace_0s_ends_a_batch_handler_at_once() {
    let (out, took) = eof_ignored(false, "mode = \"batch\"\nstop_grace = \"0s\"");
    assert!(
        !stderr(&out).contains("the batch handler"),
        "{}",
        stderr(&out)
    );
    assert!(took < Duration::from_secs(10), "{took:?}");
}

/// An end that fails (exit 3 after the loop) is a warning with what its stderr said
/// last; the records it answered keep their marks.
#[test]
fn a_batch_handler_whose_end_fails_is_a_warning_and_its_answers_stand() {
    let env = Env::new();
    env.create_table("TEXT");
    env.insert_aged(&[(1, 60), (2, 120)], |t| {
        t.format("%Y-%m-%d %H:%M:%S").to_string().into()
    });
    env.write_schedule(&Schedule {
        command: r#"["./failing_end.py"]"#,
        handler_extra: "mode = \"batch\"",
        ..Schedule::default()
    });
    env.write_handler(
        "failing_end.py",
        r#"#!/usr/bin/env python3
import json, sys
for line in sys.stdin:
    print(json.dumps({"id": json.loads(line)["id"], "code": 0}), flush=True)
print("cannot flush: disk full", file=sys.stderr)
sys.exit(3)
"#,
    );
    let (out, _) = run_within(&env, Duration::from_secs(60));
    let stderr = stderr(&out);
    assert!(
        stderr.contains("WARN tick{tier=1 window=1d}: the batch handler ./failing_end.py ended badly: exit status: 3, "),
        "{stderr}"
    );
    assert!(
        stderr.contains(
            "s after the end of its input (handler.stop_grace 30s); the records it answered keep their marks; its stderr ended: \"cannot flush: disk full\""
        ),
        "{stderr}"
    );
    assert_eq!(env.with_status("SUCCESS"), 2);
}

/// A second SIGTERM while a batch process has its grace ends it at once with the
/// tick, as it ends every running handler: the grace is never a trap.
#[test]
fn a_second_sigterm_during_the_grace_kills_the_batch_process() {
    let env = Env::new();
    env.create_table("TEXT");
    env.insert_aged(&[(1, 60)], |t| {
        t.format("%Y-%m-%d %H:%M:%S").to_string().into()
    });
    env.write_schedule(&Schedule {
        command: r#"["./deaf_to_eof.sh"]"#,
        handler_extra: "mode = \"batch\"\nstop_grace = \"1h\"",
        ..Schedule::default()
    });
    let handler = eof_ignoring_handler(false).replace(
        "echo \"after the loop\" >&2\n",
        "echo \"after the loop\" >&2\ntouch after-the-loop\n",
    );
    env.write_handler("deaf_to_eof.sh", &handler);
    let tick = Running::spawn(
        env.command()
            .args(["run", "--window", "1d", "--now", NOW])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    );
    wait_for(|| env.path("after-the-loop").exists());
    let pid: i32 = std::fs::read_to_string(env.path("handler.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    unsafe { libc::kill(tick.id() as i32, libc::SIGTERM) };
    std::thread::sleep(Duration::from_millis(300));
    let out = tick.terminate();
    assert_eq!(out.status.code(), Some(130), "{out:?}");
    wait_for(|| !process_alive(pid));
    assert_eq!(env.with_status("SUCCESS"), 1, "marked before its end began");
}

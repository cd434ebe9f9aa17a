//! The batch handler: one long-lived process, records as JSON lines, answers in any
//! order; timeouts, garbled answers and a dying process each cost only their records.

use std::time::{Duration, Instant};

use crate::harness::{Backend, Env, NOW, Schedule};

/// Answers 2 before 1, hangs on 3, garbles 5, dies on 7, maps 10 to exit code 3.
const BATCH_HANDLER: &str = r#"#!/usr/bin/env python3
import json, os, sys, time

def answer(rid, code=0, **extra):
    print(json.dumps({"id": rid, "code": code, **extra}), flush=True)

held = None
for line in sys.stdin:
    rid = json.loads(line)["id"]
    with open("calls.log", "a") as log:
        log.write(f"{rid} {os.getpid()}\n")
    if rid == 1:
        held = rid
    elif rid == 2:
        answer(2)
        answer(held)
    elif rid == 3:
        time.sleep(60)
    elif rid == 5:
        print(json.dumps({"id": 5, "code": "nope"}), flush=True)
    elif rid == 7:
        sys.exit(1)
    elif rid == 10:
        answer(10, 3)
    else:
        answer(rid, 0, message=f"delivered {rid}")
"#;

fn a_batch_handler_answers_in_any_order_and_its_failures_cost_only_their_records(backend: Backend) {
    let env = Env::on(backend);
    env.create_table("TEXT");
    let aged: Vec<(i64, i64)> = (1..=10).map(|id| (id, id * 60)).collect();
    env.insert_aged(&aged, |t| t.format("%Y-%m-%d %H:%M:%S").to_string().into());
    env.write_schedule(&Schedule {
        command: r#"["./batch.py"]"#,
        timeout: "2s",
        handler_extra: "mode = \"batch\"\nbatch_size = 4\nexit_codes = { 3 = \"DEAD\" }",
        ..Schedule::default()
    });
    env.write_handler("batch.py", BATCH_HANDLER);

    let out = env
        .backlog(&["run", "--window", "1d", "--now", NOW, "-v"])
        .assert()
        .success();
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(
        stdout.contains("selected 10, succeeded 4, failed 6 (of which DEAD 1), skipped 0"),
        "{stdout}"
    );
    // Batches of 4, two with the process at a time: [1 2 3 4] hangs on 3, and
    // [5 6 7 8], queued behind it, goes to a second process, which dies on 7 with
    // [9 10] queued; a third process gets those.
    let expect: Vec<(i64, String)> = [
        "SUCCESS", "SUCCESS", "ERROR", "ERROR", "ERROR", "SUCCESS", "ERROR", "ERROR", "SUCCESS",
        "DEAD",
    ]
    .iter()
    .enumerate()
    .map(|(i, s)| (i as i64 + 1, s.to_string()))
    .collect();
    assert_eq!(env.statuses(), expect);
    for id in [3, 4] {
        assert!(
            stderr.contains(&format!(
                "record {id}: ERROR (no answer within 2s; the batch handler was restarted)"
            )),
            "{stderr}"
        );
    }
    assert!(
        stderr
            .contains(r#"record 5: ERROR (garbled answer line "{\"id\": 5, \"code\": \"nope\"}""#),
        "{stderr}"
    );
    for id in [7, 8] {
        assert!(
            stderr.contains(&format!(
                "record {id}: ERROR (the batch handler exited (exit status: 1) before answering)"
            )),
            "{stderr}"
        );
    }

    // Each record was tried by one process only: 1-3 by the first, 5-7 by the second
    // (after the first was stopped), 9 and 10 by the third (after the second died).
    let log = std::fs::read_to_string(env.path("calls.log")).unwrap();
    let pid_of = |id: i64| {
        let lines: Vec<&str> = log
            .lines()
            .filter(|l| l.split(' ').next() == Some(&id.to_string()))
            .collect();
        assert_eq!(lines.len(), 1, "record {id} tried once: {log}");
        lines[0].split(' ').nth(1).unwrap().to_string()
    };
    let pids = [1, 5, 9].map(pid_of);
    assert_eq!([2, 3].map(pid_of), [&pids[0], &pids[0]].map(String::clone));
    assert_eq!([6, 7].map(pid_of), [&pids[1], &pids[1]].map(String::clone));
    assert_eq!(pid_of(10), pids[2]);
    assert!(
        pids[0] != pids[1] && pids[1] != pids[2] && pids[0] != pids[2],
        "{log}"
    );
}

/// Logs each record as it arrives (a reader thread) and as it is answered (0.5 s
/// later), and ends at the end of its input: with batches of 2, the tick has sent the second batch before the first is
/// answered, so the process never waits for the tick. (At 0.2 s, a tick on a machine
/// loaded by the whole suite sometimes sent the third batch a moment too late.)
const LOGGING_BATCH_HANDLER: &str = r#"#!/usr/bin/env python3
import json, queue, sys, threading, time

def log(event):
    with open("events.log", "a") as f:
        f.write(event + "\n")

arrived = queue.Queue()
def read():
    for line in sys.stdin:
        rid = json.loads(line)["id"]
        log(f"in {rid}")
        arrived.put(rid)
    arrived.put(None)
threading.Thread(target=read, daemon=True).start()
while True:
    rid = arrived.get()
    if rid is None:
        break
    time.sleep(0.5)
    log(f"out {rid}")
    print(json.dumps({"id": rid, "code": 0}), flush=True)
"#;

fn the_next_batch_is_sent_before_the_one_before_is_answered(backend: Backend) {
    let env = Env::on(backend);
    env.create_table("TEXT");
    let aged: Vec<(i64, i64)> = (1..=6).map(|id| (id, id * 60)).collect();
    env.insert_aged(&aged, |t| t.format("%Y-%m-%d %H:%M:%S").to_string().into());
    env.write_schedule(&Schedule {
        command: r#"["./batch.py"]"#,
        handler_extra: "mode = \"batch\"\nbatch_size = 2",
        ..Schedule::default()
    });
    env.write_handler("batch.py", LOGGING_BATCH_HANDLER);
    let out = env.run_window("1d");
    assert!(out.contains("selected 6, succeeded 6"), "{out}");
    let events = std::fs::read_to_string(env.path("events.log")).unwrap();
    let at = |event: &str| {
        events
            .lines()
            .position(|l| l == event)
            .unwrap_or_else(|| panic!("no {event:?} in {events}"))
    };
    assert!(
        at("in 3") < at("out 2"),
        "batch 2 is sent while batch 1 is worked on, not after:\n{events}"
    );
    assert!(at("in 5") < at("out 4"), "{events}");
    // Never more than two batches out: batch 3 waited for batch 1's answers.
    assert!(at("in 5") > at("out 2"), "{events}");
}

crate::on_every_backend!(
    a_batch_handler_answers_in_any_order_and_its_failures_cost_only_their_records,
    the_next_batch_is_sent_before_the_one_before_is_answered,
);

/// A batch record's time is its own, from its line in to its answer out: 40 records
/// of 20 ms each in one batch take 0.8 s together, and each attempt says about 20 ms,
/// not the batch's 0.8 s.
#[test]
fn a_batch_records_time_is_its_own_not_the_batchs() {
    let env = Env::new();
    env.create_table("TEXT");
    let aged: Vec<(i64, i64)> = (1..=40).map(|id| (id, id * 60)).collect();
    env.insert_aged(&aged, |t| t.format("%Y-%m-%d %H:%M:%S").to_string().into());
    env.write_schedule(&Schedule {
        command: r#"["./batch.py"]"#,
        handler_extra: "mode = \"batch\"\nbatch_size = 40",
        ..Schedule::default()
    });
    env.write_handler(
        "batch.py",
        "#!/usr/bin/env python3\nimport json, sys, time\nfor line in sys.stdin:\n    time.sleep(0.02)\n    print(json.dumps({\"id\": json.loads(line)[\"id\"], \"code\": 1}), flush=True)\n",
    );
    let started = Instant::now();
    env.backlog(&["run", "--window", "1d", "--now", NOW])
        .assert()
        .success();
    assert!(started.elapsed() >= Duration::from_millis(800));
    let took: Vec<i64> = (1..=40)
        .map(|id| {
            let out = env
                .backlog(&["show", &id.to_string(), "--json"])
                .assert()
                .success();
            let view: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
            view["attempts"][0]["took_ms"].as_i64().unwrap()
        })
        .collect();
    let mut sorted = took.clone();
    sorted.sort();
    // The median: a record read together with others shares their time.
    assert!(
        (10..300).contains(&sorted[20]),
        "each record's own time, not the batch's 800 ms and more: {took:?}"
    );
    assert!(
        took.iter().sum::<i64>() >= 700,
        "they add up to the batch: {took:?}"
    );
}

/// Never answers: writes lines that are no answers as fast as it can, forever, so that
/// its stdout always has something to read.
const JUNK_FLOODING_HANDLER: &str = r#"#!/usr/bin/env python3
import sys
junk = "not an answer\n" * 5000
while True:
    sys.stdout.write(junk)
"#;

fn a_handler_flooding_junk_lines_times_out_and_its_junk_is_logged_once_a_batch(backend: Backend) {
    let env = Env::on(backend);
    env.create_table("TEXT");
    env.insert_aged(&[(1, 60), (2, 120), (3, 180), (4, 240)], |t| {
        t.format("%Y-%m-%d %H:%M:%S").to_string().into()
    });
    env.write_schedule(&Schedule {
        command: r#"["./junk.py"]"#,
        timeout: "1s",
        handler_extra: "mode = \"batch\"\nbatch_size = 2",
        ..Schedule::default()
    });
    env.write_handler("junk.py", JUNK_FLOODING_HANDLER);

    // The log goes to a file: a tick that logged each junk line would fill a pipe
    // read into memory with gigabytes.
    let log = std::fs::File::create(env.path("tick.log")).unwrap();
    let started = Instant::now();
    let mut tick = env
        .command()
        .args(["run", "--window", "1d", "--now", NOW, "-v"])
        .env_remove("RUST_LOG")
        .stdout(std::process::Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    // Two batches, each given up on at its timeout of 1s: 5 times that is generous.
    let bound = Duration::from_secs(2 * 5);
    let status = loop {
        if let Some(status) = tick.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > bound {
            tick.kill().unwrap();
            tick.wait().unwrap();
            panic!("the tick still ran after {bound:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{status}");
    let stderr = std::fs::read_to_string(env.path("tick.log")).unwrap();
    let summaries: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("WARN tick{tier=1 window=1d}: the batch handler wrote"))
        .collect();
    assert_eq!(summaries.len(), 2, "one junk summary a batch:\n{stderr}");
    assert!(
        summaries[0].contains(r#"not JSON answers); the first: "not an answer""#),
        "{stderr}"
    );
    assert!(
        stderr.lines().count() < 40,
        "no line per junk line:\n{stderr}"
    );
    for id in 1..=4 {
        let line = stderr
            .lines()
            .find(|l| l.contains(&format!("record {id}: ERROR")))
            .unwrap_or_else(|| panic!("record {id} is an error:\n{stderr}"));
        assert!(
            line.contains(
                "no answer within 1s; the batch handler was restarted; the batch handler wrote"
            ),
            "{line}"
        );
    }
    assert_eq!(env.with_status("ERROR"), 4);
}

/// Writes 100 MB without a newline, then notes its parent's (the tick's) peak memory
/// and waits.
const ENDLESS_LINE_HANDLER: &str = r#"#!/usr/bin/env python3
import os, sys, time
chunk = b"x" * (1 << 20)
for _ in range(100):
    sys.stdout.buffer.write(chunk)
sys.stdout.buffer.flush()
time.sleep(0.3)
with open(f"/proc/{os.getppid()}/status") as status:
    hwm = next(l for l in status if l.startswith("VmHWM:")).split()[1]
with open("hwm.txt", "w") as out:
    out.write(hwm)
time.sleep(60)
"#;

/// The tick's peak resident memory in MiB, as the handler noted it.
fn tick_peak_mib(env: &Env) -> u64 {
    let kib: u64 = std::fs::read_to_string(env.path("hwm.txt"))
        .expect("the handler noted the tick's memory")
        .trim()
        .parse()
        .unwrap();
    kib / 1024
}

fn a_handler_writing_100_mb_without_a_newline_leaves_the_tick_memory_bounded(backend: Backend) {
    let env = Env::on(backend);
    env.create_table("TEXT");
    env.insert_aged(&[(1, 60), (2, 120)], |t| {
        t.format("%Y-%m-%d %H:%M:%S").to_string().into()
    });
    env.write_schedule(&Schedule {
        command: r#"["./endless.py"]"#,
        timeout: "3s",
        handler_extra: "mode = \"batch\"",
        ..Schedule::default()
    });
    env.write_handler("endless.py", ENDLESS_LINE_HANDLER);

    let out = env
        .backlog(&["run", "--window", "1d", "--now", NOW, "-v"])
        .timeout(Duration::from_secs(30))
        .assert()
        .success();
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    let peak = tick_peak_mib(&env);
    assert!(peak < 50, "the tick's peak memory is {peak} MiB");
    for id in [1, 2] {
        assert!(
            stderr.contains(&format!(
                "record {id}: ERROR (no answer within 3s; the batch handler was restarted; the batch handler wrote 1 line that is no answer (1 longer than 1 MiB); the first: \"xxxx"
            )),
            "{stderr}"
        );
    }
    assert_eq!(env.with_status("ERROR"), 2);
}

/// Answers every record, and floods its stderr meanwhile: 200,000 short lines, then
/// 100 MB without a newline; notes the tick's peak memory before it answers.
const STDERR_FLOODING_HANDLER: &str = r#"#!/usr/bin/env python3
import json, os, sys, time
for _ in range(2000):
    sys.stderr.write("complaint\n" * 100)
chunk = "y" * (1 << 20)
for _ in range(100):
    sys.stderr.write(chunk)
sys.stderr.flush()
time.sleep(0.3)
with open(f"/proc/{os.getppid()}/status") as status:
    hwm = next(l for l in status if l.startswith("VmHWM:")).split()[1]
with open("hwm.txt", "w") as out:
    out.write(hwm)
for line in sys.stdin:
    print(json.dumps({"id": json.loads(line)["id"], "code": 0}), flush=True)
"#;

fn a_handler_flooding_its_stderr_costs_the_tick_no_memory_and_few_log_lines(backend: Backend) {
    let env = Env::on(backend);
    env.create_table("TEXT");
    env.insert_aged(&[(1, 60), (2, 120), (3, 180)], |t| {
        t.format("%Y-%m-%d %H:%M:%S").to_string().into()
    });
    env.write_schedule(&Schedule {
        command: r#"["./stderr.py"]"#,
        timeout: "20s",
        handler_extra: "mode = \"batch\"",
        ..Schedule::default()
    });
    env.write_handler("stderr.py", STDERR_FLOODING_HANDLER);

    let out = env
        .backlog(&["run", "--window", "1d", "--now", NOW, "-v"])
        .timeout(Duration::from_secs(60))
        .assert()
        .success();
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(stdout.contains("selected 3, succeeded 3"), "{stdout}");
    let peak = tick_peak_mib(&env);
    assert!(peak < 50, "the tick's peak memory is {peak} MiB");
    // Logged at debug: some lines, the count of the rest, the long line cut.
    let logged = stderr
        .lines()
        .filter(|l| l.contains("batch handler: complaint"))
        .count();
    assert!((1..=1000).contains(&logged), "{logged} stderr lines logged");
    assert!(
        stderr.contains("more lines of stderr not logged"),
        "{stderr}"
    );
    assert!(stderr.len() < 1 << 20, "{} bytes of log", stderr.len());
}

/// Closes its stdout without answering and runs on.
const STDOUT_CLOSING_HANDLER: &str = "#!/bin/sh\nexec 1>&-\nsleep 60\n";

fn a_handler_that_closes_its_stdout_and_runs_on_is_stopped_at_once(backend: Backend) {
    let env = Env::on(backend);
    env.create_table("TEXT");
    env.insert_aged(&[(1, 60)], |t| {
        t.format("%Y-%m-%d %H:%M:%S").to_string().into()
    });
    env.write_schedule(&Schedule {
        command: r#"["./closing.sh"]"#,
        timeout: "30s",
        handler_extra: "mode = \"batch\"",
        ..Schedule::default()
    });
    env.write_handler("closing.sh", STDOUT_CLOSING_HANDLER);
    let started = Instant::now();
    let out = env
        .backlog(&["run", "--window", "1d", "--now", NOW, "-v"])
        .timeout(Duration::from_secs(60))
        .assert()
        .success();
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(
        stderr.contains(
            "record 1: ERROR (the batch handler closed its stdout before answering; it was stopped)"
        ),
        "{stderr}"
    );
}

/// Never reads its stdin, never answers.
const DEAF_HANDLER: &str = "#!/bin/sh\nsleep 60\n";

fn a_handler_that_never_reads_its_stdin_times_out(backend: Backend) {
    let env = Env::on(backend);
    env.create_table("TEXT");
    let aged: Vec<(i64, i64)> = (1..=40).map(|id| (id, id * 60)).collect();
    env.insert_aged(&aged, |t| t.format("%Y-%m-%d %H:%M:%S").to_string().into());
    // Lines of 10 kB: a batch of 20 is more than a pipe holds.
    env.execute(&format!(
        r#"UPDATE "BACKLOG" SET "PAYLOAD" = '{}'"#,
        "p".repeat(10_000)
    ));
    env.write_schedule(&Schedule {
        command: r#"["./deaf.sh"]"#,
        timeout: "1s",
        handler_extra: "mode = \"batch\"\nbatch_size = 20",
        ..Schedule::default()
    });
    env.write_handler("deaf.sh", DEAF_HANDLER);
    let started = Instant::now();
    let stdout = env.run_window("1d");
    assert!(
        stdout.contains("selected 40, succeeded 0, failed 40"),
        "{stdout}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(2 * 5),
        "{:?}",
        started.elapsed()
    );
}

// The batch handler's reading does not depend on the database: SQLite only.
mod sqlite_only {
    use crate::harness::Backend;

    #[test]
    fn a_handler_that_closes_its_stdout_and_runs_on_is_stopped_at_once() {
        super::a_handler_that_closes_its_stdout_and_runs_on_is_stopped_at_once(Backend::Sqlite)
    }

    #[test]
    fn a_handler_that_never_reads_its_stdin_times_out() {
        super::a_handler_that_never_reads_its_stdin_times_out(Backend::Sqlite)
    }

    #[test]
    fn a_handler_flooding_junk_lines_times_out_and_its_junk_is_logged_once_a_batch() {
        super::a_handler_flooding_junk_lines_times_out_and_its_junk_is_logged_once_a_batch(
            Backend::Sqlite,
        )
    }

    #[test]
    fn a_handler_writing_100_mb_without_a_newline_leaves_the_tick_memory_bounded() {
        super::a_handler_writing_100_mb_without_a_newline_leaves_the_tick_memory_bounded(
            Backend::Sqlite,
        )
    }

    #[test]
    fn a_handler_flooding_its_stderr_costs_the_tick_no_memory_and_few_log_lines() {
        super::a_handler_flooding_its_stderr_costs_the_tick_no_memory_and_few_log_lines(
            Backend::Sqlite,
        )
    }
}

//! Snoozing: a handler's "not before" (a batch answer's `retry_after`, a per-record
//! handler's exit 75 with a `retry-after:` line) and `backlog snooze` keep a pending
//! record from every tick until then; `show` says until when and why, and `backlog
//! retry` takes it at once.

use crate::harness::{Backend, Env, NOW, Schedule, recording_handler};

/// Answers record 1 "not before an hour from now", fails 2 plainly, delivers the rest.
const SNOOZING_BATCH: &str = r#"#!/usr/bin/env python3
import json, sys

for line in sys.stdin:
    rid = json.loads(line)["id"]
    with open("calls.log", "a") as log:
        log.write(f"{rid}\n")
    if rid == 1:
        answer = {"id": 1, "code": 1, "message": "429 Too Many Requests", "retry_after": 3600}
    elif rid == 2:
        answer = {"id": 2, "code": 1}
    else:
        answer = {"id": rid, "code": 0}
    print(json.dumps(answer), flush=True)
"#;

fn stdout(out: assert_cmd::assert::Assert) -> String {
    String::from_utf8_lossy(&out.get_output().stdout).into_owned()
}

fn run_at(env: &Env, now: &str) {
    env.backlog(&["run", "--window", "1d", "--now", now])
        .assert()
        .success();
}

fn a_batch_answers_retry_after_keeps_its_record_from_the_ticks_until_then(backend: Backend) {
    let env = Env::on(backend);
    env.classic();
    env.write_schedule(&Schedule {
        command: r#"["./batch.py"]"#,
        handler_extra: "mode = \"batch\"",
        ..Schedule::default()
    });
    env.write_handler("batch.py", SNOOZING_BATCH);
    run_at(&env, NOW);
    assert_eq!(env.take_calls(), [1, 2], "the 1d tier's records");
    let show = stdout(env.backlog(&["show", "1", "--now", NOW]).assert().success());
    assert!(
        show.contains("snoozed by its handler (code 1, retry after 1h): kept from the ticks until 2026-11-21T13:00:00Z"),
        "{show}"
    );
    assert!(
        show.contains("tried next at 2026-11-21T13:00:00Z"),
        "{show}"
    );
    assert!(
        show.contains("error    ERROR (code 1, retry after 1h)"),
        "{show}"
    );
    // The next slots try 2 again, not 1; the first slot from its time takes it.
    run_at(&env, "2026-11-21T12:05:00Z");
    assert_eq!(env.take_calls(), [2]);
    run_at(&env, "2026-11-21T12:55:00Z");
    assert_eq!(env.take_calls(), [2]);
    run_at(&env, "2026-11-21T13:00:00Z");
    assert_eq!(env.take_calls(), [1, 2]);
    assert_eq!(
        env.statuses(),
        [
            (1, "ERROR".into()),
            (2, "ERROR".into()),
            (3, "NEW".into()),
            (4, "NEW".into())
        ],
        "a snoozed record stays pending with its failure's status"
    );
}

fn backlog_snooze_keeps_records_until_a_time_and_retry_takes_them_at_once(backend: Backend) {
    let env = Env::on(backend);
    env.classic();
    env.write_schedule(&Schedule::default());
    env.write_handler("handler.sh", &recording_handler(&[]));
    let out = stdout(
        env.backlog(&[
            "snooze",
            "1",
            "2",
            "42",
            "--for",
            "2h",
            "--now",
            NOW,
            "--reason",
            "ERP upgrade",
        ])
        .assert()
        .success()
        .stderr(predicates::str::contains(
            "WARN not snoozed: \"42\": no such record",
        )),
    );
    assert!(
        out.starts_with(
            "snoozed 2 records of BACKLOG until 2026-11-21T14:00:00Z: no tick takes them before then (`backlog retry` does); run "
        ),
        "{out}"
    );
    assert_eq!(
        env.statuses()[..2],
        [(1, "NEW".into()), (2, "NEW".into())],
        "statuses as they were"
    );
    // A dry run skips them as the tick does, and says so; at their time it lists them.
    // The list on stdout, its summary on stderr.
    let dry = |now: &str| {
        let out = env
            .backlog(&["run", "--window", "1d", "--now", now, "--dry-run"])
            .assert()
            .success();
        let out = out.get_output();
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
    };
    let ids = |text: &str| -> Vec<String> {
        text.lines()
            .filter_map(|l| l.split_once('\t').map(|(id, _)| id.to_string()))
            .collect()
    };
    let before = dry(NOW);
    assert!(!ids(&before).contains(&"1".to_string()), "{before}");
    assert!(!ids(&before).contains(&"2".to_string()), "{before}");
    assert!(
        before.contains(
            ", skipping 2 held (by a tick now, or kept by a failure in their slot or a snooze)"
        ),
        "{before}"
    );
    let after = dry("2026-11-21T14:00:00Z");
    assert!(ids(&after).contains(&"2".to_string()), "{after}");
    run_at(&env, NOW);
    assert!(env.take_calls().is_empty(), "both are snoozed");
    let show = stdout(env.backlog(&["show", "1", "--now", NOW]).assert().success());
    assert!(
        show.contains("snoozed by ")
            && show.contains(": ERP upgrade: kept from the ticks until 2026-11-21T14:00:00Z"),
        "{show}"
    );
    // A person's retry takes a snoozed record at once; the other waits its time.
    env.backlog(&["retry", "1"]).assert().success();
    assert_eq!(env.take_calls(), [1]);
    run_at(&env, "2026-11-21T13:55:00Z");
    assert!(env.take_calls().is_empty());
    run_at(&env, "2026-11-21T14:00:00Z");
    assert_eq!(env.take_calls(), [2]);
    // The snooze is in the run log as an action of its own, not a tier's tick.
    assert_eq!(
        env.lines(&format!(
            "SELECT bands FROM {} WHERE window_secs = 0 ORDER BY id",
            env.own("backlog_runs")
        )),
        ["snooze", "retry"]
    );
    let status = stdout(env.backlog(&["status", "--now", NOW]).assert().success());
    assert!(!status.contains("snooze"), "{status}");
}

/// A snooze of a record in a tick's handler waits for the tick, then snoozes the
/// record as the tick left it: its failed try stays (ERROR, one attempt more), where it
/// once wrote back the NEW it had read before waiting.
fn a_snooze_that_waits_for_a_tick_keeps_what_the_tick_marked(backend: Backend) {
    let env = Env::on(backend);
    env.classic();
    env.write_schedule(&Schedule::default());
    env.write_handler(
        "handler.sh",
        "#!/bin/sh\ncat > /dev/null\necho \"$BACKLOG_RECORD_ID\" >> calls.log\nsleep 2\nexit 1\n",
    );
    let tick = crate::harness::Running::spawn(
        env.command()
            .args(["run", "--window", "1d", "--limit", "1", "--now", NOW]),
    );
    // The record the tick has in its handler.
    let started = std::time::Instant::now();
    let id = loop {
        let calls = std::fs::read_to_string(env.path("calls.log")).unwrap_or_default();
        if let Some(id) = calls.lines().next() {
            break id.to_string();
        }
        assert!(
            started.elapsed().as_secs() < 30,
            "the tick handed nothing out"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    env.backlog(&["snooze", &id, "--for", "1h", "--now", NOW])
        .assert()
        .success();
    assert!(tick.wait().status.success());
    let id: i64 = id.parse().unwrap();
    let status = env
        .statuses()
        .into_iter()
        .find(|(i, _)| *i == id)
        .unwrap()
        .1;
    assert_eq!(
        status, "ERROR",
        "record {id} keeps the status its tick marked"
    );
    let show = stdout(
        env.backlog(&["show", &id.to_string(), "--now", NOW])
            .assert()
            .success(),
    );
    assert!(
        show.contains("kept from the ticks until 2026-11-21T13:00:00Z"),
        "{show}"
    );
    assert!(show.contains("exit 1"), "the tick's try is kept: {show}");
}

crate::on_every_backend!(
    a_batch_answers_retry_after_keeps_its_record_from_the_ticks_until_then,
    backlog_snooze_keeps_records_until_a_time_and_retry_takes_them_at_once,
    a_snooze_that_waits_for_a_tick_keeps_what_the_tick_marked,
);

/// A per-record handler snoozes with exit 75 and a `retry-after:` line on stdout (an
/// RFC 3339 time here); exit 75 without one is a plain failure, tried at its next slot.
#[test]
fn exit_75_with_a_retry_after_line_snoozes_a_record() {
    let env = Env::new();
    env.classic();
    env.write_schedule(&Schedule::default());
    env.write_handler(
        "handler.sh",
        "#!/bin/sh\ncat > /dev/null\necho \"$BACKLOG_RECORD_ID\" >> calls.log\ncase \"$BACKLOG_RECORD_ID\" in\n  1) echo 'busy'; echo 'Retry-After: 2026-11-21T12:30:00Z'; exit 75 ;;\n  2) echo 'busy, no time given'; exit 75 ;;\n  3) echo 'retry-after: 1764165600000'; exit 75 ;;\nesac\nexit 0\n",
    );
    let out = env
        .backlog(&["run", "--window", "1d", "--now", NOW, "-v"])
        .assert()
        .success();
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(
        stderr.contains("record 1: ERROR (exit 75, retry after 2026-11-21T12:30:00Z)"),
        "{stderr}"
    );
    assert!(stderr.contains("record 2: ERROR (exit 75)"), "{stderr}");
    assert_eq!(env.take_calls(), [1, 2]);
    run_at(&env, "2026-11-21T12:05:00Z");
    assert_eq!(env.take_calls(), [2]);
    run_at(&env, "2026-11-21T12:30:00Z");
    assert_eq!(env.take_calls(), [1, 2]);
    // Milliseconds given as seconds: more than a year ahead, no snooze; the next slot
    // tries it.
    let out = env
        .backlog(&["run", "--window", "7d", "--now", NOW, "-v"])
        .assert()
        .success();
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    // Its record's line says why (its attempt keeps it), once, as any failure.
    assert!(
        stderr.contains("record 3: ERROR (exit 75, retry-after ignored: retry after 490046000h is more than a year ahead (366d at most))"),
        "{stderr}"
    );
    env.backlog(&["run", "--window", "7d", "--now", "2026-11-21T13:00:00Z"])
        .assert()
        .success();
    assert_eq!(env.take_calls(), [3, 3]);
}

/// A snooze that is not after now, one with no time at all, and one of records that
/// are not pending are refused, and change nothing.
#[test]
fn a_snooze_without_a_later_time_or_a_pending_record_is_refused() {
    let env = Env::new();
    env.classic();
    env.write_schedule(&Schedule::default());
    env.write_handler("handler.sh", &recording_handler(&[]));
    env.backlog(&["snooze", "1", "--until", "2026-11-21T11:00:00Z", "--now", NOW])
        .assert()
        .code(2)
        .stderr("backlog: --until 2026-11-21T11:00:00Z is not after now (2026-11-21T12:00:00Z); give a later time, or --for a span\n");
    env.backlog(&["snooze", "1", "--for", "0s"])
        .assert()
        .code(2)
        .stderr("backlog: --for 0s snoozes nothing; give a span like 30m, 2h or 1d\n");
    env.backlog(&["snooze", "1", "--for", "400d"])
        .assert()
        .code(2)
        .stderr("backlog: --for 400d is more than a year; snooze for at most 366d, or give the records up\n");
    env.backlog(&["snooze", "1"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains(
            "the following required arguments were not provided:\n  <--for <SPAN>|--until <TIME>>",
        ));
    env.execute("UPDATE BACKLOG SET STATUS = 'SUCCESS' WHERE ID = 1");
    env.backlog(&["snooze", "1", "--for", "1h"])
        .assert()
        .code(2)
        .stderr(predicates::str::ends_with(
            "backlog: nothing to snooze: \"1\": SUCCESS is not pending (a snooze takes records of NEW, ERROR)\n",
        ));
    env.backlog(&["snooze", "--status", "DONE", "--for", "1h"])
        .assert()
        .code(2)
        .stderr("backlog: --status \"DONE\" is not one of table.pending (NEW, ERROR): a snooze takes pending records only\n");
    assert!(
        !env.has_own_tables()
            || env.count(&format!(
                "SELECT count(*) FROM {}",
                env.own("backlog_attempts")
            )) == 0
    );
}

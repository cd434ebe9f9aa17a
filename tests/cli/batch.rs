//! The batch handler: one long-lived process, records as JSON lines, answers in any
//! order; timeouts, garbled answers and a dying process each cost only their records.

use crate::harness::{Backend, Env, NOW, Schedule};

/// Answers 2 before 1, never answers 3, garbles 5, dies on 7, maps 10 to exit code 3.
const BATCH_HANDLER: &str = r#"#!/usr/bin/env python3
import json, os, sys

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
        pass
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
        stdout.contains("selected 10, succeeded 5, failed 5 (of which DEAD 1), skipped 0"),
        "{stdout}"
    );
    let expect: Vec<(i64, String)> = [
        "SUCCESS", "SUCCESS", "ERROR", "SUCCESS", "ERROR", "SUCCESS", "ERROR", "ERROR", "SUCCESS",
        "DEAD",
    ]
    .iter()
    .enumerate()
    .map(|(i, s)| (i as i64 + 1, s.to_string()))
    .collect();
    assert_eq!(env.statuses(), expect);
    assert!(
        stderr.contains("record 3: ERROR (no answer within 2s; the batch handler was restarted)"),
        "{stderr}"
    );
    assert!(
        stderr
            .contains(r#"record 5: ERROR (garbled answer line "{\"id\": 5, \"code\": \"nope\"}""#),
        "{stderr}"
    );
    assert!(
        stderr.contains(
            "record 7: ERROR (the batch handler exited (exit status: 1) before answering)"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("record 8: ERROR (the batch handler exited"),
        "{stderr}"
    );

    // Three processes: the first stopped at the timeout, the second died on 7.
    let log = std::fs::read_to_string(env.path("calls.log")).unwrap();
    let pids: std::collections::BTreeSet<&str> =
        log.lines().map(|l| l.split(' ').nth(1).unwrap()).collect();
    assert_eq!(pids.len(), 3, "{log}");
}

crate::on_both_backends!(
    a_batch_handler_answers_in_any_order_and_its_failures_cost_only_their_records,
);

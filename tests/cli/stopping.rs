//! A tick stopped by a signal, or killed: what it handed out is marked or free again,
//! and the rest stays pending.

use std::time::Duration;

use crate::harness::{Backend, Env, NOW, Running, Schedule, recording_handler};
use crate::tick::{statuses, wait_for};

pub(crate) fn process_alive(pid: i32) -> bool {
    // A zombie still answers kill(0); a killed child reaped by init does not exist.
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "))
}

fn sigterm_stops_taking_records_and_leaves_the_rest_pending(backend: Backend) {
    let env = Env::on(backend);
    env.create_table("TEXT");
    env.insert_aged(&[(1, 60), (2, 120), (3, 180), (4, 240)], |t| {
        t.format("%Y-%m-%d %H:%M:%S").to_string().into()
    });
    env.write_schedule(&Schedule::default());
    env.write_handler(
        "handler.sh",
        "#!/bin/sh\ncat > /dev/null\necho \"$BACKLOG_RECORD_ID\" >> calls.log\nsleep 1\n",
    );
    let tick = Running::spawn(
        env.command()
            .args(["run", "--window", "1d", "--now", NOW])
            .stdout(std::process::Stdio::piped()),
    );
    wait_for(|| std::fs::read_to_string(env.path("calls.log")).is_ok());
    let out = tick.terminate();
    // A tick a signal stopped ran, but not to its band's end: exit 9, and it says
    // what it left for the next start.
    assert_eq!(out.status.code(), Some(9), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(
            "; stopped early by a signal, 3 records left: the next start takes them at once"
        ),
        "{stdout}"
    );
    let handled = env.take_calls();
    assert_eq!(
        handled,
        [1],
        "the running handler finished, no new one started"
    );
    assert_eq!(
        env.statuses(),
        statuses(&[(1, "SUCCESS"), (2, "NEW"), (3, "NEW"), (4, "NEW")])
    );
    let outcome = env.text(&format!("SELECT outcome FROM {}", env.own("backlog_runs")));
    let claims = env.holds_left();
    assert_eq!((outcome.as_str(), claims), ("stopped", 0));
}

/// A tick killed with SIGKILL: its handler dies with it, its claim on the record it
/// was handling blocks other ticks only until the lease runs out, and then every
/// record is processed. (It held only that record: a tick takes what it will start
/// soon, one lane's worth before it knows how long a handler takes.)
fn a_killed_tick_leaves_nothing_stuck(backend: Backend) {
    let env = Env::on(backend);
    env.create_table("TEXT");
    env.insert_aged(&[(1, 60), (2, 120), (3, 180)], |t| {
        t.format("%Y-%m-%d %H:%M:%S").to_string().into()
    });
    // Long enough for the next tick to start and take its page within the lease on
    // a busy machine (2 s was not, under the whole suite on two cores).
    env.write_schedule(&Schedule {
        database_extra: "claim_lease = \"4s\"",
        ..Schedule::default()
    });
    env.write_handler(
        "handler.sh",
        "#!/bin/sh\necho $$ > handler.pid\nexec sleep 600\n",
    );
    let tick = Running::spawn(env.command().args(["run", "--window", "1d", "--now", NOW]));
    wait_for(|| std::fs::read_to_string(env.path("handler.pid")).is_ok_and(|s| s.ends_with('\n')));
    let handler_pid: i32 = std::fs::read_to_string(env.path("handler.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    tick.kill();
    wait_for(|| !process_alive(handler_pid));

    env.write_handler("handler.sh", &recording_handler(&[]));
    let out = env.run_window("1d");
    assert!(
        out.contains("selected 2, succeeded 2, failed 0, skipped 1"),
        "the claim of the dead tick still holds: {out}"
    );
    std::thread::sleep(Duration::from_millis(4500));
    let out = env.run_window("1d");
    assert!(
        out.contains("selected 1, succeeded 1, failed 0, skipped 0"),
        "{out}"
    );
    assert_eq!(
        env.statuses(),
        statuses(&[(1, "SUCCESS"), (2, "SUCCESS"), (3, "SUCCESS")])
    );
    // The killed tick's run-log row, silent for a lease, was closed by a later tick.
    let outcomes = env.lines(&format!(
        "SELECT outcome FROM {} ORDER BY id",
        env.own("backlog_runs")
    ));
    assert_eq!(outcomes, ["abandoned", "done", "done"]);
    assert_eq!(env.holds_left(), 0, "the dead tick's hold is gone too");
}

crate::on_every_backend!(
    sigterm_stops_taking_records_and_leaves_the_rest_pending,
    a_killed_tick_leaves_nothing_stuck,
);

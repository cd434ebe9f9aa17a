//! The handler's process tree: what a handler leaves behind dies with it, with its tick,
//! or before the next tick takes its records over.

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use crate::harness::{Env, NOW, Schedule};
use crate::tick::wait_for;

/// A tick this test started: killed and reaped if the test ends early.
struct Tick(Child);

impl Tick {
    fn start(env: &Env, args: &[&str]) -> Tick {
        Tick(
            env.command()
                .args(args)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("the tick starts"),
        )
    }

    fn pid(&self) -> i32 {
        self.0.id() as i32
    }

    fn running(&mut self) -> bool {
        self.0
            .try_wait()
            .expect("the tick can be waited for")
            .is_none()
    }
}

impl Drop for Tick {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn pending_records(ids: std::ops::RangeInclusive<i64>) -> Env {
    let env = Env::new();
    env.create_table("TEXT");
    let records: Vec<(i64, i64)> = ids.map(|id| (id, 60 * id)).collect();
    env.insert_aged(&records, |t| {
        t.format("%Y-%m-%d %H:%M:%S").to_string().into()
    });
    env
}

/// A pid written by a handler, once the whole line is there.
fn read_pid(path: &Path) -> i32 {
    wait_for(|| std::fs::read_to_string(path).is_ok_and(|s| s.ends_with('\n')));
    std::fs::read_to_string(path)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// Whether the process exists at all: a zombie counts (it is not reaped yet).
fn exists(pid: i32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// Whether the process runs: a zombie does not.
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "))
}

/// The tick's children named `name`.
fn children_named(pid: i32, name: &str) -> Vec<i32> {
    let mut found = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
    {
        let text = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
        for child in text
            .split_whitespace()
            .filter_map(|p| p.parse::<i32>().ok())
        {
            let comm = std::fs::read_to_string(format!("/proc/{child}/comm")).unwrap_or_default();
            if comm.trim() == name {
                found.push(child);
            }
        }
    }
    found
}

/// The first call leaves a grandchild and hangs; the next one, on a later tick, writes
/// whether that grandchild still runs.
const LEAVES_A_GRANDCHILD: &str = r#"#!/bin/sh
cat > /dev/null
if [ -e grandchild.pid ]; then
  state=$(cut -d' ' -f3 "/proc/$(cat grandchild.pid)/stat" 2>/dev/null)
  if [ -n "$state" ] && [ "$state" != Z ]; then echo alive >> second.log; else echo gone >> second.log; fi
  exit 0
fi
sleep 600 &
echo $! > grandchild.pid.part && mv grandchild.pid.part grandchild.pid
exec sleep 600
"#;

/// Kills a tick with SIGKILL (and its watchdog too, if asked), and runs the next tick
/// once the claims expired: what the second handler call saw.
fn after_a_killed_tick(kill_the_watchdog_too: bool) -> String {
    let env = pending_records(1..=1);
    env.write_schedule(&Schedule {
        database_extra: "claim_lease = \"4s\"",
        timeout: "10m",
        ..Schedule::default()
    });
    env.write_handler("handler.sh", LEAVES_A_GRANDCHILD);
    let mut tick = Tick::start(&env, &["run", "--window", "1d", "--now", NOW]);
    let grandchild = read_pid(&env.path("grandchild.pid"));
    if kill_the_watchdog_too {
        let watchdogs = children_named(tick.pid(), "backlog-watch");
        assert_eq!(watchdogs.len(), 1, "the tick has one watchdog");
        // SAFETY: kill(2) on a pid we just read as the tick's child.
        unsafe { libc::kill(watchdogs[0], libc::SIGKILL) };
        wait_for(|| !alive(watchdogs[0]));
    }
    tick.0.kill().unwrap();
    tick.0.wait().unwrap();
    assert!(!tick.running());
    if kill_the_watchdog_too {
        assert!(
            alive(grandchild),
            "nothing on this host has killed the grandchild yet"
        );
    }
    std::thread::sleep(Duration::from_millis(4500));
    let out = env.run_window("1d");
    assert!(out.contains("selected 1, succeeded 1"), "{out}");
    assert!(!alive(grandchild));
    std::fs::read_to_string(env.path("second.log")).unwrap()
}

#[test]
fn the_grandchild_of_a_killed_tick_is_gone_before_its_record_is_handed_out_again() {
    assert_eq!(after_a_killed_tick(false), "gone\n");
}

#[test]
fn the_next_tick_kills_what_a_killed_tick_and_its_watchdog_left() {
    assert_eq!(after_a_killed_tick(true), "gone\n");
}

#[test]
fn an_escaped_process_holding_stdout_does_not_hold_the_tick() {
    let env = pending_records(1..=20);
    env.write_schedule(&Schedule::default());
    env.write_handler(
        "handler.sh",
        r#"#!/bin/sh
cat > /dev/null
setsid sh -c "touch escaped.$BACKLOG_RECORD_ID; exec sleep 30" &
while [ ! -e "escaped.$BACKLOG_RECORD_ID" ]; do sleep 0.01; done
echo "handled $BACKLOG_RECORD_ID"
exit 1
"#,
    );
    let started = Instant::now();
    let out = env
        .backlog(&["run", "--window", "1d", "--now", NOW, "-vv"])
        .assert()
        .success();
    // A second per record (the old wait) would be 20 s at the least.
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "the tick waited out the open pipes: {:?}",
        started.elapsed()
    );
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(
        stdout.contains("selected 20, succeeded 0, failed 20"),
        "{stdout}"
    );
    assert_eq!(
        stderr
            .matches("[stdout] still open 50ms after the handler exited")
            .count(),
        20,
        "{stderr}"
    );
    assert!(
        stderr.contains("record 20: ERROR (exit 1): [stdout] handled 20"),
        "{stderr}"
    );
}

#[test]
fn an_orphan_is_killed_and_reaped_while_the_tick_runs() {
    let env = pending_records(1..=10);
    env.write_schedule(&Schedule::default());
    // The newest record (id 1) goes first: it leaves a process in a session of its
    // own, which the tick inherits as a subreaper; the others keep the tick busy.
    env.write_handler(
        "handler.sh",
        r#"#!/bin/sh
cat > /dev/null
if [ "$BACKLOG_RECORD_ID" = 1 ]; then
  setsid sh -c 'echo $$ > orphan.part; mv orphan.part orphan.pid; exec sleep 600' > /dev/null 2>&1 &
  while [ ! -e orphan.pid ]; do sleep 0.01; done
  exit 0
fi
sleep 1
"#,
    );
    let mut tick = Tick::start(&env, &["run", "--window", "1d", "--now", NOW]);
    let orphan = read_pid(&env.path("orphan.pid"));
    wait_for(|| !tick.running() || !exists(orphan));
    assert!(
        tick.running(),
        "the tick ended before its orphan was reaped"
    );
    assert!(!exists(orphan), "the orphan {orphan} was killed and reaped");
    assert!(
        children_named(tick.pid(), "sleep").is_empty(),
        "no zombie or live orphan is left among the tick's children"
    );
}

#[test]
fn a_second_sigterm_kills_the_handlers_groups_and_exits_at_once() {
    let env = pending_records(1..=2);
    env.write_schedule(&Schedule {
        timeout: "10m",
        ..Schedule::default()
    });
    env.write_handler(
        "handler.sh",
        r#"#!/bin/sh
cat > /dev/null
sleep 600 &
echo $! > grandchild.pid.part && mv grandchild.pid.part grandchild.pid
exec sleep 600
"#,
    );
    let mut tick = Tick::start(&env, &["run", "--window", "1d", "--now", NOW]);
    let grandchild = read_pid(&env.path("grandchild.pid"));
    // The first signal only stops the tick from taking records: the handler hangs for
    // ten minutes. Signals sent close together may merge, so they are sent until the
    // process ends: only a second one can end it before the handler's timeout.
    let started = Instant::now();
    let status = loop {
        // SAFETY: kill(2) on the tick this test started and has not reaped.
        unsafe { libc::kill(tick.pid(), libc::SIGTERM) };
        if let Some(status) = tick.0.try_wait().unwrap() {
            break status;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the tick did not exit"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(status.code(), Some(130));
    wait_for(|| !alive(grandchild));
    assert_eq!(
        env.statuses(),
        [(1, "NEW".to_string()), (2, "NEW".to_string())],
        "nothing that was not answered is marked"
    );
}

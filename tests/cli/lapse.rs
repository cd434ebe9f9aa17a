//! A tick paused past its lease (SIGSTOP here; a frozen VM, or on SQLite a write lock
//! another process holds for longer than the lease) finds on waking that another tick
//! has taken its records. It must hand out none of them again, and write no mark where
//! it no longer holds: checked through the handler's own log, on both backends.

use std::process::{Command, Stdio};
use std::time::Duration;

use crate::concurrency::handled_without_overlap;
use crate::harness::{Backend, Env, NOW, Running, Schedule};
use crate::hooks::{Hooks, add_webhook, posted};
use crate::tick::wait_for;

const LOGGING_HANDLER: &str = r#"#!/bin/sh
cat > /dev/null
echo "start $BACKLOG_RECORD_ID $(date +%s%N) $PPID" >> handler.log
sleep 0.05
echo "end $BACKLOG_RECORD_ID $(date +%s%N)" >> handler.log
"#;

fn run_1d(env: &Env) -> Command {
    let mut cmd = env.command();
    cmd.args(["run", "--window", "1d", "--now", NOW, "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

fn starts(env: &Env) -> usize {
    std::fs::read_to_string(env.path("handler.log"))
        .map(|l| l.lines().filter(|l| l.starts_with("start")).count())
        .unwrap_or(0)
}

fn signal(pid: u32, signal: libc::c_int) {
    assert_eq!(unsafe { libc::kill(pid as i32, signal) }, 0);
}

/// Tick A is stopped mid-band for longer than its lease; tick B takes the band over;
/// A wakes while B still works. A hands out nothing more (it ends with exit code 8,
/// saying its holds lapsed, its summary printed), no record is ever in two handlers at once, and every
/// record ends up handled.
fn a_tick_paused_past_its_lease_hands_out_nothing_it_lost(backend: Backend) {
    let env = Env::on(backend);
    env.create_table("TEXT");
    let aged: Vec<(i64, i64)> = (1..=80).map(|id| (id, id * 60)).collect();
    env.insert_aged(&aged, |t| t.format("%Y-%m-%d %H:%M:%S").to_string().into());
    env.write_schedule(&Schedule {
        database_extra: "claim_lease = \"2s\"",
        ..Schedule::default()
    });
    env.write_handler("handler.sh", LOGGING_HANDLER);
    let hooks = Hooks::start();
    add_webhook(&env.path("backlog.toml"), &hooks.url);

    let a = run_1d(&env).spawn().unwrap();
    let a_pid = a.id();
    let a = Running::from(a);
    // By now its pages have grown past one record: it holds records it has not started.
    wait_for(|| starts(&env) >= 10);
    signal(a_pid, libc::SIGSTOP);
    std::thread::sleep(Duration::from_millis(3000));
    let b = Running::spawn(&mut run_1d(&env));
    let before_b = starts(&env);
    wait_for(|| starts(&env) >= before_b + 3);
    let woken = chrono::Utc::now().timestamp_nanos_opt().unwrap() as u128;
    signal(a_pid, libc::SIGCONT);
    let a = a.wait();
    let b = b.wait();

    assert!(b.status.success(), "{b:?}");
    let a_stderr = String::from_utf8_lossy(&a.stderr);
    assert_eq!(a.status.code(), Some(8), "{a_stderr}");
    assert!(
        a_stderr
            .lines()
            .last()
            .is_some_and(|l| l.starts_with("backlog: the tick stopped: this tick's hold")),
        "{a_stderr}"
    );
    let summary: serde_json::Value = serde_json::from_slice(&a.stdout).unwrap();
    assert!(summary["lapsed"].is_string(), "{summary}");
    // A person is told: one tick_lapsed alert, with its exit code and counts. B's
    // clean tick, when it ends after that alert, says the tier is well again
    // (`resolved`, naming it); before it, there was nothing to resolve.
    let mut events = posted(&hooks.take());
    if events.len() == 2 {
        let resolved = events.pop().unwrap();
        assert_eq!(resolved["kind"], "resolved", "{events:?}");
        assert_eq!(resolved["resolves"], serde_json::json!(["tick_lapsed"]));
    }
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["kind"], "tick_lapsed");
    assert_eq!(events[0]["exit_code"], 8);
    assert!(
        events[0]["counts"]["selected"].as_u64() > Some(0),
        "{}",
        events[0]
    );
    // The handler's log is the judge: A started nothing once it woke, and no record
    // was in two handlers at once.
    let log = std::fs::read_to_string(env.path("handler.log")).unwrap();
    let late: Vec<&str> = log
        .lines()
        .filter(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            f[0] == "start" && f[3] == a_pid.to_string() && f[2].parse::<u128>().unwrap() > woken
        })
        .collect();
    assert!(late.is_empty(), "handed out after waking: {late:?}");
    let handled = handled_without_overlap(&env);
    // The last tick mops up with the default lease: a 2 s lease on a loaded machine
    // could lapse this tick too.
    env.write_schedule(&Schedule::default());
    let out = env.run_window("1d");
    assert!(out.contains("failed 0"), "{out}");
    assert_eq!(
        env.with_status("SUCCESS"),
        80,
        "every record handled: {handled:?}"
    );
    let outcomes = env.lines(&format!(
        "SELECT outcome FROM {} ORDER BY id",
        env.own("backlog_runs")
    ));
    assert_eq!(outcomes[0], "lapsed", "{outcomes:?}");
    assert_eq!(env.holds_left(), 0);
}

/// A handler still running when its tick wakes past its lease is stopped (another
/// tick may have its record by then), not left to run to its timeout. Its stop is the
/// tick's doing, not the counterpart's: the breaker does not count it.
fn a_handler_running_through_a_lapse_is_stopped(backend: Backend) {
    let env = Env::on(backend);
    env.create_table("TEXT");
    env.insert_aged(&[(1, 60), (2, 120)], |t| {
        t.format("%Y-%m-%d %H:%M:%S").to_string().into()
    });
    env.write_schedule(&Schedule {
        database_extra: "claim_lease = \"2s\"",
        timeout: "60s",
        handler_extra: "stop_after_failures = 1",
        ..Schedule::default()
    });
    env.write_handler(
        "handler.sh",
        "#!/bin/sh\ncat > /dev/null\necho \"start $BACKLOG_RECORD_ID\" >> handler.log\nsleep 30\necho \"end $BACKLOG_RECORD_ID\" >> handler.log\n",
    );
    let a = run_1d(&env).spawn().unwrap();
    let a_pid = a.id();
    let a = Running::from(a);
    wait_for(|| starts(&env) >= 1);
    signal(a_pid, libc::SIGSTOP);
    std::thread::sleep(Duration::from_millis(3000));
    let woken = std::time::Instant::now();
    signal(a_pid, libc::SIGCONT);
    let a = a.wait();
    let took = woken.elapsed();
    assert_eq!(
        a.status.code(),
        Some(8),
        "{}",
        String::from_utf8_lossy(&a.stderr)
    );
    assert!(
        took < Duration::from_secs(20),
        "stopped {took:?} after waking, not at its end"
    );
    let log = std::fs::read_to_string(env.path("handler.log")).unwrap();
    assert_eq!(
        log, "start 1\n",
        "the handler was stopped, nothing else started"
    );
    let summary: serde_json::Value = serde_json::from_slice(&a.stdout).unwrap();
    // Its error is written where the tick still held the record (PostgreSQL: no
    // other runner took the claim over), else counted lost (SQLite: the span is gone).
    assert_eq!(summary["succeeded"], 0, "{summary}");
    assert!(summary["breaker"].is_null(), "{summary}");
    assert_eq!(
        summary["lost"].as_u64().unwrap() + summary["failed"].as_u64().unwrap(),
        1,
        "{summary}"
    );
    assert_eq!(env.with_status("SUCCESS"), 0);
    // Its attempt is kept: stopped, or lost where its mark landed nowhere.
    let kept = env.lines(&format!(
        "SELECT record_id || ' ' || outcome FROM {}",
        env.own("backlog_attempts")
    ));
    assert!(kept == ["1 stopped"] || kept == ["1 lost"], "{kept:?}");
}

/// The database refuses a group of marks (a trigger here; a full disk, a constraint):
/// the tick ends with exit 4 and says how many handled records were not marked, and
/// its run-log row counts only the marks that reached the table, never the group that
/// did not. A later tick tries the unmarked records again.
fn a_group_of_marks_the_database_refuses_is_not_counted(backend: Backend) {
    let env = Env::on(backend);
    crate::servers::pending_records(&env, 12);
    crate::servers::batch_schedule(&env, "", "mode = \"batch\"\nbatch_size = 1");
    // Record 12 is the band's oldest, handled last: the groups before it are written.
    env.execute(match backend {
        Backend::Sqlite => {
            r#"CREATE TRIGGER refuse BEFORE UPDATE ON "BACKLOG" WHEN NEW."ID" = 12 AND NEW."STATUS" = 'SUCCESS'
               BEGIN SELECT RAISE(ABORT, 'record 12 refused'); END"#
        }
        Backend::Postgres => {
            r#"CREATE FUNCTION refuse() RETURNS trigger AS $$ BEGIN
                 IF NEW."ID" = 12 AND NEW."STATUS" = 'SUCCESS' THEN RAISE EXCEPTION 'record 12 refused'; END IF;
                 RETURN NEW; END $$ LANGUAGE plpgsql;
               CREATE TRIGGER refuse BEFORE UPDATE ON "BACKLOG" FOR EACH ROW EXECUTE FUNCTION refuse()"#
        }
        Backend::Mysql => {
            r#"CREATE TRIGGER refuse BEFORE UPDATE ON "BACKLOG" FOR EACH ROW BEGIN
                 IF NEW."ID" = 12 AND NEW."STATUS" = 'SUCCESS' THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'record 12 refused'; END IF;
               END"#
        }
    });
    let out = crate::servers::output_within_a_minute(crate::servers::spawn_run(&env, "0.3"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(stderr.contains("record 12 refused"), "{stderr}");
    assert!(
        stderr
            .contains("handled records were not marked: their group of marks could not be written")
            || stderr.contains(
                "1 handled record was not marked: its group of marks could not be written"
            ),
        "{stderr}"
    );
    let marked = env.with_status("SUCCESS");
    assert!(marked < 12, "record 12 is not marked");
    let last = |column: &str| {
        env.count(&format!(
            "SELECT {column} FROM {} ORDER BY id DESC LIMIT 1",
            env.own("backlog_runs")
        ))
    };
    assert_eq!(
        last("succeeded"),
        marked,
        "the run log counts what was written"
    );
    assert_eq!(last("selected"), 12);
    assert_eq!(last("lost"), 12 - marked);
    assert_eq!(
        env.text(&format!(
            "SELECT outcome FROM {} ORDER BY id DESC LIMIT 1",
            env.own("backlog_runs")
        )),
        "failed"
    );
    env.execute(match backend {
        Backend::Mysql | Backend::Sqlite => "DROP TRIGGER refuse",
        Backend::Postgres => r#"DROP TRIGGER refuse ON "BACKLOG""#,
    });
    assert!(
        crate::servers::spawn_run(&env, "0")
            .wait()
            .unwrap()
            .success()
    );
    assert!(crate::servers::all_success(&env));
}

/// The heartbeat renews what a tick holds: a record whose handler runs for two and a
/// half leases stays the tick's, and a second tick started meanwhile skips it rather
/// than take it once the first lease has run out. The first ends well.
fn a_handler_longer_than_the_lease_keeps_its_record(backend: Backend) {
    let env = Env::on(backend);
    env.create_table("TEXT");
    env.insert_aged(&[(1, 60)], |t| {
        t.format("%Y-%m-%d %H:%M:%S").to_string().into()
    });
    env.write_schedule(&Schedule {
        database_extra: "claim_lease = \"2s\"",
        ..Schedule::default()
    });
    env.write_handler(
        "handler.sh",
        "#!/bin/sh\ncat > /dev/null\necho \"start $BACKLOG_RECORD_ID\" >> handler.log\nsleep 5\n",
    );
    let a = Running::spawn(&mut run_1d(&env));
    wait_for(|| starts(&env) == 1);
    // Past the first lease: without renewals the record would be free by now.
    std::thread::sleep(Duration::from_millis(3000));
    let b = run_1d(&env).output().unwrap();
    assert!(b.status.success(), "{b:?}");
    let b: serde_json::Value = serde_json::from_slice(&b.stdout).unwrap();
    assert_eq!(b["selected"], 0, "{b}");
    let a = a.wait();
    assert!(a.status.success(), "{a:?}");
    assert_eq!(starts(&env), 1, "handed out once");
    assert_eq!(env.with_status("SUCCESS"), 1);
    assert_eq!(env.holds_left(), 0);
}

crate::on_every_backend!(
    a_tick_paused_past_its_lease_hands_out_nothing_it_lost,
    a_handler_running_through_a_lapse_is_stopped,
    a_group_of_marks_the_database_refuses_is_not_counted,
    a_handler_longer_than_the_lease_keeps_its_record,
);

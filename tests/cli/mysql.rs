//! What only MySQL and MariaDB have: `DATETIME`, `TIMESTAMP` and integer inserted-at
//! columns side by side, a `done` flag as the status (the `tasks` example of
//! `schedules/`), lock waits cut at `database.busy_timeout`, and indexes the server
//! ignores (what they share with PostgreSQL is in `servers`).

use crate::harness::{Backend, Env, NOW, Schedule, recording_handler};
use crate::servers::server::{classic, runs_and_selects};

/// The same two records as DATETIME in Paris time, TIMESTAMP (UTC whatever the
/// server's zone) and BIGINT milliseconds: each lands in the same band.
#[test]
fn datetime_timestamp_and_integer_columns_select_the_same_bands() {
    for (column, values, extra) in [
        (
            "DATETIME(3)",
            ["'2026-11-21 12:30:00'", "'2026-11-18 14:00:00.000'"],
            "auto\"\ninserted_at_timezone = \"Europe/Paris",
        ),
        (
            "TIMESTAMP(6) NULL",
            ["'2026-11-21 11:30:00'", "'2026-11-18 13:00:00'"],
            "auto",
        ),
        ("BIGINT", ["1795260600000", "1795006800000"], "auto"),
    ] {
        let env = Env::on(Backend::Mysql);
        // A TIMESTAMP is stored in UTC and shown in the session's zone: written here
        // in UTC, read by the tool in UTC.
        env.execute(&format!(
            r#"SET time_zone = '+00:00';
               CREATE TABLE "BACKLOG" ("ID" BIGINT PRIMARY KEY, "STATUS" VARCHAR(20) NOT NULL, "DATE_INSERTED" {column}, INDEX ("DATE_INSERTED"));
               INSERT INTO "BACKLOG" VALUES (1, 'NEW', {}), (2, 'NEW', {})"#,
            values[0], values[1]
        ));
        env.write_schedule(&Schedule {
            format: extra,
            ..Schedule::default()
        });
        env.write_handler(
            "handler.sh",
            "#!/bin/sh\ncat > /dev/null\necho \"$BACKLOG_RECORD_ID $BACKLOG_RECORD_AGE_SECONDS\" >> calls.txt\n",
        );
        env.run_window("1d");
        env.run_window("7d");
        assert_eq!(
            std::fs::read_to_string(env.path("calls.txt")).unwrap(),
            "1 1800\n2 255600\n",
            "{column}"
        );
    }
}

/// `schedules/tasks-mysql.toml` as shipped, on its own table shape: the `done` flag
/// is the status, `attempts` and `updated_at` are written with it, and a failed task
/// waits for its arctan delay.
#[test]
fn the_tasks_example_runs_with_a_done_flag_and_the_arctan_curve() {
    let env = Env::on(Backend::Mysql);
    let example = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("schedules/tasks-mysql.toml"),
    )
    .unwrap();
    // The table as the example's comment creates it.
    let ddl: String = example
        .lines()
        .skip_while(|l| !l.contains("CREATE TABLE"))
        .take_while(|l| !l.trim_start_matches(['#', ' ']).is_empty())
        .map(|l| l.trim_start_matches('#'))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(ddl.trim_end().ends_with(");"), "{ddl}");
    env.execute(&ddl);
    env.execute(
        "INSERT INTO tasks (id, created_at, task) VALUES
           (1, '2026-11-21 11:50:00', x'00ff'), (2, '2026-11-21 11:40:00', x'01'),
           (3, '2026-11-21 06:00:00', x'02'), (4, '2026-11-20 12:00:00', x'03')",
    );
    let schedule = example
        .replace(
            "mysql://worker@db.internal:3306/app?ssl-mode=REQUIRED",
            &env.url(),
        )
        .replace(
            "# password_file = \"/etc/backlog/mysql-password\"",
            "password_file = \"pgpass\"",
        )
        .replace("/usr/local/bin/run-task", "./run-task.py");
    std::fs::write(env.path("backlog.toml"), schedule).unwrap();
    // Fails task 2; keeps each task it sees.
    env.write_handler(
        "run-task.py",
        r#"#!/usr/bin/env python3
import json, sys
seen = open("seen.jsonl", "a", buffering=1)
for line in sys.stdin:
    task = json.loads(line)
    seen.write(json.dumps(task["record"]) + "\n")
    print(json.dumps({"id": task["id"], "code": 1 if task["id"] == 2 else 0}), flush=True)
"#,
    );
    env.backlog(&["doctor"]).assert().success();
    let out = env.run_window("1h");
    assert!(out.contains("selected 2, succeeded 1, failed 1"), "{out}");
    assert_eq!(
        env.lines("SELECT CONCAT(id, ' ', done, ' ', attempts, ' ', COALESCE(updated_at, '-')) FROM tasks ORDER BY id"),
        [
            "1 1 1 2026-11-21 12:00:00",
            "2 0 1 2026-11-21 12:00:00",
            "3 0 0 -",
            "4 0 0 -"
        ]
    );
    let seen = std::fs::read_to_string(env.path("seen.jsonl")).unwrap();
    assert!(seen.contains(r#""task": "AP8=""#), "{seen}");
    // A minute later task 2 is kept by its arctan delay (an hour after one attempt)
    // even when failures kept until their slot's end are asked for.
    let out = env
        .backlog(&[
            "run",
            "--window",
            "1h",
            "--now",
            "2026-11-21T12:01:00Z",
            "--retry-failed",
        ])
        .assert()
        .success();
    let text = String::from_utf8_lossy(&out.get_output().stdout);
    assert!(
        text.contains("selected 0") && text.contains("deferred 1"),
        "{text}"
    );
    // Tier 2 takes the tasks aged over an hour up to a day (the day included).
    let out = env.run_window("1d");
    assert!(out.contains("selected 2, succeeded 2, failed 0"), "{out}");
    assert_eq!(
        env.lines("SELECT CAST(done AS CHAR) FROM tasks ORDER BY id"),
        ["1", "0", "1", "1"]
    );
}

/// Another session holds a row lock the tick's claim needs (an uncommitted claim of
/// record 1): the claim waits `database.busy_timeout` (1 s here), the server answers
/// "lock wait timeout" (1205), and the transaction is tried again, up to five times.
/// Released in time, the tick goes on and ends well; held longer, the tick ends with
/// one line (exit 4), having claimed and changed nothing.
#[test]
fn a_lock_wait_is_tried_again_and_then_ends_the_tick_cleanly() {
    use mysql::prelude::Queryable;
    let env = Env::on(Backend::Mysql);
    env.classic();
    env.write_schedule(&Schedule {
        database_extra: "busy_timeout = \"1s\"",
        ..Schedule::default()
    });
    env.write_handler("handler.sh", &recording_handler(&[]));
    env.run_window("7d");
    for (hold, ok) in [(2_500, true), (9_000, false)] {
        env.execute(r#"UPDATE "BACKLOG" SET "STATUS" = 'NEW' WHERE "ID" IN (1, 2)"#);
        let mut other = env.my();
        let mut tx = other.start_transaction(mysql::TxOpts::default()).unwrap();
        tx.query_drop(
            "INSERT INTO backlog_claims VALUES ('BACKLOG', '1', 'another session', UTC_TIMESTAMP(6) - INTERVAL 1 HOUR, UTC_TIMESTAMP(6) - INTERVAL 1 HOUR)",
        )
        .unwrap();
        let tick = env
            .command()
            .args(["run", "--window", "1d", "--now", NOW])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(hold));
        tx.rollback().unwrap();
        let out = tick.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(
            stderr.contains("claiming records: Lock wait timeout exceeded; try restarting transaction (error 1205); trying the transaction again (1 of 5)"),
            "{stderr}"
        );
        if ok {
            assert!(out.status.success(), "{stderr}");
            assert_eq!(env.with_status("SUCCESS"), 3, "{stderr}");
        } else {
            assert_eq!(out.status.code(), Some(4), "{stderr}");
            let last = stderr.lines().last().unwrap_or_default();
            assert!(
                last.starts_with("backlog: ")
                    && last.ends_with("claiming records: Lock wait timeout exceeded; try restarting transaction (error 1205)"),
                "{stderr}"
            );
            assert_eq!(
                env.count(
                    r#"SELECT count(*) FROM "BACKLOG" WHERE "ID" IN (1, 2) AND "STATUS" = 'NEW'"#
                ),
                2,
                "nothing marked"
            );
            assert_eq!(env.holds_left(), 0, "nothing left claimed");
        }
        assert_eq!(
            env.count("SELECT count(*) FROM backlog_runs WHERE outcome = 'running'"),
            0
        );
    }
    env.take_calls();
    env.run_window("1d");
    assert_eq!(env.take_calls(), [1, 2]);
}

/// An index MariaDB ignores (MySQL 8: invisible) cannot be named in `FORCE INDEX`
/// (error 1176): with the inserted-at index ignored, every page failed. The tool now
/// names only indexes the server will use, and a tick goes on without the hint.
#[test]
fn an_ignored_index_is_never_forced() {
    let (env, password) = classic(Backend::Mysql, |url| url.to_string(), None);
    env.execute(r#"ALTER TABLE "BACKLOG" ALTER INDEX "BACKLOG_BY_DATE" IGNORED"#);
    let out = runs_and_selects(&env, &[("MYSQL_PWD", &password)], 2);
    assert!(!out.contains("1176"), "{out}");
}

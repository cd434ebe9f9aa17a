//! What only MySQL and MariaDB have: their URLs, TLS modes and password sources, their
//! column types (a `done` flag, `ENUM`, `BINARY(16)` ids, `DATETIME` and `TIMESTAMP`),
//! their planner, and the `tasks` example of `schedules/`.

use crate::harness::{Backend, Env, NOW, Schedule, recording_handler};

/// The classic backlog on MySQL, its schedule pointing at the URL `url_of` makes of
/// the test database's, with `pgpass` holding `password` (none: no password file).
fn classic_my(url_of: impl Fn(&str) -> String, password: Option<&str>) -> (Env, String) {
    let env = Env::on(Backend::Mysql);
    env.classic();
    env.write_handler("handler.sh", &recording_handler(&[]));
    let real = env.my.as_ref().unwrap().password();
    let mut text = Schedule::default().render_for(&url_of(&env.url()));
    match password {
        Some(p) => std::fs::write(env.path("pgpass"), p).unwrap(),
        None => text = text.replace("password_file = \"pgpass\"\n", ""),
    }
    std::fs::write(env.path("backlog.toml"), text).unwrap();
    (env, real)
}

/// `backlog run` that fails to connect: its one line on stderr (exit 4).
fn one_line_error(env: &Env, envs: &[(&str, &str)]) -> String {
    let mut cmd = env.backlog(&["run", "--window", "1d", "--now", NOW]);
    cmd.env_remove("MYSQL_PWD");
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let out = cmd.assert().code(4);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    stderr
}

/// `backlog run --window 1d` succeeds and hands over `n` records.
fn runs_and_selects(env: &Env, envs: &[(&str, &str)], n: usize) -> String {
    env.execute(r#"UPDATE "BACKLOG" SET "STATUS" = 'NEW'"#);
    let mut cmd = env.backlog(&["run", "--window", "1d", "--now", NOW, "-v"]);
    cmd.env_remove("MYSQL_PWD");
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let out = cmd.assert().success();
    let o = out.get_output();
    let text =
        String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    assert!(text.contains(&format!("selected {n},")), "{text}");
    text
}

#[test]
fn connection_refused_a_wrong_password_and_a_missing_database_give_one_clear_line_each() {
    let closed = {
        let socket = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        socket.local_addr().unwrap().port()
    };
    let (env, real) = classic_my(
        |url| {
            let port = url.split(':').nth(2).unwrap().split('/').next().unwrap();
            url.replace(&format!(":{port}/"), &format!(":{closed}/"))
        },
        None,
    );
    let db = &env.my.as_ref().unwrap().name;
    assert_eq!(
        one_line_error(&env, &[("MYSQL_PWD", &real)]),
        format!(
            "backlog: mysql://backlog@127.0.0.1:{closed}/{db}?ssl-mode=DISABLED: cannot connect: connection refused (is the server running, and listening on that host and port?)\n"
        )
    );
    let (env, _) = classic_my(|url| url.to_string(), Some("not-the-password"));
    let line = one_line_error(&env, &[]);
    assert!(
        line.starts_with(&format!("backlog: {}: cannot connect: Access denied for user 'backlog'@'", env.url()))
            && line.ends_with("(using password: YES) (error 1045) (check the password: in the URL, database.password_file or MYSQL_PWD; or the user may connect over TLS only: leave ssl-mode=DISABLED out)\n"),
        "{line}"
    );
    let (env, real) = classic_my(|url| url.replace("/backlog_test_", "/no_such_"), None);
    let line = one_line_error(&env, &[("MYSQL_PWD", &real)]);
    assert!(
        line.ends_with("does not exist on that server (check the URL's path)\n"),
        "{line}"
    );
}

/// The password from MYSQL_PWD, from a file, or in the URL: it works, and no output of
/// any command shows it.
#[test]
fn the_password_comes_from_mysql_pwd_a_file_or_the_url_and_is_never_printed() {
    let (env, real) = classic_my(|url| url.to_string(), None);
    let mut seen = runs_and_selects(&env, &[("MYSQL_PWD", &real)], 2);
    let (env, real) = classic_my(|url| url.to_string(), Some("placeholder"));
    std::fs::write(env.path("pgpass"), format!("{real}\n")).unwrap();
    seen += &runs_and_selects(&env, &[], 2);
    let (env, real) = classic_my(
        |url| url.replace("backlog@", &format!("backlog:{}@", "{password}")),
        None,
    );
    let path = env.path("backlog.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replace("{password}", &real)).unwrap();
    for args in [
        &["run", "--window", "1d", "--now", NOW, "-vv", "--json"][..],
        &["status"],
        &["doctor"],
        &["show", "3"],
        &["explain", "--id", "3"],
    ] {
        let out = env.backlog(args).env_remove("MYSQL_PWD").assert().success();
        let o = out.get_output();
        seen += &String::from_utf8_lossy(&o.stdout);
        seen += &String::from_utf8_lossy(&o.stderr);
    }
    assert!(seen.contains("mysql://backlog@127.0.0.1"), "{seen}");
    assert!(!seen.contains(&real), "the password was printed:\n{seen}");
}

/// The user `tls_only` (made by .ci/mariadb.sh) may connect over TLS only: REQUIRED
/// and the default connect it, DISABLED is refused with a hint, VERIFY_IDENTITY
/// checks the certificate against ssl-ca and fails on a root that did not sign it.
#[test]
fn tls_modes_connect_as_the_url_asks() {
    let ca = std::env::var("BACKLOG_TEST_MYSQL_CA")
        .expect("BACKLOG_TEST_MYSQL_CA names the test CA; run `bash .ci/run`");
    let server_cert = std::path::Path::new(&ca).with_file_name("server.crt");
    let (env, real) = classic_my(|url| url.replace("backlog@", "tls_only@"), None);
    let pwd = [("MYSQL_PWD", real.as_str())];
    let line = one_line_error(&env, &pwd);
    assert!(
        line.contains("cannot connect: Access denied for user 'tls_only'@'")
            && line.ends_with("leave ssl-mode=DISABLED out)\n"),
        "{line}"
    );
    let base = env.url();
    for (mode, ok) in [
        ("ssl-mode=REQUIRED".to_string(), true),
        (format!("ssl-mode=VERIFY_IDENTITY&ssl-ca={ca}"), true),
        (format!("ssl-mode=VERIFY_CA&ssl-ca={ca}"), true),
        (
            format!("ssl-mode=VERIFY_IDENTITY&ssl-ca={}", server_cert.display()),
            false,
        ),
    ] {
        let url = base.replace("ssl-mode=DISABLED", &mode);
        let text = Schedule::default()
            .render_for(&url)
            .replace("password_file = \"pgpass\"\n", "");
        std::fs::write(env.path("backlog.toml"), text).unwrap();
        if ok {
            runs_and_selects(&env, &pwd, 2);
        } else {
            let line = one_line_error(&env, &pwd);
            assert!(
                line.contains("?ssl-mode=VERIFY_IDENTITY: cannot connect: TLS failed:"),
                "{mode}: {line}"
            );
        }
    }
    let url = base.replace("?ssl-mode=DISABLED", "");
    let text = Schedule::default()
        .render_for(&url)
        .replace("password_file = \"pgpass\"\n", "");
    std::fs::write(env.path("backlog.toml"), text).unwrap();
    runs_and_selects(&env, &pwd, 2);
}

/// Ids of each kind a MySQL table has (an unsigned integer, text, a `CHAR(36)` uuid, a
/// `BINARY(16)` uuid shown as hex) and an `ENUM` status: claimed, marked (success and
/// error), kept after a failure, found by `show`, `explain` and `retry`.
#[test]
fn ids_and_statuses_of_each_type_are_claimed_marked_and_found() {
    for (id_type, ids, shown) in [
        ("INT UNSIGNED", ["7", "8"], ["7", "8"]),
        (
            "VARCHAR(40) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin",
            ["order-7", "Order-7"],
            ["order-7", "Order-7"],
        ),
        (
            "CHAR(36)",
            [
                "'0b6f7a3e-8f1c-4c5e-9d2a-1f0e3c4b5a69'",
                "'f47ac10b-58cc-4372-a567-0e02b2c3d479'",
            ],
            [
                "0b6f7a3e-8f1c-4c5e-9d2a-1f0e3c4b5a69",
                "f47ac10b-58cc-4372-a567-0e02b2c3d479",
            ],
        ),
        (
            "BINARY(16)",
            [
                "x'0b6f7a3e8f1c4c5e9d2a1f0e3c4b5a69'",
                "x'f47ac10b58cc4372a5670e02b2c3d479'",
            ],
            [
                "0b6f7a3e8f1c4c5e9d2a1f0e3c4b5a69",
                "f47ac10b58cc4372a5670e02b2c3d479",
            ],
        ),
    ] {
        let env = Env::on(Backend::Mysql);
        let quoted = |id: &str| {
            if id.starts_with(['\'', 'x']) {
                id.to_string()
            } else {
                format!("'{id}'")
            }
        };
        env.execute(&format!(
            r#"CREATE TABLE "BACKLOG" ("ID" {id_type} PRIMARY KEY, "STATUS" ENUM('NEW', 'ERROR', 'SUCCESS') NOT NULL,
                   "DATE_INSERTED" DATETIME NOT NULL, INDEX ("DATE_INSERTED"));
               INSERT INTO "BACKLOG" VALUES ({}, 'NEW', '2026-11-21 11:30:00'), ({}, 'NEW', '2026-11-18 12:00:00')"#,
            quoted(ids[0]),
            quoted(ids[1])
        ));
        env.write_schedule(&Schedule::default());
        // The second record fails.
        env.write_handler(
            "handler.sh",
            &format!(
                "#!/bin/sh\ncat > /dev/null\necho \"$BACKLOG_RECORD_ID\" >> calls.txt\n[ \"$BACKLOG_RECORD_ID\" != '{}' ]\n",
                shown[1]
            ),
        );
        env.run_window("1d");
        env.run_window("7d");
        assert_eq!(
            std::fs::read_to_string(env.path("calls.txt"))
                .unwrap_or_else(|e| panic!("{id_type}: {e}")),
            format!("{}\n{}\n", shown[0], shown[1]),
            "{id_type}"
        );
        assert_eq!(
            env.lines(
                r#"SELECT CAST("STATUS" AS CHAR) FROM "BACKLOG" ORDER BY "DATE_INSERTED" DESC"#
            ),
            ["SUCCESS", "ERROR"],
            "{id_type}"
        );
        // Kept until its slot ends: the next tick of the tier skips it.
        assert!(env.run_window("7d").contains("skipped 1"), "{id_type}");
        let out = env
            .backlog(&["explain", "--id", shown[0]])
            .assert()
            .success();
        assert_eq!(
            String::from_utf8_lossy(&out.get_output().stdout),
            format!(
                "record {} is SUCCESS, not pending: no tier tries it\n",
                shown[0]
            )
        );
        let out = env.backlog(&["show", shown[1]]).assert().success();
        let text = String::from_utf8_lossy(&out.get_output().stdout);
        assert!(text.contains("ERROR") && text.contains("error"), "{text}");
        let out = env.backlog(&["retry", shown[1]]).assert().success();
        let text = String::from_utf8_lossy(&out.get_output().stdout);
        assert!(
            text.contains("retried 1 record: succeeded 0, failed 1"),
            "{text}"
        );
        assert_eq!(
            env.lines("SELECT CAST(count(*) AS CHAR) FROM backlog_attempts"),
            ["2"],
            "{id_type}"
        );
        env.backlog(&["explain", "--id", "no-such-id"])
            .assert()
            .code(2);
    }
}

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

/// On a table large enough for the optimizer to care and no index on the inserted-at
/// column, `doctor` says the band query scans and gives the statement that fixes it;
/// once it is run, the plan is an index range.
#[test]
fn doctor_reads_the_plan_on_a_large_table_and_its_create_index_fixes_it() {
    let env = Env::on(Backend::Mysql);
    env.execute(
        r#"CREATE TABLE "BACKLOG" ("ID" BIGINT PRIMARY KEY, "STATUS" VARCHAR(20) NOT NULL, "DATE_INSERTED" DATETIME NOT NULL, "PAYLOAD" TEXT)"#,
    );
    let rows: Vec<(i64, i64)> = (1..=30_000).map(|i| (i, i * 1200)).collect();
    env.insert_aged_at(chrono::Utc::now(), &rows, |t| t.into());
    env.execute(r#"ANALYZE TABLE "BACKLOG""#);
    env.write_schedule(&Schedule::default());
    env.write_handler("handler.sh", &recording_handler(&[]));
    let out = env.backlog(&["doctor"]).assert().code(1);
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(stdout.contains("type=ALL"), "{stdout}");
    assert!(
        stdout.contains("FAIL the band query does not use an index on DATE_INSERTED"),
        "{stdout}"
    );
    let fix = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("CREATE INDEX"))
        .unwrap_or_else(|| panic!("no fix in {stdout}"))
        .trim()
        .to_string();
    let db = &env.my.as_ref().unwrap().name;
    assert_eq!(
        fix,
        format!("CREATE INDEX `backlog_by_date_inserted` ON `{db}`.`BACKLOG` (`DATE_INSERTED`);")
    );
    // The statement is written for the mysql client, which reads backquotes.
    env.execute(&fix);
    env.execute(r#"ANALYZE TABLE "BACKLOG""#);
    let out = env.backlog(&["doctor"]).assert().success();
    let stdout = String::from_utf8_lossy(&out.get_output().stdout);
    assert!(
        stdout.contains(
            "ok   the band query reads an index range: type=range key=backlog_by_date_inserted"
        ),
        "{stdout}"
    );
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
    let (env, password) = classic_my(|url| url.to_string(), None);
    env.execute(r#"ALTER TABLE "BACKLOG" ALTER INDEX "BACKLOG_BY_DATE" IGNORED"#);
    let out = runs_and_selects(&env, &[("MYSQL_PWD", &password)], 2);
    assert!(!out.contains("1176"), "{out}");
}

/// The tool's tables of the first MySQL release (version 1: no failures in a row, no
/// alerts) move to version 3 on the next tick; a version this release does not know
/// stops it.
#[test]
fn own_tables_of_version_one_move_to_version_three() {
    let env = Env::on(Backend::Mysql);
    env.classic();
    env.write_schedule(&Schedule::default());
    env.write_handler("handler.sh", &recording_handler(&[]));
    env.run_window("1d");
    let version = || env.text(r#"SELECT value FROM backlog_meta WHERE "key" = 'schema_version'"#);
    assert_eq!(version(), "3");
    env.execute(
        r#"DROP TABLE backlog_failures, backlog_alerts; UPDATE backlog_meta SET value = '1' WHERE "key" = 'schema_version'"#,
    );
    env.run_window("1d");
    assert_eq!(version(), "3");
    assert_eq!(env.count("SELECT count(*) FROM backlog_failures"), 0);
    assert_eq!(env.count("SELECT count(*) FROM backlog_alerts"), 0);
    env.execute(r#"UPDATE backlog_meta SET value = '4' WHERE "key" = 'schema_version'"#);
    env.backlog(&["run", "--window", "1d", "--now", NOW])
        .assert()
        .code(4)
        .stderr(predicates::str::ends_with(
            "are at schema version 4, this backlog knows version 3; use the backlog release that made them\n",
        ));
}

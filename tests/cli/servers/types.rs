//! Ids and statuses of each type a server's tables have: claimed, marked (success and
//! error), kept after a failure, found by `show`, `explain` and `retry`; wall-clock
//! inserted-at columns read in the file's zone, instants handed over in UTC. Each
//! test body runs on both servers.

use crate::harness::{Backend, Env, Schedule};

/// The id column types of `backend`, each with two ids as SQL writes them and as
/// handlers and people see them.
fn id_types(backend: Backend) -> Vec<(&'static str, [&'static str; 2], [&'static str; 2])> {
    match backend {
        Backend::Postgres => vec![
            ("integer", ["'7'", "'8'"], ["7", "8"]),
            ("text", ["'order-7'", "'Order-7'"], ["order-7", "Order-7"]),
            (
                "uuid",
                [
                    "'0b6f7a3e-8f1c-4c5e-9d2a-1f0e3c4b5a69'",
                    "'f47ac10b-58cc-4372-a567-0e02b2c3d479'",
                ],
                [
                    "0b6f7a3e-8f1c-4c5e-9d2a-1f0e3c4b5a69",
                    "f47ac10b-58cc-4372-a567-0e02b2c3d479",
                ],
            ),
        ],
        _ => vec![
            ("INT UNSIGNED", ["7", "8"], ["7", "8"]),
            // Neighbours past 2^53, where a comparison with text is a float's and
            // takes one for the other; past the signed 64 bits, read as text.
            (
                "BIGINT",
                ["1234567890123456789", "1234567890123456790"],
                ["1234567890123456789", "1234567890123456790"],
            ),
            (
                "BIGINT UNSIGNED",
                ["18446744073709551614", "18446744073709551615"],
                ["18446744073709551614", "18446744073709551615"],
            ),
            // Compared byte for byte: two records.
            (
                "VARCHAR(40) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin",
                ["'order-7'", "'Order-7'"],
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
            // A uuid in 16 bytes, shown as hex.
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
        ],
    }
}

/// The other columns' types on `backend`: the status (PostgreSQL's `varchar`, MySQL's
/// `ENUM`), a wall-clock inserted-at, and an instant that defaults to 12:00 UTC.
fn other_columns(backend: Backend) -> [&'static str; 3] {
    match backend {
        Backend::Postgres => [
            "varchar(20)",
            "timestamp",
            "timestamptz DEFAULT '2026-11-21 13:00:00+01'",
        ],
        // The test's sessions are in UTC.
        _ => [
            "ENUM('NEW', 'ERROR', 'SUCCESS')",
            "DATETIME",
            "TIMESTAMP NULL DEFAULT '2026-11-21 12:00:00'",
        ],
    }
}

fn ids_and_statuses_of_each_type_are_claimed_marked_and_found(backend: Backend) {
    let [status, wall_clock, instant] = other_columns(backend);
    for (id_type, ids, shown) in id_types(backend) {
        let env = Env::on(backend);
        // Paris wall-clock times: 12:30 there is 11:30 UTC, half an hour old; the
        // 18th's 13:00 is three days old.
        env.execute(&format!(
            r#"CREATE TABLE "BACKLOG" ("ID" {id_type} PRIMARY KEY, "STATUS" {status} NOT NULL, "DATE_INSERTED" {wall_clock} NOT NULL,
                   "PAID_AT" {instant});
               CREATE INDEX "BACKLOG_BY_DATE" ON "BACKLOG" ("DATE_INSERTED");
               INSERT INTO "BACKLOG" ("ID", "STATUS", "DATE_INSERTED") VALUES ({}, 'NEW', '2026-11-21 12:30:00'), ({}, 'NEW', '2026-11-18 13:00:00')"#,
            ids[0], ids[1]
        ));
        if backend == Backend::Postgres {
            // Sessions on this database default to Tokyo time (MySQL has no zone of a
            // database's own).
            let db = env.pg.as_ref().unwrap().name.clone();
            env.execute(&format!("ALTER DATABASE {db} SET TimeZone = 'Asia/Tokyo'"));
        }
        env.write_schedule(&Schedule {
            format: "auto\"\ninserted_at_timezone = \"Europe/Paris",
            ..Schedule::default()
        });
        // The second record fails.
        env.write_handler(
            "handler.sh",
            &format!(
                "#!/bin/sh\ncat > record.json\necho \"$BACKLOG_RECORD_ID $BACKLOG_RECORD_AGE_SECONDS\" >> calls.txt\n[ \"$BACKLOG_RECORD_ID\" != '{}' ]\n",
                shown[1]
            ),
        );
        env.run_window("1d");
        env.run_window("7d");
        assert_eq!(
            std::fs::read_to_string(env.path("calls.txt"))
                .unwrap_or_else(|e| panic!("{id_type}: {e}")),
            format!("{} 1800\n{} 259200\n", shown[0], shown[1]),
            "{id_type}"
        );
        // The handler reads instants in UTC, whatever the server's zone, with the
        // offset that says so (MySQL's TIMESTAMP as PostgreSQL's timestamptz).
        let record = std::fs::read_to_string(env.path("record.json")).unwrap();
        assert!(
            record.contains(r#""PAID_AT":"2026-11-21T12:00:00+00:00""#),
            "{id_type}: {record}"
        );
        assert_eq!(
            env.lines(
                r#"SELECT CAST("STATUS" AS TEXT) FROM "BACKLOG" ORDER BY "DATE_INSERTED" DESC"#
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
            "{id_type}: {text}"
        );
        assert_eq!(
            env.lines(&format!(
                "SELECT CAST(count(*) AS TEXT) FROM {}",
                env.own("backlog_attempts")
            )),
            ["2"],
            "{id_type}"
        );
        env.backlog(&["explain", "--id", "no-such-id"])
            .assert()
            .code(2);
    }
}

crate::on_servers!(ids_and_statuses_of_each_type_are_claimed_marked_and_found);

//! Each inserted-at format, detected and declared: the same records, the same bands.

use crate::harness::{Backend, CLASSIC_AGES, Env, NOW, Schedule, Val, recording_handler};

type Encode = fn(chrono::DateTime<chrono::Utc>) -> Val;

/// MySQL's own timestamp type (`timestamp` is a `DATETIME(6)` there, see `create_table`).
const MYSQL_NATIVE: [(&str, &str, &str, Encode); 1] =
    [("DATETIME (UTC)", "timestamp", "native", |t| {
        t.naive_utc().into()
    })];

/// PostgreSQL's own timestamp types, beside the text and integer formats of both.
const NATIVE: [(&str, &str, &str, Encode); 2] = [
    ("timestamptz", "timestamptz", "native", |t| t.into()),
    ("timestamp (UTC)", "timestamp", "native", |t| {
        t.naive_utc().into()
    }),
];

const FORMATS: [(&str, &str, &str, Encode); 6] = [
    ("sqlite", "TEXT", "sqlite", |t| {
        t.format("%Y-%m-%d %H:%M:%S").to_string().into()
    }),
    ("sqlite with milliseconds", "TEXT", "sqlite", |t| {
        t.format("%Y-%m-%d %H:%M:%S%.3f").to_string().into()
    }),
    ("rfc3339 Z", "TEXT", "rfc3339", |t| {
        t.format("%Y-%m-%dT%H:%M:%SZ").to_string().into()
    }),
    ("rfc3339 +02:00 with fraction", "TEXT", "rfc3339", |t| {
        t.with_timezone(&chrono::FixedOffset::east_opt(7200).unwrap())
            .format("%Y-%m-%dT%H:%M:%S%.6f%:z")
            .to_string()
            .into()
    }),
    ("unix seconds", "INTEGER", "unix", |t| t.timestamp().into()),
    ("unix milliseconds", "INTEGER", "unix_ms", |t| {
        t.timestamp_millis().into()
    }),
];

fn each_format_selects_the_same_bands_detected_or_declared(backend: Backend) {
    let natives = match backend {
        Backend::Postgres => &NATIVE[..],
        Backend::Mysql => &MYSQL_NATIVE[..],
        Backend::Sqlite => &[],
    };
    for &(name, column_type, setting, encode) in FORMATS.iter().chain(natives) {
        for format in ["auto", setting] {
            let env = Env::on(backend);
            env.create_table(column_type);
            env.insert_aged(&CLASSIC_AGES, encode);
            env.write_schedule(&Schedule {
                format,
                ..Schedule::default()
            });
            env.write_handler("handler.sh", &recording_handler(&[]));
            let out = env
                .backlog(&["run", "--window", "7d", "--now", NOW, "--json"])
                .assert()
                .success();
            let summary: serde_json::Value =
                serde_json::from_slice(&out.get_output().stdout).unwrap();
            assert_eq!(summary["inserted_at_format"], setting, "{name} ({format})");
            assert_eq!(
                env.take_calls(),
                [3],
                "{name} ({format}): the 7d band holds only the 3-day-old record"
            );
            env.run_window("1d");
            assert_eq!(env.take_calls(), [1, 2], "{name} ({format})");
        }
    }
}

/// The age the handler is told comes from the value in its own format.
fn the_handler_is_told_the_record_age_and_window(backend: Backend) {
    let env = Env::on(backend);
    env.create_table("INTEGER");
    env.insert_aged(&[(7, 3 * 86_400)], |t| t.timestamp_millis().into());
    env.write_schedule(&Schedule::default());
    env.write_handler(
        "handler.sh",
        "#!/bin/sh\ncat > record.json\necho \"$BACKLOG_RECORD_ID $BACKLOG_TIER_WINDOW $BACKLOG_RECORD_AGE_SECONDS $BACKLOG_TABLE\" > env.txt\n",
    );
    env.run_window("7d");
    assert_eq!(
        std::fs::read_to_string(env.path("env.txt")).unwrap(),
        "7 7d 259200 BACKLOG\n"
    );
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(env.path("record.json")).unwrap()).unwrap();
    assert_eq!(
        record,
        serde_json::json!({"ID": 7, "STATUS": "NEW", "DATE_INSERTED": 1_795_003_200_000_i64, "PAYLOAD": "payload of 7"})
    );
}

/// Bytes are base64 on both backends (PostgreSQL's JSON would give `\x00ff10`).
fn nulls_and_blobs_reach_the_handler_as_json(backend: Backend) {
    let env = Env::on(backend);
    env.create_table("TEXT");
    env.execute(match backend {
        Backend::Sqlite => "ALTER TABLE BACKLOG ADD COLUMN DATA BLOB;
            INSERT INTO BACKLOG (ID, STATUS, DATE_INSERTED, PAYLOAD, DATA) VALUES (1, 'NEW', '2026-11-21 11:00:00', NULL, x'00ff10')",
        Backend::Postgres => r#"ALTER TABLE "BACKLOG" ADD COLUMN "DATA" bytea;
            INSERT INTO "BACKLOG" VALUES (1, 'NEW', '2026-11-21 11:00:00', NULL, '\x00ff10')"#,
        Backend::Mysql => r#"ALTER TABLE "BACKLOG" ADD COLUMN "DATA" VARBINARY(16);
            INSERT INTO "BACKLOG" VALUES (1, 'NEW', '2026-11-21 11:00:00', NULL, x'00ff10')"#,
    });
    env.write_schedule(&Schedule::default());
    env.write_handler("handler.sh", "#!/bin/sh\ncat > record.json\n");
    env.run_window("1d");
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(env.path("record.json")).unwrap()).unwrap();
    assert_eq!(
        record,
        serde_json::json!({"ID": 1, "STATUS": "NEW", "DATE_INSERTED": "2026-11-21 11:00:00", "PAYLOAD": null, "DATA": "AP8Q"})
    );
    // A person reads bytes of JSON text as that text; a text column of base64 is
    // shown as the table holds it.
    let json_bytes = match backend {
        Backend::Sqlite => r#"CAST('{"a":1}' AS BLOB)"#,
        Backend::Postgres => r#"convert_to('{"a":1}', 'UTF8')"#,
        Backend::Mysql => r#"CAST('{"a":1}' AS BINARY)"#,
    };
    env.execute(&format!(
        r#"INSERT INTO "BACKLOG" VALUES (2, 'DONE', '2026-11-21 11:00:00', 'eyJhIjoxfQ==', {json_bytes})"#
    ));
    let out = env.backlog(&["show", "2"]).assert().success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    let columns = text.lines().find_map(|l| l.strip_prefix("columns: "));
    let shown: serde_json::Value = serde_json::from_str(columns.unwrap()).unwrap();
    assert_eq!(shown["DATA"], r#"{"a":1}"#, "{text}");
    assert_eq!(shown["PAYLOAD"], "eyJhIjoxfQ==", "{text}");
}

/// RFC 3339 text in different UTC offsets in one column compares wrongly as text:
/// a tick refuses it when the column's ends disagree, and `doctor` finds it anywhere in
/// what it reads.
fn rfc3339_text_with_mixed_offsets_is_refused_and_found(backend: Backend) {
    let env = Env::on(backend);
    env.create_table("TEXT");
    env.insert_aged(&[(1, 480), (2, 18_000), (3, 259_200)], |t| {
        t.format("%Y-%m-%dT%H:%M:%SZ").to_string().into()
    });
    env.write_schedule(&Schedule::default());
    env.write_handler("handler.sh", &recording_handler(&[]));
    // In the middle: a tick reads only the column's ends; doctor finds it.
    env.execute(
        r#"UPDATE "BACKLOG" SET "DATE_INSERTED" = '2026-11-21T02:00:00-05:00' WHERE "ID" = 2"#,
    );
    let out = env.backlog(&["doctor"]).assert().code(1);
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(
        stdout.contains(
            "FAIL 1 of 3 distinct DATE_INSERTED values read carries another UTC offset than the column's Z, like \"2026-11-21T02:00:00-05:00\": text compares them as written"
        ),
        "{stdout}"
    );
    // At an end: every command refuses the column.
    env.execute(
        r#"UPDATE "BACKLOG" SET "DATE_INSERTED" = '2026-11-18T07:00:00-05:00' WHERE "ID" = 3"#,
    );
    env.backlog(&["run", "--window", "7d", "--now", NOW])
        .assert()
        .code(4)
        .stderr(predicates::str::ends_with(
            ": column \"DATE_INSERTED\" of table \"BACKLOG\" mixes UTC offsets (Z and -05:00): text compares them as written, so records would land in the wrong band and be handed out in the wrong order; store every value in one offset (UTC, like 2026-11-21T08:30:00Z), or use a timestamp column\n",
        ));
    assert!(env.take_calls().is_empty());
}

/// Where no index starts with the inserted-at column (one on (status, inserted-at), the
/// layout this workload asks for), its oldest and newest values would be a sort of the
/// whole table at every tick: they are read from the first and last records by id
/// instead, said at `-v`, and still refuse a column that mixes formats there.
fn a_column_no_index_starts_with_is_sampled_at_the_ends_of_the_ids(backend: Backend) {
    let env = Env::on(backend);
    env.create_table("INTEGER");
    env.insert_aged(&CLASSIC_AGES, |t| t.timestamp_millis().into());
    env.write_schedule(&Schedule::default());
    env.write_handler("handler.sh", &recording_handler(&[]));
    let note = "reading DATE_INSERTED of BACKLOG in order would sort the table: its format is read from the first and last 1000 records by ID";
    let run = |window: &str| {
        env.backlog(&["run", "-v", "--window", window, "--now", NOW])
            .assert()
            .success()
    };
    let out = run("1d");
    assert!(!String::from_utf8_lossy(&out.get_output().stderr).contains(note));
    assert_eq!(env.take_calls(), [1, 2]);

    env.execute(match backend {
        Backend::Mysql => r#"DROP INDEX "BACKLOG_BY_DATE" ON "BACKLOG""#,
        _ => r#"DROP INDEX "BACKLOG_BY_DATE""#,
    });
    env.execute(
        r#"CREATE INDEX "BACKLOG_BY_STATUS_DATE" ON "BACKLOG" ("STATUS", "DATE_INSERTED")"#,
    );
    let out = run("7d");
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(stderr.contains(note), "{stderr}");
    assert_eq!(
        env.take_calls(),
        [3],
        "the 7d band holds the 3-day-old record"
    );

    // The first record by id in Unix seconds, the others in milliseconds.
    env.execute(r#"UPDATE "BACKLOG" SET "DATE_INSERTED" = 1795003200 WHERE "ID" = 1"#);
    env.backlog(&["run", "--window", "7d", "--now", NOW])
        .assert()
        .code(4)
        .stderr(predicates::str::contains(
            "column \"DATE_INSERTED\" of table \"BACKLOG\" mixes formats: unix_ms and unix",
        ));
    assert!(env.take_calls().is_empty());
}

crate::on_every_backend!(
    a_column_no_index_starts_with_is_sampled_at_the_ends_of_the_ids,
    rfc3339_text_with_mixed_offsets_is_refused_and_found,
    each_format_selects_the_same_bands_detected_or_declared,
    the_handler_is_told_the_record_age_and_window,
    nulls_and_blobs_reach_the_handler_as_json,
);

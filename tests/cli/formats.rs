//! Each inserted-at format, detected and declared: the same records, the same bands.

use crate::harness::{Backend, CLASSIC_AGES, Env, NOW, Schedule, Val, recording_handler};

type Encode = fn(chrono::DateTime<chrono::Utc>) -> Val;

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
    let natives = if backend == Backend::Postgres {
        &NATIVE[..]
    } else {
        &[]
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
}

crate::on_both_backends!(
    each_format_selects_the_same_bands_detected_or_declared,
    the_handler_is_told_the_record_age_and_window,
    nulls_and_blobs_reach_the_handler_as_json,
);

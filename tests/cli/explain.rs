//! `backlog explain` on the default schedule, against arithmetic done by hand, and
//! `backlog status` on a classic backlog.

use crate::harness::{Backend, Env, NOW, Schedule, recording_handler};

fn json(out: &assert_cmd::assert::Assert) -> serde_json::Value {
    serde_json::from_slice(&out.get_output().stdout).unwrap()
}

fn stdout(out: &assert_cmd::assert::Assert) -> String {
    String::from_utf8_lossy(&out.get_output().stdout).into_owned()
}

/// Disjoint bands: 1d/5m = 288; 6d/1h = 144; 7d/12h = 14; 16d/24h = 16; 150d/96h = 37.5;
/// 180d/192h = 22.5; in all 522, and nothing past 360 days.
/// Cumulative: 1d/5m = 288; 7d/1h = 168; 14d/12h = 28; 30d/24h = 30; 180d/96h = 45;
/// 360d/192h = 45; in all 604.
#[test]
fn the_default_schedule_agrees_with_hand_arithmetic() {
    for (bands, tries, total) in [
        ("disjoint", [288.0, 144.0, 14.0, 16.0, 37.5, 22.5], 522.0),
        ("cumulative", [288.0, 168.0, 28.0, 30.0, 45.0, 45.0], 604.0),
    ] {
        let env = Env::new();
        env.write_schedule(&Schedule {
            bands,
            ..Schedule::default()
        });
        let plan = json(&env.backlog(&["explain", "--json"]).assert().success());
        let got: Vec<f64> = plan["tiers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["tries"].as_f64().unwrap())
            .collect();
        assert_eq!(got, tries, "{bands}");
        assert_eq!(plan["total_tries"].as_f64(), Some(total), "{bands}");
        assert_eq!(plan["never_after"], "360d");
        let warnings = plan["warnings"].as_array().unwrap().len();
        assert_eq!(
            warnings,
            usize::from(bands == "cumulative"),
            "{bands}: only the overlap note"
        );
    }
}

#[test]
fn explain_prints_the_bands_and_when_a_record_is_tried_next() {
    let env = Env::new();
    env.write_schedule(&Schedule::default());
    let at = "2026-11-21T12:34:00Z";
    let text = stdout(
        &env.backlog(&["explain", "--age", "3d", "--now", at])
            .assert()
            .success(),
    );
    assert_eq!(
        text,
        "backlog.toml (found; no --schedule given): 6 tiers, disjoint bands

tier  window  cadence    band                       tries in band
   1  1d      every 5m   ages 0 to 1d                         288
   2  7d      every 1h   ages over 1d up to 7d                144
   3  14d     every 12h  ages over 7d up to 14d                14
   4  30d     every 1d   ages over 14d up to 30d               16
   5  180d    every 4d   ages over 30d up to 180d            37.5
   6  360d    every 8d   ages over 180d up to 360d           22.5

A pending record is tried about 522 times over its life; past 360d it is never tried again.
Handler: ./handler.sh, one process per record, one at a time (concurrency 1), timeout 10s.

A record 3d old is in tier 2's band; it is tried next at 2026-11-21T13:00:00Z (in 26m), by tier 2.
"
    );
    let text = stdout(
        &env.backlog(&["explain", "--age", "400d", "--now", at])
            .assert()
            .success(),
    );
    assert!(
        text.ends_with("A record 400d old is in no band; it is never tried again.\n"),
        "{text}"
    );
}

fn explain_reads_a_record_by_id(backend: Backend) {
    let env = Env::on(backend);
    env.classic();
    env.write_schedule(&Schedule::default());
    let text = stdout(
        &env.backlog(&["explain", "--id", "3", "--now", "2026-11-21T12:10:00Z"])
            .assert()
            .success(),
    );
    assert!(text.ends_with("Record 3 (3d old) is in tier 2's band; it is tried next at 2026-11-21T13:00:00Z (in 50m), by tier 2.\n"), "{text}");
    env.execute(r#"UPDATE "BACKLOG" SET "STATUS" = 'SUCCESS' WHERE "ID" = 4"#);
    env.backlog(&["explain", "--id", "4"])
        .assert()
        .success()
        .stdout("record 4 is SUCCESS, not pending: no tier tries it\n");
    env.backlog(&["explain", "--id", "4", "--json"])
        .assert()
        .success()
        .stdout("{\"id\":\"4\",\"status\":\"SUCCESS\",\"pending\":false,\"next_try\":null}\n");
    env.backlog(&["explain", "--id", "99"])
        .assert()
        .code(2)
        .stderr("backlog: table BACKLOG has no record with ID = \"99\"\n");
}

fn status_counts_by_band_and_shows_last_ticks_and_overdue_tiers(backend: Backend) {
    let env = Env::on(backend);
    env.classic();
    env.insert_aged(&[(5, 400 * 86_400)], |t| {
        t.format("%Y-%m-%d %H:%M:%S").to_string().into()
    });
    env.write_schedule(&Schedule::default());
    env.write_handler("handler.sh", &recording_handler(&[2]));
    env.run_window("1d");

    let later = "2026-11-21T13:00:00Z";
    let status = json(
        &env.backlog(&["status", "--now", later, "--json"])
            .assert()
            .success(),
    );
    let counts: Vec<(String, serde_json::Value)> = status["ages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["label"].as_str().unwrap().to_string(),
                r["counts"].clone(),
            )
        })
        .collect();
    let expect = |label: &str, counts: serde_json::Value| (label.to_string(), counts);
    // Counted status by status through an index on (status, inserted-at) where none
    // starts with inserted-at (`store::band_statuses`): the same counts.
    env.execute(match backend {
        Backend::Mysql => r#"DROP INDEX "BACKLOG_BY_DATE" ON "BACKLOG""#,
        _ => r#"DROP INDEX "BACKLOG_BY_DATE""#,
    });
    env.execute(
        r#"CREATE INDEX "BACKLOG_BY_STATUS_DATE" ON "BACKLOG" ("STATUS", "DATE_INSERTED")"#,
    );
    let by_status = json(
        &env.backlog(&["status", "--now", later, "--json"])
            .assert()
            .success(),
    );
    assert_eq!(by_status["ages"], status["ages"]);
    assert_eq!(
        counts,
        [
            expect("0 to 1d", serde_json::json!({"ERROR": 1, "SUCCESS": 1})),
            expect("over 1d up to 7d", serde_json::json!({"NEW": 1})),
            expect("over 7d up to 14d", serde_json::json!({})),
            expect("over 14d up to 30d", serde_json::json!({})),
            expect("over 30d up to 180d", serde_json::json!({"NEW": 1})),
            expect("over 180d up to 360d", serde_json::json!({})),
            expect(
                "over 360d (never tried again)",
                serde_json::json!({"NEW": 1})
            ),
        ]
    );
    assert_eq!(status["oldest_pending"]["id"], 5);
    assert_eq!(status["oldest_pending"]["never_tried_again"], true);
    assert_eq!(status["tiers"][0]["last_tick"]["selected"], 2);
    assert_eq!(
        status["tiers"][0]["overdue_seconds"],
        55 * 60,
        "due at 12:05, it is 13:00"
    );
    assert!(status["tiers"][1]["last_tick"].is_null());

    let text = stdout(&env.backlog(&["status", "--now", later]).assert().success());
    assert!(text.contains("oldest pending record: 5 (inserted 2025-10-17 12:00:00, 400d 1h old), older than the last window: never tried again"), "{text}");
    assert!(
        text.contains("overdue: tier 1 (1d every 5m) was due at 2026-11-21T12:05:00Z, 55m ago"),
        "{text}"
    );
    assert!(
        text.contains("   2  7d      every 1h                 never ticked"),
        "{text}"
    );
}

/// A status column of REAL values (SQLite) is counted by each value as its records
/// show it, whether the counts read the band through an index on (status, inserted-at)
/// one status at a time or group it whole: 1.2 and 1.7 are two statuses, not two "1"s.
#[test]
fn real_statuses_are_counted_apart() {
    for index in ["STATUS, DATE_INSERTED", "DATE_INSERTED"] {
        let env = Env::on(Backend::Sqlite);
        env.execute(&format!(
            "CREATE TABLE BACKLOG (ID INTEGER PRIMARY KEY, STATUS REAL NOT NULL, DATE_INSERTED TEXT, PAYLOAD TEXT);
             CREATE INDEX BACKLOG_BY ON BACKLOG ({index});
             INSERT INTO BACKLOG VALUES (1, 1.2, '2026-11-21 11:00:00', NULL), (2, 1.7, '2026-11-21 10:00:00', NULL),
                                        (3, 1.7, '2026-11-21 09:00:00', NULL);"
        ));
        env.write_schedule(&Schedule::default());
        let status = json(
            &env.backlog(&["status", "--now", NOW, "--json"])
                .assert()
                .success(),
        );
        assert_eq!(
            status["ages"][0]["counts"],
            serde_json::json!({ "1.2": 1, "1.7": 2 }),
            "{index}: {status}"
        );
    }
}

crate::on_every_backend!(
    explain_reads_a_record_by_id,
    status_counts_by_band_and_shows_last_ticks_and_overdue_tiers,
);

/// `explain` and `crontab` check the table when they can reach the database: a file
/// that does not match it fails as a tick on it would (one line, exit 4), before any
/// line is printed to install; a database they cannot reach is one WARN line, and they
/// print what they can.
#[test]
fn explain_and_crontab_check_the_file_against_its_table_when_they_can() {
    let env = Env::new();
    env.create_table("TEXT");
    env.write_schedule(&Schedule::default());
    for command in ["explain", "crontab"] {
        env.backlog(&[command]).assert().success().stderr("");
    }
    let file = std::fs::read_to_string(env.path("backlog.toml")).unwrap();
    std::fs::write(
        env.path("backlog.toml"),
        file.replacen(
            "inserted_at = \"DATE_INSERTED\"",
            "inserted_at = \"CREATED\"",
            1,
        ),
    )
    .unwrap();
    let db = format!("sqlite:{}", env.path("backlog.db").display());
    for command in ["explain", "crontab"] {
        env.backlog(&[command])
            .assert()
            .code(4)
            .stdout("")
            .stderr(format!("backlog: {db}: table \"BACKLOG\" has no column \"CREATED\" (set table.inserted_at in the schedule file); columns: ID, STATUS, DATE_INSERTED, PAYLOAD\n"));
    }
    std::fs::write(env.path("backlog.toml"), &file).unwrap();
    std::fs::remove_file(env.path("backlog.db")).unwrap();
    for (command, printed) in [
        ("explain", "6 tiers, disjoint bands"),
        ("crontab", "# BEGIN backlog "),
    ] {
        let out = env.backlog(&[command]).assert().success();
        assert!(stdout(&out).contains(printed), "{}", stdout(&out));
        let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(
            stderr.ends_with(&format!(" WARN the table was not checked against the schedule file: {db}: no such database file (set database.url in the schedule file; `backlog init` writes a demo)\n")),
            "{stderr}"
        );
    }
}

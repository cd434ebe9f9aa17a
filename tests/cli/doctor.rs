//! `backlog doctor`: both verdicts on the band query's index, and the fix it prints.

use crate::harness::{Backend, Env, Schedule, recording_handler};

#[test]
fn doctor_finds_a_missing_index_and_its_fix_works() {
    let env = Env::new();
    env.db()
        .execute_batch("CREATE TABLE BACKLOG (ID INTEGER PRIMARY KEY, STATUS TEXT, DATE_INSERTED TEXT, PAYLOAD TEXT)")
        .unwrap();
    env.insert_aged(&[(1, 60), (2, 3600)], |t| {
        t.format("%Y-%m-%d %H:%M:%S").to_string().into()
    });
    env.write_schedule(&Schedule::default());
    env.write_handler("handler.sh", &recording_handler(&[]));

    let out = env.backlog(&["doctor"]).assert().code(1);
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(
        stdout.contains("FAIL the band query does not use an index on DATE_INSERTED"),
        "{stdout}"
    );
    assert_eq!(
        String::from_utf8_lossy(&out.get_output().stderr),
        "backlog: 1 of the checks failed\n"
    );
    let fix = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("CREATE INDEX"))
        .expect("the fix is printed")
        .trim()
        .to_string();
    assert_eq!(
        fix,
        "CREATE INDEX \"backlog_by_date_inserted\" ON \"BACKLOG\" (\"DATE_INSERTED\");"
    );

    env.db().execute_batch(&fix).unwrap();
    // A third record inserted in the same second as the first: two distinct values in
    // three rows, each counted as what it is.
    env.db()
        .execute_batch(
            "INSERT INTO BACKLOG (ID, STATUS, DATE_INSERTED) SELECT 3, 'NEW', DATE_INSERTED FROM BACKLOG WHERE ID = 1",
        )
        .unwrap();
    let out = env.backlog(&["doctor"]).assert().success();
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(stdout.lines().all(|l| l.starts_with("ok ")), "{stdout}");
    assert!(
        stdout.contains(
            "ok   2 distinct DATE_INSERTED values read, the whole column of 3 rows: all readable"
        ),
        "{stdout}"
    );
    assert!(stdout.contains("ok   the band query reads an index range: SEARCH BACKLOG USING INDEX backlog_by_date_inserted"), "{stdout}");
    // -v: the whole plan below its line, a line a step, as SQLite prints it.
    let out = env.backlog(&["doctor", "-v"]).assert().success();
    let verbose = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(
        verbose.ends_with("ok   the band query reads an index range: SEARCH BACKLOG USING INDEX backlog_by_date_inserted (DATE_INSERTED>? AND DATE_INSERTED<?)\n    SEARCH BACKLOG USING INDEX backlog_by_date_inserted (DATE_INSERTED>? AND DATE_INSERTED<?)\n"),
        "{verbose}"
    );
}

fn doctor_reports_unreadable_values_and_a_missing_handler(backend: Backend) {
    let env = Env::on(backend);
    env.classic();
    // An impossible time that sorts between valid ones: the format check of the
    // column's two ends passes, the sample finds it.
    env.execute(r#"UPDATE "BACKLOG" SET "DATE_INSERTED" = '2026-11-20 25:61:00' WHERE "ID" = 2"#);
    env.write_schedule(&Schedule {
        format: "sqlite",
        ..Schedule::default()
    });
    let out = env.backlog(&["doctor"]).assert().code(1);
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(
        stdout.contains("FAIL handler.command: \"./handler.sh\" not found"),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "values read is not a sqlite timestamp, like \"2026-11-20 25:61:00\": fix it"
        ),
        "{stdout}"
    );
}

/// `doctor` reads the whole inserted-at column, not only its ends: a value that cannot
/// be read in the middle of 2,500 records is found, and the count says it read them all.
fn doctor_reads_the_whole_column(backend: Backend) {
    let env = Env::on(backend);
    env.create_table("TEXT");
    let aged: Vec<(i64, i64)> = (1..=2500).map(|id| (id, id * 60)).collect();
    env.insert_aged(&aged, |t| t.format("%Y-%m-%d %H:%M:%S").to_string().into());
    // Sorts where the 1,250th value is, far from both ends.
    let middle = env.text(r#"SELECT "DATE_INSERTED" FROM "BACKLOG" WHERE "ID" = 1250"#);
    let bad = format!("{}61", &middle[..middle.len() - 2]);
    env.execute(&format!(
        r#"UPDATE "BACKLOG" SET "DATE_INSERTED" = '{bad}' WHERE "ID" = 1250"#
    ));
    env.write_schedule(&Schedule {
        format: "sqlite",
        ..Schedule::default()
    });
    env.write_handler("handler.sh", &crate::harness::recording_handler(&[]));
    let out = env.backlog(&["doctor"]).assert().code(1);
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(
        stdout.contains(&format!(
            "FAIL 1 of 2500 distinct DATE_INSERTED values read is not a sqlite timestamp, like \"{bad}\""
        )),
        "{stdout}"
    );
}

/// Statuses are compared exactly: a file whose pending values are none of the table's
/// fails the check, naming what the table has; a status the file does not name is
/// reported, and a table with pending records still passes.
fn doctor_checks_the_statuses_against_the_table(backend: Backend) {
    let env = Env::on(backend);
    env.classic();
    env.write_handler("handler.sh", &recording_handler(&[]));
    env.execute(r#"UPDATE "BACKLOG" SET "STATUS" = 'CANCELLED' WHERE "ID" = 4"#);
    env.write_schedule(&Schedule::default());
    let out = env.backlog(&["doctor"]).assert().success();
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(
        stdout.contains(
            "ok   statuses in BACKLOG: \"CANCELLED\" 1, \"NEW\" 3; the file names none of \"CANCELLED\" 1 (never selected); no record has \"ERROR\", \"SUCCESS\"\n"
        ),
        "{stdout}"
    );

    let text = std::fs::read_to_string(env.path("backlog.toml")).unwrap();
    std::fs::write(
        env.path("backlog.toml"),
        text.replace("[table]\n", "[table]\npending = [\"new\", \"error\"]\n"),
    )
    .unwrap();
    let out = env.backlog(&["doctor"]).assert().code(1);
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(
        stdout.contains(
            "FAIL statuses in BACKLOG: \"CANCELLED\" 1, \"NEW\" 3; the file names none of \"CANCELLED\" 1, \"NEW\" 3 (never selected); no record has \"new\" (did you mean \"NEW\"?), \"error\", \"SUCCESS\", \"ERROR\"; no record is pending: set table.pending, success and error to the table's own values (statuses are compared exactly, case included)\n"
        ),
        "{stdout}"
    );
}

crate::on_every_backend!(
    doctor_reads_the_whole_column,
    doctor_reports_unreadable_values_and_a_missing_handler,
    doctor_checks_the_statuses_against_the_table,
);

/// `--json`: one object on stdout carrying every check, passing or not; failing
/// checks add the error and exit 1, as without it.
#[test]
fn doctor_json_carries_the_checks_and_the_exit_code() {
    let env = Env::new();
    env.classic();
    env.write_schedule(&Schedule::default());
    let doctor = |code: i32| {
        let out = env.backlog(&["doctor", "--json"]).assert().code(code);
        let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
        assert_eq!(stdout.lines().count(), 1, "{stdout}");
        serde_json::from_str::<serde_json::Value>(&stdout).unwrap()
    };
    let failed = doctor(1);
    assert_eq!(failed["ok"], false);
    assert_eq!(failed["error"], "1 of the checks failed");
    assert_eq!(failed["exit_code"], 1);
    let checks = failed["checks"].as_array().unwrap();
    assert_eq!(checks.len(), 6, "{failed}");
    let failing: Vec<&serde_json::Value> = checks.iter().filter(|c| c["ok"] == false).collect();
    assert_eq!(failing.len(), 1, "{failed}");
    assert!(
        failing[0]["message"]
            .as_str()
            .unwrap()
            .starts_with("handler.command: \"./handler.sh\" not found"),
        "{failed}"
    );

    env.write_handler("handler.sh", &recording_handler(&[]));
    let passed = doctor(0);
    assert_eq!(passed["ok"], true);
    assert!(passed.get("error").is_none(), "{passed}");
    assert!(
        passed["checks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["ok"] == true),
        "{passed}"
    );

    // A schedule file that does not load is the one failing check.
    let out = env
        .backlog(&["doctor", "--json", "--schedule", "nope.toml"])
        .assert()
        .code(1);
    let value: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(value["checks"][0]["ok"], false);
    assert_eq!(value["exit_code"], 1);
}

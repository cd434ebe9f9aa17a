//! `backlog init --database URL --table NAME`: a schedule file proposed from a table the
//! tool has never seen, on every database; what it guessed; the file `doctor` passes
//! once the printed index exists, and `run` ticks with. The user's table is only read.

use crate::harness::{Backend, Env, recording_handler};
use crate::on_every_backend;

/// A table of other names, types and status words than the demo's: a key named
/// `ref_no`, statuses in `phase` (`queued`, `failed`, `shipped`, `void`), the insert time
/// in `added_on` beside an `updated_at` that is not it, and a text column of notes.
fn shipments(env: &Env) {
    let (key, text, time) = match env.backend {
        Backend::Sqlite => ("INTEGER", "TEXT", "TEXT"),
        Backend::Postgres => ("BIGINT", "TEXT", "TIMESTAMPTZ"),
        Backend::Mysql => ("BIGINT", "VARCHAR(40)", "DATETIME"),
    };
    env.execute(&format!(
        "CREATE TABLE shipments (ref_no {key} PRIMARY KEY, note {text}, phase {text} NOT NULL, added_on {time} NOT NULL, updated_at {time})"
    ));
    let now = chrono::Utc::now();
    let rows: Vec<String> = (1..=24)
        .map(|i| {
            let phase = ["queued", "failed", "shipped", "void"][i % 4];
            let at = |t: chrono::DateTime<chrono::Utc>| match env.backend {
                Backend::Postgres => t.format("'%Y-%m-%d %H:%M:%S+00'").to_string(),
                _ => t.format("'%Y-%m-%d %H:%M:%S'").to_string(),
            };
            let added = now - chrono::Duration::minutes(i as i64 * 55);
            format!("({i}, 'fragile', '{phase}', {}, {})", at(added), at(now))
        })
        .collect();
    env.execute(&format!(
        "INSERT INTO shipments (ref_no, note, phase, added_on, updated_at) VALUES {}",
        rows.join(", ")
    ));
}

fn phases(env: &Env) -> Vec<(String, i64)> {
    ["queued", "failed", "shipped", "void"]
        .iter()
        .map(|p| {
            let n = env.count(&format!(
                "SELECT COUNT(*) FROM shipments WHERE phase = '{p}'"
            ));
            (p.to_string(), n)
        })
        .collect()
}

/// The database's password where the written file has none: in the environment.
fn with_password(env: &Env, cmd: &mut assert_cmd::Command) {
    if env.backend != Backend::Sqlite {
        let password = std::fs::read_to_string(env.path("pgpass")).unwrap();
        cmd.env("PGPASSWORD", password.trim())
            .env("MYSQL_PWD", password.trim());
    }
}

fn init_proposes_a_file_that_doctor_passes_and_run_ticks_with(backend: Backend) {
    let env = Env::on(backend);
    shipments(&env);
    let before = phases(&env);
    let url = env.url_with_password();

    let out = env
        .backlog(&[
            "init",
            "--database",
            &url,
            "--table",
            "shipments",
            "--command",
            "./ship.sh",
        ])
        .assert()
        .success();
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(
        stdout.starts_with("read table shipments (24 records)\n"),
        "{stdout}"
    );
    for line in [
        "    pending: \"queued\" 6, \"failed\" 6",
        "    done: \"shipped\" 6",
        "    neither, so never selected: \"void\" 6",
    ] {
        assert!(stdout.lines().any(|l| l == line), "{line} in\n{stdout}");
    }
    assert!(
        stdout.contains("  status = \"phase\": by its name and values ("),
        "{stdout}"
    );
    assert!(
        stdout.contains("  id = \"ref_no\": the primary key ("),
        "{stdout}"
    );
    assert!(
        stdout.contains("  inserted_at = \"added_on\": by its name and type ("),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "wrote backlog.toml (the default progressive schedule over table shipments)\n"
        ),
        "{stdout}"
    );
    assert_eq!(phases(&env), before, "init only reads the table");

    let file = std::fs::read_to_string(env.path("backlog.toml")).unwrap();
    for line in [
        "name = \"shipments\"",
        "id = \"ref_no\"",
        "status = \"phase\"",
        "inserted_at = \"added_on\"",
        "pending = [\"queued\", \"failed\"]",
        "success = \"shipped\"",
        "error = \"failed\"",
        "command = [\"./ship.sh\"]",
        "window = \"360d\"",
    ] {
        assert!(file.lines().any(|l| l == line), "{line} in\n{file}");
    }
    let format = match backend {
        Backend::Sqlite => "inserted_at_format = \"auto\"",
        _ => "inserted_at_format = \"native\"",
    };
    assert!(file.lines().any(|l| l == format), "{format} in\n{file}");
    if backend != Backend::Sqlite {
        let password = std::fs::read_to_string(env.path("pgpass")).unwrap();
        assert!(!file.contains(password.trim()), "no password in\n{file}");
    }

    env.write_handler("ship.sh", &recording_handler(&[]));
    // No index on added_on yet: doctor fails on it, and init printed the fix.
    let mut doctor = env.backlog(&["doctor"]);
    with_password(&env, &mut doctor);
    doctor.assert().code(1);
    let index = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("CREATE INDEX"))
        .unwrap_or_else(|| panic!("the index to create in\n{stdout}"))
        .trim();
    env.execute(index);
    let mut doctor = env.backlog(&["doctor"]);
    with_password(&env, &mut doctor);
    let out = doctor.assert().success();
    let report = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(report.lines().all(|l| l.starts_with("ok ")), "{report}");

    let mut run = env.backlog(&["run", "--window", "1d"]);
    with_password(&env, &mut run);
    run.assert().success();
    assert_eq!(
        phases(&env),
        [
            ("queued".to_string(), 0),
            ("failed".to_string(), 0),
            ("shipped".to_string(), 18),
            ("void".to_string(), 6)
        ],
        "every queued and failed shipment of the day went through; void ones were left"
    );
}

on_every_backend!(init_proposes_a_file_that_doctor_passes_and_run_ticks_with);

#[test]
fn init_says_what_it_cannot_guess_and_leaves_files_alone() {
    let env = Env::new();
    shipments(&env);
    env.execute("CREATE TABLE events (payload TEXT, seen_at TEXT)");
    let fails = |args: &[&str], code: i32, stderr: &str| {
        let out = env.backlog(args).assert().code(code);
        assert_eq!(
            String::from_utf8_lossy(&out.get_output().stderr),
            format!("backlog: {stderr}\n"),
            "{args:?}"
        );
    };
    fails(
        &["init", "--database", "backlog.db", "--table", "shipment"],
        2,
        "--table shipment: backlog.db has no such table; did you mean \"shipments\"?; its tables: events, shipments",
    );
    fails(
        &["init", "--database", "backlog.db", "--table", "events"],
        2,
        "table events has no primary key; name a column that identifies each record with --id COLUMN",
    );
    fails(
        &[
            "init",
            "--database",
            "backlog.db",
            "--table",
            "shipments",
            "--status",
            "phse",
        ],
        2,
        "--status phse: table shipments has no such column; did you mean \"phase\"?; its columns are ref_no, note, phase, added_on, updated_at",
    );
    fails(
        &["init", "--database", "nope.db", "--table", "shipments"],
        2,
        "--database nope.db: no such SQLite file; give the path of the file that holds the table, or a server's URL (postgres://…, mysql://…)",
    );
    assert!(!env.path("nope.db").exists(), "init creates no database");
    assert!(!env.path("backlog.toml").exists());

    // --dry-run prints the file and writes none; an existing file needs --force.
    let out = env
        .backlog(&[
            "init",
            "--database",
            "backlog.db",
            "--table",
            "shipments",
            "--dry-run",
        ])
        .assert()
        .success();
    let printed = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(printed.contains("\nstatus = \"phase\"\n"), "{printed}");
    assert!(
        String::from_utf8_lossy(&out.get_output().stderr)
            .starts_with("read table shipments (24 records)\n"),
    );
    assert!(!env.path("backlog.toml").exists());
    std::fs::write(env.path("backlog.toml"), "mine").unwrap();
    fails(
        &["init", "--database", "backlog.db", "--table", "shipments"],
        2,
        "backlog.toml exists; pass --force to overwrite it, or --dry-run to print the proposal",
    );
    assert_eq!(
        std::fs::read_to_string(env.path("backlog.toml")).unwrap(),
        "mine"
    );
    env.backlog(&[
        "init",
        "--database",
        "backlog.db",
        "--table",
        "shipments",
        "--force",
    ])
    .assert()
    .success();
    let out = env
        .backlog(&[
            "init",
            "--database",
            "backlog.db",
            "--table",
            "shipments",
            "--force",
            "--json",
        ])
        .assert()
        .success();
    let json: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(json["table"]["status"], "phase", "{json}");
    assert_eq!(
        json["table"]["pending"],
        serde_json::json!(["queued", "failed"])
    );
    assert_eq!(json["written"], serde_json::json!(["backlog.toml"]));
    assert!(
        json["create_index"]
            .as_str()
            .unwrap()
            .starts_with("CREATE INDEX")
    );
    let out = env
        .backlog(&[
            "init",
            "--database",
            "backlog.db",
            "--table",
            "shipments",
            "--dry-run",
            "--json",
        ])
        .assert()
        .success();
    let json: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert!(
        json["file"]
            .as_str()
            .unwrap()
            .contains("\nstatus = \"phase\"\n"),
        "{json}"
    );
    assert_eq!(json["written"], serde_json::json!([]));
    // Without --command, the handler is left to write, and the next step says so.
    let file = std::fs::read_to_string(env.path("backlog.toml")).unwrap();
    assert!(
        file.contains("\n# To fill in: write ./handler.sh beside this file"),
        "{file}"
    );
    assert!(!env.path("handler.sh").exists());
}

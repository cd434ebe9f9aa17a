//! `backlog init --database URL --table NAME`: a schedule file proposed from a table the
//! tool has never seen, on every database; what it guessed; the file `doctor` passes
//! once the printed index exists, and `run` ticks with. The user's table is only read.

use crate::harness::{Backend, Env, recording_handler};

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

crate::on_backend!(
    sqlite,
    Sqlite,
    init_proposes_a_file_that_doctor_passes_and_run_ticks_with
);
crate::on_servers!(
    init_proposes_a_file_that_doctor_passes_and_run_ticks_with,
    init_on_a_server_reads_labels_and_keeps_the_password
);

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

/// On a server: an enumeration's labels no record holds yet are statuses too, a `date`
/// column is no insert time, statuses that differ in case alone are two, and the
/// password is neither written nor said, in the user part of the URL or a parameter.
fn init_on_a_server_reads_labels_and_keeps_the_password(backend: Backend) {
    let env = Env::on(backend);
    let (labels, time) = match backend {
        Backend::Postgres => {
            env.execute("CREATE TYPE job_state AS ENUM ('new', 'done', 'failed')");
            ("job_state", "TIMESTAMPTZ")
        }
        _ => ("ENUM('new', 'done', 'failed')", "DATETIME"),
    };
    env.execute(&format!(
        "CREATE TABLE jobs (id BIGINT PRIMARY KEY, st {labels} NOT NULL, created_on DATE, queued_at {time} NOT NULL)"
    ));
    env.execute(
        "INSERT INTO jobs VALUES (1, 'new', '2026-12-01', '2026-12-01 10:00:00'), (2, 'done', '2026-12-01', '2026-12-01 11:00:00')",
    );
    let text = match backend {
        Backend::Postgres => "TEXT",
        _ => "VARCHAR(10)",
    };
    env.execute(&format!(
        "CREATE TABLE cases (id BIGINT PRIMARY KEY, status {text} NOT NULL, created_at {time} NOT NULL)"
    ));
    env.execute(
        "INSERT INTO cases VALUES (1, 'new', '2026-12-01 10:00:00'), (2, 'NEW', '2026-12-01 10:00:00'), (3, 'NEW', '2026-12-01 10:00:00'), (4, 'done', '2026-12-01 10:00:00')",
    );
    let url = env.url_with_password();
    let password = std::fs::read_to_string(env.path("pgpass")).unwrap();
    let password = password.trim();
    // The password as a parameter instead of in the user part.
    let mut in_query = url::Url::parse(&url).unwrap();
    in_query.set_password(None).unwrap();
    in_query.query_pairs_mut().append_pair("password", password);
    let in_query = in_query.to_string();

    for url in [&url, &in_query] {
        let out = env
            .backlog(&["init", "--database", url, "--table", "jobs", "--dry-run"])
            .assert()
            .success();
        let file = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
        let said = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
        for line in [
            "status = \"st\"",
            "pending = [\"new\", \"failed\"]",
            "success = \"done\"",
            "error = \"failed\"",
            "inserted_at = \"queued_at\"",
        ] {
            assert!(file.lines().any(|l| l == line), "{line} in\n{file}\n{said}");
        }
        assert!(
            !file.contains(password) && !said.contains(password),
            "{file}\n{said}"
        );
        assert!(
            file.contains("# The password is not written here"),
            "{file}"
        );
        let out = env
            .backlog(&["init", "--database", url, "--table", "jbos"])
            .assert()
            .code(2);
        let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
        assert!(!stderr.contains(password), "{stderr}");
        assert!(
            stderr.contains("has no such table; did you mean \"jobs\"?"),
            "{stderr}"
        );
    }

    let out = env
        .backlog(&["init", "--database", &url, "--table", "cases", "--dry-run"])
        .assert()
        .success();
    let file = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(
        file.lines()
            .any(|l| l == "pending = [\"NEW\", \"new\", \"ERROR\"]"),
        "two statuses that differ in case are two:\n{file}"
    );
}

/// What a table's values cannot say is given by flags; guesses follow the values' case;
/// the flags are named where they are wrong.
#[test]
fn init_takes_statuses_from_flags_and_guesses_in_the_tables_case() {
    let env = Env::new();
    env.execute(
        "CREATE TABLE codes (id INTEGER PRIMARY KEY, status INTEGER NOT NULL, created_at TEXT NOT NULL);
         INSERT INTO codes VALUES (1, 0, '2026-12-01 10:00:00'), (2, 1, '2026-12-01 10:00:00'), (3, 2, '2026-12-01 10:00:00');
         CREATE TABLE titled (id INTEGER PRIMARY KEY, state TEXT NOT NULL, created_at TEXT NOT NULL);
         INSERT INTO titled VALUES (1, 'Pending', '2026-12-01 10:00:00'), (2, 'Done', '2026-12-01 10:00:00');
         CREATE TABLE fresh (ref TEXT, status TEXT, created_at TEXT);
         CREATE VIEW open_codes AS SELECT * FROM codes WHERE status = 0;",
    );
    let init = |args: &[&str]| {
        let mut all = vec!["init", "--database", "backlog.db", "--dry-run"];
        all.extend(args);
        env.backlog(&all).assert()
    };
    let out = init(&["--table", "codes"]).code(2);
    assert_eq!(
        String::from_utf8_lossy(&out.get_output().stderr),
        "backlog: none of status's values (\"0\" 1, \"1\" 1, \"2\" 1) looks like a status backlog knows (NEW, PENDING, ERROR, SUCCESS, DONE…); give them with --pending, --success and --error (like --pending 0 --success 1 --error 2), or name another column with --status\n"
    );
    let out = init(&[
        "--table",
        "codes",
        "--pending",
        "0,2",
        "--success",
        "1",
        "--error",
        "2",
    ])
    .success();
    let file = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    for line in [
        "pending = [\"0\", \"2\"]",
        "success = \"1\"",
        "error = \"2\"",
    ] {
        assert!(file.lines().any(|l| l == line), "{line} in\n{file}");
    }

    let out = init(&["--table", "titled"]).success();
    let file = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    for line in [
        "pending = [\"Pending\", \"Error\"]",
        "success = \"Done\"",
        "error = \"Error\"",
    ] {
        assert!(file.lines().any(|l| l == line), "{line} in\n{file}");
    }

    // An empty table without a key: the statuses are the tool's own, said as guesses.
    let out = init(&["--table", "fresh", "--id", "ref"]).success();
    let file = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    let said = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    for line in [
        "pending = [\"NEW\", \"ERROR\"]",
        "success = \"SUCCESS\"",
        "# TEXT, as --id says, not the primary key: keep it unique",
    ] {
        assert!(file.lines().any(|l| l == line), "{line} in\n{file}");
    }
    assert!(
        said.contains("table fresh has no record with a status yet, so the statuses are guesses"),
        "{said}"
    );
    assert!(said.starts_with("read table fresh (0 records)\n"), "{said}");

    let fails = |args: &[&str], stderr: &str| {
        let out = init(args).code(2);
        assert_eq!(
            String::from_utf8_lossy(&out.get_output().stderr),
            format!("backlog: {stderr}\n"),
            "{args:?}"
        );
    };
    fails(
        &["--table", "open_codes"],
        "--table open_codes: \"open_codes\" is a view, not a table: a status written to it would not stick; give the table it reads",
    );
    fails(
        &["--table", " "],
        "--table is empty; give it a value, or leave it out",
    );
    fails(
        &["--table", "titled", "--command", "./deliver.sh \"x"],
        "--command ./deliver.sh \"x: a quote is not closed; quote each argument as a shell would",
    );
}

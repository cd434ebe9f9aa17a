//! What only PostgreSQL has: a heartbeat cut off, a daemon waiting for its database,
//! TLS, passwords, id types, the planner, and the tool's own schema (what it shares
//! with MySQL is in `servers`).

use crate::concurrency::handled_without_overlap;
use crate::harness::{
    Backend, Env, NOW, Running, Schedule, pg_admin_url, pg_connect, recording_handler,
};
use crate::servers::{batch_schedule, pending_records, spawn_run};
use crate::tick::wait_for;

/// The heartbeat's connection drops and cannot come back while the tick's own does:
/// after half a lease without renewal the tick hands over no more records, since
/// another runner could soon take them, and says why.
#[test]
fn a_tick_whose_claims_cannot_be_renewed_stops_taking_records() {
    let env = Env::on(Backend::Postgres);
    pending_records(&env, 40);
    batch_schedule(
        &env,
        "claim_lease = \"2s\"",
        "mode = \"batch\"\nbatch_size = 1",
    );
    let runner = spawn_run(&env, "0.1");
    wait_for(|| std::fs::read_to_string(env.path("handler.log")).is_ok());
    let db = env.pg.as_ref().unwrap().name.clone();
    // From another database: a database cannot close itself to connections.
    let mut admin = pg_connect(&pg_admin_url());
    admin
        .batch_execute(&format!(
            "ALTER DATABASE {db} WITH ALLOW_CONNECTIONS false;
             SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{db}' AND application_name = 'backlog heartbeat'"
        ))
        .unwrap();
    let out = runner.wait_with_output().unwrap();
    admin
        .batch_execute(&format!("ALTER DATABASE {db} WITH ALLOW_CONNECTIONS true"))
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    let last = stderr.lines().last().unwrap_or_default();
    assert!(
        last.contains(": claims not renewed for")
            && last.ends_with("stopped taking records before they run out"),
        "{stderr}"
    );
    let handled = handled_without_overlap(&env).len();
    assert!(handled < 40, "it stopped early: {handled} handled");
    let marked = env.with_status("SUCCESS");
    assert_eq!(marked as usize, handled, "what it handled it marked");
}

/// A daemon started while its database refuses connections waits for it, with
/// growing pauses, then runs its tiers.
#[test]
fn the_daemon_waits_for_a_database_it_cannot_reach_yet() {
    let env = Env::on(Backend::Postgres);
    // The daemon runs on the real clock: records aged from it, whatever today's date.
    env.classic_at(chrono::Utc::now());
    env.write_schedule(&Schedule {
        tiers: "\n[[tier]]\nwindow = \"1d\"\nevery = \"1h\"\n",
        ..Schedule::default()
    });
    env.write_handler("handler.sh", &recording_handler(&[]));
    let db = env.pg.as_ref().unwrap().name.clone();
    let mut admin = pg_connect(&pg_admin_url());
    admin
        .batch_execute(&format!("ALTER DATABASE {db} WITH ALLOW_CONNECTIONS false"))
        .unwrap();
    let log = std::fs::File::create(env.path("daemon.log")).unwrap();
    let daemon = Running::spawn(env.command().args(["daemon"]).stderr(log));
    let daemon_log = || std::fs::read_to_string(env.path("daemon.log")).unwrap_or_default();
    wait_for(|| daemon_log().contains("trying again in 2s"));
    admin
        .batch_execute(&format!("ALTER DATABASE {db} WITH ALLOW_CONNECTIONS true"))
        .unwrap();
    // Never ticked: the 1d tier's slot counts as missed and fires at once.
    wait_for(|| env.with_status("SUCCESS") == 2);
    let out = daemon.terminate();
    assert!(out.status.success(), "{}", daemon_log());
    let text = daemon_log();
    assert!(
        text.contains("cannot connect: database \"")
            && text.contains("is not currently accepting connections; trying again in 1s"),
        "{text}"
    );
    assert_eq!(
        env.count(&format!(
            "SELECT count(*) FROM {} WHERE outcome = 'done'",
            env.own("backlog_runs")
        )),
        1
    );
}

/// The classic backlog on PostgreSQL, its schedule pointing at `url` with `pgpass`
/// holding `password`.
fn classic_pg(url_of: impl Fn(&str) -> String, password: Option<&str>) -> (Env, String) {
    let env = Env::on(Backend::Postgres);
    env.classic();
    env.write_handler("handler.sh", &recording_handler(&[]));
    let real = env.pg.as_ref().unwrap().password();
    let url = url_of(&env.url());
    let mut text = Schedule::default().render_for(&url);
    match password {
        Some(p) => std::fs::write(env.path("pgpass"), p).unwrap(),
        None => text = text.replace("password_file = \"pgpass\"\n", ""),
    }
    std::fs::write(env.path("backlog.toml"), text).unwrap();
    (env, real)
}

fn one_line_error(env: &Env, envs: &[(&str, &str)]) -> String {
    let mut cmd = env.backlog(&["run", "--window", "1d", "--now", NOW]);
    cmd.env_remove("PGPASSWORD");
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let out = cmd.assert().code(4);
    String::from_utf8_lossy(&out.get_output().stderr).into_owned()
}

#[test]
fn connection_refused_and_a_wrong_password_give_one_clear_line_each() {
    let closed = {
        let socket = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        socket.local_addr().unwrap().port()
    };
    let (env, real) = classic_pg(
        |url| {
            let port = url.split(':').nth(2).unwrap().split('/').next().unwrap();
            url.replace(&format!(":{port}/"), &format!(":{closed}/"))
        },
        None,
    );
    let db = &env.pg.as_ref().unwrap().name;
    assert_eq!(
        one_line_error(&env, &[("PGPASSWORD", &real)]),
        format!(
            "backlog: postgres://postgres@127.0.0.1:{closed}/{db}?sslmode=disable: cannot connect: connection refused (is the server running, and listening on that host and port?)\n"
        )
    );

    let (env, _) = classic_pg(|url| url.to_string(), Some("not-the-password"));
    let url = env.url();
    assert_eq!(
        one_line_error(&env, &[]),
        format!(
            "backlog: {url}: cannot connect: password authentication failed for user \"postgres\" (check the password: in the URL, database.password_file or PGPASSWORD)\n"
        )
    );
    let (env, _) = classic_pg(|url| url.to_string(), None);
    assert_eq!(
        one_line_error(&env, &[]),
        format!(
            "backlog: {}: cannot connect: the server asks for a password and none was given (put it in database.password_file, PGPASSWORD or the URL)\n",
            env.url()
        )
    );
}

/// The password from PGPASSWORD, from a file, or in the URL: it works, and no output
/// of any command shows it.
#[test]
fn the_password_comes_from_the_environment_a_file_or_the_url_and_is_never_printed() {
    let (env, real) = classic_pg(|url| url.to_string(), None);
    let with_env = |args: &[&str]| {
        let out = env
            .backlog(args)
            .env("PGPASSWORD", &real)
            .assert()
            .success();
        let o = out.get_output();
        String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr)
    };
    let from_env = with_env(&["run", "--window", "1d", "--now", NOW, "-vv"]);
    assert!(from_env.contains("selected 2"), "{from_env}");

    let (env, real) = classic_pg(
        |url| url.replace("postgres@", &format!("postgres:{}@", "{password}")),
        None,
    );
    let path = env.path("backlog.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replace("{password}", &real)).unwrap();
    let mut seen = String::new();
    for args in [
        &["run", "--window", "1d", "--now", NOW, "-vv", "--json"][..],
        &["run", "--window", "7d", "--now", NOW, "--dry-run"],
        &["status"],
        &["status", "--json"],
        &["doctor"],
        &["explain", "--id", "3"],
    ] {
        let out = env
            .backlog(args)
            .env_remove("PGPASSWORD")
            .assert()
            .success();
        let o = out.get_output();
        seen += &String::from_utf8_lossy(&o.stdout);
        seen += &String::from_utf8_lossy(&o.stderr);
    }
    assert!(seen.contains("postgres://postgres@127.0.0.1"), "{seen}");
    assert!(!seen.contains(&real), "the password was printed:\n{seen}");
    assert!(!from_env.contains(&real), "{from_env}");
    // A failing run's message names the database without the password, too.
    env.execute(r#"DROP TABLE "BACKLOG""#);
    let out = env.backlog(&["run", "--window", "1d"]).assert().code(4);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr);
    assert!(stderr.contains("no table \"BACKLOG\""), "{stderr}");
    assert!(!stderr.contains(&real), "{stderr}");
}

/// A password with the characters a URL gives meaning to (`@ : / # ? % +`) connects
/// when written percent-encoded in the URL, in its user part or its query, where `+`
/// is a plus as libpq reads it.
#[test]
fn a_password_with_url_characters_connects() {
    let (env, _) = classic_pg(|url| url.to_string(), None);
    env.execute(
        "DROP ROLE IF EXISTS url_chars; CREATE ROLE url_chars LOGIN SUPERUSER PASSWORD 'p@ss+w:rd/#?%é'",
    );
    let base = env.url();
    let encoded = "p%40ss+w:rd%2F%23%3F%25%C3%A9";
    for url in [
        base.replacen("postgres@", &format!("url_chars:{encoded}@"), 1),
        base.replacen("postgres@", "url_chars@", 1).replace(
            "?sslmode=disable",
            &format!("?connect_timeout=5&password={encoded}&sslmode=disable&application_name=a+b"),
        ),
    ] {
        let path = env.path("backlog.toml");
        std::fs::write(
            &path,
            Schedule::default()
                .render_for(&url)
                .replace("password_file = \"pgpass\"\n", ""),
        )
        .unwrap();
        let out = env
            .backlog(&["run", "--window", "1d", "--now", NOW, "--dry-run"])
            .env_remove("PGPASSWORD")
            .assert()
            .success();
        let stdout = String::from_utf8_lossy(&out.get_output().stdout);
        assert!(
            stdout.contains("would hand over 2 records"),
            "{url}: {stdout}"
        );
    }
}

/// The role `tls_only` (made by .ci/postgres.sh) may connect over TLS only.
#[test]
fn sslmode_require_connects_over_tls() {
    let (env, real) = classic_pg(
        |url| {
            url.replace("postgres@", "tls_only@")
                .replace("sslmode=disable", "sslmode=require")
        },
        None,
    );
    let run = |url_mode: &str| {
        let path = env.path("backlog.toml");
        let text = std::fs::read_to_string(&path).unwrap();
        let text = text
            .replace("sslmode=require", url_mode)
            .replace("sslmode=disable", url_mode);
        std::fs::write(&path, text).unwrap();
        env.backlog(&["run", "--window", "1d", "--now", NOW])
            .env("PGPASSWORD", &real)
            .assert()
    };
    let out = run("sslmode=disable").code(4);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr);
    assert!(
        stderr.contains("no encryption") && stderr.contains("pg_hba.conf"),
        "without TLS the server refuses tls_only: {stderr}"
    );
    let out = run("sslmode=require").success();
    let stdout = String::from_utf8_lossy(&out.get_output().stdout);
    assert!(stdout.contains("selected 2"), "{stdout}");
}

/// `verify-full` and `verify-ca` check the server's certificate against the test
/// authority of .ci/postgres.sh (BACKLOG_TEST_PG_CA): its name for `verify-full`
/// (127.0.0.1 and localhost are in it), only its chain for `verify-ca`. A root that did
/// not sign it is refused in one line.
#[test]
fn sslmode_verify_full_checks_the_certificate() {
    let ca = std::env::var("BACKLOG_TEST_PG_CA")
        .expect("BACKLOG_TEST_PG_CA names the test CA; run `bash .ci/run`");
    let server_cert = std::path::Path::new(&ca).with_file_name("server.crt");
    let (env, real) = classic_pg(|url| url.to_string(), None);
    let base = env.url();
    let mut cases = vec![
        (
            base.replace(
                "sslmode=disable",
                &format!("sslmode=verify-full&sslrootcert={ca}"),
            ),
            true,
        ),
        (
            base.replace("127.0.0.1", "localhost").replace(
                "sslmode=disable",
                &format!("sslmode=verify-full&sslrootcert={ca}"),
            ),
            true,
        ),
        (
            base.replace(
                "sslmode=disable",
                &format!("sslmode=verify-ca&sslrootcert={ca}"),
            ),
            true,
        ),
    ];
    cases.push((
        base.replace(
            "sslmode=disable",
            &format!("sslmode=verify-full&sslrootcert={}", server_cert.display()),
        ),
        false,
    ));
    for (url, ok) in cases {
        let text = Schedule::default()
            .render_for(&url)
            .replace("password_file = \"pgpass\"\n", "");
        std::fs::write(env.path("backlog.toml"), text).unwrap();
        env.execute(r#"UPDATE "BACKLOG" SET "STATUS" = 'NEW'"#);
        let cmd = env
            .backlog(&["run", "--window", "1d", "--now", NOW])
            .env("PGPASSWORD", &real)
            .assert();
        if ok {
            let out = cmd.success();
            let stdout = String::from_utf8_lossy(&out.get_output().stdout);
            assert!(stdout.contains("selected 2"), "{url}: {stdout}");
        } else {
            let out = cmd.code(4);
            let stderr = String::from_utf8_lossy(&out.get_output().stderr);
            assert!(
                stderr.contains("sslmode=verify-full: cannot connect: error performing TLS handshake: invalid peer certificate"),
                "{url}: {stderr}"
            );
            assert_eq!(stderr.lines().count(), 1, "{stderr}");
        }
    }
}

/// bigint, integer, text and uuid ids; a varchar status; a timestamp column read in
/// the file's time zone.
#[test]
fn ids_of_each_type_are_claimed_marked_and_found() {
    for (id_type, ids) in [
        ("integer", ["7", "8"]),
        ("text", ["order-7", "order-8"]),
        (
            "uuid",
            [
                "0b6f7a3e-8f1c-4c5e-9d2a-1f0e3c4b5a69",
                "f47ac10b-58cc-4372-a567-0e02b2c3d479",
            ],
        ),
    ] {
        let env = Env::on(Backend::Postgres);
        env.execute(&format!(
            r#"CREATE TABLE "BACKLOG" ("ID" {id_type} PRIMARY KEY, "STATUS" varchar(20) NOT NULL, "DATE_INSERTED" timestamp NOT NULL,
                   "PAID_AT" timestamptz DEFAULT '2026-11-21 13:00:00+01');
               INSERT INTO "BACKLOG" VALUES ('{}', 'NEW', '2026-11-21 12:30:00'), ('{}', 'NEW', '2026-11-18 13:00:00')"#,
            ids[0], ids[1]
        ));
        // Sessions on this database default to Tokyo time.
        let db = env.pg.as_ref().unwrap().name.clone();
        env.execute(&format!("ALTER DATABASE {db} SET TimeZone = 'Asia/Tokyo'"));
        // Paris wall-clock times: 12:30 there is 11:30 UTC, half an hour old.
        env.write_schedule(&Schedule {
            format: "auto\"\ninserted_at_timezone = \"Europe/Paris",
            ..Schedule::default()
        });
        env.write_handler(
            "handler.sh",
            "#!/bin/sh\ncat > record.json\necho \"$BACKLOG_RECORD_ID $BACKLOG_RECORD_AGE_SECONDS\" >> calls.txt\n",
        );
        env.run_window("1d");
        env.run_window("7d");
        let calls = std::fs::read_to_string(env.path("calls.txt")).unwrap();
        assert_eq!(
            calls,
            format!("{} 1800\n{} 259200\n", ids[0], ids[1]),
            "{id_type}"
        );
        // The handler reads timestamptz values in UTC, whatever the server's zone.
        let record = std::fs::read_to_string(env.path("record.json")).unwrap();
        assert!(
            record.contains(r#""PAID_AT":"2026-11-21T12:00:00+00:00""#),
            "{record}"
        );
        let statuses = env.lines(r#"SELECT "STATUS" FROM "BACKLOG""#);
        assert_eq!(statuses, ["SUCCESS", "SUCCESS"], "{id_type}");
        let out = env.backlog(&["explain", "--id", ids[1]]).assert().success();
        assert_eq!(
            String::from_utf8_lossy(&out.get_output().stdout),
            format!(
                "record {} is SUCCESS, not pending: no tier tries it\n",
                ids[1]
            )
        );
        env.backlog(&["explain", "--id", "no-such-id"])
            .assert()
            .code(2);
    }
}

/// A status column of an enum type: selected, claimed, marked (success and error),
/// kept after a failure, and counted by `status` and `doctor`, all through casts.
#[test]
fn an_enum_status_column_works_like_text() {
    let env = Env::on(Backend::Postgres);
    env.execute(
        r#"CREATE TYPE delivery AS ENUM ('NEW', 'ERROR', 'SUCCESS', 'DEAD');
           CREATE TABLE "BACKLOG" ("ID" bigint PRIMARY KEY, "STATUS" delivery NOT NULL, "DATE_INSERTED" timestamptz NOT NULL);
           CREATE INDEX "BACKLOG_BY_DATE" ON "BACKLOG" ("DATE_INSERTED");
           INSERT INTO "BACKLOG" VALUES (1, 'NEW', '2026-11-21 11:00:00Z'), (2, 'NEW', '2026-11-21 10:00:00Z'), (3, 'ERROR', '2026-11-21 09:00:00Z')"#,
    );
    env.write_schedule(&Schedule::default());
    env.write_handler("handler.sh", &recording_handler(&[2]));
    let out = env.run_window("1d");
    assert!(out.contains("selected 3, succeeded 2, failed 1"), "{out}");
    assert_eq!(
        env.lines(r#"SELECT "STATUS"::text FROM "BACKLOG" ORDER BY "ID""#),
        ["SUCCESS", "ERROR", "SUCCESS"]
    );
    let out = env.backlog(&["doctor"]).assert().success();
    assert!(
        String::from_utf8_lossy(&out.get_output().stdout).contains(
            "ok   statuses in BACKLOG: \"ERROR\" 1, \"SUCCESS\" 2; no record has \"NEW\""
        ),
        "{out:?}"
    );
    // The failure is kept until the next slot; `--retry-failed` takes it now.
    assert!(
        env.run_window("1d")
            .contains("selected 0, succeeded 0, failed 0, skipped 1")
    );
    env.backlog(&["run", "--window", "1d", "--now", NOW, "--retry-failed"])
        .assert()
        .success();
    assert_eq!(env.take_calls(), [1, 2, 3, 2]);
}

/// `inserted_at_timezone` concerns the inserted-at column only: a `[retry]` section's
/// text `since` column beside a Paris `timestamp` column is read as text. The zone on
/// a column of another type is an error naming it.
#[test]
fn the_inserted_at_zone_leaves_the_retry_columns_alone() {
    let env = Env::on(Backend::Postgres);
    env.execute(
        r#"CREATE TABLE "BACKLOG" ("ID" bigint PRIMARY KEY, "STATUS" text NOT NULL, "DATE_INSERTED" timestamp NOT NULL,
               "FAILURES" integer, "LAST_TRY" text);
           INSERT INTO "BACKLOG" VALUES (1, 'NEW', '2026-11-21 12:30:00', NULL, NULL),
               (2, 'NEW', '2026-11-21 12:00:00', 1, '2026-11-21 10:30:00')"#,
    );
    let schedule = Schedule {
        format: "auto\"\ninserted_at_timezone = \"Europe/Paris",
        ..Schedule::default()
    }
    .render_for(&env.url())
    .replacen(
        "[handler]",
        "[retry]\nstrategy = \"constant\"\nparams = { delay = \"1h\" }\ncount = \"FAILURES\"\nsince = \"LAST_TRY\"\n\n[handler]",
        1,
    );
    std::fs::write(env.path("backlog.toml"), &schedule).unwrap();
    env.write_handler("handler.sh", &recording_handler(&[]));
    env.run_window("1d");
    assert_eq!(env.take_calls(), [1, 2], "2 waited 1h30 of its 1h");
    assert_eq!(
        env.lines(r#"SELECT "LAST_TRY" FROM "BACKLOG" ORDER BY "ID""#),
        ["2026-11-21 12:00:00", "2026-11-21 12:00:00"]
    );

    env.execute(r#"ALTER TABLE "BACKLOG" ALTER COLUMN "DATE_INSERTED" TYPE text"#);
    env.backlog(&["run", "--window", "1d", "--now", NOW])
        .assert()
        .code(4)
        .stderr(predicates::str::ends_with(
            "column \"DATE_INSERTED\" of table \"BACKLOG\" is of type text; table.inserted_at_timezone applies to a timestamp without time zone column only\n",
        ));
}

/// On a table large enough for the planner to care, `doctor` reads EXPLAIN: a
/// sequential scan without an index, an index range once its own `CREATE INDEX` ran.
#[test]
fn doctor_reads_the_plan_and_its_create_index_fixes_it() {
    let env = Env::on(Backend::Postgres);
    env.execute(
        r#"CREATE TABLE "BACKLOG" ("ID" bigint PRIMARY KEY, "STATUS" text NOT NULL, "DATE_INSERTED" timestamptz NOT NULL);
           INSERT INTO "BACKLOG" SELECT g, CASE WHEN g % 10 = 0 THEN 'SUCCESS' ELSE 'NEW' END,
               now() - (g * 345.6) * INTERVAL '1 second' FROM generate_series(1, 100000) g;
           ANALYZE "BACKLOG""#,
    );
    env.write_schedule(&Schedule::default());
    env.write_handler("handler.sh", &recording_handler(&[]));
    let out = env.backlog(&["doctor"]).assert().code(1);
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(stdout.contains("Seq Scan on \"BACKLOG\""), "{stdout}");
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
    assert_eq!(
        fix,
        r#"CREATE INDEX CONCURRENTLY "backlog_by_date_inserted" ON "public"."BACKLOG" ("DATE_INSERTED");"#
    );
    env.execute(&fix);
    env.execute(r#"ANALYZE "BACKLOG""#);
    let out = env.backlog(&["doctor"]).assert().success();
    let stdout = String::from_utf8_lossy(&out.get_output().stdout);
    assert!(
        stdout.contains("ok   the band query reads an index range"),
        "{stdout}"
    );
}

/// The tool's tables go in the schema the file names, with a version a later release
/// can migrate from; a version this release does not know stops it.
#[test]
fn own_tables_live_in_the_named_schema_with_a_version() {
    let env = Env::on(Backend::Postgres);
    env.classic();
    env.write_schedule(&Schedule {
        database_extra: "schema = \"jobs_meta\"",
        ..Schedule::default()
    });
    env.write_handler("handler.sh", &recording_handler(&[]));
    env.run_window("1d");
    let tables = env.lines(
        "SELECT table_name::text FROM information_schema.tables WHERE table_schema = 'jobs_meta' ORDER BY 1",
    );
    assert_eq!(
        tables,
        [
            "backlog_alerts",
            "backlog_attempts",
            "backlog_claims",
            "backlog_failures",
            "backlog_meta",
            "backlog_pauses",
            "backlog_runs"
        ]
    );
    assert!(!env.has_own_tables(), "nothing in the default schema");
    let version =
        || env.text("SELECT value FROM jobs_meta.backlog_meta WHERE key = 'schema_version'");
    assert_eq!(version(), "5");
    // Version 3 (no failures in a row, no alerts) moves to version 5 on the next tick.
    env.execute(
        "DROP TABLE jobs_meta.backlog_failures, jobs_meta.backlog_alerts; UPDATE jobs_meta.backlog_meta SET value = '3' WHERE key = 'schema_version'",
    );
    env.run_window("1d");
    assert_eq!(version(), "5");
    assert_eq!(
        env.text("SELECT ((SELECT count(*) FROM jobs_meta.backlog_failures) + (SELECT count(*) FROM jobs_meta.backlog_alerts))::text"),
        "0"
    );
    // Version 4 (no alerts) moves to version 5.
    env.execute(
        "DROP TABLE jobs_meta.backlog_alerts; UPDATE jobs_meta.backlog_meta SET value = '4' WHERE key = 'schema_version'",
    );
    env.run_window("1d");
    assert_eq!(version(), "5");
    // Version 1 (no `lost` count in the run log, no attempts, no pauses) moves to
    // version 5 on the next tick.
    env.execute(
        "ALTER TABLE jobs_meta.backlog_runs DROP COLUMN lost; DROP TABLE jobs_meta.backlog_attempts, jobs_meta.backlog_pauses, jobs_meta.backlog_failures, jobs_meta.backlog_alerts; UPDATE jobs_meta.backlog_meta SET value = '1' WHERE key = 'schema_version'",
    );
    env.run_window("1d");
    assert_eq!(version(), "5");
    assert_eq!(
        env.text("SELECT sum(lost)::text FROM jobs_meta.backlog_runs"),
        "0"
    );
    assert_eq!(
        env.text("SELECT count(*)::text FROM jobs_meta.backlog_attempts"),
        "0"
    );
    env.execute("UPDATE jobs_meta.backlog_meta SET value = '6' WHERE key = 'schema_version'");
    env.backlog(&["run", "--window", "1d", "--now", NOW])
        .assert()
        .code(4)
        .stderr(predicates::str::ends_with(
            ": the tool's tables in schema \"jobs_meta\" are at schema version 6, this backlog knows version 5; use the backlog release that made them\n",
        ));
}

/// Without `--now`, `status` (and `run`) take the time from the database server: here,
/// on the same machine, within a minute of the host's.
#[test]
fn the_clock_is_the_database_servers() {
    let env = Env::on(Backend::Postgres);
    env.classic();
    env.write_schedule(&Schedule::default());
    let out = env.backlog(&["status", "--json"]).assert().success();
    let status: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let now: chrono::DateTime<chrono::Utc> = status["now"].as_str().unwrap().parse().unwrap();
    let skew = (chrono::Utc::now() - now).num_seconds().abs();
    assert!(skew < 60, "{now} is {skew} s off");
}

/// A text inserted-at column in a collation other than C (ICU's English), indexed in
/// it: the page query compares in the column's collation, which keeps that index in
/// use, and orders timestamps of one layout as C does, so the bands are the same. A
/// value written without the column's fraction (as Python's `isoformat` writes a whole
/// second) sorts less than a second from its instant, in its band here.
#[test]
fn text_timestamps_in_a_non_c_collation_select_the_same_bands() {
    let env = Env::on(Backend::Postgres);
    env.execute(
        r#"CREATE TABLE "BACKLOG" ("ID" bigint PRIMARY KEY, "STATUS" text NOT NULL, "DATE_INSERTED" text COLLATE "en-x-icu", "PAYLOAD" text);
           CREATE INDEX "BACKLOG_BY_DATE" ON "BACKLOG" ("DATE_INSERTED");"#,
    );
    env.insert_aged(&crate::harness::CLASSIC_AGES, |t| {
        t.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string().into()
    });
    // A day old to the second, without a fraction: tier 1's oldest.
    env.execute(
        r#"INSERT INTO "BACKLOG" VALUES (5, 'NEW', '2026-11-20T12:00:00Z', 'whole second')"#,
    );
    env.write_schedule(&Schedule::default());
    env.write_handler("handler.sh", &recording_handler(&[]));
    env.backlog(&["doctor"]).assert().success();
    for (window, ids) in [("1d", vec![1, 2, 5]), ("7d", vec![3]), ("14d", vec![])] {
        env.run_window(window);
        assert_eq!(env.take_calls(), ids, "{window}");
    }
}

/// A panic while a page is taken (here in the tick's own filter of the records it
/// wants; in a library user's code it could be anywhere) ends the page's transaction:
/// the session is not left holding the page's rows, and the store takes pages again.
#[test]
fn a_panic_while_a_page_is_taken_leaves_no_row_locked() {
    use backlog::store::BandQuery;
    let env = Env::on(Backend::Postgres);
    env.classic();
    env.write_schedule(&Schedule::default());
    let config = backlog::Config::load(&env.path("backlog.toml")).unwrap();
    let mut store = backlog::store::open(&config.database, &config.table).unwrap();
    let format = store.inspect().unwrap();
    store.ensure_own_tables().unwrap();
    let now = chrono::DateTime::parse_from_rfc3339(NOW).unwrap().to_utc();
    let band = BandQuery {
        from: format.encode(now - chrono::Duration::days(400)),
        to: format.encode(now),
        to_inclusive: true,
        take_tried: false,
        clock: now,
        wants_all: true,
    };
    let lease = now + chrono::Duration::seconds(60);
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        store.take("test/1", &band, None, 10, lease, &|_| {
            panic!("a filter that fails")
        })
    }));
    assert!(panicked.is_err());
    // Another session may lock every row at once: none is held.
    let locked = env.count(r#"SELECT count(*) FROM (SELECT 1 FROM "BACKLOG" FOR UPDATE NOWAIT) x"#);
    assert!(locked > 0);
    let page = store
        .take("test/2", &band, None, 10, lease, &|_| true)
        .unwrap();
    assert!(!page.taken.is_empty(), "the store takes pages again");
}

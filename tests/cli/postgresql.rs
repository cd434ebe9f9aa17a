//! What only PostgreSQL has, or is only tested on it: a heartbeat cut off, a daemon
//! waiting for a database that refuses connections, an enum status column, a
//! `timestamp` inserted-at column's zone beside `[retry]` columns, text timestamps in
//! an ICU collation, a table partitioned by month (what it shares with MySQL is in
//! `servers`).

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

/// A table partitioned by month on its inserted-at column: `doctor` reads every
/// distinct value once (a row's ctid is unique only within its partition) and says,
/// from the band query's EXPLAIN, that a band of a week reads one or two of the six
/// partitions, not all; a tick of the week scans no partition outside its band (its
/// pages nor its marks); a tick of 60 days takes its band across the partitions.
#[test]
fn a_table_partitioned_by_month_is_read_only_where_the_band_is() {
    use chrono::{Datelike, Months, TimeZone, Utc};
    let env = Env::on(Backend::Postgres);
    // On the real clock, as `doctor` explains a band of ages 1d to 7d from now.
    let now = Utc::now();
    let month = Utc
        .with_ymd_and_hms(now.year(), now.month(), 1, 0, 0, 0)
        .unwrap();
    let mut sql = String::from(
        r#"CREATE TABLE "BACKLOG" ("ID" bigint NOT NULL, "STATUS" text NOT NULL, "DATE_INSERTED" timestamptz NOT NULL, "PAYLOAD" text) PARTITION BY RANGE ("DATE_INSERTED");"#,
    );
    for k in 0..6u32 {
        let from = month - Months::new(4) + Months::new(k);
        let to = from + Months::new(1);
        sql += &format!(
            r#"CREATE TABLE "BACKLOG_{k}" PARTITION OF "BACKLOG" FOR VALUES FROM ('{}') TO ('{}');"#,
            from.to_rfc3339(),
            to.to_rfc3339()
        );
    }
    sql += r#"ALTER TABLE "BACKLOG" ADD PRIMARY KEY ("ID", "DATE_INSERTED");
              CREATE INDEX "BACKLOG_BY_DATE" ON "BACKLOG" ("DATE_INSERTED");"#;
    // 20,000 records, one every 255 s from 1 hour to 59 days old (in three or four
    // partitions), enough that each partition is read through its index; one in 339
    // pending, 59 in all.
    sql += &format!(
        r#"INSERT INTO "BACKLOG" SELECT g, CASE WHEN g % 339 = 0 THEN 'NEW' ELSE 'SUCCESS' END,
               TIMESTAMPTZ '{}' - INTERVAL '1 hour' - g * INTERVAL '255 seconds', 'p'
           FROM generate_series(0, 19999) g; ANALYZE "BACKLOG";"#,
        now.to_rfc3339()
    );
    env.execute(&sql);
    env.write_schedule(&Schedule {
        command: r#"["true"]"#,
        tiers: "[[tier]]\nwindow = \"7d\"\nevery = \"1h\"\n\n[[tier]]\nwindow = \"60d\"\nevery = \"1d\"\n",
        ..Schedule::default()
    });
    let doctor = env.backlog(&["doctor"]).assert().success();
    let doctor = String::from_utf8_lossy(&doctor.get_output().stdout).into_owned();
    assert!(
        doctor.contains("20000 distinct DATE_INSERTED values read, the whole column of 20000 rows"),
        "{doctor}"
    );
    let plan = doctor
        .lines()
        .find(|l| l.contains("the band query"))
        .unwrap_or_default();
    assert!(
        (plan.contains(" in 1 of the table's 6 partitions")
            || plan.contains(" in 2 of the table's 6 partitions"))
            && plan.starts_with("ok"),
        "{plan}"
    );
    // A tick of the week reads (and marks in) the partitions of the last week only:
    // the server's count of scans of each partition, before and after.
    let scans = |k: u32| {
        env.count(&format!(
            "SELECT coalesce(seq_scan, 0) + coalesce(idx_scan, 0) FROM pg_stat_user_tables WHERE relname = 'BACKLOG_{k}'"
        ))
    };
    let before: Vec<i64> = (0..6).map(scans).collect();
    let out = env.backlog(&["run", "--window", "7d"]).assert().success();
    let out = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(out.contains("selected 7, succeeded 7"), "{out}");
    // The server counts a session's scans when it ends, a moment after the tick.
    wait_for(|| scans(4) > before[4]);
    std::thread::sleep(std::time::Duration::from_millis(500));
    let after: Vec<i64> = (0..6).map(scans).collect();
    for k in [0, 1, 2, 5] {
        assert_eq!(
            after[k], before[k],
            "partition {k} (months -4 to +1 from now) is out of the week's band: scans before {before:?}, after {after:?}"
        );
    }
    let out = env.backlog(&["run", "--window", "60d"]).assert().success();
    let out = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(out.contains("selected 52, succeeded 52"), "{out}");
    assert_eq!(
        env.with_status("NEW"),
        0,
        "every pending record, in every partition"
    );
}

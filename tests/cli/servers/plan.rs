//! What `doctor` reads of a server's planner: the band query's plan, the statement
//! that makes the index it lacks, and a (status, inserted-at) index read one pending
//! status at a time. Each test body runs on both servers.

use crate::harness::{Backend, Env, NOW, Schedule, recording_handler};
use crate::servers::{all_success, batch_schedule, pending_records, spawn_run};

/// A table large enough for the planner to care, with no index on the inserted-at
/// column, in each server's quickest way to fill one.
fn large_table_without_an_index(env: &Env) {
    match env.backend {
        Backend::Postgres => env.execute(
            r#"CREATE TABLE "BACKLOG" ("ID" bigint PRIMARY KEY, "STATUS" text NOT NULL, "DATE_INSERTED" timestamptz NOT NULL);
               INSERT INTO "BACKLOG" SELECT g, CASE WHEN g % 10 = 0 THEN 'SUCCESS' ELSE 'NEW' END,
                   now() - (g * 345.6) * INTERVAL '1 second' FROM generate_series(1, 100000) g"#,
        ),
        _ => {
            env.execute(
                r#"CREATE TABLE "BACKLOG" ("ID" BIGINT PRIMARY KEY, "STATUS" VARCHAR(20) NOT NULL, "DATE_INSERTED" DATETIME NOT NULL, "PAYLOAD" TEXT)"#,
            );
            let rows: Vec<(i64, i64)> = (1..=30_000).map(|i| (i, i * 1200)).collect();
            env.insert_aged_at(chrono::Utc::now(), &rows, |t| t.into());
        }
    }
}

/// Brings the server's statistics of the table up to date.
fn analyze(env: &Env) {
    env.execute(match env.backend {
        Backend::Postgres => r#"ANALYZE "BACKLOG""#,
        _ => r#"ANALYZE TABLE "BACKLOG""#,
    });
}

/// On a table large enough for the planner to care and no index on the inserted-at
/// column, `doctor` reads the plan (EXPLAIN), says the band query scans and gives the
/// statement that fixes it, written for the server's own client; once it is run, the
/// plan is an index range on that index.
fn doctor_reads_the_plan_and_its_create_index_fixes_it(backend: Backend) {
    let env = Env::on(backend);
    large_table_without_an_index(&env);
    analyze(&env);
    env.write_schedule(&Schedule::default());
    env.write_handler("handler.sh", &recording_handler(&[]));
    let out = env.backlog(&["doctor"]).assert().code(1);
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    let (scan, fixed) = match backend {
        Backend::Postgres => (
            r#"Seq Scan on "BACKLOG""#.to_string(),
            r#"CREATE INDEX CONCURRENTLY "backlog_by_date_inserted" ON "public"."BACKLOG" ("DATE_INSERTED");"#.to_string(),
        ),
        // Backquotes: the mysql client reads them whatever its sql_mode.
        _ => (
            "type=ALL".to_string(),
            format!(
                "CREATE INDEX `backlog_by_date_inserted` ON `{}`.`BACKLOG` (`DATE_INSERTED`);",
                env.my.as_ref().unwrap().name
            ),
        ),
    };
    assert!(stdout.contains(&scan), "{stdout}");
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
    assert_eq!(fix, fixed);
    env.execute(&fix);
    analyze(&env);
    let out = env.backlog(&["doctor"]).assert().success();
    let stdout = String::from_utf8_lossy(&out.get_output().stdout);
    let range = stdout
        .lines()
        .find(|l| l.starts_with("ok   the band query reads an index range"))
        .unwrap_or_else(|| panic!("no index range in {stdout}"));
    match backend {
        Backend::Mysql => assert!(
            range.starts_with(
                "ok   the band query reads an index range: type=range key=backlog_by_date_inserted"
            ),
            "{stdout}"
        ),
        // The node that reads the table, in one short line: no estimates, no
        // conditions; `-v` prints the whole plan below it.
        _ => {
            assert_eq!(
                range,
                r#"ok   the band query reads an index range: Index Scan Backward using backlog_by_date_inserted on "BACKLOG""#,
                "{stdout}"
            );
            let out = env.backlog(&["doctor", "-v"]).assert().success();
            let verbose = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
            let whole: Vec<&str> = verbose
                .lines()
                .skip_while(|l| *l != range)
                .skip(1)
                .take_while(|l| l.starts_with("    "))
                .collect();
            assert!(
                whole[0].starts_with("    Limit  (cost=")
                    && whole
                        .iter()
                        .any(|l| l.trim_start().starts_with("Index Cond: ")),
                "{verbose}"
            );
        }
    }
}

/// A table whose only index on the inserted-at column is (status, inserted-at), as
/// many queues have: pages are read one pending status at a time through it and
/// merged, so `doctor` finds an index range where one query for both statuses would
/// sort the rest of the band at every page, and the tick hands the records over
/// newest first, each once, across pages.
fn a_status_and_age_index_serves_the_pages(backend: Backend) {
    let env = Env::on(backend);
    pending_records(&env, 2_500);
    let on = if backend == Backend::Mysql {
        r#" ON "BACKLOG""#
    } else {
        ""
    };
    env.execute(&format!(
        r#"DROP INDEX "BACKLOG_BY_DATE"{on};
           CREATE INDEX "BACKLOG_BY_STATUS_DATE" ON "BACKLOG" ("STATUS", "DATE_INSERTED");
           UPDATE "BACKLOG" SET "STATUS" = 'ERROR' WHERE "ID" % 3 = 0;
           UPDATE "BACKLOG" SET "STATUS" = 'SUCCESS' WHERE "ID" % 7 = 0"#
    ));
    // `doctor` plans the 7-day tier's band by the real clock, the records are aged from
    // the tests' fixed NOW: for its plan they are moved to two days old today (a band
    // the planner sees empty sorts its few rows, whatever the index), then back.
    let shift = (chrono::Utc::now()
        - chrono::DateTime::parse_from_rfc3339(NOW)
            .unwrap()
            .with_timezone(&chrono::Utc))
    .num_seconds()
        - 2 * 86_400;
    let move_by = |secs: i64| {
        if backend == Backend::Postgres {
            env.execute(&format!(
                r#"UPDATE "BACKLOG" SET "DATE_INSERTED" = "DATE_INSERTED" + INTERVAL '{secs} seconds'; ANALYZE "BACKLOG""#
            ));
        }
    };
    move_by(shift);
    let pending = env.count(r#"SELECT count(*) FROM "BACKLOG" WHERE "STATUS" <> 'SUCCESS'"#);
    batch_schedule(&env, "", "mode = \"batch\"\nbatch_size = 100");
    let out = env.backlog(&["doctor", "-v"]).assert().success();
    move_by(-shift);
    let doctor = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    // One index scan a pending status, merged: the line names the first, the whole
    // plan (`-v`) the merge.
    let (line, plan) = match backend {
        Backend::Postgres => (
            r#"ok   the band query reads an index range: Index Scan Backward using "BACKLOG_BY_STATUS_DATE" on "BACKLOG" (and 1 more scan)"#,
            "Merge Append",
        ),
        _ => (
            "ok   the band query reads an index range: type=",
            "key=BACKLOG_BY_STATUS_DATE",
        ),
    };
    assert!(
        doctor.lines().any(|l| l.starts_with(line)) && doctor.contains(plan),
        "{doctor}"
    );
    let out = spawn_run(&env, "0").wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let log = std::fs::read_to_string(env.path("handler.log")).unwrap();
    let ids: Vec<i64> = log
        .lines()
        .filter_map(|l| l.strip_prefix("start "))
        .map(|l| l.split(' ').next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(ids.len() as i64, pending, "each pending record once");
    assert!(
        ids.windows(2).all(|w| w[0] < w[1]),
        "newest first, across pages"
    );
    assert!(all_success(&env));
}

crate::on_servers!(
    doctor_reads_the_plan_and_its_create_index_fixes_it,
    a_status_and_age_index_serves_the_pages,
);

//! Selection is an index range over the band, never a scan with a function around the
//! column: checked with SQLite's own EXPLAIN QUERY PLAN on the statements the store runs.

use backlog_core::TableConfig;
use backlog_core::store::Store;
use backlog_sqlite::SqliteStore;
use rusqlite::ToSql;

use crate::harness::Env;

fn plan(env: &Env, sql: &str) -> String {
    let db = env.db();
    let mut stmt = db.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
    let count = stmt.parameter_count();
    let values: Vec<Box<dyn ToSql>> = (0..count)
        .map(|_| Box::new("x") as Box<dyn ToSql>)
        .collect();
    let rows = stmt
        .query_map(rusqlite::params_from_iter(values.iter()), |r| {
            r.get::<_, String>(3)
        })
        .unwrap();
    rows.map(Result::unwrap).collect::<Vec<_>>().join("; ")
}

#[test]
fn band_pages_are_index_range_scans() {
    let env = Env::new();
    env.classic();
    let mut store = SqliteStore::open(
        &env.path("backlog.db"),
        std::time::Duration::from_secs(5),
        TableConfig::new("BACKLOG", "ID", "STATUS", "DATE_INSERTED"),
    )
    .unwrap();
    store.inspect().unwrap();
    let first = plan(&env, &store.page_sql(true, false, false, false));
    assert_eq!(
        first,
        "SEARCH BACKLOG USING INDEX BACKLOG_BY_DATE (DATE_INSERTED>? AND DATE_INSERTED<?)"
    );
    let tier_one = plan(&env, &store.page_sql(true, true, false, false));
    assert_eq!(
        tier_one,
        "SEARCH BACKLOG USING INDEX BACKLOG_BY_DATE (DATE_INSERTED>? AND DATE_INSERTED<?)"
    );
    let next = plan(&env, &store.page_sql(false, false, false, false));
    assert_eq!(
        next,
        "SEARCH BACKLOG USING INDEX BACKLOG_BY_DATE (DATE_INSERTED>? AND DATE_INSERTED<?)"
    );
    // While another tick holds a span, or failures are kept until their next slot,
    // each row is looked up in the spans by the table's key and in the kept failures
    // by its id: still a range over the band, not a scan.
    store.ensure_own_tables().unwrap();
    let held = plan(&env, &store.page_sql(false, false, true, true));
    assert_eq!(
        held,
        "SEARCH BACKLOG USING INDEX BACKLOG_BY_DATE (DATE_INSERTED>? AND DATE_INSERTED<?); CORRELATED SCALAR SUBQUERY 1; SEARCH h USING INDEX sqlite_autoindex_backlog_holds_1 (table_name=?); CORRELATED SCALAR SUBQUERY 2; SEARCH k USING PRIMARY KEY (table_name=? AND record_id=?)"
    );
}

/// With an index on (status, inserted-at) and none on inserted-at alone, a query for
/// several pending statuses at once would sort the rest of the band in a temporary
/// B-tree at every page: the store reads one status at a time (an index range each,
/// in order) and merges them. A tick over such a table hands out every pending
/// record once, newest first, whatever its status.
#[test]
fn a_status_and_date_index_is_read_one_status_at_a_time() {
    let env = Env::new();
    env.classic();
    env.execute(
        "DROP INDEX BACKLOG_BY_DATE; CREATE INDEX BACKLOG_BY_STATUS_DATE ON BACKLOG (STATUS, DATE_INSERTED);
         UPDATE BACKLOG SET STATUS = 'ERROR' WHERE ID IN (2, 4);",
    );
    let mut store = SqliteStore::open(
        &env.path("backlog.db"),
        std::time::Duration::from_secs(5),
        TableConfig::new("BACKLOG", "ID", "STATUS", "DATE_INSERTED"),
    )
    .unwrap();
    store.inspect().unwrap();
    for (first, inclusive) in [(true, false), (true, true), (false, false)] {
        let plan = plan(&env, &store.page_sql(first, inclusive, false, false));
        assert_eq!(
            plan,
            "SEARCH BACKLOG USING INDEX BACKLOG_BY_STATUS_DATE (STATUS=? AND DATE_INSERTED>? AND DATE_INSERTED<?)"
        );
    }
    env.write_schedule(&crate::harness::Schedule {
        tiers: "\n[[tier]]\nwindow = \"400d\"\nevery = \"1d\"\n",
        ..crate::harness::Schedule::default()
    });
    env.write_handler("handler.sh", &crate::harness::recording_handler(&[]));
    let out = env
        .backlog(&[
            "run",
            "--window",
            "400d",
            "--now",
            crate::harness::NOW,
            "--limit",
            "3",
        ])
        .assert()
        .success();
    let out = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(out.contains("selected 3, succeeded 3"), "{out}");
    let calls = std::fs::read_to_string(env.path("calls.log")).unwrap();
    assert_eq!(calls, "1\n2\n3\n", "newest first across both statuses");
    // `doctor` sees the index range; `status` finds the oldest pending record the same
    // way (one status at a time), record 4 (ERROR, two months old).
    env.backlog(&["doctor"])
        .assert()
        .stdout(predicates::str::contains(
            "ok   the band query reads an index range: SEARCH BACKLOG USING INDEX BACKLOG_BY_STATUS_DATE (STATUS=? AND DATE_INSERTED>? AND DATE_INSERTED<?)",
        ));
    env.backlog(&["status", "--now", crate::harness::NOW])
        .assert()
        .success()
        .stdout(predicates::str::contains("oldest pending record: 4 "));
}

/// An index on the status beside the one on inserted-at: SQLite's planner, left to
/// itself, takes the status's (an equality looks more selective than a range) and sorts
/// the band at every page, and the store read one status at a time and merged, half as
/// fast. The store keeps the status from any index (`+STATUS`): the pages are ranges of
/// the inserted-at index, for all pending statuses at once.
#[test]
fn an_index_on_the_status_beside_the_date_index_is_left_alone() {
    let env = Env::new();
    env.classic();
    env.execute("CREATE INDEX BACKLOG_BY_STATUS ON BACKLOG (STATUS);");
    let mut store = SqliteStore::open(
        &env.path("backlog.db"),
        std::time::Duration::from_secs(5),
        TableConfig::new("BACKLOG", "ID", "STATUS", "DATE_INSERTED"),
    )
    .unwrap();
    store.inspect().unwrap();
    for (first, inclusive) in [(true, false), (true, true), (false, false)] {
        let sql = store.page_sql(first, inclusive, false, false);
        assert!(sql.contains("+\"STATUS\" IN (?9, ?10)"), "{sql}");
        assert_eq!(
            plan(&env, &sql),
            "SEARCH BACKLOG USING INDEX BACKLOG_BY_DATE (DATE_INSERTED>? AND DATE_INSERTED<?)"
        );
    }
    // One pending status alone is an equality the planner likes even more.
    let mut table = TableConfig::new("BACKLOG", "ID", "STATUS", "DATE_INSERTED");
    table.pending = vec!["NEW".into()];
    let mut store = SqliteStore::open(
        &env.path("backlog.db"),
        std::time::Duration::from_secs(5),
        table,
    )
    .unwrap();
    store.inspect().unwrap();
    assert_eq!(
        plan(&env, &store.page_sql(true, false, false, false)),
        "SEARCH BACKLOG USING INDEX BACKLOG_BY_DATE (DATE_INSERTED>? AND DATE_INSERTED<?)"
    );
}

/// A text id is not the rowid: the rows of one inserted-at value are put in id order in
/// a small sort (`FOR RIGHT PART OF ORDER BY`), which is no sort of the band; the page
/// still reads the inserted-at index, for all statuses at once.
#[test]
fn a_text_id_sorts_only_the_rows_of_one_instant() {
    let env = Env::new();
    env.execute(
        "CREATE TABLE JOBS (ID TEXT PRIMARY KEY, STATUS TEXT NOT NULL, DATE_INSERTED TEXT NOT NULL);
         CREATE INDEX JOBS_BY_DATE ON JOBS (DATE_INSERTED);
         CREATE INDEX JOBS_BY_STATUS ON JOBS (STATUS);
         INSERT INTO JOBS VALUES ('a', 'NEW', '2026-11-21T10:00:00Z');",
    );
    let mut store = SqliteStore::open(
        &env.path("backlog.db"),
        std::time::Duration::from_secs(5),
        TableConfig::new("JOBS", "ID", "STATUS", "DATE_INSERTED"),
    )
    .unwrap();
    store.inspect().unwrap();
    let plan = plan(&env, &store.page_sql(true, false, false, false));
    assert!(
        plan.starts_with(
            "SEARCH JOBS USING INDEX JOBS_BY_DATE (DATE_INSERTED>? AND DATE_INSERTED<?)"
        ) && !plan.contains("TEMP B-TREE FOR ORDER BY"),
        "{plan}"
    );
}

/// An INTEGER status (a flag: 0 new, 2 retry, 1 done) beside an index on it and one on
/// inserted-at: `+STATUS` would drop the column's affinity and compare the stored
/// numbers with the text of `pending`, matching nothing. The page keeps the column as
/// it is, and the tick takes both pending flags; with one pending flag too.
#[test]
fn an_integer_status_is_compared_as_a_number_beside_its_index() {
    let env = Env::new();
    env.execute(
        "CREATE TABLE FLAGS (ID INTEGER PRIMARY KEY, STATUS INTEGER NOT NULL, DATE_INSERTED TEXT NOT NULL);
         CREATE INDEX FLAGS_BY_DATE ON FLAGS (DATE_INSERTED);
         CREATE INDEX FLAGS_BY_STATUS ON FLAGS (STATUS);
         INSERT INTO FLAGS VALUES (1, 0, '2026-11-21 10:00:00'), (2, 2, '2026-11-21 09:00:00'),
                                  (3, 1, '2026-11-21 08:00:00'), (4, 0, '2026-11-21 07:00:00');",
    );
    env.write_handler("handler.sh", &crate::harness::recording_handler(&[]));
    for (pending, selected) in [(r#"["0", "2"]"#, 3), (r#"["0"]"#, 2)] {
        env.write_schedule(&crate::harness::Schedule::default());
        let text = std::fs::read_to_string(env.path("backlog.toml")).unwrap();
        let text = text
            .replace("name = \"BACKLOG\"", "name = \"FLAGS\"")
            .replace(
                "[table]\n",
                &format!("[table]\npending = {pending}\nsuccess = \"1\"\nerror = \"2\"\n"),
            );
        std::fs::write(env.path("backlog.toml"), text).unwrap();
        env.execute("UPDATE FLAGS SET STATUS = CASE ID WHEN 2 THEN 2 WHEN 3 THEN 1 ELSE 0 END;");
        let out = env.run_window("1d");
        assert!(
            out.contains(&format!("selected {selected}, succeeded {selected}")),
            "{pending}: {out}"
        );
    }
}

/// Both an index on (status, inserted-at) and one on inserted-at: the pages go one
/// status at a time through the first, reading only pending records' keys, where a
/// range of the second would read every record of the band, the done ones too.
#[test]
fn a_status_and_date_index_is_preferred_to_the_date_index() {
    let env = Env::new();
    env.classic();
    env.execute("CREATE INDEX BACKLOG_BY_STATUS_DATE ON BACKLOG (STATUS, DATE_INSERTED);");
    let mut store = SqliteStore::open(
        &env.path("backlog.db"),
        std::time::Duration::from_secs(5),
        TableConfig::new("BACKLOG", "ID", "STATUS", "DATE_INSERTED"),
    )
    .unwrap();
    store.inspect().unwrap();
    assert_eq!(
        plan(&env, &store.page_sql(true, false, false, false)),
        "SEARCH BACKLOG USING INDEX BACKLOG_BY_STATUS_DATE (STATUS=? AND DATE_INSERTED>? AND DATE_INSERTED<?)"
    );
}

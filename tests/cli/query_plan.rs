//! Selection is an index range over the band, never a scan with a function around the
//! column: checked with SQLite's own EXPLAIN QUERY PLAN on the statements the store runs.

use backlog::store::{SqliteStore, Store};
use backlog::{Scalar, TableConfig};
use rusqlite::ToSql;

use crate::harness::Env;

fn plan(env: &Env, sql: &str) -> String {
    let db = env.db();
    let mut stmt = db.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
    let count = stmt.parameter_count();
    let values: Vec<Box<dyn ToSql>> = (0..count)
        .map(|_| Box::new(Scalar::Text("x".into())) as Box<dyn ToSql>)
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

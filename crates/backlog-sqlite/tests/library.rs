//! The SQLite store under the core's tick, through the library's public face: what a
//! Rust user who links `backlog-core` and `backlog-sqlite` runs.

/// A closure through the library on a real SQLite file: the status it names is
/// what the tick counts, writes and keeps.
#[test]
fn a_closure_answering_the_success_status_succeeds() {
    use backlog_core::record::{Record, Scalar};
    use backlog_core::schedule::{Cadence, Schedule, Tier};
    use backlog_core::{FnHandler, Outcome, TableConfig, TickOptions, process_backlog};
    use std::time::Duration;

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("orders.db");
    let db = rusqlite::Connection::open(&path).unwrap();
    db.execute_batch(
        "CREATE TABLE orders (id INTEGER PRIMARY KEY, state TEXT NOT NULL, created_at INTEGER NOT NULL);
         CREATE INDEX orders_by_created_at ON orders (created_at);",
    )
    .unwrap();
    let now = chrono::Utc::now();
    for id in 1..=9_i64 {
        db.execute(
            "INSERT INTO orders VALUES (?1, 'NEW', ?2)",
            (id, now.timestamp() - id * 60),
        )
        .unwrap();
    }
    let day = Duration::from_secs(86_400);
    let mut schedule = Schedule::new(vec![Tier::new(
        day,
        Cadence::Every(Duration::from_secs(300)),
    )]);
    schedule.limit = 1000;
    let mut table = TableConfig::new("orders", "id", "state", "created_at");
    table.given_up = Some("DEAD".into());
    let mut store =
        backlog_sqlite::SqliteStore::open(&path, Duration::from_secs(5), table.clone()).unwrap();
    // Ids 1 to 6 answer the success status by name, 7 the error status, 8 the
    // given-up status, 9 a status of its own.
    let mut handler = FnHandler(|record: &Record| match record.id {
        Scalar::Int(1..=6) => Outcome::Status("SUCCESS".into()),
        Scalar::Int(7) => Outcome::Status("ERROR".into()),
        Scalar::Int(8) => Outcome::Status("DEAD".into()),
        _ => Outcome::Status("HELD".into()),
    });
    let mut opts = TickOptions::new(day, now);
    opts.history.record = backlog_core::config::HistoryRecord::All;
    let summary = process_backlog(
        &schedule,
        &table,
        &mut store,
        &mut handler,
        &opts,
        &mut |_| {},
    )
    .unwrap();
    assert_eq!(
        (summary.selected, summary.succeeded, summary.failed),
        (9, 6, 3)
    );
    let rows: Vec<(i64, String, String)> = db
        .prepare(
            "SELECT o.id, o.state, a.outcome FROM orders o
             JOIN backlog_attempts a ON a.record_id = CAST(o.id AS TEXT) ORDER BY o.id",
        )
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let expected: Vec<(i64, String, String)> = (1..=9)
        .map(|id| {
            let (state, outcome) = match id {
                1..=6 => ("SUCCESS", "success"),
                7 => ("ERROR", "error"),
                8 => ("DEAD", "mapped"),
                _ => ("HELD", "mapped"),
            };
            (id, state.to_string(), outcome.to_string())
        })
        .collect();
    assert_eq!(rows, expected);
    let run: (i64, i64) = db
        .query_row(
            "SELECT succeeded, failed FROM backlog_runs ORDER BY id DESC LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(run, (6, 3));
}

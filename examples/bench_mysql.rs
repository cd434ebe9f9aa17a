//! MySQL / MariaDB throughput with 1, 2, 4 and 8 runners on one database, measured
//! side by side in one run against the floor:
//! `BENCH_MYSQL=mysql://root:secret@127.0.0.1:3306/mysql cargo run --release --example bench_mysql`
//! (a URL of a user who may create databases; the bench creates and drops
//! `backlog_bench`).
//!
//! The table: 1,000,000 records over 400 days, 90 % pending, indexes on inserted-at
//! (`DATETIME(6)`) and status, as in `bench_postgres`. Every run starts from the same
//! statuses.
//! - Floor: the band's SELECT, then one prepared UPDATE per row, in one transaction,
//!   written directly with the `mysql` crate (the driver the tool uses).
//! - Runners: N threads, each a tick of its own (its own connections, claims and
//!   heartbeat, as N processes on N hosts would have) over the same band of about
//!   70,000 pending records, with an in-process handler that does nothing.
//!
//! `BENCH_ROUNDS` rounds (2) of the floor and each runner count, printed as they come.

use std::time::{Duration, Instant};

use backlog_core::config::Config;
use backlog_core::{FnHandler, Outcome, TickOptions, process_backlog};
use chrono::{DateTime, TimeZone, Utc};
use mysql::prelude::Queryable;
use mysql::{Conn, Opts, OptsBuilder};

const ROWS: i64 = 1_000_000;
const DB: &str = "backlog_bench";

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 21, 12, 0, 0).unwrap()
}

/// The statuses every run starts from: 10 % SUCCESS, 20 % ERROR, 70 % NEW.
const STATUS_OF_ID: &str =
    "CASE ID % 10 WHEN 0 THEN 'SUCCESS' WHEN 1 THEN 'ERROR' WHEN 2 THEN 'ERROR' ELSE 'NEW' END";

fn connect(url: &str) -> Conn {
    let opts = OptsBuilder::from_opts(Opts::from_url(url).unwrap())
        .prefer_socket(false)
        .init(vec!["SET time_zone = '+00:00'"]);
    Conn::new(opts).unwrap()
}

fn generate(db: &mut Conn) {
    db.query_drop(format!(
        "CREATE TABLE BACKLOG (ID BIGINT PRIMARY KEY, STATUS VARCHAR(16) NOT NULL, DATE_INSERTED DATETIME(6) NOT NULL, PAYLOAD TEXT);
         CREATE TABLE digits (d INT);
         INSERT INTO digits VALUES (0), (1), (2), (3), (4), (5), (6), (7), (8), (9);
         INSERT INTO BACKLOG
           SELECT g + 1, 'NEW', TIMESTAMP '{}' - INTERVAL (400 * 86400 * g DIV {ROWS}) SECOND, '{{\"order\": 1}}'
           FROM (SELECT a.d + 10 * b.d + 100 * c.d + 1000 * e.d + 10000 * f.d + 100000 * h.d AS g
                 FROM digits a, digits b, digits c, digits e, digits f, digits h) n;
         UPDATE BACKLOG SET STATUS = {STATUS_OF_ID};
         CREATE INDEX BACKLOG_BY_DATE ON BACKLOG (DATE_INSERTED);
         CREATE INDEX BACKLOG_BY_STATUS ON BACKLOG (STATUS);
         ANALYZE TABLE BACKLOG;",
        now().format("%Y-%m-%d %H:%M:%S")
    ))
    .unwrap();
}

/// Puts the band's statuses back and clears the tool's own tables.
fn reset(db: &mut Conn) {
    db.query_drop(format!(
        "UPDATE BACKLOG SET STATUS = {STATUS_OF_ID} WHERE STATUS <> {STATUS_OF_ID}"
    ))
    .unwrap();
    for table in ["backlog_claims", "backlog_runs", "backlog_attempts"] {
        let _ = db.query_drop(format!("TRUNCATE TABLE {table}"));
    }
}

/// The floor: the band's ids, then an UPDATE per row, in one transaction.
fn floor(db: &mut Conn) -> (f64, u64) {
    let (from, to) = (
        (now() - chrono::Duration::days(32)).naive_utc(),
        (now() - chrono::Duration::days(1)).naive_utc(),
    );
    let (from, to) = (
        from.format("%Y-%m-%d %H:%M:%S").to_string(),
        to.format("%Y-%m-%d %H:%M:%S").to_string(),
    );
    let started = Instant::now();
    let mut tx = db.start_transaction(mysql::TxOpts::default()).unwrap();
    let ids: Vec<i64> = tx
        .exec(
            "SELECT ID FROM BACKLOG WHERE DATE_INSERTED >= ? AND DATE_INSERTED < ? AND STATUS IN ('NEW', 'ERROR') ORDER BY DATE_INSERTED DESC, ID DESC",
            (from, to),
        )
        .unwrap();
    let update = tx
        .prep("UPDATE BACKLOG SET STATUS = 'SUCCESS' WHERE ID = ?")
        .unwrap();
    for id in &ids {
        tx.exec_drop(&update, (id,)).unwrap();
    }
    tx.commit().unwrap();
    (
        ids.len() as f64 / started.elapsed().as_secs_f64(),
        ids.len() as u64,
    )
}

/// `n` ticks at once, each on a thread of its own: records/s and records handled.
fn runners(config: &Config, n: usize) -> (f64, u64) {
    let started = Instant::now();
    let handled: u64 = std::thread::scope(|scope| {
        let ticks: Vec<_> = (0..n)
            .map(|_| {
                scope.spawn(|| {
                    let mut store =
                        backlog_core::store::open(&config.database, &config.table).unwrap();
                    let opts = TickOptions::new(Duration::from_secs(32 * 86_400), now());
                    process_backlog(
                        &config.schedule,
                        &config.table,
                        store.as_mut(),
                        &mut FnHandler(|_: &backlog_core::Record| Outcome::Success),
                        &opts,
                        &mut |_| {},
                    )
                    .unwrap()
                    .selected
                })
            })
            .collect();
        ticks.into_iter().map(|t| t.join().unwrap()).sum()
    });
    (handled as f64 / started.elapsed().as_secs_f64(), handled)
}

fn main() {
    backlog_sqlite::install();
    backlog_postgres::install();
    backlog_mysql::install();
    let Ok(admin) = std::env::var("BENCH_MYSQL") else {
        eprintln!(
            "set BENCH_MYSQL to the URL of a user who may create databases, like mysql://root:secret@127.0.0.1:3306/mysql"
        );
        std::process::exit(2);
    };
    let mut server = connect(&admin);
    server
        .query_drop(format!(
            "DROP DATABASE IF EXISTS {DB}; CREATE DATABASE {DB}"
        ))
        .unwrap();
    let url = match admin.rsplit_once('/') {
        Some((base, _)) => format!("{base}/{DB}"),
        None => panic!("BENCH_MYSQL names no database"),
    };
    let mut db = connect(&url);
    let started = Instant::now();
    generate(&mut db);
    println!(
        "generated {ROWS} records over 400 days in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bench.toml");
    std::fs::write(
        &file,
        format!(
            "[database]\nurl = \"{url}?ssl-mode=DISABLED\"\n[table]\nname = \"BACKLOG\"\nid = \"ID\"\nstatus = \"STATUS\"\ninserted_at = \"DATE_INSERTED\"\n[handler]\ncommand = [\"true\"]\n[[tier]]\nwindow = \"1d\"\nevery = \"1h\"\n[[tier]]\nwindow = \"32d\"\nevery = \"1h\"\nlimit = 1000000\n"
        ),
    )
    .unwrap();
    let config = Config::load(&file).unwrap();
    let rounds: usize = std::env::var("BENCH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(2);
    for round in 1..=rounds {
        reset(&mut db);
        let (floor_rps, n) = floor(&mut db);
        println!(
            "round {round}: floor (one transaction, an UPDATE per row): {n} records, {floor_rps:>8.0} records/s"
        );
        for n in [1, 2, 4, 8] {
            reset(&mut db);
            let (rps, handled) = runners(&config, n);
            println!(
                "round {round}: {n} runner{}: {handled} records, {rps:>8.0} records/s, {:.2} of the floor",
                if n == 1 { " " } else { "s" },
                rps / floor_rps
            );
        }
    }
    drop(db);
    server.query_drop(format!("DROP DATABASE {DB}")).unwrap();
}

//! What a claim costs on PostgreSQL, by design, measured side by side in one run:
//! `BENCH_PG=postgres://postgres:secret@127.0.0.1:5432/postgres?sslmode=disable cargo run --release --example bench_pg_claims`
//! (a superuser URL; the bench creates and drops a database `backlog_claims_bench`).
//!
//! Each design takes 70 pages of 1,000 records and lets go of them again, one
//! statement per page each way, as a tick does around its handlers and marks (the
//! marks themselves, the same for every design, are not in these figures):
//! - the claims table as `backlog` keeps it (logged, with its two indexes): one
//!   `INSERT … SELECT unnest … ON CONFLICT` a page, one `DELETE … = ANY` a page;
//! - the same table `UNLOGGED` (no WAL for it; emptied by a crash of the server and
//!   absent on a standby after a failover);
//! - session advisory locks (Que's design): `pg_try_advisory_lock` over the page's
//!   ids, then `pg_advisory_unlock` of each, no writes at all (the locks live in the
//!   server's shared lock table and vanish with the connection).
//!
//! `BENCH_ROUNDS` rounds (5); prints the median µs a record for each.

use std::time::Instant;

use postgres::{Client, NoTls};

const DB: &str = "backlog_claims_bench";
const PAGES: i64 = 70;
const PAGE: i64 = 1000;

fn with_db(url: &str, db: &str) -> String {
    let (base, query) = url.split_once('?').map_or((url, ""), |(b, q)| (b, q));
    let base = base.rsplit_once('/').map_or(base, |(b, _)| b);
    if query.is_empty() {
        format!("{base}/{db}")
    } else {
        format!("{base}/{db}?{query}")
    }
}

const TABLE: &str = "(table_name text NOT NULL, record_id text NOT NULL, owner text NOT NULL,
    claimed_at timestamptz NOT NULL, expires_at timestamptz NOT NULL,
    PRIMARY KEY (table_name, record_id))";

/// Claims and lets go of every page through `table`: seconds taken.
fn table_claims(db: &mut Client, table: &str) -> f64 {
    let claim = db
        .prepare(&format!(
            "INSERT INTO {table} AS c (table_name, record_id, owner, claimed_at, expires_at)
             SELECT 'BACKLOG', id::text, $2, now(), now() + interval '5 minutes' FROM unnest($1::int8[]) id
             ON CONFLICT (table_name, record_id) DO UPDATE SET owner = excluded.owner,
                 claimed_at = excluded.claimed_at, expires_at = excluded.expires_at
             WHERE c.expires_at < excluded.claimed_at
             RETURNING record_id"
        ))
        .unwrap();
    let release = db
        .prepare(&format!(
            "DELETE FROM {table} WHERE table_name = 'BACKLOG' AND owner = $2 AND record_id = ANY ($1)"
        ))
        .unwrap();
    let started = Instant::now();
    for page in 0..PAGES {
        let ids: Vec<i64> = (page * PAGE..(page + 1) * PAGE).collect();
        let got = db.query(&claim, &[&ids, &"runner"]).unwrap();
        assert_eq!(got.len() as i64, PAGE);
        let text: Vec<String> = ids.iter().map(ToString::to_string).collect();
        db.execute(&release, &[&text, &"runner"]).unwrap();
    }
    started.elapsed().as_secs_f64()
}

/// Takes and lets go of every page with session advisory locks: seconds taken.
fn advisory_claims(db: &mut Client) -> f64 {
    let claim = db
        .prepare("SELECT id FROM unnest($1::int8[]) id WHERE pg_try_advisory_lock(id)")
        .unwrap();
    let release = db
        .prepare("SELECT count(*) FROM unnest($1::int8[]) id WHERE pg_advisory_unlock(id)")
        .unwrap();
    let started = Instant::now();
    for page in 0..PAGES {
        let ids: Vec<i64> = (page * PAGE..(page + 1) * PAGE).collect();
        let got = db.query(&claim, &[&ids]).unwrap();
        assert_eq!(got.len() as i64, PAGE);
        db.query_one(&release, &[&ids]).unwrap();
    }
    started.elapsed().as_secs_f64()
}

fn main() {
    let Ok(admin) = std::env::var("BENCH_PG") else {
        eprintln!("set BENCH_PG to a superuser URL");
        std::process::exit(2);
    };
    let rounds: usize = std::env::var("BENCH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(5);
    let mut server = Client::connect(&admin, NoTls).unwrap();
    server
        .batch_execute(&format!("DROP DATABASE IF EXISTS {DB} WITH (FORCE)"))
        .unwrap();
    server
        .batch_execute(&format!("CREATE DATABASE {DB}"))
        .unwrap();
    let mut db = Client::connect(&with_db(&admin, DB), NoTls).unwrap();
    db.batch_execute(&format!(
        "CREATE TABLE logged {TABLE}; CREATE INDEX ON logged (owner);
         CREATE UNLOGGED TABLE unlogged {TABLE}; CREATE INDEX ON unlogged (owner);"
    ))
    .unwrap();
    let names = [
        "claims table (logged)",
        "claims table UNLOGGED",
        "advisory locks",
    ];
    let mut figures: [Vec<f64>; 3] = Default::default();
    let records = (PAGES * PAGE) as f64;
    for round in 0..rounds {
        // Each design first in turn.
        for k in 0..3 {
            let i = (round + k) % 3;
            let secs = match i {
                0 => table_claims(&mut db, "logged"),
                1 => table_claims(&mut db, "unlogged"),
                _ => advisory_claims(&mut db),
            };
            figures[i].push(secs * 1e6 / records);
        }
        db.batch_execute("VACUUM logged, unlogged").unwrap();
    }
    println!(
        "a claim and its release, {PAGES} pages of {PAGE}, one statement a page each way, {rounds} rounds (median µs a record, min–max):"
    );
    for (name, v) in names.iter().zip(&mut figures) {
        v.sort_by(f64::total_cmp);
        println!(
            "  {name:<22} {:>5.2} µs ({:.2}–{:.2})",
            v[v.len() / 2],
            v[0],
            v[v.len() - 1]
        );
    }
    drop(db);
    server
        .batch_execute(&format!("DROP DATABASE {DB} WITH (FORCE)"))
        .unwrap();
}

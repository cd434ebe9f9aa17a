//! A Rust handler: the library with a closure instead of a command.
//!
//! Builds a small backlog in a temporary SQLite file, then runs the 1-day tier of a
//! two-tier schedule over it with a closure that "delivers" even ids and fails odd ones.
//! Run it with `cargo run -p backlog-sqlite --example rust_handler`.
//!
//! Only `rusqlite`, to create the demo table, is not reached through `backlog-core`: `chrono`
//! and `chrono_tz` are re-exported (`backlog_core::chrono`, `backlog_core::chrono_tz`).

use std::time::Duration;

use backlog_core::chrono::Utc;
use backlog_core::schedule::{Cadence, Schedule, Tier};
use backlog_core::{FnHandler, Outcome, Scalar, TableConfig, TickOptions, process_backlog};
use backlog_sqlite::SqliteStore;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The backlog table; yours already exists.
    let dir = tempfile_dir()?;
    let path = dir.join("orders.db");
    let db = rusqlite::Connection::open(&path)?;
    db.execute_batch(
        "CREATE TABLE orders (id INTEGER PRIMARY KEY, state TEXT NOT NULL, created_at INTEGER NOT NULL, total_cents INTEGER);
         CREATE INDEX orders_by_created_at ON orders (created_at);",
    )?;
    let now = Utc::now();
    for id in 1..=10_i64 {
        db.execute(
            "INSERT INTO orders VALUES (?1, 'NEW', ?2, ?3)",
            rusqlite::params![
                id,
                (now - backlog_core::chrono::Duration::hours(id * 3)).timestamp(),
                id * 1250
            ],
        )?;
    }

    let day = Duration::from_secs(86_400);
    let mut schedule = Schedule::new(vec![
        Tier::new(day, Cadence::Every(Duration::from_secs(300))),
        Tier::new(7 * day, Cadence::Every(Duration::from_secs(3600))),
    ]);
    schedule.limit = 1000;
    let table = TableConfig::new("orders", "id", "state", "created_at");
    let mut store = SqliteStore::open(&path, Duration::from_secs(5), table.clone())?;
    let mut handler = FnHandler(|record: &backlog_core::Record| {
        println!(
            "order {} ({} cents)",
            record.id, record.columns["total_cents"]
        );
        match record.id {
            Scalar::Int(id) if id % 2 == 0 => Outcome::Success,
            _ => Outcome::Error,
        }
    });
    let summary = process_backlog(
        &schedule,
        &table,
        &mut store,
        &mut handler,
        &TickOptions::new(day, now),
        &mut |_| {},
    )?;
    println!("{}", summary.line(&table));
    std::fs::remove_dir_all(dir)?;
    Ok(())
}

/// A fresh folder under the system's temp dir.
fn tempfile_dir() -> std::io::Result<std::path::PathBuf> {
    let dir = std::env::temp_dir().join(format!("backlog-example-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

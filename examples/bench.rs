//! Benchmarks, measured side by side in one run: `cargo run --release --example bench`.
//!
//! Prints the figures BENCHMARKS.md records. Every measurement runs on a fresh copy of
//! the same generated database, so each starts from the same pending records.
//!
//! 1. The engine against the floor: one tick over a band of about 70,000 pending
//!    records with an in-process handler that does nothing, against the same SELECT and
//!    one prepared UPDATE per row in one transaction, written directly with rusqlite.
//! 2. The batch handler with a trivial process, the per-record command handler, and the
//!    tick a user writes by hand today (Python's sqlite3 module).
//! 3. A tick over an empty band of a 10,000-row and a 10,000,000-row table.
//!
//! `BENCH_ONLY=engine` runs only the floor and the engine, for a profiler:
//! `perf record -g target/release/examples/bench`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use backlog::config::{HandlerConfig, HandlerMode};
use backlog::schedule::{Cadence, Schedule, Tier};
use backlog::store::SqliteStore;
use backlog::{BandMode, FnHandler, Outcome, TableConfig, TickOptions, process_backlog};
use chrono::{DateTime, TimeZone, Utc};
use rusqlite::{Connection, params};

const DAY: u64 = 86_400;

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 21, 12, 0, 0).unwrap()
}

/// `rows` records spread evenly over 400 days before `now`, 90 % pending, with an
/// index on the inserted-at column and one on the status.
fn generate(path: &Path, rows: u64) {
    let _ = std::fs::remove_file(path);
    let mut db = Connection::open(path).unwrap();
    db.execute_batch("PRAGMA journal_mode = WAL; CREATE TABLE BACKLOG (ID INTEGER PRIMARY KEY, STATUS TEXT NOT NULL, DATE_INSERTED TEXT NOT NULL, PAYLOAD TEXT);").unwrap();
    let tx = db.transaction().unwrap();
    {
        let mut insert = tx
            .prepare("INSERT INTO BACKLOG VALUES (?1, ?2, ?3, ?4)")
            .unwrap();
        let span = 400 * DAY;
        for i in 0..rows {
            let age = span * i / rows;
            let at = now() - chrono::Duration::seconds(age as i64);
            let status = match i % 10 {
                0 => "SUCCESS",
                1 | 2 => "ERROR",
                _ => "NEW",
            };
            insert
                .execute(params![
                    i as i64 + 1,
                    status,
                    at.format("%Y-%m-%d %H:%M:%S").to_string(),
                    "{\"order\": 1}"
                ])
                .unwrap();
        }
    }
    tx.commit().unwrap();
    db.execute_batch("CREATE INDEX BACKLOG_BY_DATE ON BACKLOG (DATE_INSERTED); CREATE INDEX BACKLOG_BY_STATUS ON BACKLOG (STATUS); ANALYZE;").unwrap();
}

fn copy(from: &Path, to: &Path) {
    let db = Connection::open(from).unwrap();
    db.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")
        .unwrap();
    drop(db);
    std::fs::copy(from, to).unwrap();
}

/// Tiers whose second band, ages (1d, 32d], holds about 7.75 % of a 400-day table.
fn schedule() -> Schedule {
    let tier = |days: u64| Tier {
        window: Duration::from_secs(days * DAY),
        cadence: Cadence::Every(Duration::from_secs(3600)),
        limit: None,
        jitter: Duration::ZERO,
        spread: 1,
    };
    Schedule {
        tiers: vec![tier(1), tier(32)],
        bands: BandMode::Disjoint,
        limit: u64::MAX,
        timezone: chrono_tz::Tz::UTC,
    }
}

fn table() -> TableConfig {
    TableConfig::new("BACKLOG", "ID", "STATUS", "DATE_INSERTED")
}

/// One tick of the 32d tier with `handler`; records per second and records handled.
fn tick(path: &Path, handler: &mut dyn backlog::Handler) -> (f64, u64) {
    tick_with(path, handler, |_| {})
}

/// The same, with the tick's options tuned.
fn tick_with(
    path: &Path,
    handler: &mut dyn backlog::Handler,
    tune: impl Fn(&mut TickOptions),
) -> (f64, u64) {
    let mut store = SqliteStore::open(path, Duration::from_secs(30), table()).unwrap();
    let mut opts = TickOptions::new(Duration::from_secs(32 * DAY), now());
    tune(&mut opts);
    let started = Instant::now();
    let summary = process_backlog(
        &schedule(),
        &table(),
        &mut store,
        handler,
        &opts,
        &mut |_| {},
    )
    .unwrap();
    (
        summary.selected as f64 / started.elapsed().as_secs_f64(),
        summary.selected,
    )
}

/// The floor: the same band SELECT, then one prepared UPDATE per row, in one transaction.
fn floor(path: &Path) -> (f64, u64) {
    let mut db = Connection::open(path).unwrap();
    let started = Instant::now();
    let tx = db.transaction().unwrap();
    let ids: Vec<i64> = {
        let mut select = tx
            .prepare("SELECT ID FROM BACKLOG WHERE DATE_INSERTED >= ?1 AND DATE_INSERTED < ?2 AND STATUS IN ('NEW', 'ERROR') ORDER BY DATE_INSERTED DESC, ID DESC")
            .unwrap();
        let from = (now() - chrono::Duration::days(32))
            .format("%Y-%m-%d %H:%M:%S")
            .to_string();
        let to = (now() - chrono::Duration::days(1))
            .format("%Y-%m-%d %H:%M:%S")
            .to_string();
        select
            .query_map(params![from, to], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    {
        let mut update = tx
            .prepare("UPDATE BACKLOG SET STATUS = 'SUCCESS' WHERE ID = ?1")
            .unwrap();
        for id in &ids {
            update.execute([id]).unwrap();
        }
    }
    tx.commit().unwrap();
    (
        ids.len() as f64 / started.elapsed().as_secs_f64(),
        ids.len() as u64,
    )
}

fn command_handler(dir: &Path, command: &[&str], mode: HandlerMode) -> Box<dyn backlog::Handler> {
    let config = HandlerConfig {
        command: command.iter().map(|s| s.to_string()).collect(),
        mode,
        batch_size: 100,
        timeout: Duration::from_secs(30),
        env: Default::default(),
        exit_codes: Default::default(),
    };
    backlog::handler::from_config(&config, dir).unwrap()
}

/// The process's peak resident memory, from Linux's /proc.
fn peak_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// `BENCH_MEMORY=FILE`: in a process of its own, one tick over the database FILE;
/// prints the records handled and the process's peak resident memory in KiB.
fn memory_child(path: &Path) {
    let (_, n) = tick(path, &mut FnHandler(|_: &backlog::Record| Outcome::Success));
    println!("{n} {}", peak_kib());
}

fn main() {
    let dir = PathBuf::from(
        std::env::args()
            .nth(1)
            .unwrap_or_else(|| "target/bench".into()),
    );
    if let Ok(path) = std::env::var("BENCH_MEMORY") {
        return memory_child(Path::new(&path));
    }
    std::fs::create_dir_all(&dir).unwrap();
    let source = dir.join("million.db");
    let work = dir.join("work.db");
    let t = Instant::now();
    generate(&source, 1_000_000);
    println!(
        "generated 1,000,000 rows over 400 days in {:.1}s",
        t.elapsed().as_secs_f64()
    );

    copy(&source, &work);
    let (floor_rps, n) = floor(&work);
    println!("floor (rusqlite, one transaction):   {n} records, {floor_rps:>9.0} records/s");
    // The engine with its defaults, then with fewer commits: larger claim pages and
    // mark groups, or marks written once a second only.
    type Tune = fn(&mut TickOptions);
    let variants: [(&str, Tune); 3] = [
        ("engine (no-op Rust handler):", |_| {}),
        ("engine, pages and mark groups of 1000:", |o| {
            o.page_size = 1000;
            o.mark_group = 1000;
        }),
        ("engine, pages of 1000, marks each 1s:", |o| {
            o.page_size = 1000;
            o.mark_group = usize::MAX;
        }),
    ];
    let mut engine_rps = 0.0;
    for (i, (label, tune)) in variants.iter().enumerate() {
        copy(&source, &work);
        let (rps, n) = tick_with(
            &work,
            &mut FnHandler(|_: &backlog::Record| Outcome::Success),
            tune,
        );
        if i == 0 {
            engine_rps = rps;
        }
        println!(
            "{label:<38} {n} records, {rps:>9.0} records/s = {:.2} of the floor",
            rps / floor_rps
        );
    }

    // `BENCH_ONLY=engine` stops here, for profiling the engine alone.
    if std::env::var("BENCH_ONLY").as_deref() == Ok("engine") {
        return;
    }

    let answerer = dir.join("answer.py");
    std::fs::write(
        &answerer,
        "import json, sys\nfor line in sys.stdin:\n    sys.stdout.write(json.dumps({\"id\": json.loads(line)[\"id\"], \"code\": 0}) + \"\\n\")\n    sys.stdout.flush()\n",
    )
    .unwrap();
    copy(&source, &work);
    let mut batch = command_handler(
        &dir,
        &["python3", answerer.to_str().unwrap()],
        HandlerMode::Batch,
    );
    let (batch_rps, n) = tick(&work, batch.as_mut());
    drop(batch);
    println!(
        "batch handler (python3 answering):   {n} records, {batch_rps:>9.0} records/s = {:.2} of the engine",
        batch_rps / engine_rps
    );

    // Per record, one process each: a smaller band, as it is slow.
    let small = dir.join("small.db");
    generate(&small, 40_000);
    let mut per_record = command_handler(&dir, &["/bin/true"], HandlerMode::PerRecord);
    let (cmd_rps, n) = tick(&small, per_record.as_mut());
    println!("per-record command (/bin/true):      {n} records, {cmd_rps:>9.0} records/s");

    let script = dir.join("by_hand.py");
    std::fs::write(
        &script,
        r#"import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1])
start = time.perf_counter()
rows = db.execute("SELECT ID FROM BACKLOG WHERE DATE_INSERTED >= ? AND DATE_INSERTED < ? AND STATUS IN ('NEW', 'ERROR') ORDER BY DATE_INSERTED DESC", (sys.argv[2], sys.argv[3])).fetchall()
for (i,) in rows:
    db.execute("UPDATE BACKLOG SET STATUS = 'SUCCESS' WHERE ID = ?", (i,))
db.commit()
print(len(rows), len(rows) / (time.perf_counter() - start))
"#,
    )
    .unwrap();
    copy(&source, &work);
    let from = (now() - chrono::Duration::days(32))
        .format("%Y-%m-%d %H:%M:%S")
        .to_string();
    let to = (now() - chrono::Duration::days(1))
        .format("%Y-%m-%d %H:%M:%S")
        .to_string();
    let out = std::process::Command::new("python3")
        .args([script.to_str().unwrap(), work.to_str().unwrap(), &from, &to])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let mut words = text.split_whitespace();
    let (n, py_rps): (u64, f64) = (
        words.next().unwrap().parse().unwrap(),
        words.next().unwrap().parse().unwrap(),
    );
    println!(
        "by hand (Python sqlite3, one txn):   {n} records, {py_rps:>9.0} records/s; the engine is {:.2}× it",
        engine_rps / py_rps
    );

    // Memory must not grow with the backlog: records are read a page at a time. Each
    // tick runs in a process of its own, on a database generated beforehand, so the
    // peak is the tick's.
    let mut peaks = Vec::new();
    for due in [1_000u64, 1_000_000] {
        // The table spans 400 days and the band 31 of them: 400/31 × N rows put N in it.
        let path = dir.join(format!("memory-{due}.db"));
        generate(&path, due * 400 / 31);
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .env("BENCH_MEMORY", &path)
            .output()
            .unwrap();
        let v: Vec<u64> = String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .map(|w| w.parse().unwrap())
            .collect();
        println!(
            "memory, a tick over {:>7} due records: peak {:>6} KiB",
            v[0], v[1]
        );
        peaks.push(v[1]);
        let _ = std::fs::remove_file(&path);
    }
    println!(
        "memory, 1,000,000 due against 1,000:  {:.2}×",
        peaks[1] as f64 / peaks[0] as f64
    );

    // An empty band: the cost must follow the band, not the table.
    for rows in [10_000u64, 10_000_000] {
        let path = dir.join(format!("empty-{rows}.db"));
        generate(&path, rows);
        let mut store = SqliteStore::open(&path, Duration::from_secs(30), table()).unwrap();
        // 500 days back: the band (1d, 32d] then lies before every record.
        let mut opts = TickOptions::new(
            Duration::from_secs(32 * DAY),
            now() - chrono::Duration::days(500),
        );
        opts.dry_run = true;
        let mut times = Vec::new();
        for _ in 0..20 {
            let started = Instant::now();
            let s = process_backlog(
                &schedule(),
                &table(),
                &mut store,
                &mut FnHandler(|_: &backlog::Record| Outcome::Success),
                &opts,
                &mut |_| {},
            )
            .unwrap();
            assert_eq!(s.selected, 0);
            times.push(started.elapsed().as_secs_f64() * 1e6);
        }
        times.sort_by(f64::total_cmp);
        println!(
            "empty band, {rows:>10} rows:           median {:>7.0} µs per tick (20 ticks)",
            times[10]
        );
        let _ = std::fs::remove_file(&path);
    }
}

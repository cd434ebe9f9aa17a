//! What every measurement uses: the generated table, its copies, a tick, the floor.

use std::path::Path;
use std::time::{Duration, Instant};

use backlog_core::config::{HandlerConfig, HandlerMode};
use backlog_core::schedule::{Cadence, Schedule, Tier};
use backlog_core::{FnHandler, Outcome, TableConfig, TickOptions, process_backlog};
use backlog_sqlite::SqliteStore;
use chrono::{DateTime, TimeZone, Utc};
use rusqlite::{Connection, params};

pub(crate) const DAY: u64 = 86_400;

pub(crate) fn cpu() -> f64 {
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 / 1e6;
    t(u.ru_utime) + t(u.ru_stime)
}

/// About the most trivial batch handler: perl, rewriting each line to its answer as it
/// comes, its output flushed per line.
pub(crate) const PERL_ANSWERER: &str =
    r#"$| = 1; print "{\"id\":$1,\"code\":0}\n" if /^\{"id":([^,]*),/"#;

pub(crate) fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 21, 12, 0, 0).unwrap()
}

/// `rows` records spread evenly over 400 days before `now`, 90 % pending, with an
/// index on the inserted-at column and one on the status.
pub(crate) fn generate(path: &Path, rows: u64) {
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

pub(crate) fn copy(from: &Path, to: &Path) {
    let db = Connection::open(from).unwrap();
    db.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")
        .unwrap();
    drop(db);
    std::fs::copy(from, to).unwrap();
    // On disk before the clock starts: a commit's fsync would otherwise also flush
    // the copy, by however much of it the kernel had not yet written back.
    std::fs::File::open(to).unwrap().sync_all().unwrap();
}

/// Tiers whose second band, ages (1d, 32d], holds about 7.75 % of a 400-day table.
pub(crate) fn schedule() -> Schedule {
    let tier = |days: u64| {
        Tier::new(
            Duration::from_secs(days * DAY),
            Cadence::Every(Duration::from_secs(3600)),
        )
    };
    let mut schedule = Schedule::new(vec![tier(1), tier(32)]);
    schedule.limit = u64::MAX;
    schedule
}

pub(crate) fn table() -> TableConfig {
    TableConfig::new("BACKLOG", "ID", "STATUS", "DATE_INSERTED")
}

/// One tick of the 32d tier with `handler`; records per second and records handled.
pub(crate) fn tick(path: &Path, handler: &mut dyn backlog_core::Handler) -> (f64, u64) {
    tick_with(path, handler, |_| {})
}

/// The same, with the tick's options tuned.
pub(crate) fn tick_with(
    path: &Path,
    handler: &mut dyn backlog_core::Handler,
    tune: impl Fn(&mut TickOptions),
) -> (f64, u64) {
    let mut store = SqliteStore::open(path, Duration::from_secs(30), table()).unwrap();
    let mut opts = TickOptions::new(Duration::from_secs(32 * DAY), now());
    tune(&mut opts);
    let started = Instant::now();
    let c0 = cpu();
    let summary = process_backlog(
        &schedule(),
        &table(),
        &mut store,
        handler,
        &opts,
        &mut |_| {},
    )
    .unwrap();
    eprintln!(
        "  engine wall {:.3} cpu {:.3} succeeded {} failed {}",
        started.elapsed().as_secs_f64(),
        cpu() - c0,
        summary.succeeded,
        summary.failed
    );
    (
        summary.selected as f64 / started.elapsed().as_secs_f64(),
        summary.selected,
    )
}

/// The floor: the same band SELECT (`columns`: `*` reads every column of each row into
/// owned values, as a handler gets them; `ID` reads the id only), then one prepared
/// UPDATE per row, in one transaction.
pub(crate) fn floor(path: &Path, columns: &str) -> (f64, u64) {
    let mut db = Connection::open(path).unwrap();
    let started = Instant::now();
    let c0 = cpu();
    let tx = db.transaction().unwrap();
    let ids: Vec<i64> = {
        let mut select = tx
            .prepare(&format!("SELECT {columns} FROM BACKLOG WHERE DATE_INSERTED >= ?1 AND DATE_INSERTED < ?2 AND STATUS IN ('NEW', 'ERROR') ORDER BY DATE_INSERTED DESC, ID DESC"))
            .unwrap();
        let width = select.column_count();
        let from = (now() - chrono::Duration::days(32))
            .format("%Y-%m-%d %H:%M:%S")
            .to_string();
        let to = (now() - chrono::Duration::days(1))
            .format("%Y-%m-%d %H:%M:%S")
            .to_string();
        select
            .query_map(params![from, to], |r| {
                let row: Vec<rusqlite::types::Value> =
                    (0..width).map(|i| r.get(i)).collect::<Result<_, _>>()?;
                std::hint::black_box(&row);
                r.get(0)
            })
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
    eprintln!(
        "  floor wall {:.3} cpu {:.3}",
        started.elapsed().as_secs_f64(),
        cpu() - c0
    );
    (
        ids.len() as f64 / started.elapsed().as_secs_f64(),
        ids.len() as u64,
    )
}

pub(crate) fn command_handler(
    dir: &Path,
    command: &[&str],
    mode: HandlerMode,
) -> Box<dyn backlog_core::Handler> {
    let mut config = HandlerConfig::new(command.iter().map(|s| s.to_string()).collect());
    config.mode = mode;
    backlog_core::handler::from_config(&config, dir, "BACKLOG").unwrap()
}

/// The median of `v` (sorted in place).
pub(crate) fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The process's peak resident memory, from Linux's /proc.
pub(crate) fn peak_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// `BENCH_MEMORY=FILE`: in a process of its own, one tick over the database FILE;
/// prints the records handled and the process's peak resident memory in KiB.
pub(crate) fn memory_child(path: &Path) {
    let (_, n) = tick(
        path,
        &mut FnHandler(|_: &backlog_core::Record| Outcome::Success),
    );
    println!("{n} {}", peak_kib());
}

/// The rows of `backlog_attempts` and of `backlog_tried` (records kept from later ticks)
/// in the database at `path`, after a tick.
pub(crate) fn own_rows(path: &Path) -> (u64, u64) {
    let db = Connection::open(path).unwrap();
    let count = |table: &str| {
        db.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| {
            r.get::<_, i64>(0)
        })
        .map_or(0, |n| n as u64)
    };
    (count("backlog_attempts"), count("backlog_tried"))
}

/// What two `Instant::now()` readings cost here, in nanoseconds: the inline path
/// times each record with them.
pub(crate) fn two_readings_ns() -> f64 {
    let n = 2_000_000u32;
    let started = Instant::now();
    for _ in 0..n {
        let t = std::hint::black_box(Instant::now());
        std::hint::black_box(t.elapsed());
    }
    started.elapsed().as_secs_f64() * 1e9 / f64::from(n)
}

//! The fleet as a user runs it: R `backlog run` processes (the real binary, start-up
//! included) started together on one server's table, against the ideal and, with a
//! no-op handler, against the workers a user writes by hand for a fleet.
//! `cargo build --release -F cli && BENCH_PG=postgres://postgres:secret@127.0.0.1:5432/postgres
//! cargo run --release --example bench_fleet` (a URL of a user who may create
//! databases; the bench creates and drops `backlog_bench_fleet`).
//!
//! The table: `BENCH_RECORDS` (4,000) pending records, inserted evenly between 2 and 20
//! hours before the pinned clock, an index on inserted-at; every runner ticks the 1d
//! tier, so the band is the whole table. The handler is a batch handler
//! (`examples/bench_handler.rs`, built beside this one) that answers each line
//! `BENCH_WAIT_MS` (50) after it read it, however many it holds, so a
//! runner with `concurrency = BENCH_LANES` (16) and `batch_size = BENCH_BATCH` (1) has
//! lanes × batch records in flight: the ideal is R × lanes × batch / wait.
//!
//! - `BENCH_RUNNERS` (1,2,4,8): the runner counts, each run from the same statuses.
//! - `BENCH_WAIT_MS=0` with a large `BENCH_BATCH` (500) is the no-op handler; the
//!   same counts of hand-written workers are then run too (each a thread on its own
//!   connection looping `SELECT … WHERE status = 'NEW' ORDER BY inserted_at DESC LIMIT
//!   500 FOR UPDATE SKIP LOCKED`, one UPDATE of those ids, commit); the table then has
//!   an index on (status, inserted-at) too, as a user would add for them.
//! - `BENCH_BIN_OLD=path`: another binary, run beside this one in every round (old
//!   first in odd rounds, second in even ones), for a ratio measured side by side
//!   (both must know the tool's tables at the same schema version); `BENCH_BIN=path`
//!   runs another binary instead of `target/release/backlog`.
//! - `BENCH_BY_HAND` (the runner counts): the worker counts written by hand to run
//!   with a no-op handler; empty for none.
//! - `BENCH_LINKS` (direct): `direct`, `slow` or both (`direct,slow`): how the runners
//!   reach the server. `slow` is the servers' tests' link (`tests/cli/servers/link.rs`,
//!   this example's too): 100 ms added each way, a 200 ms round trip, and every 5 s
//!   one connection stalled for 1.5 s. With both, the slow line says its fraction of
//!   the direct one's rate, measured in the same round.
//! - `BENCH_ROUNDS` (2); `BENCH_KEEP=1` leaves the database behind.
//!
//! Each run prints records a second (records the runners' summaries say succeeded,
//! over the wall time from the first start to the last exit), the fraction of the
//! ideal, each runner's share (min / max against the mean), and what was left pending.
//! The handler's log gives any record answered twice. No figure is asserted.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Instant;

use chrono::{DateTime, TimeZone, Utc};

// `Shape::DIRECT` is the partition tests' relay, not used here.
#[allow(dead_code)]
#[path = "../tests/cli/servers/link.rs"]
mod link;

/// The slow link of `BENCH_LINKS=slow`: the servers' tests' (`servers::slow_link`).
const SLOW: link::Shape = link::Shape {
    delay: std::time::Duration::from_millis(100),
    stall_every: Some(std::time::Duration::from_secs(5)),
    stall_for: std::time::Duration::from_millis(1500),
};

const DB: &str = "backlog_bench_fleet";

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 21, 12, 0, 0).unwrap()
}

fn var(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_string())
}

fn number(name: &str, default: u64) -> u64 {
    var(name, &default.to_string())
        .parse()
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn with_db(url: &str, db: &str) -> String {
    let (base, query) = url.split_once('?').unwrap_or((url, ""));
    let base = base.rsplit_once('/').map_or(base, |(b, _)| b);
    match query {
        "" => format!("{base}/{db}"),
        q => format!("{base}/{db}?{q}"),
    }
}

struct Fleet {
    dir: PathBuf,
    handler: PathBuf,
    records: u64,
    lanes: u64,
    batch: u64,
    wait_ms: u64,
}

impl Fleet {
    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Writes the schedule file `name`, whose runners reach the server at `url`.
    fn schedule(&self, url: &str, name: &str) -> PathBuf {
        let text = format!(
            r#"[database]
url = "{url}"

[table]
name = "BACKLOG"
id = "ID"
status = "STATUS"
inserted_at = "DATE_INSERTED"

[handler]
command = ["{handler}"]
mode = "batch"
batch_size = {batch}
concurrency = {lanes}
timeout = "60s"

[[tier]]
window = "1d"
every = "5m"
limit = 10000000
"#,
            batch = self.batch,
            lanes = self.lanes,
            handler = self.handler.display(),
        );
        let path = self.path(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    fn runner(&self, bin: &Path, now: DateTime<Utc>, schedule: &str) -> Command {
        let mut cmd = Command::new(bin);
        cmd.current_dir(&self.dir)
            .args(["run", "--window", "1d", "--json", "-s", schedule])
            .args(["--now", &now.to_rfc3339()])
            .env("BENCH_LOG", self.path("handler.log"))
            .env("BENCH_WAIT_MS", self.wait_ms.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd
    }

    /// Runs `runners` processes of `bin` at once on the schedule file `schedule`;
    /// returns the wall seconds, each runner's count of records that succeeded, and
    /// when the last runner ended.
    fn run(&self, bin: &Path, runners: usize, schedule: &str) -> Run {
        let _ = std::fs::remove_file(self.path("handler.log"));
        let unix_start = std::time::SystemTime::now();
        let started = Instant::now();
        let children: Vec<_> = (0..runners)
            .map(|_| self.runner(bin, now(), schedule).spawn().unwrap())
            .collect();
        // Each read on its own thread: a runner whose pipe filled would wait for ever.
        let outs: Vec<Output> = children
            .into_iter()
            .map(|c| std::thread::spawn(move || c.wait_with_output().unwrap()))
            .collect::<Vec<_>>()
            .into_iter()
            .map(|t| t.join().unwrap())
            .collect();
        let secs = started.elapsed().as_secs_f64();
        let each = outs
            .iter()
            .map(|out| {
                let summary: serde_json::Value = serde_json::from_slice(&out.stdout)
                    .unwrap_or_else(|_| {
                        panic!(
                            "a runner failed ({}): {}",
                            out.status,
                            String::from_utf8_lossy(&out.stderr)
                        )
                    });
                assert!(
                    out.status.success(),
                    "a runner failed ({}): {}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr)
                );
                summary["succeeded"].as_u64().unwrap_or(0)
            })
            .collect();
        let start_ms = unix_start
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as f64;
        let log = std::fs::read_to_string(self.path("handler.log")).unwrap_or_default();
        let mut ids = Vec::new();
        let mut times = Vec::new();
        for line in log.lines() {
            let (id, ms) = line.split_once(' ').unwrap_or((line, "0"));
            ids.push(id);
            times.push((ms.parse::<f64>().unwrap_or(0.0) - start_ms) / 1000.0);
        }
        let all = ids.len();
        ids.sort_unstable();
        ids.dedup();
        times.sort_by(f64::total_cmp);
        let at = |q: f64| {
            times
                .get(((times.len() as f64 - 1.0) * q) as usize)
                .copied()
        };
        Run {
            secs,
            each,
            twice: all - ids.len(),
            answers: at(0.0)
                .zip(at(0.5))
                .zip(at(1.0))
                .map(|((a, b), c)| [a, b, c]),
        }
    }
}

/// What one run of the fleet did.
struct Run {
    secs: f64,
    each: Vec<u64>,
    /// Records the handler answered more than once.
    twice: usize,
    /// Seconds from the start to the first answer, the median one and the last.
    answers: Option<[f64; 3]>,
}

fn reset(db: &mut postgres::Client) {
    // One statement each: VACUUM cannot run in a transaction.
    for sql in [
        r#"UPDATE "BACKLOG" SET "STATUS" = 'NEW' WHERE "STATUS" <> 'NEW'"#,
        "DELETE FROM backlog.backlog_claims",
        r#"VACUUM ANALYZE "BACKLOG""#,
        // This session's counts of the rows it visited reported now, not in the run.
        // (PostgreSQL 15 and later; before, the counts come within a second anyway.)
        "DO $$ BEGIN PERFORM pg_stat_force_next_flush(); EXCEPTION WHEN undefined_function THEN NULL; END $$",
    ] {
        db.batch_execute(sql).unwrap();
    }
}

/// Rows the table's scans have visited so far (index fetches and sequential reads), by
/// the server's statistics: what the runners' pages cost the server, per record.
fn visited(db: &mut postgres::Client) -> i64 {
    // The runners' sessions report theirs as they end; this one's snapshot is fresh.
    db.batch_execute("SELECT pg_stat_clear_snapshot()").unwrap();
    db.query_one(
        "SELECT coalesce(idx_tup_fetch, 0) + coalesce(seq_tup_read, 0) FROM pg_stat_user_tables WHERE relname = 'BACKLOG'",
        &[],
    )
    .unwrap()
    .get(0)
}

fn left(db: &mut postgres::Client) -> i64 {
    db.query_one(
        r#"SELECT count(*) FROM "BACKLOG" WHERE "STATUS" = 'NEW'"#,
        &[],
    )
    .unwrap()
    .get(0)
}

/// `workers` threads as a user writes them, each on its own connection, until the
/// table has nothing pending; returns the wall seconds and each worker's count.
fn by_hand(url: &str, workers: usize) -> (f64, Vec<u64>) {
    let started = Instant::now();
    let threads: Vec<_> = (0..workers)
        .map(|_| {
            let url = url.to_string();
            std::thread::spawn(move || {
                let mut db = postgres::Client::connect(&url, postgres::NoTls).unwrap();
                let mut done = 0u64;
                loop {
                    let mut tx = db.transaction().unwrap();
                    let ids: Vec<i64> = tx
                        .query(
                            r#"SELECT "ID" FROM "BACKLOG" WHERE "STATUS" = 'NEW'
                               ORDER BY "DATE_INSERTED" DESC LIMIT 500 FOR UPDATE SKIP LOCKED"#,
                            &[],
                        )
                        .unwrap()
                        .iter()
                        .map(|r| r.get(0))
                        .collect();
                    if ids.is_empty() {
                        tx.commit().unwrap();
                        return done;
                    }
                    tx.execute(
                        r#"UPDATE "BACKLOG" SET "STATUS" = 'SUCCESS' WHERE "ID" = ANY ($1)"#,
                        &[&ids],
                    )
                    .unwrap();
                    tx.commit().unwrap();
                    done += ids.len() as u64;
                }
            })
        })
        .collect();
    let each = threads.into_iter().map(|t| t.join().unwrap()).collect();
    (started.elapsed().as_secs_f64(), each)
}

/// Prints a run's line; returns its rate (records a second).
fn report(
    label: &str,
    secs: f64,
    each: &[u64],
    (ideal, direct): (Option<f64>, Option<f64>),
    left: i64,
    twice: usize,
) -> f64 {
    let n: u64 = each.iter().sum();
    let rate = n as f64 / secs;
    let mean = n as f64 / each.len() as f64;
    let (min, max) = (
        each.iter().min().copied().unwrap_or(0),
        each.iter().max().copied().unwrap_or(0),
    );
    let of_ideal = ideal.map_or(String::new(), |i| format!(", {:.2} of ideal", rate / i));
    let of_direct = direct.map_or(String::new(), |d| format!(", {:.2} of direct", rate / d));
    println!(
        "  {label}: {n} records in {secs:.2} s, {rate:>8.0}/s{of_ideal}{of_direct}; per runner min {min} ({:.2} of mean) max {max}; {left} left pending, {twice} answered twice",
        min as f64 / mean.max(1.0)
    );
    rate
}

fn main() {
    let admin = std::env::var("BENCH_PG").unwrap_or_else(|_| {
        eprintln!("set BENCH_PG to a URL of a user who may create databases");
        std::process::exit(2)
    });
    let bin = std::env::var_os("BENCH_BIN")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::current_exe()
                .unwrap()
                .parent()
                .and_then(Path::parent)
                .map(|d| d.join("backlog"))
        })
        .filter(|b| b.exists())
        .unwrap_or_else(|| {
            eprintln!(
                "target/release/backlog not found: build it first with `cargo build --release -F cli`"
            );
            std::process::exit(2)
        });
    let handler = std::env::current_exe()
        .unwrap()
        .with_file_name("bench_handler");
    if !handler.exists() {
        eprintln!(
            "{} not found: build it with `cargo build --release -F cli --examples`",
            handler.display()
        );
        std::process::exit(2)
    }
    let old = std::env::var("BENCH_BIN_OLD").ok().map(PathBuf::from);
    let dir = PathBuf::from(var("BENCH_DIR", "target/bench-fleet"));
    std::fs::create_dir_all(&dir).unwrap();
    let wait_ms = number("BENCH_WAIT_MS", 50);
    let fleet = Fleet {
        dir: std::fs::canonicalize(&dir).unwrap(),
        handler,
        records: number("BENCH_RECORDS", 4000),
        lanes: number("BENCH_LANES", 16),
        batch: number("BENCH_BATCH", if wait_ms == 0 { 500 } else { 1 }),
        wait_ms,
    };
    let runners: Vec<usize> = var("BENCH_RUNNERS", "1,2,4,8")
        .split(',')
        .map(|r| r.trim().parse().unwrap())
        .collect();
    let rounds = number("BENCH_ROUNDS", 2);
    let links: Vec<String> = var("BENCH_LINKS", "direct")
        .split(',')
        .map(|l| l.trim().to_string())
        .collect();
    if let Some(other) = links
        .iter()
        .find(|l| !["direct", "slow"].contains(&l.as_str()))
    {
        eprintln!("BENCH_LINKS: {other:?} is not a link; use direct, slow or both");
        std::process::exit(2)
    }
    let by_hand_counts: Vec<usize> = var("BENCH_BY_HAND", &var("BENCH_RUNNERS", "1,2,4,8"))
        .split(',')
        .filter_map(|r| r.trim().parse().ok())
        .collect();

    let mut server = postgres::Client::connect(&admin, postgres::NoTls).unwrap();
    for sql in [
        format!("DROP DATABASE IF EXISTS {DB} WITH (FORCE)"),
        format!("CREATE DATABASE {DB}"),
    ] {
        server.batch_execute(&sql).unwrap();
    }
    let url = with_db(&admin, DB);
    let mut db = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    db.batch_execute(
        r#"CREATE TABLE "BACKLOG" ("ID" bigint PRIMARY KEY, "STATUS" text NOT NULL,
               "DATE_INSERTED" timestamptz NOT NULL, "PAYLOAD" text);
           CREATE INDEX "BACKLOG_BY_DATE" ON "BACKLOG" ("DATE_INSERTED")"#,
    )
    .unwrap();
    let span: i64 = 18 * 3600 * 1000;
    db.execute(
        r#"INSERT INTO "BACKLOG" SELECT i, 'NEW',
               $1::timestamptz - make_interval(secs => 7200 + (i * $2::int8 / $3::int8) / 1000.0), '{"order": 1}'
           FROM generate_series(1, $3::int8) AS i"#,
        &[&now(), &span, &(fleet.records as i64)],
    )
    .unwrap();
    if wait_ms == 0 {
        // The index a user adds for the workers by hand; the runners have it too.
        db.batch_execute(
            r#"CREATE INDEX "BACKLOG_BY_STATUS_DATE" ON "BACKLOG" ("STATUS", "DATE_INSERTED")"#,
        )
        .unwrap();
    }
    // The tool's tables, made by a first tick as after a database's first run.
    fleet.schedule(&url, "direct.toml");
    let slow = link::SlowLink::start(
        std::net::Ipv4Addr::LOCALHOST.into(),
        link::server_of(&url),
        SLOW,
    );
    fleet.schedule(&slow.instead_of(&url, &url), "slow.toml");
    let made = fleet
        .runner(&bin, now() - chrono::Duration::days(365), "direct.toml")
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    println!(
        "backlog: {}, {} cores; {} records, {} lanes × batch {} a runner, {} ms a record",
        bin.display(),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        fleet.records,
        fleet.lanes,
        fleet.batch,
        fleet.wait_ms
    );
    let binaries: Vec<(&str, &Path)> = match &old {
        Some(old) => vec![("old", old.as_path()), ("new", bin.as_path())],
        None => vec![("backlog", bin.as_path())],
    };
    for round in 1..=rounds {
        println!("round {round}");
        for &r in &runners {
            // A batch handler with `concurrency = 1` holds two batches (pipelined).
            let lanes = fleet.lanes.max(2);
            let ideal = (fleet.wait_ms > 0)
                .then(|| (r as u64 * lanes * fleet.batch) as f64 * 1000.0 / fleet.wait_ms as f64);
            let mut order = binaries.clone();
            if round % 2 == 0 {
                order.reverse();
            }
            for (name, bin) in order {
                let mut direct = None;
                for link in &links {
                    reset(&mut db);
                    let before = visited(&mut db);
                    let run = fleet.run(bin, r, &format!("{link}.toml"));
                    std::thread::sleep(std::time::Duration::from_millis(500));
                    let visits = visited(&mut db) - before;
                    let label = format!(
                        "{name}, {link}, {r:>3} runner{}",
                        if r == 1 { " " } else { "s" }
                    );
                    let of_direct = if link == "slow" { direct } else { None };
                    let rate = report(
                        &label,
                        run.secs,
                        &run.each,
                        (ideal, of_direct),
                        left(&mut db),
                        run.twice,
                    );
                    if link == "direct" {
                        direct = Some(rate);
                    }
                    if let Some([first, half, last]) = run.answers {
                        println!(
                            "    answers at {first:.2} s (first), {half:.2} s (half), {last:.2} s (last); the last runner ended at {:.2} s; rows visited {:.1} a record",
                            run.secs,
                            visits as f64 / fleet.records as f64
                        );
                    }
                }
            }
            if fleet.wait_ms == 0 && by_hand_counts.contains(&r) {
                reset(&mut db);
                let before = visited(&mut db);
                let (secs, each) = by_hand(&url, r);
                let label = format!("by hand, {r:>3} worker{}", if r == 1 { " " } else { "s" });
                report(&label, secs, &each, (None, None), left(&mut db), 0);
                std::thread::sleep(std::time::Duration::from_millis(500));
                let visits = visited(&mut db) - before;
                println!(
                    "    rows visited {:.1} a record",
                    visits as f64 / fleet.records as f64
                );
            }
        }
    }
    drop(db);
    println!("the slow link stalled {} connections", slow.stalls());
    if std::env::var_os("BENCH_KEEP").is_none() {
        server
            .batch_execute(&format!("DROP DATABASE {DB} WITH (FORCE)"))
            .unwrap();
    }
}

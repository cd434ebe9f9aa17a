//! Benchmarks, measured side by side in one run: `cargo run --release --example bench`.
//!
//! Prints the figures BENCHMARKS.md records. Every measurement runs on a fresh copy of
//! the same generated database, so each starts from the same pending records.
//!
//! 1. The engine against the floor: one tick over a band of about 70,000 pending
//!    records with an in-process handler that does nothing, against the same SELECT
//!    (every column of each row read into owned values, as a handler gets them) and one
//!    prepared UPDATE per row in one transaction, written directly with rusqlite. The
//!    machine is shared and its speed drifts, so the floor and the engine alternate for
//!    `BENCH_ROUNDS` rounds (5) and the median of the rounds' ratios is the figure.
//! 2. The batch handler with a trivial process, the per-record command handler, and the
//!    tick a user writes by hand today (Python's sqlite3 module).
//! 3. A tick over an empty band of a 10,000-row and a 10,000,000-row table.
//! 4. The history of attempts (`backlog_attempts`) against the engine without it: the
//!    same no-op tick with `[history]` off (`keep = 0`), as by default (failures only,
//!    so a tick of successes writes no attempt and pays for timing each record), with
//!    `record = "all"` (an attempt row a record), and with a handler that fails every
//!    record (an attempt row a record, and the record kept from later ticks), also with
//!    the history off to tell the two apart. Rounds as for the engine, the floor first,
//!    the ticks in an order that turns by one each round.
//!
//! `BENCH_ONLY=engine` runs only the floor and the engine, `BENCH_ONLY=history` only
//! the floor and the ticks of the history, `BENCH_ONLY=batch` stops after the batch
//! handlers. `BENCH_ONE=engine` (or `floor`, `perl`, or a tick of the history bench:
//! `off`, `all`, `fails`) runs one tick (or the floor) once on a fresh copy, for a
//! profiler:
//! `BENCH_ONE=engine perf record -g target/release/examples/bench`; `BENCH_ONE=fixed`
//! times ticks of 1 and 1,000 records, what a tick costs beyond its records. Each tick
//! and floor also prints its wall and CPU seconds on stderr.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use backlog::config::{HandlerConfig, HandlerMode, HistoryConfig, HistoryRecord};
use backlog::schedule::{Cadence, Schedule, Tier};
use backlog::store::SqliteStore;
use backlog::{BandMode, FnHandler, Outcome, TableConfig, TickOptions, process_backlog};
use chrono::{DateTime, TimeZone, Utc};
use rusqlite::{Connection, params};

const DAY: u64 = 86_400;

fn cpu() -> f64 {
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 / 1e6;
    t(u.ru_utime) + t(u.ru_stime)
}

/// About the most trivial batch handler: perl, rewriting each line to its answer as it
/// comes, its output flushed per line.
const PERL_ANSWERER: &str = r#"$| = 1; print "{\"id\":$1,\"code\":0}\n" if /^\{"id":([^,]*),/"#;

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
    // On disk before the clock starts: a commit's fsync would otherwise also flush
    // the copy, by however much of it the kernel had not yet written back.
    std::fs::File::open(to).unwrap().sync_all().unwrap();
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
fn floor(path: &Path, columns: &str) -> (f64, u64) {
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

fn command_handler(dir: &Path, command: &[&str], mode: HandlerMode) -> Box<dyn backlog::Handler> {
    let mut config = HandlerConfig::new(command.iter().map(|s| s.to_string()).collect());
    config.mode = mode;
    backlog::handler::from_config(&config, dir).unwrap()
}

/// The median of `v` (sorted in place).
fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
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

/// The rows of `backlog_attempts` and of `backlog_tried` (records kept from later ticks)
/// in the database at `path`, after a tick.
fn own_rows(path: &Path) -> (u64, u64) {
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
fn two_readings_ns() -> f64 {
    let n = 2_000_000u32;
    let started = Instant::now();
    for _ in 0..n {
        let t = std::hint::black_box(Instant::now());
        std::hint::black_box(t.elapsed());
    }
    started.elapsed().as_secs_f64() * 1e9 / f64::from(n)
}

/// A tick of the history bench: its name, whether its handler fails every record, and
/// the history it keeps.
struct HistoryCase {
    name: &'static str,
    fails: bool,
    history: HistoryConfig,
}

fn history_cases() -> Vec<HistoryCase> {
    let mut off = HistoryConfig::default();
    off.keep = Duration::ZERO;
    let mut all = HistoryConfig::default();
    all.record = HistoryRecord::All;
    vec![
        HistoryCase {
            name: "history off (keep = 0)",
            fails: false,
            history: off.clone(),
        },
        HistoryCase {
            name: "default (failures only)",
            fails: false,
            history: HistoryConfig::default(),
        },
        HistoryCase {
            name: "record = all",
            fails: false,
            history: all,
        },
        HistoryCase {
            name: "every record fails, default",
            fails: true,
            history: HistoryConfig::default(),
        },
        HistoryCase {
            name: "every record fails, off",
            fails: true,
            history: off,
        },
    ]
}

/// The floor and the ticks of `history_cases`, `rounds` times on fresh copies of
/// `source`; prints each round, then each tick's median records/s and its ratios to
/// the history-off tick and to the floor of the same round (median, min–max).
fn history_bench(source: &Path, work: &Path, rounds: usize) {
    let cases = history_cases();
    // Per case: records/s, ratio to off, ratio to the floor.
    let mut figures: Vec<[Vec<f64>; 3]> = cases.iter().map(|_| Default::default()).collect();
    let mut floors = Vec::new();
    for round in 0..rounds {
        copy(source, work);
        let (floor_rps, n) = floor(work, "*");
        floors.push(floor_rps);
        let mut rps = vec![0.0; cases.len()];
        let mut order = Vec::new();
        for k in 0..cases.len() {
            let i = (round + k) % cases.len();
            let case = &cases[i];
            copy(source, work);
            let tune = |o: &mut TickOptions| o.history = case.history.clone();
            let (r, m) = if case.fails {
                tick_with(
                    work,
                    &mut FnHandler(|_: &backlog::Record| Outcome::Error),
                    tune,
                )
            } else {
                tick_with(
                    work,
                    &mut FnHandler(|_: &backlog::Record| Outcome::Success),
                    tune,
                )
            };
            assert_eq!(n, m, "every tick and the floor cover the same band");
            let (attempts, tried) = own_rows(work);
            eprintln!(
                "  {}: {attempts} attempt rows, {tried} kept from later ticks",
                case.name
            );
            rps[i] = r;
            order.push(i + 1);
        }
        println!(
            "round {}: {n} records; floor {floor_rps:>7.0}/s; ticks in the order {order:?}",
            round + 1
        );
        for (i, case) in cases.iter().enumerate() {
            let (of_off, of_floor) = (rps[i] / rps[0], rps[i] / floor_rps);
            println!(
                "  {}. {:<28} {:>7.0}/s = {of_off:.3} of off, {of_floor:.3} of the floor",
                i + 1,
                case.name,
                rps[i]
            );
            figures[i][0].push(rps[i]);
            figures[i][1].push(of_off);
            figures[i][2].push(of_floor);
        }
    }
    let spread = |v: &[f64]| {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        (v[v.len() / 2], v[0], v[v.len() - 1])
    };
    let (floor_median, floor_min, floor_max) = spread(&floors);
    println!(
        "history of attempts over {rounds} rounds (median, min–max): floor {floor_median:.0}/s ({floor_min:.0}–{floor_max:.0})"
    );
    for (case, [rps, of_off, of_floor]) in cases.iter().zip(&figures) {
        let (r, r0, r1) = spread(rps);
        let (o, o0, o1) = spread(of_off);
        let (f, f0, f1) = spread(of_floor);
        println!(
            "  {:<28} {r:>7.0}/s ({r0:.0}–{r1:.0}); {o:.3} of off ({o0:.3}–{o1:.3}); {f:.3} of the floor ({f0:.3}–{f1:.3})",
            case.name
        );
    }
    let off_median = spread(&figures[0][0]).0;
    let two = two_readings_ns();
    println!(
        "two Instant::now() readings: {two:.1} ns, {:.1} % of a record's {:.0} ns with the history off",
        two * off_median / 1e7,
        1e9 / off_median
    );
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
    // Absolute: handlers run in this folder and are given paths inside it.
    let dir = std::fs::canonicalize(&dir).unwrap();
    let source = dir.join("million.db");
    let work = dir.join("work.db");
    if let Ok(one) = std::env::var("BENCH_ONE") {
        copy(&source, &work);
        let c0 = cpu();
        match one.as_str() {
            "floor" => {
                floor(&work, "*");
            }
            "none" => {}
            "off" | "all" | "fails" => {
                let case = &history_cases()[match one.as_str() {
                    "off" => 0,
                    "all" => 2,
                    _ => 3,
                }];
                let tune = |o: &mut TickOptions| o.history = case.history.clone();
                if case.fails {
                    tick_with(
                        &work,
                        &mut FnHandler(|_: &backlog::Record| Outcome::Error),
                        tune,
                    );
                } else {
                    tick_with(
                        &work,
                        &mut FnHandler(|_: &backlog::Record| Outcome::Success),
                        tune,
                    );
                }
            }
            "perl" => {
                let mut perl =
                    command_handler(&dir, &["perl", "-ne", PERL_ANSWERER], HandlerMode::Batch);
                tick(&work, perl.as_mut());
            }
            "fixed" => {
                for (limit, first) in [
                    (1, true),
                    (1, true),
                    (1000, true),
                    (1, false),
                    (1000, false),
                ] {
                    copy(&source, &work);
                    if !first {
                        // The tool's tables made beforehand, as after a database's first tick.
                        let mut store =
                            SqliteStore::open(&work, Duration::from_secs(30), table()).unwrap();
                        backlog::store::Store::ensure_own_tables(&mut store).unwrap();
                    }
                    let t = Instant::now();
                    tick_with(
                        &work,
                        &mut FnHandler(|_: &backlog::Record| Outcome::Success),
                        |o| o.limit = Some(limit),
                    );
                    eprintln!(
                        "limit {limit}, tables made by this tick {first}: {:.1} ms",
                        t.elapsed().as_secs_f64() * 1e3
                    );
                }
            }
            _ => {
                tick(
                    &work,
                    &mut FnHandler(|_: &backlog::Record| Outcome::Success),
                );
            }
        }
        eprintln!("cpu {:.3}", cpu() - c0);
        return;
    }
    let t = Instant::now();
    generate(&source, 1_000_000);
    println!(
        "generated 1,000,000 rows over 400 days in {:.1}s",
        t.elapsed().as_secs_f64()
    );

    // The floor and the engine alternate, each on a fresh copy, and the median of
    // the rounds' ratios is the figure: the machine's speed drifts between rounds.
    let rounds: usize = std::env::var("BENCH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(5);
    let only = std::env::var("BENCH_ONLY").unwrap_or_default();
    if only == "history" {
        history_bench(&source, &work, rounds);
        return;
    }
    if only == "memory" {
        memory_and_empty_band(&dir);
        return;
    }
    type Tune = fn(&mut TickOptions);
    let engine_tick = |tune: Tune| {
        copy(&source, &work);
        tick_with(
            &work,
            &mut FnHandler(|_: &backlog::Record| Outcome::Success),
            tune,
        )
    };
    let (mut ratios, mut old_ratios, mut engine_rates) = (Vec::new(), Vec::new(), Vec::new());
    for round in 1..=rounds {
        copy(&source, &work);
        let (floor_rps, n) = floor(&work, "*");
        copy(&source, &work);
        let (ids_rps, _) = floor(&work, "ID");
        let (rps, m) = engine_tick(|_| {});
        assert_eq!(n, m, "the engine and the floor cover the same band");
        // The defaults before the span holds: pages of 200, marks in groups of 100.
        let (old_rps, _) = engine_tick(|o| {
            o.page_size = 200;
            o.mark_group = Some(100);
        });
        println!(
            "round {round}: {n} records; floor {floor_rps:>7.0}/s (ids only {ids_rps:>7.0}/s); engine {rps:>7.0}/s = {:.2} of the floor; with pages of 200 and marks per 100 {old_rps:>7.0}/s = {:.2}",
            rps / floor_rps,
            old_rps / floor_rps
        );
        ratios.push(rps / floor_rps);
        old_ratios.push(old_rps / floor_rps);
        engine_rates.push(rps);
    }
    let engine_rps = median(&mut engine_rates);
    println!(
        "engine (no-op Rust handler): median {:.2} of the floor over {rounds} rounds (min {:.2}, max {:.2}); pages of 200 and marks per 100: {:.2}",
        median(&mut ratios),
        ratios[0],
        ratios[rounds - 1],
        median(&mut old_ratios)
    );

    // `BENCH_ONLY=engine` stops here, for profiling the engine alone.
    if only == "engine" {
        return;
    }
    history_bench(&source, &work, rounds);

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
    let (batch_rps, _) = tick(&work, batch.as_mut());
    drop(batch);
    // About the most trivial process: perl, rewriting each line to its answer as it
    // comes, its output flushed per line.
    copy(&source, &work);
    let mut perl = command_handler(&dir, &["perl", "-ne", PERL_ANSWERER], HandlerMode::Batch);
    let (perl_rps, n) = tick(&work, perl.as_mut());
    drop(perl);
    let (engine_now, _) = engine_tick(|_| {});
    println!(
        "batch handler (perl answering):      {n} records, {perl_rps:>9.0} records/s = {:.2} of the engine run beside it ({engine_now:.0}/s; {:.2} of the engine's median)",
        perl_rps / engine_now,
        perl_rps / engine_rps
    );
    let (engine_now, _) = engine_tick(|_| {});
    println!(
        "batch handler (python3 answering):   {n} records, {batch_rps:>9.0} records/s = {:.2} of the engine run beside it ({engine_now:.0}/s; {:.2} of the engine's median)",
        batch_rps / engine_now,
        batch_rps / engine_rps
    );

    // `BENCH_ONLY=batch` stops here.
    if only == "batch" {
        return;
    }

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
rows = db.execute("SELECT * FROM BACKLOG WHERE DATE_INSERTED >= ? AND DATE_INSERTED < ? AND STATUS IN ('NEW', 'ERROR') ORDER BY DATE_INSERTED DESC", (sys.argv[2], sys.argv[3])).fetchall()
for row in rows:
    db.execute("UPDATE BACKLOG SET STATUS = 'SUCCESS' WHERE ID = ?", (row[0],))
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
    let (engine_now, _) = engine_tick(|_| {});
    println!(
        "by hand (Python sqlite3, one txn):   {n} records, {py_rps:>9.0} records/s; the engine beside it is {:.2}× it",
        engine_now / py_rps
    );

    memory_and_empty_band(&dir);
}

/// The memory of a tick over 1,000 and 1,000,000 due records, and the time of a tick
/// over an empty band of a small and a large table (`BENCH_ONLY=memory` runs only these).
fn memory_and_empty_band(dir: &Path) {
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

    // An empty band: the cost must follow the band, not the table. The two tables
    // take turns, 10 rounds of 20 ticks each, and the medians are compared.
    let sizes = [10_000u64, 10_000_000];
    let mut stores: Vec<SqliteStore> = sizes
        .iter()
        .map(|rows| {
            let path = dir.join(format!("empty-{rows}.db"));
            generate(&path, *rows);
            SqliteStore::open(&path, Duration::from_secs(30), table()).unwrap()
        })
        .collect();
    // 500 days back: the band (1d, 32d] then lies before every record.
    let mut opts = TickOptions::new(
        Duration::from_secs(32 * DAY),
        now() - chrono::Duration::days(500),
    );
    opts.dry_run = true;
    let mut times = [Vec::new(), Vec::new()];
    for _ in 0..10 {
        for (store, times) in stores.iter_mut().zip(&mut times) {
            for _ in 0..20 {
                let started = Instant::now();
                let s = process_backlog(
                    &schedule(),
                    &table(),
                    store,
                    &mut FnHandler(|_: &backlog::Record| Outcome::Success),
                    &opts,
                    &mut |_| {},
                )
                .unwrap();
                assert_eq!(s.selected, 0);
                times.push(started.elapsed().as_secs_f64() * 1e6);
            }
        }
    }
    let medians: Vec<f64> = times.iter_mut().map(|v| median(v)).collect();
    for (rows, m) in sizes.iter().zip(&medians) {
        println!("empty band, {rows:>10} rows:           median {m:>7.0} µs per tick (200 ticks)");
    }
    println!(
        "empty band, 10,000,000 rows against 10,000: {:.2}×",
        medians[1] / medians[0]
    );
    for rows in sizes {
        let _ = std::fs::remove_file(dir.join(format!("empty-{rows}.db")));
    }
}

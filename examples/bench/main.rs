//! Benchmarks, measured side by side in one run: `cargo run --release --example bench`.
//!
//! Prints the figures docs/benchmarks.md records. Every measurement runs on a fresh copy of
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

use backlog_core::config::HandlerMode;
use backlog_core::{FnHandler, Outcome, TickOptions, process_backlog};
use backlog_sqlite::SqliteStore;

mod common;
mod history;

use common::*;
use history::*;

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
        return run_one(&one, &dir, &source, &work);
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
    let engine_rps = engine_rounds(&source, &work, rounds);
    // `BENCH_ONLY=engine` stops here, for profiling the engine alone.
    if only == "engine" {
        return;
    }
    history_bench(&source, &work, rounds);

    batch_handlers(&dir, &source, &work, engine_rps);
    // `BENCH_ONLY=batch` stops here.
    if only == "batch" {
        return;
    }

    per_record_and_by_hand(&dir, &source, &work);
    memory_and_empty_band(&dir);
}

/// `BENCH_ONE`: one tick (or the floor) once on a fresh copy, for a profiler.
fn run_one(one: &str, dir: &Path, source: &Path, work: &Path) {
    copy(source, work);
    let c0 = cpu();
    match one {
        "floor" => {
            floor(work, "*");
        }
        "none" => {}
        "off" | "all" | "fails" => {
            let case = &history_cases()[match one {
                "off" => 0,
                "all" => 2,
                _ => 3,
            }];
            let tune = |o: &mut TickOptions| o.history = case.history.clone();
            if case.fails {
                tick_with(
                    work,
                    &mut FnHandler(|_: &backlog_core::Record| Outcome::Error),
                    tune,
                );
            } else {
                tick_with(
                    work,
                    &mut FnHandler(|_: &backlog_core::Record| Outcome::Success),
                    tune,
                );
            }
        }
        "perl" => {
            let mut perl =
                command_handler(dir, &["perl", "-ne", PERL_ANSWERER], HandlerMode::Batch);
            tick(work, perl.as_mut());
        }
        "fixed" => {
            for (limit, first) in [
                (1, true),
                (1, true),
                (1000, true),
                (1, false),
                (1000, false),
            ] {
                copy(source, work);
                if !first {
                    // The tool's tables made beforehand, as after a database's first tick.
                    let mut store =
                        SqliteStore::open(work, Duration::from_secs(30), table()).unwrap();
                    backlog_core::store::Store::ensure_own_tables(&mut store).unwrap();
                }
                let t = Instant::now();
                tick_with(
                    work,
                    &mut FnHandler(|_: &backlog_core::Record| Outcome::Success),
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
                work,
                &mut FnHandler(|_: &backlog_core::Record| Outcome::Success),
            );
        }
    }
    eprintln!("cpu {:.3}", cpu() - c0);
}

type Tune = fn(&mut TickOptions);

/// The engine's no-op tick on a fresh copy of `source`, tuned.
fn engine_tick(source: &Path, work: &Path, tune: Tune) -> (f64, u64) {
    copy(source, work);
    tick_with(
        work,
        &mut FnHandler(|_: &backlog_core::Record| Outcome::Success),
        tune,
    )
}

/// The floor and the engine alternate, each on a fresh copy, and the median of the
/// rounds' ratios is the figure: the machine's speed drifts between rounds. Returns
/// the engine's median rate.
fn engine_rounds(source: &Path, work: &Path, rounds: usize) -> f64 {
    let (mut ratios, mut old_ratios, mut engine_rates) = (Vec::new(), Vec::new(), Vec::new());
    for round in 1..=rounds {
        copy(source, work);
        let (floor_rps, n) = floor(work, "*");
        copy(source, work);
        let (ids_rps, _) = floor(work, "ID");
        let (rps, m) = engine_tick(source, work, |_| {});
        assert_eq!(n, m, "the engine and the floor cover the same band");
        // The defaults before the span holds: pages of 200, marks in groups of 100.
        let (old_rps, _) = engine_tick(source, work, |o| {
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

    engine_rps
}

/// The batch handler with a trivial process (python3, then perl), beside the engine.
fn batch_handlers(dir: &Path, source: &Path, work: &Path, engine_rps: f64) {
    let answerer = dir.join("answer.py");
    std::fs::write(
    &answerer,
    "import json, sys\nfor line in sys.stdin:\n    sys.stdout.write(json.dumps({\"id\": json.loads(line)[\"id\"], \"code\": 0}) + \"\\n\")\n    sys.stdout.flush()\n",
)
.unwrap();
    copy(source, work);
    let mut batch = command_handler(
        dir,
        &["python3", answerer.to_str().unwrap()],
        HandlerMode::Batch,
    );
    let (batch_rps, _) = tick(work, batch.as_mut());
    drop(batch);
    // About the most trivial process: perl, rewriting each line to its answer as it
    // comes, its output flushed per line.
    copy(source, work);
    let mut perl = command_handler(dir, &["perl", "-ne", PERL_ANSWERER], HandlerMode::Batch);
    let (perl_rps, n) = tick(work, perl.as_mut());
    drop(perl);
    let (engine_now, _) = engine_tick(source, work, |_| {});
    println!(
        "batch handler (perl answering):      {n} records, {perl_rps:>9.0} records/s = {:.2} of the engine run beside it ({engine_now:.0}/s; {:.2} of the engine's median)",
        perl_rps / engine_now,
        perl_rps / engine_rps
    );
    let (engine_now, _) = engine_tick(source, work, |_| {});
    println!(
        "batch handler (python3 answering):   {n} records, {batch_rps:>9.0} records/s = {:.2} of the engine run beside it ({engine_now:.0}/s; {:.2} of the engine's median)",
        batch_rps / engine_now,
        batch_rps / engine_rps
    );
}

/// The per-record command handler, and the tick a user writes by hand today
/// (Python's sqlite3 module), beside the engine.
fn per_record_and_by_hand(dir: &Path, source: &Path, work: &Path) {
    // Per record, one process each: a smaller band, as it is slow.
    let small = dir.join("small.db");
    generate(&small, 40_000);
    let mut per_record = command_handler(dir, &["/bin/true"], HandlerMode::PerRecord);
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
    copy(source, work);
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
    let (engine_now, _) = engine_tick(source, work, |_| {});
    println!(
        "by hand (Python sqlite3, one txn):   {n} records, {py_rps:>9.0} records/s; the engine beside it is {:.2}× it",
        engine_now / py_rps
    );
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
                    &mut FnHandler(|_: &backlog_core::Record| Outcome::Success),
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

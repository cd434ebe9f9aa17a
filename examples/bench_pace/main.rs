//! The issue 46 benchmark, live: `rate = "auto"` against a loopback counterpart, with
//! the real binary as a user runs it (start-up included). `cargo build --release -F cli -p
//! backlog && cargo build -p backlog --example bench_pace && BENCH_BIN=target/release/backlog
//! target/debug/examples/bench_pace` (the driver need not be a release build; without
//! `BENCH_BIN` it runs the `backlog` of its own profile).
//!
//! The counterpart (`counterpart.rs`) is a token bucket on 127.0.0.1 holding a second
//! of its capacity and answering `429` with `Retry-After: 1` beyond; the handler calls
//! it once per record with curl, a 429 being exit 75 and a `retry-after:` line (a
//! snooze: the record is not tried again in the tick). Each run is on a fresh SQLite
//! (or, with `BENCH_PG`, PostgreSQL) database of due records (all in the 1d tier's
//! band), with `runners` processes of
//! `backlog run --window 1d` started together, each with `concurrency = lanes`.
//!
//! 1. The scenario: capacity 40/s, 1,200 records, 2 runners × 16 handlers,
//!    side by side with no `rate`, a fixed `rate = "38/s"` and `rate = "auto"`.
//! 2. The raise: `rate = "auto"` over 2,400 records, the capacity raised from 40/s to
//!    80/s 10 s after the counterpart's first refusal (once the fleet found 40/s; or
//!    10 s after the start, with `BENCH_RAISE_FROM=start`, and for a fixed `rate`,
//!    which is never refused); how long from the raise
//!    until the counterpart takes 0.7 of the new capacity in a second (and in every
//!    3-second mean after), and until the fleet's pace reaches it.
//!
//! Per run: records through in the tick (marked `SUCCESS`), calls the counterpart got,
//! the share it refused, the wall time from the first start to the last exit, the
//! calls it took a second over the whole run and over the steady part (from the second
//! after its first refusal, or from `BENCH_WARMUP` seconds where none, to the last full
//! second, or to the raise) against its capacity, and the fleet's final pace
//! (`backlog_paces`).
//! The raise prints its trace: a line a second of calls taken, refused, and the pace.
//!
//! Settings (environment): `BENCH_BIN`, `BENCH_DIR` (target/bench-pace), `BENCH_PG`
//! (a PostgreSQL URL of a user who may create databases: the runs are then on the
//! database `backlog_bench_pace` there, made afresh for each and left behind),
//! `BENCH_RECORDS` (1200), `BENCH_RUNNERS` (2), `BENCH_LANES` (16), `BENCH_CAPACITY`
//! (40), `BENCH_FIXED` (38/s), `BENCH_VARIANTS` (none,fixed,auto), `BENCH_BREAKER` (10,
//! `stop_after_failures`; 0 for none), `BENCH_CALL_MS` (0: the counterpart answers at
//! once), `BENCH_WARMUP` (5), `BENCH_RAISE_RECORDS` (2400; 0 skips the raise),
//! `BENCH_RAISED` (80), `BENCH_RAISE_AT` (10), `BENCH_RAISE_FROM` (refusal, or start),
//! `BENCH_RAISE_VARIANTS` (auto),
//! `BENCH_TRACE=1` (print the first scenario's traces too), `BENCH_ROUNDS` (1).
//! No figure is asserted.

mod counterpart;
mod database;
mod fleet;

use std::path::{Path, PathBuf};
use std::time::Duration;

use counterpart::{Capacities, Counterpart, Second};
use fleet::{Fleet, Run};

fn var(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_string())
}

fn number(name: &str, default: f64) -> f64 {
    var(name, &default.to_string())
        .parse()
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn list(name: &str, default: &str) -> Vec<String> {
    var(name, default)
        .split(',')
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect()
}

/// The `[handler]` line of a variant.
fn rate_line(variant: &str, fixed: &str) -> String {
    match variant {
        "none" => String::new(),
        "fixed" => format!("rate = \"{fixed}\""),
        "auto" => "rate = \"auto\"".into(),
        other => panic!("BENCH_VARIANTS: {other} is not none, fixed or auto"),
    }
}

fn label(variant: &str, fixed: &str) -> String {
    match variant {
        "fixed" => format!("fixed {fixed}"),
        other => other.to_string(),
    }
}

/// Calls taken a second over the full seconds `from..to` of the trace, if any.
fn mean_took(trace: &[Second], from: usize, to: usize) -> Option<f64> {
    let to = to.min(trace.len());
    (to > from)
        .then(|| trace[from..to].iter().map(|s| s.took as f64).sum::<f64>() / (to - from) as f64)
}

/// The last full second of a trace (the last bucket is the run's partial end).
fn full_seconds(trace: &[Second]) -> usize {
    trace.len().saturating_sub(1)
}

/// One run's line; its steady part the full seconds `steady` of the trace.
fn row(
    name: &str,
    records: u64,
    run: &Run,
    trace: &[Second],
    steady: (usize, usize),
    capacity: f64,
) {
    let took: u32 = trace.iter().map(|s| s.took).sum();
    let refused: u32 = trace.iter().map(|s| s.refused).sum();
    let calls = took + refused;
    let (steady_text, of) = match mean_took(trace, steady.0, steady.1) {
        Some(s) => (
            format!("{s:.1}/s ({}–{} s)", steady.0, steady.1),
            format!("{:.2}", s / capacity),
        ),
        None => ("-".into(), "-".into()),
    };
    let pace = run
        .paces
        .last()
        .map_or("-".into(), |(_, p)| format!("{p:.1}/s"));
    let tripped = match run.tripped {
        0 => "no".to_string(),
        n => format!("{n} of {}", run.runners),
    };
    println!(
        "{name:<11} {:>5} {:>6.1}% {calls:>6} {refused:>6} {:>6.1}% {:>7.1}s {:>7.1}/s {steady_text:>18} {of:>6} {pace:>9}  {tripped}",
        run.succeeded,
        run.succeeded as f64 * 100.0 / records as f64,
        refused as f64 * 100.0 / calls.max(1) as f64,
        run.secs,
        took as f64 / run.secs,
    );
}

fn header() {
    println!(
        "{:<11} {:>13} {:>6} {:>14} {:>8} {:>9} {:>18} {:>6} {:>9}  tripped",
        "pace", "through", "calls", "refused", "wall", "took/s", "steady", "of cap", "final pace"
    );
}

fn print_trace(trace: &[Second], paces: &[(f64, f64)]) {
    println!("  second  took  refused  pace at its end");
    for (second, s) in trace.iter().enumerate() {
        let pace = paces
            .iter()
            .find(|(t, _)| *t >= (second + 1) as f64)
            .map_or("-".into(), |(_, p)| format!("{p:.1}/s"));
        println!("  {second:>6} {:>5} {:>8}  {pace}", s.took, s.refused);
    }
}

/// The steady part of a run: from the second after the first refusal (the fleet had
/// found the capacity) or from `warmup` where none was refused, to `end`.
fn steady(first_refusal: Option<f64>, warmup: usize, end: usize) -> (usize, usize) {
    (first_refusal.map_or(warmup, |r| r as usize + 1), end)
}

/// From the raise (second `raise` of the run) until the counterpart takes `goal`
/// calls a second: the first full second that does, and the first from which every
/// 3-second mean up to the last full second does (it holds); each in seconds from the
/// raise to that second's end.
fn follow(trace: &[Second], raise: f64, goal: f64) -> (Option<f64>, Option<f64>) {
    let (from, end) = (raise.ceil() as usize, full_seconds(trace));
    let reached = (from..end).find(|&s| trace[s].took as f64 >= goal);
    let last = end.saturating_sub(2);
    let holds = (from..last)
        .find(|&s| (s..last).all(|w| mean_took(trace, w, w + 3).unwrap_or(0.0) >= goal));
    let after = |s: usize| (s + 1) as f64 - raise;
    (reached.map(after), holds.map(after))
}

/// The raise scenario for `variant`: prints its line, how it followed, its trace.
fn raise_run(fleet: &Fleet, counterpart: &Counterpart, variant: &str, raise: &Raise) {
    let name = format!("{variant}-raise");
    fleet.make(&name, raise.records, &rate_line(variant, &raise.fixed));
    let started = counterpart.reset(Capacities {
        steps: vec![(0.0, raise.from), (raise.at, raise.to)],
        // A fixed pace is never refused: its raise counts from the start.
        after_refusal: raise.after_refusal && variant == "auto",
    });
    let run = fleet.run(&name, started);
    let trace = counterpart.trace();
    let raised = counterpart.raised_at().first().copied();
    let end = raised.map_or(full_seconds(&trace), |r| r as usize);
    let before = steady(counterpart.first_refusal(), raise.warmup, end);
    let label = label(variant, &raise.fixed);
    row(&label, raise.records, &run, &trace, before, raise.from);
    let Some(raised) = raised else {
        println!("  the capacity was never raised: no call refused before the run ended");
        return print_trace(&trace, &run.paces);
    };
    let goal = 0.7 * raise.to;
    let (reached, holds) = follow(&trace, raised, goal);
    let after = mean_took(
        &trace,
        (raised + holds.unwrap_or(0.0)).ceil() as usize,
        full_seconds(&trace),
    );
    let paced = run
        .paces
        .iter()
        .find(|(t, p)| *t >= raised && *p >= goal)
        .map(|(t, _)| t - raised);
    let seconds = |s: Option<f64>| s.map_or("never".into(), |s| format!("{s:.1} s"));
    println!(
        "  raised at {raised:.1} s; then it takes {goal:.0}/s within {}, holds it (3 s means) from {}, and takes {} there ({} of {}/s); the fleet's pace reaches {goal:.0}/s {} after the raise",
        seconds(reached),
        seconds(holds),
        after.map_or("-".into(), |a| format!("{a:.1}/s")),
        after.map_or("-".into(), |a| format!("{:.2}", a / raise.to)),
        raise.to,
        seconds(paced),
    );
    print_trace(&trace, &run.paces);
}

/// The second scenario's settings.
struct Raise {
    records: u64,
    from: f64,
    to: f64,
    at: f64,
    after_refusal: bool,
    fixed: String,
    warmup: usize,
}

fn binary() -> PathBuf {
    std::env::var_os("BENCH_BIN")
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
            eprintln!("the backlog binary not found: build it first, or set BENCH_BIN");
            std::process::exit(2)
        })
}

fn main() {
    let bin = std::fs::canonicalize(binary()).unwrap();
    let dir = PathBuf::from(var("BENCH_DIR", "target/bench-pace"));
    std::fs::create_dir_all(&dir).unwrap();
    let fleet = Fleet {
        dir: std::fs::canonicalize(&dir).unwrap(),
        bin,
        runners: number("BENCH_RUNNERS", 2.0) as usize,
        lanes: number("BENCH_LANES", 16.0) as u64,
        breaker: number("BENCH_BREAKER", 10.0) as u64,
        pg: std::env::var("BENCH_PG").ok(),
    };
    let records = number("BENCH_RECORDS", 1200.0) as u64;
    let capacity = number("BENCH_CAPACITY", 40.0);
    let fixed = var("BENCH_FIXED", "38/s");
    let warmup = number("BENCH_WARMUP", 5.0) as usize;
    let call = Duration::from_millis(number("BENCH_CALL_MS", 0.0) as u64);
    let counterpart = Counterpart::start(call);
    fleet.write_handler(&counterpart.url);
    let breaker = match fleet.breaker {
        0 => "no breaker".to_string(),
        k => format!("the breaker at {k} failures in a row"),
    };
    println!(
        "backlog: {}; {} cores; {}; {} runners × {} handlers (curl per record), {breaker}; calls answered after {} ms",
        fleet.bin.display(),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        if fleet.pg.is_some() {
            "PostgreSQL"
        } else {
            "SQLite"
        },
        fleet.runners,
        fleet.lanes,
        call.as_millis(),
    );
    let raise = Raise {
        records: number("BENCH_RAISE_RECORDS", 2400.0) as u64,
        from: capacity,
        to: number("BENCH_RAISED", 80.0),
        at: number("BENCH_RAISE_AT", 10.0),
        after_refusal: var("BENCH_RAISE_FROM", "refusal") != "start",
        fixed: fixed.clone(),
        warmup,
    };
    for round in 1..=number("BENCH_ROUNDS", 1.0) as usize {
        println!(
            "\nround {round}: a counterpart of {capacity}/s (429 beyond), {records} records; steady from the first refusal, or from {warmup} s"
        );
        header();
        for variant in list("BENCH_VARIANTS", "none,fixed,auto") {
            fleet.make(&variant, records, &rate_line(&variant, &fixed));
            let started = counterpart.reset(Capacities::fixed(capacity));
            let run = fleet.run(&variant, started);
            let trace = counterpart.trace();
            let part = steady(counterpart.first_refusal(), warmup, full_seconds(&trace));
            row(
                &label(&variant, &fixed),
                records,
                &run,
                &trace,
                part,
                capacity,
            );
            if var("BENCH_TRACE", "") == "1" {
                print_trace(&trace, &run.paces);
            }
        }
        if raise.records == 0 {
            continue;
        }
        let when = match raise.after_refusal {
            true => "after the first refusal",
            false => "after the start",
        };
        println!(
            "\nround {round}: {capacity}/s raised to {}/s {} s {when}, {} records; steady up to the raise",
            raise.to, raise.at, raise.records
        );
        header();
        for variant in list("BENCH_RAISE_VARIANTS", "auto") {
            raise_run(&fleet, &counterpart, &variant, &raise);
        }
    }
}

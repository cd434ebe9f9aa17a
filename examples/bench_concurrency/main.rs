//! Concurrency as a user runs it, measured side by side in one run:
//! `cargo build --release -F cli && cargo run --release --example bench_concurrency`.
//!
//! Every figure is the real `backlog` binary (`target/release/backlog`, found next to
//! this example's own executable) run as a crontab line runs it, `backlog run --window
//! 1d`, timed from outside from its start to its exit, start-up included. Each run works
//! on a fresh copy of one generated SQLite backlog whose band holds exactly the records
//! measured: all pending, inserted between 2 and 20 hours before the pinned clock
//! (`--now`), so the 1d tier's band (0, 1d] is all of them. The tool's own tables are
//! made beforehand, by a tick over an empty band, as after a database's first tick.
//! The yardstick is GNU `xargs -P N` over the same work.
//!
//! 1. 200 records, a handler of 100 ms, concurrency 1 / 8 / 32 / 64, against the ideal
//!    N / 0.1 s and against `xargs -P N -n1` of the same handler over 200 lines. Two
//!    handlers: `["sleep", "0.1"]`, the same program xargs runs, so the two differ only
//!    in who starts it; and `handler.sh`, what a user writes (bash: it reads its record
//!    from stdin, sleeps 100 ms and appends "id start end" to a log with `$EPOCHREALTIME`,
//!    no process spawned for the clock). The log gives the peak number of handlers
//!    running at once and checks that no id was in two handlers at once.
//! 2. 2,000 records, `/bin/true` per record at concurrency 1 (and 2), against
//!    `seq 2000 | xargs -P1 -n1 /bin/true`: what starting a process costs the tool.
//! 3. A batch handler (`mode = "batch"`, a perl script that sleeps 100 ms a record and
//!    answers each line as it goes, flushed), 200 records in batches of 10, concurrency 4
//!    against concurrency 1 (ideal: 4×).
//! 4. PostgreSQL, when `BENCH_PG` names a superuser URL (the bench creates and drops a
//!    database `backlog_bench_concurrency`): 200 records of the 100 ms `handler.sh`,
//!    4 `backlog run` processes at once with concurrency 4 each, and 1 with concurrency
//!    16, against the ideal 16 / 0.1 s; two rounds, alternating. The handler's log gives
//!    the peak running at once, any id in two handlers at once, and ids handled twice.
//!
//! `BENCH_ONLY=sleep,true,batch,pg` picks parts (any of them, comma-separated).
//! The folder is `target/bench-concurrency`, or the first argument; it is left behind
//! with the template database and the schedule files, for timing single commands by
//! hand. No figure is asserted: the machine is shared and noisy.

use std::path::PathBuf;

mod common;
mod postgres;

use common::*;
use postgres::postgres;

fn sleeps(bench: &Bench) {
    const N: u64 = 200;
    println!(
        "1. {N} records, a 100 ms handler per record, against the ideal N / 0.1 s and `xargs -P N -n1` of the same handler over {N} lines"
    );
    println!(
        "   N  handler        backlog rec/s (of ideal)   xargs rec/s (of ideal)   backlog/xargs   handler log (backlog run)"
    );
    generate_sqlite(&bench.path("sleep.db"), N);
    for concurrency in [1usize, 8, 32, 64] {
        let extra = format!("concurrency = {concurrency}");
        let sleep_file = format!("sleep-c{concurrency}.toml");
        let script_file = format!("script-c{concurrency}.toml");
        bench.write(
            &sleep_file,
            &schedule("work.db", r#"["sleep", "0.1"]"#, &extra),
        );
        bench.write(
            &script_file,
            &schedule("work.db", r#"["./handler.sh"]"#, &extra),
        );
        if concurrency == 1 {
            ready(bench, "sleep.db", &sleep_file, "sleep-ready.db");
        }
        let ideal = concurrency as f64 / 0.1;
        // 200 records are whole waves of N only for N = 1 and 8: at 32, 7 waves of
        // 100 ms (0.89 of N / 0.1 s); at 64, 4 waves (0.78).
        let waves = N.div_ceil(concurrency as u64) as f64 * 0.1;
        println!(
            "  {concurrency:>2}  ideal {ideal:.0}/s; in whole waves of {concurrency}, {N} records take {waves:.1} s: {:.1}/s ({:.2} of the ideal)",
            N as f64 / waves,
            N as f64 / waves / ideal
        );
        // `xargs -n1 sleep 0.1` appends its argument, and sleep adds up its arguments:
        // fed zeros, each is `sleep 0.1 0`, 100 ms. handler.sh takes the id as $1.
        for (name, file, pipeline) in [
            (
                "sleep 0.1 ",
                &sleep_file,
                format!("yes 0 | head -n {N} | xargs -P {concurrency} -n1 sleep 0.1"),
            ),
            (
                "handler.sh",
                &script_file,
                format!("seq {N} | xargs -P {concurrency} -n1 ./handler.sh"),
            ),
        ] {
            let (rps, n) = backlog_run(bench, "sleep-ready.db", file);
            let log = bench.log();
            let xargs = xargs_run(bench, &pipeline, N);
            let log_text = if log.runs.is_empty() {
                format!("({n} succeeded)")
            } else {
                log.verdict(N as usize)
            };
            println!(
                "  {concurrency:>2}  {name}  {rps:>13.1} ({:.2})   {xargs:>11.1} ({:.2})   {:>13.2}   {log_text}",
                rps / ideal,
                xargs / ideal,
                rps / xargs
            );
        }
    }
}

fn spawns(bench: &Bench) {
    const N: u64 = 2000;
    println!(
        "2. {N} records, `/bin/true` per record, against `seq {N} | xargs -P N -n1 /bin/true`"
    );
    generate_sqlite(&bench.path("true.db"), N);
    for concurrency in [1usize, 2] {
        let file = format!("true-c{concurrency}.toml");
        bench.write(
            &file,
            &schedule(
                "work.db",
                r#"["/bin/true"]"#,
                &format!("concurrency = {concurrency}"),
            ),
        );
        if concurrency == 1 {
            ready(bench, "true.db", &file, "true-ready.db");
        }
        let (rps, n) = backlog_run(bench, "true-ready.db", &file);
        let xargs = xargs_run(
            bench,
            &format!("seq {N} | xargs -P {concurrency} -n1 /bin/true"),
            N,
        );
        println!(
            "   concurrency {concurrency}: backlog {n} records, {rps:>6.0} records/s ({:.2} ms a record); xargs -P {concurrency} {xargs:>6.0} records/s; backlog/xargs {:.2}",
            1e3 / rps,
            rps / xargs
        );
    }
}

fn batches(bench: &Bench) {
    const N: u64 = 200;
    println!(
        "3. {N} records, a batch handler (perl, 100 ms a record, batches of 10), concurrency 4 against 1"
    );
    bench.executable("batch.pl", BATCH_HANDLER);
    let mut rates = Vec::new();
    for concurrency in [1usize, 4] {
        let file = format!("batch-c{concurrency}.toml");
        bench.write(
            &file,
            &schedule(
                "work.db",
                r#"["./batch.pl"]"#,
                &format!("mode = \"batch\"\nbatch_size = 10\nconcurrency = {concurrency}"),
            ),
        );
        let (rps, n) = backlog_run(bench, "sleep-ready.db", &file);
        let ideal = concurrency as f64 / 0.1;
        println!(
            "   concurrency {concurrency}: {n} records, {rps:>5.1} records/s, {:.2} of the ideal {ideal:.0}/s; {}",
            rps / ideal,
            bench.log().verdict(N as usize)
        );
        rates.push(rps);
    }
    println!(
        "   concurrency 4 against 1: {:.2}× (ideal 4×)",
        rates[1] / rates[0]
    );
}

fn main() {
    let dir = PathBuf::from(
        std::env::args()
            .nth(1)
            .unwrap_or_else(|| "target/bench-concurrency".into()),
    );
    std::fs::create_dir_all(&dir).unwrap();
    // Absolute: handlers run in this folder and are given paths inside it.
    let dir = std::fs::canonicalize(&dir).unwrap();
    let bench = Bench {
        dir,
        bin: backlog_binary(),
    };
    bench.executable("handler.sh", LOGGING_HANDLER);
    println!(
        "backlog: {}, {} cores",
        bench.bin.display(),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    let only = std::env::var("BENCH_ONLY").unwrap_or_default();
    let wanted = |part: &str| only.is_empty() || only.split(',').any(|p| p == part);
    if wanted("sleep") || wanted("batch") {
        sleeps_or_template(&bench, wanted("sleep"));
    }
    if wanted("true") {
        spawns(&bench);
    }
    if wanted("batch") {
        batches(&bench);
    }
    if wanted("pg") {
        postgres(&bench);
    }
}

/// Part 1, or (when only the batch part is wanted) just the database it leaves.
fn sleeps_or_template(bench: &Bench, measure: bool) {
    if measure {
        return sleeps(bench);
    }
    generate_sqlite(&bench.path("sleep.db"), 200);
    bench.write(
        "sleep-c1.toml",
        &schedule("work.db", r#"["sleep", "0.1"]"#, ""),
    );
    ready(bench, "sleep.db", "sleep-c1.toml", "sleep-ready.db");
}

//! Concurrency as a user runs it, measured side by side in one run:
//! `cargo build --release && cargo run --release --example bench_concurrency`.
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

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Instant;

use chrono::{DateTime, TimeZone, Utc};
use rusqlite::{Connection, params};

/// The handler a user writes: read the record, work 100 ms, log when it ran.
const LOGGING_HANDLER: &str = r#"#!/bin/bash
# One record: read it from stdin, take 100 ms, append "id start end" to the log.
start=$EPOCHREALTIME
IFS= read -r -d '' _record || true
sleep 0.1
echo "${BACKLOG_RECORD_ID:-$1} $start $EPOCHREALTIME" >> "${BENCH_LOG:-handler.log}"
"#;

/// A batch handler: 100 ms a record, each answer written and flushed as it is known;
/// logs each record as the per-record handler does.
const BATCH_HANDLER: &str = r#"#!/usr/bin/perl
use strict;
use Time::HiRes qw(sleep time);
$| = 1;
open(my $log, '>>', $ENV{BENCH_LOG} || 'handler.log') or die "log: $!";
$log->autoflush(1);
while (my $line = <STDIN>) {
    my ($id) = $line =~ /^\{"id":([^,]*),/ or next;
    my $start = time;
    sleep 0.1;
    printf $log "%s %.6f %.6f\n", $id, $start, time;
    print "{\"id\":$id,\"code\":0}\n";
}
"#;

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 21, 12, 0, 0).unwrap()
}

fn now_arg() -> String {
    now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// The age of record `i` of `n`: evenly between 2 and 20 hours.
fn inserted_at(i: u64, n: u64) -> DateTime<Utc> {
    let age = 2 * 3600 + 18 * 3600 * i / n.max(1);
    now() - chrono::Duration::seconds(age as i64)
}

/// The `backlog` binary next to this example's executable (`target/release/examples/`).
fn backlog_binary() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let bin = exe
        .parent()
        .and_then(Path::parent)
        .map(|d| d.join("backlog"))
        .unwrap();
    if !bin.exists() {
        eprintln!(
            "{} not found: build it first with `cargo build --release`",
            bin.display()
        );
        std::process::exit(2);
    }
    bin
}

/// A SQLite backlog of `n` pending records aged 2 to 20 hours.
fn generate_sqlite(path: &Path, n: u64) {
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    let mut db = Connection::open(path).unwrap();
    db.execute_batch("PRAGMA journal_mode = WAL; CREATE TABLE BACKLOG (ID INTEGER PRIMARY KEY, STATUS TEXT NOT NULL, DATE_INSERTED TEXT NOT NULL, PAYLOAD TEXT); CREATE INDEX BACKLOG_BY_DATE ON BACKLOG (DATE_INSERTED);").unwrap();
    let tx = db.transaction().unwrap();
    {
        let mut insert = tx
            .prepare("INSERT INTO BACKLOG VALUES (?1, 'NEW', ?2, ?3)")
            .unwrap();
        for i in 0..n {
            insert
                .execute(params![
                    i as i64 + 1,
                    inserted_at(i, n).format("%Y-%m-%d %H:%M:%S").to_string(),
                    "{\"order\": 1}"
                ])
                .unwrap();
        }
    }
    tx.commit().unwrap();
}

/// A schedule file: one tier of 1d, the handler as given.
fn schedule(url: &str, command: &str, handler_extra: &str) -> String {
    format!(
        r#"[database]
url = "{url}"

[table]
name = "BACKLOG"
id = "ID"
status = "STATUS"
inserted_at = "DATE_INSERTED"

[handler]
command = {command}
timeout = "30s"
{handler_extra}

[[tier]]
window = "1d"
every = "5m"
limit = 100000
"#
    )
}

struct Bench {
    dir: PathBuf,
    bin: PathBuf,
}

impl Bench {
    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.path(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    fn executable(&self, name: &str, text: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let path = self.write(name, text);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    /// `backlog run --window 1d` with this schedule file, in the folder.
    fn backlog(&self, schedule: &str, now: &str) -> Command {
        let mut cmd = Command::new(&self.bin);
        cmd.current_dir(&self.dir)
            .args([
                "run", "--window", "1d", "--json", "--now", now, "-s", schedule,
            ])
            .env("BENCH_LOG", self.path("handler.log"))
            .stdin(Stdio::null());
        cmd
    }

    /// A shell pipeline, run in the folder.
    fn sh(&self, script: &str) -> Command {
        let mut cmd = Command::new("sh");
        cmd.current_dir(&self.dir)
            .args(["-c", script])
            .env("BENCH_LOG", self.path("handler.log"))
            .stdin(Stdio::null());
        cmd
    }

    /// A fresh copy of `template` as `work.db`.
    fn fresh(&self, template: &str) {
        for suffix in ["-wal", "-shm"] {
            let _ = std::fs::remove_file(self.path(&format!("work.db{suffix}")));
        }
        std::fs::copy(self.path(template), self.path("work.db")).unwrap();
    }

    fn clear_log(&self) {
        let _ = std::fs::remove_file(self.path("handler.log"));
    }

    /// The handler log so far.
    fn log(&self) -> Log {
        Log::parse(&std::fs::read_to_string(self.path("handler.log")).unwrap_or_default())
    }
}

/// Runs a command to its end: wall seconds and its output. Exits on failure.
fn timed(cmd: &mut Command) -> (f64, Output) {
    let started = Instant::now();
    let out = cmd.output().unwrap();
    let secs = started.elapsed().as_secs_f64();
    if !out.status.success() {
        eprintln!(
            "{cmd:?} failed ({}):\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        std::process::exit(1);
    }
    (secs, out)
}

/// The records a `backlog run --json` summary says succeeded.
fn succeeded(out: &Output) -> u64 {
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not a JSON summary ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    summary["succeeded"].as_u64().unwrap()
}

/// Times one `backlog run` on a fresh copy of `template`: records/s and records done.
fn backlog_run(bench: &Bench, template: &str, schedule: &str) -> (f64, u64) {
    bench.fresh(template);
    bench.clear_log();
    let (secs, out) = timed(&mut bench.backlog(schedule, &now_arg()));
    let n = succeeded(&out);
    (n as f64 / secs, n)
}

/// Times a shell pipeline doing `n` records: records/s.
fn xargs_run(bench: &Bench, script: &str, n: u64) -> f64 {
    bench.clear_log();
    let (secs, _) = timed(&mut bench.sh(script));
    n as f64 / secs
}

/// What the handlers' own log says: "id start end" per invocation.
struct Log {
    runs: Vec<(String, f64, f64)>,
}

impl Log {
    fn parse(text: &str) -> Self {
        let runs = text
            .lines()
            .filter_map(|l| {
                let mut f = l.split_whitespace();
                let id = f.next()?.to_string();
                let start = f.next()?.parse().ok()?;
                let end = f.next()?.parse().ok()?;
                Some((id, start, end))
            })
            .collect();
        Log { runs }
    }

    /// The most handlers running at one moment (an end before a start at a tie).
    fn peak(&self) -> usize {
        let mut events: Vec<(f64, i32)> = self
            .runs
            .iter()
            .flat_map(|(_, s, e)| [(*s, 1), (*e, -1)])
            .collect();
        events.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let mut running = 0i32;
        let mut peak = 0;
        for (_, d) in events {
            running += d;
            peak = peak.max(running);
        }
        peak as usize
    }

    /// Ids whose handlers overlapped in time: in two handlers at once.
    fn overlapping(&self) -> Vec<String> {
        let mut by_id: BTreeMap<&str, Vec<(f64, f64)>> = BTreeMap::new();
        for (id, s, e) in &self.runs {
            by_id.entry(id).or_default().push((*s, *e));
        }
        by_id
            .into_iter()
            .filter(|(_, spans)| {
                let mut spans = spans.clone();
                spans.sort_by(|a, b| a.0.total_cmp(&b.0));
                spans.windows(2).any(|w| w[1].0 < w[0].1)
            })
            .map(|(id, _)| id.to_string())
            .collect()
    }

    /// Ids handled more than once (at different times).
    fn repeated(&self) -> usize {
        let mut count: BTreeMap<&str, usize> = BTreeMap::new();
        for (id, _, _) in &self.runs {
            *count.entry(id).or_default() += 1;
        }
        count.values().filter(|&&c| c > 1).count()
    }

    fn distinct(&self) -> usize {
        let ids: std::collections::BTreeSet<&str> =
            self.runs.iter().map(|(id, _, _)| id.as_str()).collect();
        ids.len()
    }

    /// The mean seconds a handler ran, by its own clock.
    fn mean(&self) -> f64 {
        self.runs.iter().map(|(_, s, e)| e - s).sum::<f64>() / self.runs.len().max(1) as f64
    }

    /// "peak N at once, no id twice at once" or what went wrong.
    fn verdict(&self, expected: usize) -> String {
        let overlapping = self.overlapping();
        let mut text = format!(
            "{} runs, {} ids, peak {} at once, mean {:.1} ms",
            self.runs.len(),
            self.distinct(),
            self.peak(),
            self.mean() * 1e3
        );
        if self.distinct() != expected {
            text.push_str(&format!(", EXPECTED {expected} IDS"));
        }
        match self.repeated() {
            0 => {}
            n => text.push_str(&format!(", {n} ids handled twice")),
        }
        if overlapping.is_empty() {
            text.push_str(", no id in two handlers at once");
        } else {
            text.push_str(&format!(
                ", IDS IN TWO HANDLERS AT ONCE: {}",
                overlapping.join(" ")
            ));
        }
        text
    }
}

/// Makes the tool's own tables, as a database's first tick does: a tick whose band is
/// empty (the clock a year back).
fn first_tick(bench: &Bench, schedule: &str) {
    timed(&mut bench.backlog(schedule, "2025-11-21T12:00:00Z"));
}

/// Makes the tool's own tables in a fresh copy of `source` and keeps it as `ready`, its
/// write-ahead log folded in, so that a copy of the one file is the whole database.
fn ready(bench: &Bench, source: &str, schedule: &str, ready: &str) {
    bench.fresh(source);
    first_tick(bench, schedule);
    let db = Connection::open(bench.path("work.db")).unwrap();
    db.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)").unwrap();
    drop(db);
    std::fs::copy(bench.path("work.db"), bench.path(ready)).unwrap();
}

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

/// The URL with another database name.
fn with_db(url: &str, db: &str) -> String {
    let (base, query) = url.split_once('?').map_or((url, ""), |(b, q)| (b, q));
    let base = base.rsplit_once('/').map_or(base, |(b, _)| b);
    if query.is_empty() {
        format!("{base}/{db}")
    } else {
        format!("{base}/{db}?{query}")
    }
}

fn postgres(bench: &Bench) {
    const N: u64 = 200;
    const DB: &str = "backlog_bench_concurrency";
    let Ok(admin) = std::env::var("BENCH_PG") else {
        println!(
            "4. PostgreSQL: skipped (set BENCH_PG to a superuser URL, like postgres://postgres:secret@127.0.0.1:5432/postgres)"
        );
        return;
    };
    println!(
        "4. PostgreSQL, {N} records of the 100 ms handler.sh, against the ideal 16 / 0.1 s = 160 records/s"
    );
    let mut server = postgres::Client::connect(&admin, postgres::NoTls).unwrap();
    // One statement each: CREATE DATABASE cannot run in a transaction.
    for sql in [
        format!("DROP DATABASE IF EXISTS {DB} WITH (FORCE)"),
        format!("CREATE DATABASE {DB}"),
    ] {
        server.batch_execute(&sql).unwrap();
    }
    let url = with_db(&admin, DB);
    let mut db = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    db.batch_execute(r#"CREATE TABLE "BACKLOG" ("ID" bigint PRIMARY KEY, "STATUS" text NOT NULL, "DATE_INSERTED" timestamptz NOT NULL, "PAYLOAD" text); CREATE INDEX "BACKLOG_BY_DATE" ON "BACKLOG" ("DATE_INSERTED")"#).unwrap();
    for i in 0..N {
        db.execute(
            r#"INSERT INTO "BACKLOG" VALUES ($1, 'NEW', $2, '{"order": 1}')"#,
            &[&(i as i64 + 1), &inserted_at(i, N)],
        )
        .unwrap();
    }
    db.batch_execute(r#"VACUUM ANALYZE "BACKLOG""#).unwrap();
    for c in [4, 16] {
        bench.write(
            &format!("pg-c{c}.toml"),
            &schedule(&url, r#"["./handler.sh"]"#, &format!("concurrency = {c}")),
        );
    }
    first_tick(bench, "pg-c4.toml");
    let ideal = 16.0 / 0.1;
    for round in 1..=2 {
        for (runners, file) in [(4usize, "pg-c4.toml"), (1, "pg-c16.toml")] {
            db.batch_execute(r#"UPDATE "BACKLOG" SET "STATUS" = 'NEW'"#)
                .unwrap();
            bench.clear_log();
            let started = Instant::now();
            let children: Vec<_> = (0..runners)
                .map(|_| {
                    bench
                        .backlog(file, &now_arg())
                        .stdout(Stdio::piped())
                        .stderr(Stdio::piped())
                        .spawn()
                        .unwrap()
                })
                .collect();
            let outs: Vec<Output> = children
                .into_iter()
                .map(|c| c.wait_with_output().unwrap())
                .collect();
            let secs = started.elapsed().as_secs_f64();
            for out in outs.iter().filter(|o| !o.status.success()) {
                eprintln!(
                    "a runner failed ({}): {}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            let each: Vec<u64> = outs
                .iter()
                .filter(|o| o.status.success())
                .map(succeeded)
                .collect();
            let n: u64 = each.iter().sum();
            let left: i64 = db
                .query_one(
                    r#"SELECT count(*) FROM "BACKLOG" WHERE "STATUS" <> 'SUCCESS'"#,
                    &[],
                )
                .unwrap()
                .get(0);
            let rps = n as f64 / secs;
            println!(
                "   round {round}, {runners} runner{} × concurrency {:>2}: {n} records ({}; {left} left pending), {rps:>5.1} records/s, {:.2} of the ideal; {}",
                if runners == 1 { " " } else { "s" },
                16 / runners,
                each.iter()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join(" + "),
                rps / ideal,
                bench.log().verdict(N as usize)
            );
        }
    }
    drop(db);
    server
        .batch_execute(&format!("DROP DATABASE {DB} WITH (FORCE)"))
        .unwrap();
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

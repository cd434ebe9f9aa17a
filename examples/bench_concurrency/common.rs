//! What every part uses: the handlers, the generated backlog, the binary timed from
//! outside, the handlers' log.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Instant;

use chrono::{DateTime, TimeZone, Utc};
use rusqlite::{Connection, params};

/// The handler a user writes: read the record, work 100 ms, log when it ran.
pub(crate) const LOGGING_HANDLER: &str = r#"#!/bin/bash
# One record: read it from stdin, take 100 ms, append "id start end" to the log.
start=$EPOCHREALTIME
IFS= read -r -d '' _record || true
sleep 0.1
echo "${BACKLOG_RECORD_ID:-$1} $start $EPOCHREALTIME" >> "${BENCH_LOG:-handler.log}"
"#;

/// A batch handler: 100 ms a record, each answer written and flushed as it is known;
/// logs each record as the per-record handler does.
pub(crate) const BATCH_HANDLER: &str = r#"#!/usr/bin/perl
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

pub(crate) fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 21, 12, 0, 0).unwrap()
}

pub(crate) fn now_arg() -> String {
    now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// The age of record `i` of `n`: evenly between 2 and 20 hours.
pub(crate) fn inserted_at(i: u64, n: u64) -> DateTime<Utc> {
    let age = 2 * 3600 + 18 * 3600 * i / n.max(1);
    now() - chrono::Duration::seconds(age as i64)
}

/// The `backlog` binary next to this example's executable (`target/release/examples/`).
pub(crate) fn backlog_binary() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let bin = exe
        .parent()
        .and_then(Path::parent)
        .map(|d| d.join("backlog"))
        .unwrap();
    if !bin.exists() {
        eprintln!(
            "{} not found: build it first with `cargo build --release -F cli`",
            bin.display()
        );
        std::process::exit(2);
    }
    bin
}

/// A SQLite backlog of `n` pending records aged 2 to 20 hours.
pub(crate) fn generate_sqlite(path: &Path, n: u64) {
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
pub(crate) fn schedule(url: &str, command: &str, handler_extra: &str) -> String {
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

pub(crate) struct Bench {
    pub(crate) dir: PathBuf,
    pub(crate) bin: PathBuf,
}

impl Bench {
    pub(crate) fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    pub(crate) fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.path(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    pub(crate) fn executable(&self, name: &str, text: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let path = self.write(name, text);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    /// `backlog run --window 1d` with this schedule file, in the folder.
    pub(crate) fn backlog(&self, schedule: &str, now: &str) -> Command {
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
    pub(crate) fn sh(&self, script: &str) -> Command {
        let mut cmd = Command::new("sh");
        cmd.current_dir(&self.dir)
            .args(["-c", script])
            .env("BENCH_LOG", self.path("handler.log"))
            .stdin(Stdio::null());
        cmd
    }

    /// A fresh copy of `template` as `work.db`.
    pub(crate) fn fresh(&self, template: &str) {
        for suffix in ["-wal", "-shm"] {
            let _ = std::fs::remove_file(self.path(&format!("work.db{suffix}")));
        }
        std::fs::copy(self.path(template), self.path("work.db")).unwrap();
    }

    pub(crate) fn clear_log(&self) {
        let _ = std::fs::remove_file(self.path("handler.log"));
    }

    /// The handler log so far.
    pub(crate) fn log(&self) -> Log {
        Log::parse(&std::fs::read_to_string(self.path("handler.log")).unwrap_or_default())
    }
}

/// Runs a command to its end: wall seconds and its output. Exits on failure.
pub(crate) fn timed(cmd: &mut Command) -> (f64, Output) {
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
pub(crate) fn succeeded(out: &Output) -> u64 {
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not a JSON summary ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    summary["succeeded"].as_u64().unwrap()
}

/// Times one `backlog run` on a fresh copy of `template`: records/s and records done.
pub(crate) fn backlog_run(bench: &Bench, template: &str, schedule: &str) -> (f64, u64) {
    bench.fresh(template);
    bench.clear_log();
    let (secs, out) = timed(&mut bench.backlog(schedule, &now_arg()));
    let n = succeeded(&out);
    (n as f64 / secs, n)
}

/// Times a shell pipeline doing `n` records: records/s.
pub(crate) fn xargs_run(bench: &Bench, script: &str, n: u64) -> f64 {
    bench.clear_log();
    let (secs, _) = timed(&mut bench.sh(script));
    n as f64 / secs
}

/// What the handlers' own log says: "id start end" per invocation.
pub(crate) struct Log {
    pub(crate) runs: Vec<(String, f64, f64)>,
}

impl Log {
    pub(crate) fn parse(text: &str) -> Self {
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
    pub(crate) fn peak(&self) -> usize {
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
    pub(crate) fn overlapping(&self) -> Vec<String> {
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
    pub(crate) fn repeated(&self) -> usize {
        let mut count: BTreeMap<&str, usize> = BTreeMap::new();
        for (id, _, _) in &self.runs {
            *count.entry(id).or_default() += 1;
        }
        count.values().filter(|&&c| c > 1).count()
    }

    pub(crate) fn distinct(&self) -> usize {
        let ids: std::collections::BTreeSet<&str> =
            self.runs.iter().map(|(id, _, _)| id.as_str()).collect();
        ids.len()
    }

    /// The mean seconds a handler ran, by its own clock.
    pub(crate) fn mean(&self) -> f64 {
        self.runs.iter().map(|(_, s, e)| e - s).sum::<f64>() / self.runs.len().max(1) as f64
    }

    /// "peak N at once, no id twice at once" or what went wrong.
    pub(crate) fn verdict(&self, expected: usize) -> String {
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
pub(crate) fn first_tick(bench: &Bench, schedule: &str) {
    timed(&mut bench.backlog(schedule, "2025-11-21T12:00:00Z"));
}

/// Makes the tool's own tables in a fresh copy of `source` and keeps it as `ready`, its
/// write-ahead log folded in, so that a copy of the one file is the whole database.
pub(crate) fn ready(bench: &Bench, source: &str, schedule: &str, ready: &str) {
    bench.fresh(source);
    first_tick(bench, schedule);
    let db = Connection::open(bench.path("work.db")).unwrap();
    db.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)").unwrap();
    drop(db);
    std::fs::copy(bench.path("work.db"), bench.path(ready)).unwrap();
}

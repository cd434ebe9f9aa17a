//! A partitioned table as a user runs it: PostgreSQL, a table partitioned by month on
//! its inserted-at column holding `BENCH_ROWS` (50,000,000) rows over `BENCH_MONTHS`
//! (48) months, against a plain table holding only the rows of the band, the floor a
//! tick's pages and marks can reach. `cargo build --release -F cli --examples &&
//! BENCH_PG=postgres://postgres:secret@127.0.0.1:5432/postgres cargo run --release
//! --example bench_partitions` (a URL of a user who may create databases; the bench
//! creates and drops `backlog_bench_partitions`).
//!
//! Every row older than a day is done but those of the last week (ages 1 to 7 days),
//! which are pending: the 7d tier's band, as `doctor` checks it. Each round sets the
//! band's rows pending again, then times, on each table, a tick of the 7d tier with a
//! no-op batch handler (`examples/bench_handler.rs`, batches of 500) and an empty tick
//! right after it (nothing pending: start-up, inspection and the band's first page).
//! `doctor` is run once on each and its line on the partitions printed, and the
//! partitions the two ticks scanned are counted from the server's statistics. Only
//! ratios of the same round are worth comparing on a shared machine.
//!
//! - `BENCH_ROWS`, `BENCH_MONTHS`: the partitioned table's size.
//! - `BENCH_ROUNDS` (2); `BENCH_KEEP=1` leaves the database behind (a second run with
//!   `BENCH_REUSE=1` then skips the load, which takes minutes).
//! - `BENCH_BIN=path`: another binary than `target/release/backlog`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use chrono::{DateTime, Datelike, Duration, TimeZone, Utc};

const DB: &str = "backlog_bench_partitions";

/// The clock of every tick: a pinned noon, so the band is the same each round.
fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 21, 12, 0, 0).unwrap()
}

fn number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .map(|v| v.parse().unwrap_or_else(|e| panic!("{name}: {e}")))
        .unwrap_or(default)
}

fn with_db(url: &str, db: &str) -> String {
    let (base, query) = url.split_once('?').unwrap_or((url, ""));
    let base = base.rsplit_once('/').map_or(base, |(b, _)| b);
    match query {
        "" => format!("{base}/{db}"),
        q => format!("{base}/{db}?{q}"),
    }
}

/// The first instant of the month `back` months before `t`'s.
fn month_start(t: DateTime<Utc>, back: i64) -> DateTime<Utc> {
    let months = i64::from(t.year()) * 12 + i64::from(t.month0()) - back;
    Utc.with_ymd_and_hms((months / 12) as i32, (months % 12) as u32 + 1, 1, 0, 0, 0)
        .unwrap()
}

fn schedule(dir: &Path, url: &str, table: &str, handler: &Path) -> PathBuf {
    let text = format!(
        r#"[database]
url = "{url}"

[table]
name = "{table}"
id = "ID"
status = "STATUS"
inserted_at = "DATE_INSERTED"

[handler]
command = ["{handler}"]
mode = "batch"
batch_size = 500
concurrency = 2
timeout = "60s"

[[tier]]
window = "1d"
every = "5m"

[[tier]]
window = "7d"
every = "1h"
limit = 100000000
"#,
        handler = handler.display()
    );
    let path = dir.join(format!("{table}.toml"));
    std::fs::write(&path, text).unwrap();
    path
}

/// Runs the binary; returns its wall seconds and its stdout, or stops the bench with
/// its error.
fn backlog(bin: &Path, dir: &Path, args: &[&str]) -> (f64, String) {
    let started = Instant::now();
    let out = Command::new(bin)
        .current_dir(dir)
        .args(args)
        .env("BENCH_WAIT_MS", "0")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let secs = started.elapsed().as_secs_f64();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    // doctor exits 1 when it warns: its output is what is wanted.
    if !out.status.success() && args[0] != "doctor" {
        panic!(
            "backlog {args:?} failed ({}): {}{stdout}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    (secs, stdout)
}

/// Makes the partitioned table and the plain one; returns the rows of the band.
fn load(db: &mut postgres::Client, rows: i64, months: i64) -> i64 {
    let started = Instant::now();
    db.batch_execute(
        r#"CREATE TABLE "BACKLOG" ("ID" bigint NOT NULL, "STATUS" text NOT NULL,
               "DATE_INSERTED" timestamptz NOT NULL, "PAYLOAD" text)
           PARTITION BY RANGE ("DATE_INSERTED")"#,
    )
    .unwrap();
    // A partition a month, this month's included, and the next one (empty).
    for back in -1..months {
        let (from, to) = (month_start(now(), back), month_start(now(), back - 1));
        db.batch_execute(&format!(
            r#"CREATE TABLE "BACKLOG_{}" PARTITION OF "BACKLOG" FOR VALUES FROM ('{}') TO ('{}')"#,
            from.format("%Y_%m"),
            from.to_rfc3339(),
            to.to_rfc3339()
        ))
        .unwrap();
    }
    // Evenly from the first partition's start to now, newest with the highest ids;
    // loaded a tenth at a time, the indexes made after.
    let first = month_start(now(), months - 1);
    let span_ms = (now() - first).num_milliseconds();
    let step = (rows + 9) / 10;
    for lo in (1..=rows).step_by(step as usize) {
        let hi = (lo + step - 1).min(rows);
        db.execute(
            r#"INSERT INTO "BACKLOG" SELECT i, 'SUCCESS',
                   $1::timestamptz + make_interval(secs => (i - 1) * ($2::int8::float8 / $3::int8) / 1000.0),
                   '{"order": 1}'
               FROM generate_series($4::int8, $5::int8) AS i"#,
            &[&first, &span_ms, &rows, &lo, &hi],
        )
        .unwrap();
        eprintln!(
            "  loaded {hi} of {rows} rows ({:.0} s)",
            started.elapsed().as_secs_f64()
        );
    }
    db.batch_execute(
        r#"ALTER TABLE "BACKLOG" ADD PRIMARY KEY ("ID", "DATE_INSERTED");
           CREATE INDEX "BACKLOG_BY_DATE" ON "BACKLOG" ("DATE_INSERTED");
           CREATE TABLE "BAND" (LIKE "BACKLOG");"#,
    )
    .unwrap();
    db.execute(
        r#"INSERT INTO "BAND" SELECT * FROM "BACKLOG" WHERE "DATE_INSERTED" >= $1"#,
        &[&(now() - Duration::days(8))],
    )
    .unwrap();
    db.batch_execute(
        r#"ALTER TABLE "BAND" ADD PRIMARY KEY ("ID");
           CREATE INDEX "BAND_BY_DATE" ON "BAND" ("DATE_INSERTED")"#,
    )
    .unwrap();
    for table in ["BACKLOG", "BAND"] {
        db.batch_execute(&format!(r#"VACUUM ANALYZE "{table}""#))
            .unwrap();
    }
    eprintln!(
        "  loaded and indexed in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    band_rows(db, "BAND")
}

fn band_rows(db: &mut postgres::Client, table: &str) -> i64 {
    db.query_one(
        &format!(
            r#"SELECT count(*) FROM "{table}" WHERE "DATE_INSERTED" >= $1 AND "DATE_INSERTED" < $2"#
        ),
        &[&(now() - Duration::days(7)), &(now() - Duration::days(1))],
    )
    .unwrap()
    .get(0)
}

/// Sets the band's rows of `table` pending again, the rest done, and forgets the claims.
fn reset(db: &mut postgres::Client, table: &str) {
    let (from, to) = (now() - Duration::days(7), now() - Duration::days(1));
    db.execute(
        &format!(
            r#"UPDATE "{table}" SET "STATUS" = 'NEW' WHERE "DATE_INSERTED" >= $1 AND "DATE_INSERTED" < $2 AND "STATUS" <> 'NEW'"#
        ),
        &[&from, &to],
    )
    .unwrap();
    for sql in [
        "DELETE FROM backlog.backlog_claims".to_string(),
        format!(r#"VACUUM ANALYZE "{table}""#),
    ] {
        db.batch_execute(&sql).unwrap();
    }
}

/// Each partition's scans so far (index and sequential), by the server's statistics.
fn scans(db: &mut postgres::Client) -> std::collections::BTreeMap<String, i64> {
    // The runners' sessions report theirs as they end; this one's snapshot is fresh.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    db.batch_execute("SELECT pg_stat_clear_snapshot()").unwrap();
    db.query(
        "SELECT relname::text, coalesce(idx_scan, 0) + coalesce(seq_scan, 0) FROM pg_stat_user_tables WHERE relname LIKE 'BACKLOG\\_%'",
        &[],
    )
    .unwrap()
    .iter()
    .map(|r| (r.get(0), r.get(1)))
    .collect()
}

fn pending(db: &mut postgres::Client, table: &str) -> i64 {
    db.query_one(
        &format!(r#"SELECT count(*) FROM "{table}" WHERE "STATUS" = 'NEW'"#),
        &[],
    )
    .unwrap()
    .get(0)
}

fn main() {
    let admin = std::env::var("BENCH_PG").unwrap_or_else(|_| {
        eprintln!("set BENCH_PG to a URL of a user who may create databases");
        std::process::exit(2)
    });
    let exe = std::env::current_exe().unwrap();
    let bin = std::env::var_os("BENCH_BIN")
        .map(PathBuf::from)
        .or_else(|| {
            exe.parent()
                .and_then(Path::parent)
                .map(|d| d.join("backlog"))
        })
        .filter(|b| b.exists())
        .unwrap_or_else(|| {
            eprintln!(
                "target/release/backlog not found: build it with `cargo build --release -F cli`"
            );
            std::process::exit(2)
        });
    let handler = exe.with_file_name("bench_handler");
    if !handler.exists() {
        eprintln!(
            "{} not found: build it with `cargo build --release -F cli --examples`",
            handler.display()
        );
        std::process::exit(2)
    }
    let rows = number("BENCH_ROWS", 50_000_000) as i64;
    let months = number("BENCH_MONTHS", 48) as i64;
    let rounds = number("BENCH_ROUNDS", 2);
    let dir = std::env::temp_dir().join(format!("bench-partitions-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();

    let mut server = postgres::Client::connect(&admin, postgres::NoTls).unwrap();
    let url = with_db(&admin, DB);
    let reuse = std::env::var_os("BENCH_REUSE").is_some();
    if !reuse {
        // One statement each: neither runs in a transaction.
        for sql in [
            format!("DROP DATABASE IF EXISTS {DB} WITH (FORCE)"),
            format!("CREATE DATABASE {DB}"),
        ] {
            server.batch_execute(&sql).unwrap();
        }
    }
    let mut db = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let band = if reuse {
        band_rows(&mut db, "BAND")
    } else {
        load(&mut db, rows, months)
    };
    let at = now().to_rfc3339();
    println!(
        "backlog: {}, {} cores; {rows} rows in {} monthly partitions against a plain table of the band's rows; {band} rows pending in the band (ages 1d to 7d)",
        bin.display(),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        months + 1
    );
    let tables = ["BACKLOG", "BAND"];
    for table in tables {
        let file = schedule(&dir, &url, table, &handler);
        let file = file.to_str().unwrap();
        // The tool's tables, made by a first tick long before the band's records.
        let past = (now() - Duration::days(3650)).to_rfc3339();
        backlog(&bin, &dir, &["run", "-w", "7d", "-s", file, "--now", &past]);
        let (secs, out) = backlog(&bin, &dir, &["doctor", "-s", file]);
        for line in out
            .lines()
            .filter(|l| l.contains("partition") || l.contains("band query"))
        {
            println!("  {table} doctor ({secs:.2} s): {}", line.trim());
        }
    }
    for round in 1..=rounds {
        println!("round {round}");
        let mut took = Vec::new();
        let mut order = tables.to_vec();
        if round % 2 == 0 {
            order.reverse();
        }
        for table in order {
            reset(&mut db, table);
            let before = scans(&mut db);
            let file = dir.join(format!("{table}.toml"));
            let file = file.to_str().unwrap();
            let args = ["run", "-w", "7d", "--json", "-s", file, "--now", &at];
            let (secs, out) = backlog(&bin, &dir, &args);
            let summary: serde_json::Value = serde_json::from_str(&out).unwrap();
            let done = summary["succeeded"].as_u64().unwrap_or(0);
            let (empty, _) = backlog(&bin, &dir, &args);
            if table == "BACKLOG" {
                let after = scans(&mut db);
                let read: Vec<&String> = after
                    .iter()
                    .filter(|(name, n)| before.get(*name) != Some(n))
                    .map(|(name, _)| name)
                    .collect();
                println!(
                    "  BACKLOG: partitions scanned by the two ticks: {} of {} ({})",
                    read.len(),
                    after.len(),
                    read.iter()
                        .map(|n| n.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            }
            println!(
                "  {table:>7}: {done} records in {secs:.2} s, {:>7.0}/s; empty tick {:.0} ms; {} left pending",
                done as f64 / secs,
                empty * 1000.0,
                pending(&mut db, table)
            );
            took.push((table, secs, empty));
        }
        took.sort_by_key(|t| t.0);
        let (parts, plain) = (took[0], took[1]);
        println!(
            "  partitioned / plain: tick {:.2}, empty tick {:.2}",
            parts.1 / plain.1,
            parts.2 / plain.2
        );
    }
    drop(db);
    let _ = std::fs::remove_dir_all(&dir);
    if std::env::var_os("BENCH_KEEP").is_none() {
        server
            .batch_execute(&format!("DROP DATABASE {DB} WITH (FORCE)"))
            .unwrap();
    }
}

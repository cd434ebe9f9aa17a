//! PostgreSQL throughput with 1, 2, 4 and 8 runners on one database, measured side by
//! side in one run against the floor:
//! `BENCH_PG=postgres://postgres:secret@127.0.0.1:5432/postgres cargo run --release --example bench_postgres`
//! (a superuser URL; the bench creates and drops a database `backlog_bench`).
//!
//! The table: 1,000,000 records over 400 days, 90 % pending, indexes on inserted-at and
//! status, as in `bench`. Every run starts from the same statuses (reset, then VACUUM).
//! - Floors, written directly against the table, each in one transaction after the
//!   band's SELECT of its ids:
//!   - per row: one prepared UPDATE per row, each waiting for its answer (the
//!     `postgres` crate), one round trip a row;
//!   - pipelined: the same prepared UPDATE per row, but 1,000 of them in flight at
//!     once on one connection (`tokio-postgres` futures polled together, which it
//!     writes out back to back): psycopg's pipelined `executemany`, the floor of
//!     issue 15;
//!   - batched: one `UPDATE … FROM unnest($1::bigint[])` per 1,000 ids.
//! - The first tick on the freshly generated database, which creates the tool's tables.
//! - Runners: N threads, each a tick of its own (its own connections, claims and
//!   heartbeat, as N processes on N hosts would have) over the same band of about
//!   70,000 pending records, with an in-process handler that does nothing; `BENCH_ROUNDS`
//!   rounds of the floors and of 1, 2, 4 and 8 runners, then the medians.
//!   `BENCH_ONLY=runners` runs only these, `BENCH_RUNNERS=1,4` only these counts,
//!   `BENCH_CLAIMS=unlogged` with an UNLOGGED claims table.
//! - History of attempts (`backlog_attempts`), one runner: the same tick with
//!   `[history]` off (`keep = 0`), as by default (failures only: nothing written for
//!   successes), with `record = "all"`, and with a handler that fails every record (by
//!   default, and with the history off), each against the floor measured in the same
//!   round, for `BENCH_ROUNDS` rounds (3). `BENCH_ONLY=history` runs only these.

use std::time::{Duration, Instant};

use backlog_core::config::{Config, HistoryConfig, HistoryRecord};
use backlog_core::{FnHandler, Outcome, TickOptions, process_backlog};
use chrono::{DateTime, TimeZone, Utc};
use postgres::{Client, NoTls};

const ROWS: i64 = 1_000_000;
const DB: &str = "backlog_bench";

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 21, 12, 0, 0).unwrap()
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

/// The statuses every run starts from: 10 % SUCCESS, 20 % ERROR, 70 % NEW.
const STATUS_OF_ID: &str = r#"CASE "ID" % 10 WHEN 0 THEN 'SUCCESS' WHEN 1 THEN 'ERROR' WHEN 2 THEN 'ERROR' ELSE 'NEW' END"#;

fn generate(db: &mut Client) {
    db.batch_execute(&format!(
        r#"CREATE TABLE "BACKLOG" ("ID" bigint PRIMARY KEY, "STATUS" text NOT NULL, "DATE_INSERTED" timestamptz NOT NULL, "PAYLOAD" text);
           INSERT INTO "BACKLOG" SELECT g, 'NEW', TIMESTAMPTZ '{}' - (400::bigint * 86400 * (g - 1) / {ROWS}) * INTERVAL '1 second', '{{"order": 1}}'
           FROM generate_series(1, {ROWS}) g;
           UPDATE "BACKLOG" SET "STATUS" = {STATUS_OF_ID};
           CREATE INDEX "BACKLOG_BY_DATE" ON "BACKLOG" ("DATE_INSERTED");
           CREATE INDEX "BACKLOG_BY_STATUS" ON "BACKLOG" ("STATUS");"#,
        now().to_rfc3339()
    ))
    .unwrap();
    // VACUUM runs alone: a multi-statement string is one transaction.
    db.batch_execute(r#"VACUUM ANALYZE "BACKLOG""#).unwrap();
}

/// Puts the band's statuses back and clears the tool's own tables.
fn reset(db: &mut Client) {
    db.batch_execute(&format!(
        r#"UPDATE "BACKLOG" SET "STATUS" = {STATUS_OF_ID} WHERE "STATUS" <> {STATUS_OF_ID}"#
    ))
    .unwrap();
    db.batch_execute(r#"VACUUM ANALYZE "BACKLOG""#).unwrap();
    let _ = db.batch_execute("TRUNCATE backlog.backlog_claims, backlog.backlog_runs");
    let _ = db.batch_execute("TRUNCATE backlog.backlog_attempts");
}

/// The band (1d, 32d] before `now`.
fn band() -> (DateTime<Utc>, DateTime<Utc>) {
    (
        now() - chrono::Duration::days(32),
        now() - chrono::Duration::days(1),
    )
}

fn floor(db: &mut Client) -> (f64, u64) {
    let started = Instant::now();
    let mut tx = db.transaction().unwrap();
    let ids = band_ids(&mut tx);
    let update = tx
        .prepare(r#"UPDATE "BACKLOG" SET "STATUS" = 'SUCCESS' WHERE "ID" = $1"#)
        .unwrap();
    for id in &ids {
        tx.execute(&update, &[id]).unwrap();
    }
    tx.commit().unwrap();
    (
        ids.len() as f64 / started.elapsed().as_secs_f64(),
        ids.len() as u64,
    )
}

/// The band's ids, newest first, in `tx`.
fn band_ids(tx: &mut postgres::Transaction<'_>) -> Vec<i64> {
    let (from, to) = band();
    tx.query(
        r#"SELECT "ID" FROM "BACKLOG" WHERE "DATE_INSERTED" >= $1 AND "DATE_INSERTED" < $2 AND "STATUS" = ANY ($3) ORDER BY "DATE_INSERTED" DESC, "ID" DESC"#,
        &[&from, &to, &vec!["NEW", "ERROR"]],
    )
    .unwrap()
    .iter()
    .map(|r| r.get(0))
    .collect()
}

/// The batched floor: one `UPDATE … FROM unnest` per 1,000 ids.
fn floor_batched(db: &mut Client) -> (f64, u64) {
    let started = Instant::now();
    let mut tx = db.transaction().unwrap();
    let ids = band_ids(&mut tx);
    let update = tx
        .prepare(r#"UPDATE "BACKLOG" t SET "STATUS" = 'SUCCESS' FROM unnest($1::bigint[]) AS u(id) WHERE t."ID" = u.id"#)
        .unwrap();
    for chunk in ids.chunks(1000) {
        tx.execute(&update, &[&chunk]).unwrap();
    }
    tx.commit().unwrap();
    (
        ids.len() as f64 / started.elapsed().as_secs_f64(),
        ids.len() as u64,
    )
}

/// The pipelined floor: an UPDATE per row, 1,000 in flight at once on one connection.
fn floor_pipelined(url: &str) -> (f64, u64) {
    use futures_util::{StreamExt, TryStreamExt};
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(connection);
        let (from, to) = band();
        let started = Instant::now();
        client.batch_execute("BEGIN").await.unwrap();
        let ids: Vec<i64> = client
            .query(
                r#"SELECT "ID" FROM "BACKLOG" WHERE "DATE_INSERTED" >= $1 AND "DATE_INSERTED" < $2 AND "STATUS" = ANY ($3) ORDER BY "DATE_INSERTED" DESC, "ID" DESC"#,
                &[&from, &to, &vec!["NEW", "ERROR"]],
            )
            .await
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        let update = client
            .prepare(r#"UPDATE "BACKLOG" SET "STATUS" = 'SUCCESS' WHERE "ID" = $1"#)
            .await
            .unwrap();
        futures_util::stream::iter(&ids)
            .map(|id| {
                let (client, update) = (&client, &update);
                async move { client.execute(update, &[id]).await }
            })
            .buffer_unordered(1000)
            .try_for_each(|_| async { Ok(()) })
            .await
            .unwrap();
        client.batch_execute("COMMIT").await.unwrap();
        (
            ids.len() as f64 / started.elapsed().as_secs_f64(),
            ids.len() as u64,
        )
    })
}

/// N runners on the band: records/s, records handled, and records the runners read
/// but found held by another (the work they duplicated).
fn runners(config: &Config, n: usize) -> (f64, u64, u64) {
    let started = Instant::now();
    let (handled, skipped): (u64, u64) = std::thread::scope(|scope| {
        let ticks: Vec<_> = (0..n)
            .map(|_| {
                scope.spawn(|| {
                    let mut store =
                        backlog_core::store::open(&config.database, &config.table).unwrap();
                    let opts = TickOptions::new(Duration::from_secs(32 * 86_400), now());
                    process_backlog(
                        &config.schedule,
                        &config.table,
                        store.as_mut(),
                        &mut FnHandler(|_: &backlog_core::Record| Outcome::Success),
                        &opts,
                        &mut |_| {},
                    )
                    .unwrap()
                })
            })
            .collect();
        ticks
            .into_iter()
            .map(|t| t.join().unwrap())
            .fold((0, 0), |(h, s), t| (h + t.selected, s + t.skipped))
    });
    (
        handled as f64 / started.elapsed().as_secs_f64(),
        handled,
        skipped,
    )
}

/// The median, the least and the most of `v`.
fn spread(v: &[f64]) -> (f64, f64, f64) {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

/// The first tick on the fresh database, then `rounds` rounds of the three floors and
/// of 1, 2, 4 and 8 runners, each from the same statuses; prints each round, then the
/// medians of records/s and of the ratios to the per-row and the pipelined floors of
/// the same round.
fn runners_bench(db: &mut Client, url: &str, config: &Config, rounds: usize) {
    reset(db);
    let (first, n, _) = runners(config, 1);
    println!(
        "first tick on the fresh database (makes the tool's tables): {n} records, {first:>7.0} records/s"
    );
    // `BENCH_CLAIMS=unlogged`: the same ticks with an UNLOGGED claims table, which
    // `backlog` does not make (see docs/benchmarks.md).
    if std::env::var("BENCH_CLAIMS").as_deref() == Ok("unlogged") {
        db.batch_execute("ALTER TABLE backlog.backlog_claims SET UNLOGGED")
            .unwrap();
        println!("the claims table is UNLOGGED from here on");
    }
    // `BENCH_RUNNERS=1,4` measures only these counts.
    let counts: Vec<usize> = std::env::var("BENCH_RUNNERS")
        .ok()
        .map(|v| v.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![1, 2, 4, 8]);
    // Per round: per-row, pipelined and batched floors, then the runners.
    let mut figures: Vec<Vec<f64>> = vec![Vec::new(); 3 + counts.len()];
    for round in 0..rounds {
        reset(db);
        let (per_row, n) = floor(db);
        reset(db);
        let (pipelined, m) = floor_pipelined(url);
        reset(db);
        let (batched, b) = floor_batched(db);
        assert_eq!((n, n), (m, b), "every floor covers the same band");
        println!(
            "round {}: {n} records; floors: per row {per_row:>6.0}/s, pipelined {pipelined:>6.0}/s, batched {batched:>6.0}/s",
            round + 1
        );
        for (i, f) in [per_row, pipelined, batched].into_iter().enumerate() {
            figures[i].push(f);
        }
        for (i, &count) in counts.iter().enumerate() {
            reset(db);
            let (rps, handled, skipped) = runners(config, count);
            assert_eq!(n, handled, "the runners cover the band once");
            println!(
                "  {count} runner{}: {rps:>6.0}/s = {:.2} of per row, {:.2} of pipelined; {skipped} read held by another",
                if count == 1 { " " } else { "s" },
                rps / per_row,
                rps / pipelined
            );
            figures[3 + i].push(rps);
        }
    }
    println!("floors and runners over {rounds} rounds (median, min–max):");
    let names = ["floor, per row", "floor, pipelined", "floor, batched"];
    for (name, v) in names.iter().zip(&figures) {
        let (m, lo, hi) = spread(v);
        println!("  {name:<17} {m:>7.0}/s ({lo:.0}–{hi:.0})");
    }
    let one = spread(&figures[3]).0;
    for (i, &count) in counts.iter().enumerate() {
        let v = &figures[3 + i];
        let ratio = |floor: &[f64]| {
            let r: Vec<f64> = v.iter().zip(floor).map(|(a, b)| a / b).collect();
            spread(&r).0
        };
        let (m, lo, hi) = spread(v);
        println!(
            "  {count} runner{}         {m:>7.0}/s ({lo:.0}–{hi:.0}); {:.2} of per row, {:.2} of pipelined, {:.2} of batched; {:.2} × one runner",
            if count == 1 { " " } else { "s" },
            ratio(&figures[0]),
            ratio(&figures[1]),
            ratio(&figures[2]),
            m / one
        );
    }
}

/// One tick in this thread with `history`, its handler failing every record if
/// `fails`: records/s and records handled.
fn history_tick(config: &Config, history: &HistoryConfig, fails: bool) -> (f64, u64) {
    let mut store = backlog_core::store::open(&config.database, &config.table).unwrap();
    let mut opts = TickOptions::new(Duration::from_secs(32 * 86_400), now());
    opts.history = history.clone();
    let outcome = if fails {
        Outcome::Error
    } else {
        Outcome::Success
    };
    let started = Instant::now();
    let summary = process_backlog(
        &config.schedule,
        &config.table,
        store.as_mut(),
        &mut FnHandler(move |_: &backlog_core::Record| outcome.clone()),
        &opts,
        &mut |_| {},
    )
    .unwrap();
    (
        summary.selected as f64 / started.elapsed().as_secs_f64(),
        summary.selected,
    )
}

/// The floor and one runner with each history, `rounds` times; prints each round,
/// then the medians and spreads of records/s and of the ratios to the history-off
/// tick and to the floor of the same round.
fn history_bench(db: &mut Client, config: &Config, rounds: usize) {
    let mut off = HistoryConfig::default();
    off.keep = Duration::ZERO;
    let mut all = HistoryConfig::default();
    all.record = HistoryRecord::All;
    let cases: [(&str, HistoryConfig, bool); 5] = [
        ("history off (keep = 0)", off.clone(), false),
        ("default (failures only)", HistoryConfig::default(), false),
        ("record = all", all, false),
        (
            "every record fails, default",
            HistoryConfig::default(),
            true,
        ),
        ("every record fails, off", off, true),
    ];
    let mut figures: Vec<[Vec<f64>; 3]> = cases.iter().map(|_| Default::default()).collect();
    // Untimed: the first tick of a database makes the tool's tables.
    reset(db);
    let (warm, _) = history_tick(config, &HistoryConfig::default(), false);
    eprintln!("  a first tick, untimed: {warm:.0} records/s");
    for round in 0..rounds {
        reset(db);
        let (floor_rps, n) = floor(db);
        let mut rps = vec![0.0; cases.len()];
        let mut order = Vec::new();
        for k in 0..cases.len() {
            let i = (round + k) % cases.len();
            let (name, history, fails) = &cases[i];
            reset(db);
            let (r, m) = history_tick(config, history, *fails);
            assert_eq!(n, m, "every tick and the floor cover the same band");
            let attempts: i64 = db
                .query_one("SELECT count(*) FROM backlog.backlog_attempts", &[])
                .map_or(0, |r| r.get(0));
            eprintln!("  {name}: {attempts} attempt rows");
            rps[i] = r;
            order.push(i + 1);
        }
        println!(
            "round {}: {n} records; floor {floor_rps:>7.0}/s; ticks in the order {order:?}",
            round + 1
        );
        for (i, (name, _, _)) in cases.iter().enumerate() {
            let (of_off, of_floor) = (rps[i] / rps[0], rps[i] / floor_rps);
            println!(
                "  {}. {name:<28} {:>7.0}/s = {of_off:.3} of off, {of_floor:.3} of the floor",
                i + 1,
                rps[i]
            );
            figures[i][0].push(rps[i]);
            figures[i][1].push(of_off);
            figures[i][2].push(of_floor);
        }
    }
    println!("history of attempts, one runner, over {rounds} rounds (median, min–max):");
    for ((name, _, _), [rps, of_off, of_floor]) in cases.iter().zip(&figures) {
        let (r, r0, r1) = spread(rps);
        let (o, o0, o1) = spread(of_off);
        let (f, f0, f1) = spread(of_floor);
        println!(
            "  {name:<28} {r:>7.0}/s ({r0:.0}–{r1:.0}); {o:.3} of off ({o0:.3}–{o1:.3}); {f:.3} of the floor ({f0:.3}–{f1:.3})"
        );
    }
}

fn main() {
    backlog_sqlite::install();
    backlog_postgres::install();
    backlog_mysql::install();
    let Ok(admin) = std::env::var("BENCH_PG") else {
        eprintln!(
            "set BENCH_PG to a superuser URL, like postgres://postgres:secret@127.0.0.1:5432/postgres"
        );
        std::process::exit(2);
    };
    let mut server = Client::connect(&admin, NoTls).unwrap();
    server
        .batch_execute(&format!("DROP DATABASE IF EXISTS {DB} WITH (FORCE)"))
        .unwrap();
    server
        .batch_execute(&format!("CREATE DATABASE {DB}"))
        .unwrap();
    let url = with_db(&admin, DB);
    let mut db = Client::connect(&url, NoTls).unwrap();
    let started = Instant::now();
    generate(&mut db);
    println!(
        "generated {ROWS} records over 400 days in {:.1}s",
        started.elapsed().as_secs_f64()
    );

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bench.toml");
    std::fs::write(
        &file,
        format!(
            r#"[database]
url = "{url}"
[table]
name = "BACKLOG"
id = "ID"
status = "STATUS"
inserted_at = "DATE_INSERTED"
[handler]
command = ["true"]
[[tier]]
window = "1d"
every = "1h"
[[tier]]
window = "32d"
every = "1h"
limit = 1000000
"#
        ),
    )
    .unwrap();
    let config = Config::load(&file).unwrap();

    let rounds: usize = std::env::var("BENCH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(3);
    if std::env::var("BENCH_ONLY").as_deref() == Ok("history") {
        history_bench(&mut db, &config, rounds);
        drop(db);
        server
            .batch_execute(&format!("DROP DATABASE {DB} WITH (FORCE)"))
            .unwrap();
        return;
    }
    runners_bench(&mut db, &url, &config, rounds);
    if std::env::var("BENCH_ONLY").as_deref() != Ok("runners") {
        history_bench(&mut db, &config, rounds);
    }
    drop(db);
    server
        .batch_execute(&format!("DROP DATABASE {DB} WITH (FORCE)"))
        .unwrap();
}

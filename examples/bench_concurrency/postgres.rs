//! Part 4: runners on PostgreSQL.

use std::process::{Output, Stdio};
use std::time::Instant;

use crate::common::*;

/// The URL with another database name.
pub(crate) fn with_db(url: &str, db: &str) -> String {
    let (base, query) = url.split_once('?').map_or((url, ""), |(b, q)| (b, q));
    let base = base.rsplit_once('/').map_or(base, |(b, _)| b);
    if query.is_empty() {
        format!("{base}/{db}")
    } else {
        format!("{base}/{db}?{query}")
    }
}

pub(crate) fn postgres(bench: &Bench) {
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

//! The binary as a user runs it, against the script they would write by hand (issue 15):
//! `cargo build --release -F cli && cargo run --release --example bench_binary [DIR]`.
//!
//! Times whole processes from outside, start-up included: `backlog run -w 30d --now …`
//! with a perl one-line batch answerer (`mode = "batch"`, `batch_size = 1000`), the
//! Python script by hand (one SELECT of the band, one UPDATE per row, one transaction,
//! no handler), and a Rust floor (the same, with rusqlite, in a process of its own:
//! this example run as `bench_binary floor DB`). Three layouts of one table of
//! 1,000,000 rows over 400 days (60 % NEW, 30 % ERROR, 10 % SUCCESS, an `ORDER_DATA`
//! payload), generated once under DIR (default `target/bench-binary`):
//!
//! - `composite`: one index on (STATUS, DATE_INSERTED), a rollback journal, ids
//!   scattered (a row's id says nothing of its date, so the band's rows lie all over
//!   the table's B-tree);
//! - `wal`: one index on DATE_INSERTED alone, WAL, ids scattered;
//! - `ordered`: the same as `wal` with ids in date order.
//!
//! Every command runs on a fresh copy of the layout's database, synced to disk before
//! the clock starts; the commands alternate within a round, their order turned by one
//! each round, for `BENCH_ROUNDS` rounds (5). Each run prints its wall, user and system
//! seconds; the summary prints medians and the median of the rounds' ratios, so a
//! drift of the machine's speed moves both sides of a ratio alike.
//!
//! `BACKLOG_BIN` names the binary (default: the release `backlog` beside this example); `BACKLOG_BIN_OLD`, when set, adds a second binary to
//! every round (before/after in one run). `BENCH_LAYOUTS=composite,wal` picks layouts.
//! `BENCH_ONE=composite` prepares one fresh copy and prints the command lines to run
//! it under a profiler, without timing anything.
//!
//! `BENCH_OTEL=1` adds the binary exporting its spans and metrics over OTLP (issue 56):
//! `otel` to a receiver this example runs on loopback (axum, decoding each request
//! with opentelemetry-proto and counting its spans, as a collector on the host would),
//! `otel-down` to a port that refuses, `otel-hang` to one that accepts and never
//! answers; each is also given as a ratio to `backlog`'s wall time, round by round.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use chrono::{DateTime, TimeZone, Utc};
use rusqlite::{Connection, params};

const ROWS: u64 = 1_000_000;
const DAYS: u64 = 400;

/// About the most trivial batch answerer: each line rewritten to its answer as it
/// comes, flushed per line (docs/handler.md).
const PERL_ANSWERER: &str = r#"$| = 1; print "{\"id\":$1,\"code\":0}\n" if /^\{"id":([^,]*),/"#;

/// The script by hand: the band in one SELECT, one UPDATE per row, one transaction.
const PYTHON_BY_HAND: &str = r#"import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
rows = db.execute(
    "SELECT * FROM BACKLOG WHERE STATUS IN ('NEW', 'ERROR') AND DATE_INSERTED >= ? AND DATE_INSERTED <= ? ORDER BY DATE_INSERTED DESC",
    (sys.argv[2], sys.argv[3]),
).fetchall()
for row in rows:
    # the handler's work would go here
    db.execute("UPDATE BACKLOG SET STATUS = 'SUCCESS' WHERE ID = ?", (row[0],))
db.commit()
"#;

#[derive(Clone, Copy)]
struct Layout {
    name: &'static str,
    composite: bool,
    wal: bool,
    scattered: bool,
}

const LAYOUTS: [Layout; 3] = [
    Layout {
        name: "composite",
        composite: true,
        wal: false,
        scattered: true,
    },
    Layout {
        name: "wal",
        composite: false,
        wal: true,
        scattered: true,
    },
    Layout {
        name: "ordered",
        composite: false,
        wal: true,
        scattered: false,
    },
];

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 21, 12, 0, 0).unwrap()
}

fn sqlite_time(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-%d %H:%M:%S").to_string()
}

/// The 30d tier's band, oldest and newest inserted-at values, as the script binds them.
fn band() -> (String, String) {
    (
        sqlite_time(now() - chrono::Duration::days(30)),
        sqlite_time(now()),
    )
}

/// The ids in insertion order: 1..=ROWS, or those shuffled (Fisher-Yates with a fixed
/// xorshift seed), so a row's id says nothing of its date.
fn ids(scattered: bool) -> Vec<u64> {
    let mut ids: Vec<u64> = (1..=ROWS).collect();
    if scattered {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for i in (1..ids.len()).rev() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ids.swap(i, (x % (i as u64 + 1)) as usize);
        }
    }
    ids
}

fn generate(path: &Path, layout: Layout) {
    let _ = std::fs::remove_file(path);
    let mut db = Connection::open(path).unwrap();
    let journal = if layout.wal { "WAL" } else { "DELETE" };
    db.execute_batch(&format!(
        "PRAGMA journal_mode = {journal};
         CREATE TABLE BACKLOG (ID INTEGER PRIMARY KEY, STATUS TEXT NOT NULL,
             DATE_INSERTED TEXT NOT NULL, ORDER_DATA TEXT);"
    ))
    .unwrap();
    let tx = db.transaction().unwrap();
    {
        let mut insert = tx
            .prepare("INSERT INTO BACKLOG VALUES (?1, ?2, ?3, ?4)")
            .unwrap();
        let span = DAYS * 86_400;
        let ids = ids(layout.scattered);
        for i in 0..ROWS {
            // Oldest first, as rows arrive.
            let at = now() - chrono::Duration::seconds((span - span * i / ROWS) as i64);
            let id = ids[i as usize];
            let status = match i % 10 {
                0 => "SUCCESS",
                1..=3 => "ERROR",
                _ => "NEW",
            };
            let data = format!(
                r#"{{"order": {i}, "customer": "C-{}", "lines": [{{"sku": "A-{}", "qty": {}}}]}}"#,
                i % 7919,
                i % 613,
                1 + i % 5
            );
            insert
                .execute(params![id as i64, status, sqlite_time(at), data])
                .unwrap();
        }
    }
    tx.commit().unwrap();
    let index = if layout.composite {
        "CREATE INDEX BACKLOG_BY_STATUS_DATE ON BACKLOG (STATUS, DATE_INSERTED);"
    } else {
        "CREATE INDEX BACKLOG_BY_DATE ON BACKLOG (DATE_INSERTED);"
    };
    db.execute_batch(&format!("{index} ANALYZE;")).unwrap();
    if layout.wal {
        db.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")
            .unwrap();
    }
}

fn schedule_file(db: &Path, answerer: &Path) -> String {
    format!(
        r#"limit = 1000000

[database]
url = "{}"

[table]
name = "BACKLOG"
id = "ID"
status = "STATUS"
inserted_at = "DATE_INSERTED"

[handler]
command = ["perl", "-n", "{}"]
mode = "batch"
batch_size = 1000

[[tier]]
window = "30d"
every = "1d"
"#,
        db.display(),
        answerer.display()
    )
}

/// A fresh copy of `from`, on disk before any clock starts: a commit's fsync would
/// otherwise also flush whatever of the copy the kernel had not written back.
fn fresh(from: &Path, to: &Path) {
    for suffix in ["", "-journal", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", to.display()));
    }
    std::fs::copy(from, to).unwrap();
    std::fs::File::open(to).unwrap().sync_all().unwrap();
    std::fs::File::open(to.parent().unwrap())
        .unwrap()
        .sync_all()
        .unwrap();
}

/// The Rust floor, run as `bench_binary floor DB`: the script by hand with rusqlite.
fn floor(db: &Path) {
    let mut db = Connection::open(db).unwrap();
    let (low, high) = band();
    let tx = db.transaction().unwrap();
    let ids: Vec<i64> = {
        let mut select = tx
            .prepare("SELECT * FROM BACKLOG WHERE STATUS IN ('NEW', 'ERROR') AND DATE_INSERTED >= ?1 AND DATE_INSERTED <= ?2 ORDER BY DATE_INSERTED DESC")
            .unwrap();
        let width = select.column_count();
        select
            .query_map(params![low, high], |r| {
                let row: Vec<rusqlite::types::Value> =
                    (0..width).map(|i| r.get(i)).collect::<Result<_, _>>()?;
                std::hint::black_box(&row);
                r.get(0)
            })
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    let mut update = tx
        .prepare("UPDATE BACKLOG SET STATUS = 'SUCCESS' WHERE ID = ?1")
        .unwrap();
    for id in &ids {
        update.execute([id]).unwrap();
    }
    drop(update);
    tx.commit().unwrap();
    println!("{}", ids.len());
}

/// One timed run: wall, user and system seconds of the whole child process.
fn timed(command: &mut Command) -> (f64, f64, f64) {
    let before = children_cpu();
    let started = Instant::now();
    let out = command.output().unwrap();
    let wall = started.elapsed().as_secs_f64();
    let after = children_cpu();
    assert!(
        out.status.success(),
        "{command:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (wall, after.0 - before.0, after.1 - before.1)
}

fn children_cpu() -> (f64, f64) {
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut u) };
    let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 / 1e6;
    (t(u.ru_utime), t(u.ru_stime))
}

fn pending_in_band(db: &Path) -> i64 {
    let (low, high) = band();
    Connection::open(db)
        .unwrap()
        .query_row(
            "SELECT count(*) FROM BACKLOG WHERE STATUS IN ('NEW', 'ERROR') AND DATE_INSERTED >= ?1 AND DATE_INSERTED <= ?2",
            params![low, high],
            |r| r.get(0),
        )
        .unwrap()
}

/// The `backlog` built beside this example (`target/release/examples/..`).
fn default_binary() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().join("backlog")
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The commands of a round on one layout: (name, the command on database `db`).
/// A command of a round, by name: what it runs on a given copy of the database.
type Named = (String, Box<dyn Fn(&Path) -> Command>);

fn commands(dir: &Path, layout: Layout, otel: Option<&Collectors>) -> Vec<Named> {
    let answerer = dir.join("answer.pl");
    let script = dir.join("by_hand.py");
    let mut binaries = vec![(
        "backlog".to_string(),
        std::env::var_os("BACKLOG_BIN")
            .map(PathBuf::from)
            .unwrap_or_else(default_binary),
    )];
    if let Some(old) = std::env::var_os("BACKLOG_BIN_OLD") {
        binaries.push(("old".to_string(), PathBuf::from(old)));
    }
    let mut list: Vec<Named> = Vec::new();
    if let Some(otel) = otel {
        let binary = binaries[0].1.clone();
        for (name, endpoint) in [
            ("otel", &otel.live),
            ("otel-down", &otel.down),
            ("otel-hang", &otel.hanging),
        ] {
            let (dir, answerer, binary) = (dir.to_path_buf(), answerer.clone(), binary.clone());
            let (endpoint, file_name) = (endpoint.clone(), format!("{}-{name}", layout.name));
            list.push((
                name.to_string(),
                Box::new(move |db: &Path| {
                    let file = dir.join(format!("{file_name}.toml"));
                    std::fs::write(&file, schedule_file(db, &answerer)).unwrap();
                    let mut c = Command::new(&binary);
                    c.arg("run").arg("--schedule").arg(&file);
                    c.args(["-w", "30d", "--now", &now().to_rfc3339()]);
                    c.env("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint);
                    c
                }),
            ));
        }
    }
    for (name, binary) in binaries {
        let (dir, answerer) = (dir.to_path_buf(), answerer.clone());
        let name_ = format!("{}-{}", layout.name, name);
        list.push((
            name,
            Box::new(move |db: &Path| {
                let file = dir.join(format!("{name_}.toml"));
                std::fs::write(&file, schedule_file(db, &answerer)).unwrap();
                let mut c = Command::new(&binary);
                c.arg("run").arg("--schedule").arg(&file);
                c.args(["-w", "30d", "--now", &now().to_rfc3339()]);
                c
            }),
        ));
    }
    list.push((
        "python".to_string(),
        Box::new(move |db: &Path| {
            let (low, high) = band();
            let mut c = Command::new("python3");
            c.arg(&script).arg(db).arg(low).arg(high);
            c
        }),
    ));
    list.push((
        "floor".to_string(),
        Box::new(|db: &Path| {
            let mut c = Command::new(std::env::current_exe().unwrap());
            c.arg("floor").arg(db);
            c
        }),
    ));
    list
}

/// The OTLP endpoints of `BENCH_OTEL`: a receiver that counts the spans it decodes,
/// a port that refuses, one that never answers.
struct Collectors {
    live: String,
    down: String,
    hanging: String,
    spans: std::sync::Arc<std::sync::atomic::AtomicU64>,
    _runtime: tokio::runtime::Runtime,
}

fn collectors() -> Collectors {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let live = format!("http://{}", listener.local_addr().unwrap());
    let spans = Arc::new(AtomicU64::new(0));
    let counted = Arc::clone(&spans);
    runtime.spawn(async move {
        let app = axum::Router::new().fallback(move |body: axum::body::Bytes| {
            let counted = Arc::clone(&counted);
            async move {
                use prost::Message;
                let request = opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest::decode(body);
                let n: usize = request.map_or(0, |r| {
                    r.resource_spans
                        .iter()
                        .flat_map(|r| &r.scope_spans)
                        .map(|s| s.spans.len())
                        .sum()
                });
                counted.fetch_add(n as u64, Ordering::Relaxed);
                ""
            }
        });
        let listener = tokio::net::TcpListener::from_std(listener).unwrap();
        axum::serve(listener, app).await.unwrap();
    });
    let down = {
        let refused = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", refused.local_addr().unwrap())
    };
    let quiet = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let hanging = format!("http://{}", quiet.local_addr().unwrap());
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in quiet.incoming().flatten() {
            held.push(stream);
        }
    });
    Collectors {
        live,
        down,
        hanging,
        spans,
        _runtime: runtime,
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("floor") {
        return floor(Path::new(&args[2]));
    }
    let dir = PathBuf::from(args.get(1).map_or("target/bench-binary", String::as_str));
    std::fs::create_dir_all(&dir).unwrap();
    let dir = dir.canonicalize().unwrap();
    std::fs::write(dir.join("answer.pl"), PERL_ANSWERER).unwrap();
    std::fs::write(dir.join("by_hand.py"), PYTHON_BY_HAND).unwrap();
    let rounds: usize = std::env::var("BENCH_ROUNDS").map_or(5, |v| v.parse().unwrap());
    let picked = std::env::var("BENCH_LAYOUTS").ok();
    let one = std::env::var("BENCH_ONE").ok();
    let otel = std::env::var_os("BENCH_OTEL").map(|_| collectors());
    let layouts: Vec<Layout> = LAYOUTS
        .into_iter()
        .filter(|l| match (&one, &picked) {
            (Some(one), _) => one == l.name,
            (None, Some(p)) => p.split(',').any(|n| n == l.name),
            (None, None) => true,
        })
        .collect();
    for layout in &layouts {
        let source = dir.join(format!("{}.db", layout.name));
        if !source.exists() {
            eprintln!("generating {}", source.display());
            generate(&source, *layout);
        }
    }
    if one.is_some() {
        let layout = layouts[0];
        let db = dir.join(format!("{}-run.db", layout.name));
        fresh(&dir.join(format!("{}.db", layout.name)), &db);
        for (name, make) in commands(&dir, layout, otel.as_ref()) {
            println!("{name}: {:?}", make(&db));
        }
        return;
    }
    for layout in layouts {
        let source = dir.join(format!("{}.db", layout.name));
        println!(
            "layout {}: {} pending records in the band",
            layout.name,
            pending_in_band(&source)
        );
        let list = commands(&dir, layout, otel.as_ref());
        let mut walls: Vec<Vec<f64>> = vec![Vec::new(); list.len()];
        for round in 0..rounds {
            for k in 0..list.len() {
                let i = (k + round) % list.len();
                let db = dir.join(format!("{}-run.db", layout.name));
                fresh(&source, &db);
                let received = otel
                    .as_ref()
                    .map(|o| o.spans.load(std::sync::atomic::Ordering::Relaxed));
                let (wall, user, sys) = timed(&mut (list[i].1)(&db));
                let spans = match (&otel, received) {
                    (Some(o), Some(before)) if list[i].0 == "otel" => format!(
                        ", {} spans received",
                        o.spans.load(std::sync::atomic::Ordering::Relaxed) - before
                    ),
                    _ => String::new(),
                };
                println!(
                    "  round {round} {:8} {wall:.3} s wall {user:.3} user {sys:.3} sys{spans}",
                    list[i].0
                );
                walls[i].push(wall);
            }
        }
        let python = list.iter().position(|(n, _)| n == "python").unwrap();
        let floor = list.iter().position(|(n, _)| n == "floor").unwrap();
        let plain = list.iter().position(|(n, _)| n == "backlog").unwrap();
        for (i, (name, _)) in list.iter().enumerate() {
            let ratio = |j: usize| {
                let r: Vec<f64> = (0..rounds).map(|k| walls[j][k] / walls[i][k]).collect();
                median(&r)
            };
            let against_plain = match otel.is_some() {
                true => format!(", {:.3} x backlog's time", 1.0 / ratio(plain)),
                false => String::new(),
            };
            println!(
                "  {:10} {name:9} median {:.3} s, {:.2} x python, {:.2} of the floor{against_plain}",
                layout.name,
                median(&walls[i]),
                ratio(python),
                ratio(floor)
            );
        }
    }
}

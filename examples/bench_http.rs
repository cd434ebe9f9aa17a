//! The URL handler (`[handler] url = …`) as a user runs it, against what they would
//! do without it: `cargo build --release -F cli && cargo run --release --example bench_http`.
//!
//! Whole processes timed from outside, start-up included, side by side in one run:
//! each figure is the best of `BENCH_ROUNDS` (3) rounds, the order of the commands
//! turned by one each round. Every run works on a fresh copy of a generated SQLite
//! backlog (the demo's table, rollback journal, an index on DATE_INSERTED), all its
//! records pending and inserted between 1 minute and 22 hours before the pinned clock
//! (`--now`), so the 1d tier's band is all of them; the tool's own tables are made
//! beforehand, by a tick over an empty band, as after a database's first tick. After
//! each run the bench counts the table's SUCCESS rows and fails unless every record
//! is one.
//!
//! A. 5,000 records POSTed to a local nginx (started by the bench on a free loopback
//!    port, `return 200 "ok"`), 8 at once:
//!    1. `backlog run --window 1d` with `url = "http://127.0.0.1:PORT/orders/{ID}"`;
//!    2. the same with a command handler running curl per record (over a copy of
//!       1,000 records: it is slow);
//!    3. the Python script a user writes in ten minutes (stdlib only: 8 threads, each
//!       with its own keep-alive `http.client.HTTPConnection`, then one transaction of
//!       UPDATEs);
//!    4. `ab -k -c 8`, 50,000 POSTs of one record's JSON: the HTTP floor, no database.
//!
//!    Targets: built-in ≥ 3× the script, ≥ 40× the curl handler.
//! B. 10,000 records POSTed to a counterpart that answers after 100 ms (an axum server
//!    in this process), `concurrency = 256`: against the ideal 256 / 0.1 s = 2,560/s
//!    (target ≥ 0.9 of it).
//!
//! Each run prints its wall time, the CPU of the client process (with its children:
//! curl and sh for the command handler) and of the server (nginx's master and worker,
//! or this process for B). Needs nginx (Debian: `nginx-light`), `ab` (`apache2-utils`),
//! curl and python3. `BACKLOG_BIN` names the binary (default: the release `backlog`
//! beside this example). `BENCH_ONLY=a` or `b` runs one shape. The folder is a fresh
//! temporary one, or the first argument (then left behind, with the schedule files,
//! the templates and the script, for timing single commands by hand). No figure is
//! asserted: the machine may be shared and noisy.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use chrono::{DateTime, TimeZone, Utc};
use rusqlite::{Connection, params};

/// Shape A's records, and the curl handler's (its copy is smaller: ~300 records/s).
const RECORDS_A: u64 = 5_000;
const RECORDS_CURL: u64 = 1_000;
/// Shape B's records, its concurrency and its counterpart's answer time.
const RECORDS_B: u64 = 10_000;
const CONCURRENCY_B: usize = 256;
const ANSWER_AFTER: Duration = Duration::from_millis(100);
/// The floor's requests: long enough for ab's own figure to settle.
const AB_REQUESTS: u64 = 50_000;

/// What a user writes in ten minutes: the band in one SELECT, 8 threads each with a
/// keep-alive connection of its own, then every success marked in one transaction.
const PYTHON_BY_HAND: &str = r#"import json, sqlite3, sys, threading
from concurrent.futures import ThreadPoolExecutor
from http.client import HTTPConnection

db_path, low, high, port = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
db = sqlite3.connect(db_path)
db.row_factory = sqlite3.Row
rows = db.execute(
    "SELECT * FROM BACKLOG WHERE STATUS IN ('NEW', 'ERROR') AND DATE_INSERTED > ? AND DATE_INSERTED <= ?",
    (low, high),
).fetchall()
local = threading.local()

def post(row):
    conn = getattr(local, "conn", None)
    if conn is None:
        conn = local.conn = HTTPConnection("127.0.0.1", port, timeout=30)
    body = json.dumps(dict(row))
    conn.request("POST", f"/orders/{row['ID']}", body, {"Content-Type": "application/json"})
    answer = conn.getresponse()
    answer.read()
    return row["ID"] if 200 <= answer.status < 300 else None

with ThreadPoolExecutor(8) as pool:
    done = [i for i in pool.map(post, rows) if i is not None]
db.executemany("UPDATE BACKLOG SET STATUS = 'SUCCESS' WHERE ID = ?", [(i,) for i in done])
db.commit()
print(len(done))
"#;

/// The pinned clock every run sees (`--now`; the script's band).
fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 21, 12, 0, 0).unwrap()
}

fn sqlite_time(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-%d %H:%M:%S").to_string()
}

/// The 1d tier's band as the script binds it: (now - 1d, now].
fn band() -> (String, String) {
    (
        sqlite_time(now() - chrono::Duration::days(1)),
        sqlite_time(now()),
    )
}

/// The backlog binary: `BACKLOG_BIN`, else the release `backlog` beside this example
/// (`target/release/examples/..`).
fn backlog_binary() -> PathBuf {
    std::env::var_os("BACKLOG_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let exe = std::env::current_exe().unwrap();
            exe.parent().unwrap().parent().unwrap().join("backlog")
        })
}

/// The tools the bench runs, and the Debian package of each.
const TOOLS: [(&str, &str); 4] = [
    ("nginx", "nginx-light"),
    ("ab", "apache2-utils"),
    ("curl", "curl"),
    ("python3", "python3"),
];

/// Where a program is: on PATH, or in /usr/sbin (nginx's, which a user's PATH may
/// lack).
fn find(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin")])
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}

/// A demo-like backlog of `n` pending records, record 1 the youngest, seconds apart
/// between 1 minute and 22 hours old.
fn generate(path: &Path, n: u64) {
    for suffix in ["", "-journal", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    let mut db = Connection::open(path).unwrap();
    db.execute_batch(
        "CREATE TABLE BACKLOG (ID INTEGER PRIMARY KEY, STATUS TEXT NOT NULL,
             DATE_INSERTED TEXT, PAYLOAD TEXT);
         CREATE INDEX BACKLOG_BY_DATE_INSERTED ON BACKLOG (DATE_INSERTED);",
    )
    .unwrap();
    let tx = db.transaction().unwrap();
    {
        let mut insert = tx
            .prepare("INSERT INTO BACKLOG VALUES (?1, 'NEW', ?2, ?3)")
            .unwrap();
        for i in 0..n {
            let age = 60 + 22 * 3600 * i / n;
            let id = i as i64 + 1;
            insert
                .execute(params![
                    id,
                    sqlite_time(now() - chrono::Duration::seconds(age as i64)),
                    payload(id)
                ])
                .unwrap();
        }
    }
    tx.commit().unwrap();
}

fn payload(id: i64) -> String {
    format!(
        r#"{{"order": {}, "customer": "c{:02}", "amount_cents": {}}}"#,
        10_000 + id,
        id % 37,
        (id * 7919) % 100_000
    )
}

/// A schedule file: one tier of 1d (the default schedule's first), the handler given.
fn schedule(db: &Path, handler: &str) -> String {
    format!(
        r#"[database]
url = "{}"

[table]
name = "BACKLOG"
id = "ID"
status = "STATUS"
inserted_at = "DATE_INSERTED"
pending = ["NEW", "ERROR"]
success = "SUCCESS"
error = "ERROR"

[handler]
{handler}
timeout = "30s"

[[tier]]
window = "1d"
every = "5m"
limit = 100000
"#,
        db.display()
    )
}

/// Rows of the table with the given status.
fn count(db: &Path, status: &str) -> u64 {
    Connection::open(db)
        .unwrap()
        .query_row(
            "SELECT count(*) FROM BACKLOG WHERE STATUS = ?1",
            [status],
            |r| r.get::<_, i64>(0),
        )
        .unwrap() as u64
}

/// The seconds of CPU (user, system) of this process's waited-for children.
fn children_cpu() -> (f64, f64) {
    rusage(libc::RUSAGE_CHILDREN)
}

fn rusage(who: libc::c_int) -> (f64, f64) {
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(who, &mut u) };
    let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 / 1e6;
    (t(u.ru_utime), t(u.ru_stime))
}

/// User + system seconds of a process and its children (nginx's master and worker),
/// from /proc: the server's share of a run's CPU.
fn tree_cpu(root: u32) -> f64 {
    let tick = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let mut total = 0.0;
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let pid: u32 = match entry.file_name().to_str().and_then(|n| n.parse().ok()) {
            Some(pid) => pid,
            None => continue,
        };
        // After the command's name in parentheses: state, ppid, … utime (14), stime (15).
        let Some(rest) = stat.rfind(')').map(|at| &stat[at + 2..]) else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let ppid: u32 = fields.get(1).and_then(|f| f.parse().ok()).unwrap_or(0);
        if pid == root || ppid == root {
            let ticks: f64 =
                fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
            total += ticks / tick;
        }
    }
    total
}

/// A loopback port nobody listens on now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The bench's own nginx, stopped when dropped (a panic included), so no run leaves
/// one listening.
struct Nginx {
    child: Child,
    port: u16,
}

impl Nginx {
    fn start(dir: &Path) -> Nginx {
        let port = free_port();
        let d = dir.display();
        // `return 200` answers any method: a static location would answer POST 405.
        // The temp paths are the folder's, so that nginx starts without root too.
        let conf = format!(
            r#"daemon off;
master_process on;
worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/nginx-error.log;
events {{}}
http {{
    access_log off;
    client_body_temp_path {d}/nginx-body;
    proxy_temp_path {d}/nginx-proxy;
    fastcgi_temp_path {d}/nginx-fastcgi;
    uwsgi_temp_path {d}/nginx-uwsgi;
    scgi_temp_path {d}/nginx-scgi;
    server {{
        listen 127.0.0.1:{port};
        location / {{ return 200 "ok"; }}
    }}
}}
"#
        );
        let conf_path = dir.join("nginx.conf");
        std::fs::write(&conf_path, conf).unwrap();
        let child = Command::new(find("nginx").expect("nginx"))
            .arg("-p")
            .arg(dir)
            .arg("-c")
            .arg(&conf_path)
            .arg("-e")
            .arg(dir.join("nginx-error.log"))
            .stdin(Stdio::null())
            .spawn()
            .expect("starting nginx");
        let mut nginx = Nginx { child, port };
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Ok(Some(status)) = nginx.child.try_wait() {
                panic!(
                    "nginx exited ({status}): {}",
                    std::fs::read_to_string(dir.join("nginx-error.log")).unwrap_or_default()
                );
            }
            assert!(
                Instant::now() < deadline,
                "nginx is not listening on port {port} after 10 s"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        nginx
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/orders", self.port)
    }

    fn cpu(&self) -> f64 {
        tree_cpu(self.child.id())
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        // SIGTERM: the master stops its worker and exits (fast shutdown).
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A POST of `body` to `url` must come back 200: checked with curl before any run.
fn check_post(url: &str, body: &Path) {
    let out = Command::new("curl")
        .args(["-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST"])
        .arg("--data-binary")
        .arg(format!("@{}", body.display()))
        .arg(url)
        .output()
        .unwrap();
    let code = String::from_utf8_lossy(&out.stdout);
    assert_eq!(code, "200", "a POST to {url} got {code:?}, not 200");
}

/// The bench's folder and binary.
#[derive(Clone)]
struct Bench {
    dir: PathBuf,
    bin: PathBuf,
}

impl Bench {
    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// The database every run works on: a fresh copy of a template.
    fn work(&self) -> PathBuf {
        self.path("work.db")
    }

    /// Copies `template` to work.db, on disk before any clock starts: a commit's fsync
    /// would otherwise also flush the copy.
    fn fresh(&self, template: &Path) {
        let work = self.work();
        for suffix in ["-journal", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", work.display()));
        }
        std::fs::copy(template, &work).unwrap();
        std::fs::File::open(&work).unwrap().sync_all().unwrap();
    }

    /// `backlog run --window 1d --json` with the schedule file `name`.
    fn backlog(&self, name: &str, at: &str) -> Command {
        let mut c = Command::new(&self.bin);
        c.current_dir(&self.dir)
            .args(["run", "--window", "1d", "--json", "--now", at, "--schedule"])
            .arg(self.path(name))
            .stdin(Stdio::null());
        c
    }

    /// Writes the schedule file `name` on work.db with `handler`.
    fn schedule(&self, name: &str, handler: &str) {
        std::fs::write(self.path(name), schedule(&self.work(), handler)).unwrap();
    }

    /// A template of `n` records with the tool's tables made (a tick a year back, over
    /// an empty band, with the schedule file `name`), as after a first tick.
    fn template(&self, template: &str, n: u64, name: &str) -> PathBuf {
        let path = self.path(template);
        generate(&self.work(), n);
        let out = self.backlog(name, "2025-11-21T12:00:00Z").output().unwrap();
        assert!(
            out.status.success(),
            "the first tick failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(count(&self.work(), "NEW"), n, "the first tick took records");
        std::fs::copy(self.work(), &path).unwrap();
        path
    }
}

/// A command of a round: its name, its records, the template it runs on (none for the
/// floor), and the command itself.
struct Contender {
    name: &'static str,
    records: u64,
    template: Option<PathBuf>,
    command: Box<dyn Fn() -> Command>,
}

/// What one run gave: records/s, wall seconds, the client's user and system seconds,
/// the server's seconds.
#[derive(Clone, Copy)]
struct Sample {
    rate: f64,
    wall: f64,
    user: f64,
    sys: f64,
    server: f64,
}

/// Runs a contender once on a fresh copy of its template and checks that every record
/// came out SUCCESS (the floor: that ab saw no failure).
fn run_once(bench: &Bench, c: &Contender, server_cpu: &dyn Fn() -> f64) -> Sample {
    if let Some(template) = &c.template {
        bench.fresh(template);
    }
    let mut command = (c.command)();
    let (cpu, server) = (children_cpu(), server_cpu());
    let started = Instant::now();
    let out = command.output().unwrap();
    let wall = started.elapsed().as_secs_f64();
    let (cpu_after, server_after) = (children_cpu(), server_cpu());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}: {command:?} failed ({}):\n{stdout}\n{}",
        c.name,
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let rate = if c.template.is_some() {
        let done = count(&bench.work(), "SUCCESS");
        assert_eq!(
            done,
            c.records,
            "{}: {done} of {} records SUCCESS after the run:\n{stdout}\n{}",
            c.name,
            c.records,
            String::from_utf8_lossy(&out.stderr)
        );
        c.records as f64 / wall
    } else {
        ab_rate(&stdout, c.records)
    };
    Sample {
        rate,
        wall,
        user: cpu_after.0 - cpu.0,
        sys: cpu_after.1 - cpu.1,
        server: server_after - server,
    }
}

/// ab's "Requests per second", once it says every request completed with a 2xx.
fn ab_rate(out: &str, requests: u64) -> f64 {
    let field = |name: &str| {
        out.lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|v| v.split_whitespace().next().unwrap_or("").to_string())
    };
    assert_eq!(
        field("Complete requests:").as_deref(),
        Some(requests.to_string().as_str()),
        "ab:\n{out}"
    );
    assert_eq!(
        field("Failed requests:").as_deref(),
        Some("0"),
        "ab:\n{out}"
    );
    assert!(field("Non-2xx responses:").is_none(), "ab:\n{out}");
    field("Requests per second:")
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no requests per second in ab's output:\n{out}"))
}

/// Runs the contenders for `rounds` rounds, the order turned by one each round, and
/// prints each run; returns each contender's samples.
fn rounds(
    bench: &Bench,
    list: &[Contender],
    rounds: usize,
    server: &str,
    server_cpu: &dyn Fn() -> f64,
) -> Vec<Vec<Sample>> {
    let mut samples = vec![Vec::new(); list.len()];
    for round in 0..rounds {
        for k in 0..list.len() {
            let i = (k + round) % list.len();
            let s = run_once(bench, &list[i], server_cpu);
            println!(
                "  round {round} {:10} {:>6} records {:7.3} s {:>9.0}/s   client {:.2} user {:.2} sys   {server} {:.2} cpu",
                list[i].name, list[i].records, s.wall, s.rate, s.user, s.sys, s.server
            );
            samples[i].push(s);
        }
    }
    samples
}

/// The best run (the highest rate) of each contender.
fn best(samples: &[Sample]) -> Sample {
    *samples
        .iter()
        .max_by(|a, b| a.rate.total_cmp(&b.rate))
        .unwrap()
}

fn verdict(value: f64, target: f64) -> &'static str {
    if value >= target { "met" } else { "MISSED" }
}

fn shape_a(bench: &Bench, rounds_n: usize) {
    let nginx = Nginx::start(&bench.dir);
    let url = nginx.url();
    let port = nginx.port;
    // One record's JSON as the handler sends it: the floor's body.
    let body = bench.path("body.json");
    std::fs::write(
        &body,
        serde_json::json!({
            "ID": 1,
            "STATUS": "NEW",
            "DATE_INSERTED": sqlite_time(now() - chrono::Duration::seconds(60)),
            "PAYLOAD": payload(1),
        })
        .to_string(),
    )
    .unwrap();
    check_post(&format!("{url}/1"), &body);
    println!(
        "A. {RECORDS_A} records POSTed to nginx (127.0.0.1:{port}, return 200 \"ok\"), 8 at once; best of {rounds_n} rounds"
    );
    bench.schedule(
        "url.toml",
        &format!("url = \"{url}/{{ID}}\"\nconcurrency = 8"),
    );
    bench.schedule(
        "curl.toml",
        &format!(
            "command = [\"sh\", \"-c\", \"curl -sf -o /dev/null -X POST --data-binary @- {url}/$BACKLOG_RECORD_ID\"]\nconcurrency = 8"
        ),
    );
    let template = bench.template("a.db", RECORDS_A, "url.toml");
    let curl_template = bench.template("a-curl.db", RECORDS_CURL, "url.toml");
    let script = bench.path("by_hand.py");
    std::fs::write(&script, PYTHON_BY_HAND).unwrap();

    let backlog = |name: &'static str| {
        let bench = bench.clone();
        let at = now().to_rfc3339();
        move || bench.backlog(name, &at)
    };
    let work = bench.work();
    let floor_url = format!("{url}/1");
    let list = vec![
        Contender {
            name: "built-in",
            records: RECORDS_A,
            template: Some(template.clone()),
            command: Box::new(backlog("url.toml")),
        },
        Contender {
            name: "curl",
            records: RECORDS_CURL,
            template: Some(curl_template),
            command: Box::new(backlog("curl.toml")),
        },
        Contender {
            name: "python",
            records: RECORDS_A,
            template: Some(template),
            command: Box::new(move || {
                let (low, high) = band();
                let mut c = Command::new("python3");
                c.arg(&script)
                    .arg(&work)
                    .args([low, high, port.to_string()]);
                c
            }),
        },
        Contender {
            name: "ab floor",
            records: AB_REQUESTS,
            template: None,
            command: Box::new(move || {
                let mut c = Command::new("ab");
                c.args(["-k", "-c", "8", "-n", &AB_REQUESTS.to_string(), "-p"])
                    .arg(&body)
                    .args(["-T", "application/json", &floor_url]);
                c
            }),
        },
    ];
    let samples = rounds(bench, &list, rounds_n, "nginx", &|| nginx.cpu());
    let [builtin, curl, python, floor] = [0, 1, 2, 3].map(|i| best(&samples[i]));
    println!("  best of {rounds_n}:");
    for (c, s) in list.iter().zip([builtin, curl, python, floor]) {
        println!(
            "    {:10} {:>9.0} records/s   (client {:.1} µs CPU a record, nginx {:.1} µs)",
            c.name,
            s.rate,
            (s.user + s.sys) / c.records as f64 * 1e6,
            s.server / c.records as f64 * 1e6
        );
    }
    let vs_python = builtin.rate / python.rate;
    let vs_curl = builtin.rate / curl.rate;
    println!(
        "  built-in / python script  {vs_python:6.2}×  (target ≥ 3×: {})",
        verdict(vs_python, 3.0)
    );
    println!(
        "  built-in / curl handler   {vs_curl:6.2}×  (target ≥ 40×: {})",
        verdict(vs_curl, 40.0)
    );
    println!(
        "  ab floor / python script  {:6.2}×",
        floor.rate / python.rate
    );
    println!(
        "  built-in / ab floor       {:6.2}",
        builtin.rate / floor.rate
    );
}

/// Shape B's counterpart: answers every request 100 ms after it came, counting them
/// and the most in flight at once.
struct Slow {
    calls: AtomicU64,
    in_flight: AtomicU64,
    peak: AtomicU64,
}

async fn slow_answer(
    axum::extract::State(slow): axum::extract::State<Arc<Slow>>,
    _body: axum::body::Bytes,
) -> &'static str {
    let now = slow.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    slow.peak.fetch_max(now, Ordering::SeqCst);
    tokio::time::sleep(ANSWER_AFTER).await;
    slow.in_flight.fetch_sub(1, Ordering::SeqCst);
    slow.calls.fetch_add(1, Ordering::SeqCst);
    "ok"
}

fn shape_b(bench: &Bench, rounds_n: usize) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let slow = Arc::new(Slow {
        calls: AtomicU64::new(0),
        in_flight: AtomicU64::new(0),
        peak: AtomicU64::new(0),
    });
    let app = axum::Router::new()
        .fallback(axum::routing::post(slow_answer))
        .with_state(slow.clone());
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let port = listener.local_addr().unwrap().port();
    runtime.spawn(async move { axum::serve(listener, app).await });
    // A POST must come back 200 before any run.
    let mut probe = TcpStream::connect(("127.0.0.1", port)).unwrap();
    probe
        .write_all(b"POST /orders/0 HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")
        .unwrap();
    let mut answer = String::new();
    probe.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");

    let ideal = CONCURRENCY_B as f64 / ANSWER_AFTER.as_secs_f64();
    println!(
        "B. {RECORDS_B} records POSTed to a counterpart answering after {} ms (axum, in this process), concurrency {CONCURRENCY_B}: ideal {ideal:.0}/s; best of {rounds_n} rounds",
        ANSWER_AFTER.as_millis()
    );
    // The records are not whole waves of 256: the last wave is part-full.
    let waves = RECORDS_B.div_ceil(CONCURRENCY_B as u64) as f64 * ANSWER_AFTER.as_secs_f64();
    println!(
        "  in whole waves of {CONCURRENCY_B}, {RECORDS_B} records take {waves:.1} s: {:.0}/s ({:.3} of the ideal)",
        RECORDS_B as f64 / waves,
        RECORDS_B as f64 / waves / ideal
    );
    bench.schedule(
        "slow.toml",
        &format!("url = \"http://127.0.0.1:{port}/orders/{{ID}}\"\nconcurrency = {CONCURRENCY_B}"),
    );
    let template = bench.template("b.db", RECORDS_B, "slow.toml");
    let at = now().to_rfc3339();
    let b = bench.clone();
    let list = [Contender {
        name: "built-in",
        records: RECORDS_B,
        template: Some(template),
        command: Box::new(move || b.backlog("slow.toml", &at)),
    }];
    let self_cpu = || {
        let (u, s) = rusage(libc::RUSAGE_SELF);
        u + s
    };
    slow.calls.store(0, Ordering::SeqCst);
    let samples = rounds(bench, &list, rounds_n, "server", &self_cpu);
    let calls = slow.calls.load(Ordering::SeqCst);
    assert_eq!(
        calls,
        RECORDS_B * rounds_n as u64,
        "the counterpart answered {calls} calls, not one a record a round"
    );
    let s = best(&samples[0]);
    let fraction = s.rate / ideal;
    println!(
        "  best of {rounds_n}: {:.0} records/s, {fraction:.3} of the ideal {ideal:.0}/s (target ≥ 0.9: {}); at most {} calls in flight at once",
        s.rate,
        verdict(fraction, 0.9),
        slow.peak.load(Ordering::SeqCst)
    );
    runtime.shutdown_timeout(Duration::from_secs(1));
}

fn main() -> ExitCode {
    let bin = backlog_binary();
    if !bin.is_file() {
        eprintln!(
            "{} not found: build it first with `cargo build --release -F cli` (or name it in BACKLOG_BIN)",
            bin.display()
        );
        return ExitCode::from(2);
    }
    let only = std::env::var("BENCH_ONLY").unwrap_or_default();
    let wanted = |part: &str| only.is_empty() || only.split(',').any(|p| p == part);
    for (tool, package) in TOOLS {
        // Shape B needs nothing but the binary.
        if wanted("a") && find(tool).is_none() {
            eprintln!("{tool} not found: install Debian's package: apt-get install {package}");
            return ExitCode::from(2);
        }
    }
    let rounds_n: usize = std::env::var("BENCH_ROUNDS").map_or(3, |v| v.parse().unwrap());
    // The temporary folder outlives everything started in it (declared first, dropped
    // last).
    let (_temp, dir) = match std::env::args().nth(1) {
        Some(dir) => {
            std::fs::create_dir_all(&dir).unwrap();
            (None, std::fs::canonicalize(dir).unwrap())
        }
        None => {
            let temp = tempfile::Builder::new()
                .prefix("bench-http-")
                .tempdir()
                .unwrap();
            let dir = temp.path().to_path_buf();
            (Some(temp), dir)
        }
    };
    let bench = Bench { dir, bin };
    println!(
        "backlog: {}, {} cores, folder {}",
        bench.bin.display(),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        bench.dir.display()
    );
    if wanted("a") {
        shape_a(&bench, rounds_n);
    }
    if wanted("b") {
        shape_b(&bench, rounds_n);
    }
    ExitCode::SUCCESS
}

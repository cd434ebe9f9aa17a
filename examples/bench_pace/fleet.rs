//! The fleet as a user runs it: a fresh database of due records for each run
//! (`database.rs`), a schedule file with the variant's `rate`, and `runners` processes
//! of the real binary started together on it, while a thread reads the fleet's pace
//! from `backlog_paces` once a second.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use chrono::{DateTime, TimeZone, Utc};

use crate::database::{Database, Reader};

/// The pinned clock every tick runs at.
pub fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 21, 12, 0, 0).unwrap()
}

/// What stays the same between runs.
pub struct Fleet {
    pub dir: PathBuf,
    pub bin: PathBuf,
    pub runners: usize,
    pub lanes: u64,
    /// `stop_after_failures`; 0 for no breaker.
    pub breaker: u64,
    /// A PostgreSQL server's URL (`BENCH_PG`), else SQLite files in `dir`.
    pub pg: Option<String>,
}

/// What one run of the fleet left.
pub struct Run {
    pub secs: f64,
    /// Records marked `SUCCESS`.
    pub succeeded: i64,
    /// Runners that exited 7 (the breaker tripped), of `runners`.
    pub tripped: usize,
    pub runners: usize,
    /// The fleet's pace (starts a second) read each second from the run's start:
    /// `(seconds, pace)`; the last one read after the runners ended.
    pub paces: Vec<(f64, f64)>,
}

impl Fleet {
    fn db(&self, name: &str) -> Database {
        Database::of(&self.dir, name, self.pg.as_deref())
    }

    /// A fresh database for the run `name` (`Database::create`) and its schedule file;
    /// the tool's tables made by a first tick, as after a database's first run (a tick
    /// a year earlier, whose band is empty).
    pub fn make(&self, name: &str, records: u64, rate: &str) {
        self.db(name).create(records, now());
        self.schedule(name, rate);
        let made = self
            .runner(name, now() - chrono::Duration::days(365))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        assert!(
            made.status.success(),
            "the first tick: {}",
            String::from_utf8_lossy(&made.stderr)
        );
    }

    fn schedule(&self, name: &str, rate: &str) {
        let breaker = match self.breaker {
            0 => String::new(),
            k => format!("stop_after_failures = {k}"),
        };
        let text = format!(
            r#"[database]
url = "{db}"

[table]
name = "BACKLOG"
id = "ID"
status = "STATUS"
inserted_at = "DATE_INSERTED"

[handler]
command = ["{handler}"]
concurrency = {lanes}
timeout = "10s"
{rate}
{breaker}

[[tier]]
window = "1d"
every = "5m"
limit = 10000000
"#,
            db = self.db(name).url(),
            handler = self.dir.join("handler.sh").display(),
            lanes = self.lanes,
        );
        std::fs::write(self.dir.join(format!("{name}.toml")), text).unwrap();
    }

    fn runner(&self, name: &str, at: DateTime<Utc>) -> Command {
        let mut cmd = Command::new(&self.bin);
        cmd.current_dir(&self.dir)
            .args(["run", "--window", "1d", "-s", &format!("{name}.toml")])
            .args(["--now", &at.to_rfc3339()])
            .stdin(Stdio::null());
        cmd
    }

    /// The handler every run calls: curl to the counterpart, 200 a success, 429 exit
    /// 75 with a `retry-after:` line (the adapted test's handler).
    pub fn write_handler(&self, url: &str) {
        let path = self.dir.join("handler.sh");
        std::fs::write(
            &path,
            format!(
                r#"#!/bin/sh
cat > /dev/null
code=$(curl -s -o /dev/null -w '%{{http_code}}' --max-time 5 '{url}')
case "$code" in
  200) exit 0 ;;
  429) echo "retry-after: 1"; exit 75 ;;
  *) echo "counterpart answered $code"; exit 1 ;;
esac
"#
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    /// Runs the fleet on `name.db` (made by `make`), `started` being the counterpart's
    /// run start; each runner's output goes to `name.N.log`.
    pub fn run(&self, name: &str, started: Instant) -> Run {
        let stop = Arc::new(AtomicBool::new(false));
        let poller = {
            let (stop, reader) = (Arc::clone(&stop), self.db(name).reader());
            std::thread::spawn(move || poll_paces(reader, started, &stop))
        };
        let children: Vec<_> = (0..self.runners)
            .map(|n| {
                let log = std::fs::File::create(self.dir.join(format!("{name}.{n}.log"))).unwrap();
                self.runner(name, now())
                    .stdout(log.try_clone().unwrap())
                    .stderr(log)
                    .spawn()
                    .unwrap()
            })
            .collect();
        let mut tripped = 0;
        for mut child in children {
            match child.wait().unwrap().code() {
                Some(0) => {}
                Some(7) => tripped += 1,
                other => panic!("a runner of {name} failed ({other:?}): see {name}.*.log"),
            }
        }
        let secs = started.elapsed().as_secs_f64();
        stop.store(true, Ordering::SeqCst);
        let mut paces = poller.join().unwrap();
        let db = self.db(name);
        if let Some(pace) = db.reader().pace() {
            paces.push((started.elapsed().as_secs_f64(), pace));
        }
        let succeeded = db.succeeded();
        Run {
            secs,
            succeeded,
            tripped,
            runners: self.runners,
            paces,
        }
    }
}

/// Reads the pace each second of the run (on the second, from `started`) until `stop`.
fn poll_paces(mut reader: Reader, started: Instant, stop: &AtomicBool) -> Vec<(f64, f64)> {
    let mut paces = Vec::new();
    let mut second = 1.0;
    while !stop.load(Ordering::SeqCst) {
        let wait = Duration::from_secs_f64(second).saturating_sub(started.elapsed());
        std::thread::sleep(wait.min(Duration::from_millis(100)));
        if started.elapsed().as_secs_f64() < second {
            continue;
        }
        if let Some(pace) = reader.pace() {
            paces.push((started.elapsed().as_secs_f64(), pace));
        }
        second += 1.0;
    }
    paces
}

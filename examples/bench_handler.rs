//! The fleet bench's batch handler (`examples/bench_fleet.rs` runs it): answers each
//! record `BENCH_WAIT_MS` (50) after it read it, however many it holds, as a handler
//! waiting on a counterpart asynchronously would; appends each id it answered to
//! `BENCH_LOG` with the time it answered (Unix milliseconds), so the bench can see a
//! record answered twice and when the fleet's answers began and ended.
//!
//! Compiled rather than a script: at 128 runners the fleet starts thousands of batch
//! handlers a second, and an interpreter's start-up would be what the bench measured.

use std::collections::VecDeque;
use std::io::{BufRead, Write};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

/// The id's text as the line gives it (`{"id":42,…` → `42`), quotes and all.
fn id_of(line: &str) -> Option<&str> {
    let rest = line.strip_prefix("{\"id\":")?;
    rest.split_once(',').map(|(id, _)| id)
}

fn main() {
    let wait = Duration::from_millis(
        std::env::var("BENCH_WAIT_MS")
            .ok()
            .and_then(|w| w.parse().ok())
            .unwrap_or(50),
    );
    let mut log = std::env::var_os("BENCH_LOG").map(|path| {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .expect("BENCH_LOG")
    });
    let (lines, due) = mpsc::channel::<(String, Instant)>();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { return };
            if let Some(id) = id_of(&line)
                && lines.send((id.to_string(), Instant::now() + wait)).is_err()
            {
                return;
            }
        }
    });
    let mut held: VecDeque<(String, Instant)> = VecDeque::new();
    let mut stdin_open = true;
    let mut out = std::io::stdout().lock();
    while stdin_open || !held.is_empty() {
        // Every record waits as long, so the first held is the first due.
        let next = match held.front() {
            Some(&(_, at)) => at.checked_duration_since(Instant::now()),
            None => Some(Duration::MAX),
        };
        if let Some(left) = next.filter(|_| stdin_open) {
            match due.recv_timeout(left) {
                Ok(record) => {
                    held.push_back(record);
                    continue;
                }
                Err(RecvTimeoutError::Disconnected) => {
                    stdin_open = false;
                    continue;
                }
                Err(RecvTimeoutError::Timeout) => {}
            }
        } else if let Some(left) = next.filter(|left| !left.is_zero()) {
            std::thread::sleep(left);
        }
        let now = Instant::now();
        let unix_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        let (mut answers, mut ids) = (String::new(), String::new());
        while held.front().is_some_and(|&(_, at)| at <= now) {
            let (id, _) = held.pop_front().unwrap();
            answers.push_str(&format!("{{\"id\":{id},\"code\":0}}\n"));
            ids.push_str(&format!("{id} {unix_ms}\n"));
        }
        if !answers.is_empty() {
            out.write_all(answers.as_bytes()).expect("stdout");
            out.flush().expect("stdout");
            if let Some(log) = &mut log {
                log.write_all(ids.as_bytes()).expect("BENCH_LOG");
            }
        }
    }
}

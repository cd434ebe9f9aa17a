//! What a batch process writes: its answers on stdout, which the tick reads itself
//! when it waits for them, and its stderr, which a thread of its own logs. Both are
//! bounded whatever the process writes: a line has at most `MAX_LINE` bytes, a read
//! at most 64 KiB, and the caller looks at its deadline after each read, so neither a
//! flood nor a line without end can hold the tick past its timeout or fill its memory.

use std::io::Read;
use std::os::fd::AsFd;
use std::process::{ChildStderr, ChildStdout};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use std::borrow::Cow;
use std::collections::BTreeMap;

use rustix::event::PollFlags;
use rustix::io::Errno;

use super::bounded_lines::{Junk, JunkKind, Splitter, truncated};
use super::child::{OUTPUT_TAIL, poll_ready};
use super::{Handled, Outcome, Snooze};

/// The process's stdout, read by the tick itself when it waits for answers: by then
/// most of a batch's answers are in the pipe, and one read takes them all. A thread
/// reading each answer as it came woke the tick once per line, and the task switches
/// cost more than the rest of the batch handler's work.
pub(super) struct Answers {
    pub(super) stdout: ChildStdout,
    /// Cuts what is read into lines of at most `MAX_LINE` bytes.
    pub(super) splitter: Splitter,
    pub(super) buffer: Vec<u8>,
    /// Whole lines read and not yet filed.
    pub(super) lines: Vec<u8>,
    /// Stdout closed: the process ended, or will not answer again.
    pub(super) ended: bool,
}

/// What the process said by a deadline.
pub(super) enum Said {
    /// What one read brought: the whole lines it ended are in `Answers::lines` (none,
    /// when it only added to a line). After the end of stdout, the last line without
    /// its newline counts.
    Read,
    Ended,
    Nothing,
}

impl Answers {
    /// Waits for the process to write, until `deadline`, and reads once: one read at
    /// most, so that the caller looks at the clock after each, however much the
    /// process writes. A line longer than `MAX_LINE` is dropped as it arrives and
    /// noted in `junk`.
    pub(super) fn read(&mut self, deadline: Instant, junk: &mut Junk) -> Said {
        if self.ended {
            return Said::Ended;
        }
        let mut too_long = |start: &[u8]| junk.note(JunkKind::TooLong, start);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let stdout = Some((self.stdout.as_fd(), PollFlags::IN));
            match poll_ready([stdout], Some(left)) {
                Ok([true]) => {}
                Ok([false]) => return Said::Nothing,
                Err(Errno::INTR) => continue,
                Err(_) => break,
            }
            match self.stdout.read(&mut self.buffer) {
                Ok(0) => break,
                Ok(n) => {
                    self.splitter
                        .feed(&self.buffer[..n], &mut self.lines, &mut too_long);
                    return Said::Read;
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        self.ended = true;
        self.splitter.finish(&mut self.lines);
        Said::Read
    }
}

/// One answer line as the process writes it; other keys are ignored.
#[derive(serde::Deserialize)]
pub(super) struct Answer {
    pub(super) id: Option<serde_json::Value>,
    pub(super) code: Option<serde_json::Value>,
    message: Option<serde_json::Value>,
    /// A failure's "not before": seconds, or an RFC 3339 time (see `Snooze`).
    retry_after: Option<serde_json::Value>,
}

impl Answer {
    /// What the answer says of its record, its `code` read: success for 0, a status
    /// of `exit_codes`, or an error; a failure's `retry_after` snoozes it.
    pub(super) fn handled(&self, code: i64, exit_codes: &BTreeMap<i32, String>) -> Handled {
        // A success has nothing to try again; a `retry_after` that cannot be read is
        // no snooze (the record fails as answered, and is tried at its next slot), and
        // its detail says why.
        let read = self
            .retry_after
            .as_ref()
            .filter(|_| code != 0)
            .map(Snooze::of_json);
        let detail: Cow<'static, str> = match (code, &read) {
            (0, _) => "code 0".into(),
            (_, Some(Ok(snooze))) => format!("code {code}, {}", snooze.describe()).into(),
            (_, Some(Err(why))) => format!("code {code}, retry_after ignored: {why}").into(),
            _ => format!("code {code}").into(),
        };
        let snooze = read.and_then(Result::ok);
        let handled = match i32::try_from(code) {
            Ok(0) => Handled::new(Outcome::Success, detail),
            Ok(c) => match exit_codes.get(&c) {
                Some(status) => Handled::new(Outcome::Status(status.clone()), detail),
                None => Handled::new(Outcome::Error, detail),
            },
            Err(_) => Handled::new(Outcome::Error, detail),
        };
        let message = self.message.as_ref().and_then(|m| m.as_str());
        let handled = handled
            .with_code(code)
            .with_output(truncated(message.unwrap_or_default(), OUTPUT_TAIL));
        match snooze {
            Some(snooze) => handled.snoozed(snooze),
            None => handled,
        }
    }
}

/// At most this many lines of a batch process's stderr are logged a second; the rest
/// are counted, and the count logged.
const STDERR_LINES_A_SECOND: u32 = 100;
/// A longer stderr line is logged cut at this length.
const STDERR_LINE: usize = OUTPUT_TAIL;

/// How much of the end of a batch process's stderr is kept for the warning about its
/// end (`batch_process`), whether or not debug logs the rest.
pub(super) const STDERR_TAIL: usize = 1024;

/// Reads a batch process's stderr to its end and logs it at debug, bounded: lines cut
/// at `STDERR_LINE`, at most `STDERR_LINES_A_SECOND` a second. When debug is off, what
/// is read is dropped unread, so a flood costs a read a 64 KiB and no memory. Keeps
/// the last `STDERR_TAIL` bytes or so in `tail` as they are read: what a process that
/// ended badly said last, there even while a process it left holds the pipe open.
pub(super) fn log_stderr(mut stderr: ChildStderr, tail: &Mutex<Vec<u8>>) {
    let logging = tracing::enabled!(tracing::Level::DEBUG);
    let mut buffer = vec![0; 64 * 1024];
    let mut splitter = Splitter::new(STDERR_LINE);
    let mut lines = Vec::new();
    let mut log = StderrLog {
        second: Instant::now(),
        logged: 0,
        unlogged: 0,
    };
    loop {
        let n = match stderr.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        keep_tail(
            &mut tail.lock().unwrap_or_else(|e| e.into_inner()),
            &buffer[..n],
        );
        if !logging {
            continue;
        }
        splitter.feed(&buffer[..n], &mut lines, &mut |start| log.line(start, true));
        for line in lines.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            log.line(line, false);
        }
        lines.clear();
    }
    splitter.finish(&mut lines);
    for line in lines.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        log.line(line, false);
    }
    log.flush();
}

/// Adds `data` to `tail`, trimming it to `STDERR_TAIL` bytes at least and twice that
/// at most, so that a flood of small reads costs no copy per read (the reader of the
/// tail keeps its last `STDERR_TAIL` bytes).
fn keep_tail(tail: &mut Vec<u8>, data: &[u8]) {
    let data = &data[data.len().saturating_sub(STDERR_TAIL)..];
    tail.extend_from_slice(data);
    if tail.len() > 2 * STDERR_TAIL {
        tail.drain(..tail.len() - STDERR_TAIL);
    }
}

/// The budget of stderr lines logged in the current second.
struct StderrLog {
    second: Instant,
    logged: u32,
    unlogged: u64,
}

impl StderrLog {
    fn line(&mut self, line: &[u8], cut: bool) {
        if self.second.elapsed() >= Duration::from_secs(1) {
            self.flush();
            self.second = Instant::now();
            self.logged = 0;
        }
        if self.logged >= STDERR_LINES_A_SECOND {
            self.unlogged += 1;
            return;
        }
        self.logged += 1;
        let line = String::from_utf8_lossy(line);
        let line = line.trim_end_matches('\r');
        if cut {
            tracing::debug!("batch handler: {line}… (a line cut at {STDERR_LINE} bytes)");
        } else {
            tracing::debug!("batch handler: {line}");
        }
    }

    fn flush(&mut self) {
        if self.unlogged > 0 {
            tracing::debug!(
                "batch handler: {} of stderr not logged (at most {STDERR_LINES_A_SECOND} a second)",
                crate::plural::count(self.unlogged, "more line", "more lines")
            );
            self.unlogged = 0;
        }
    }
}

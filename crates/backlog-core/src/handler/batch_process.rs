//! One batch process from its start to its end: its pipes, the thread that feeds its
//! stdin and the one that logs its stderr, and the two ways it ends.
//!
//! It is killed at once, with its group, when it is stuck (a batch ran past its
//! timeout) or done for (it died, or closed its stdout). Otherwise it ends when the
//! tick has no more input for it, and then it is let finish: its stdin is closed, and
//! it has `handler.stop_grace` to exit on its own, so that what a handler does after
//! its read loop (a flush, a commit, the end of a bulk request) runs. Only after the
//! grace does its group get SIGTERM, and SIGKILL `KILL_GRACE` later, as a per-record
//! handler at its timeout. Meanwhile its stdout is read and dropped, so that a process
//! writing at its end never blocks on a full pipe. Its answers were filed before its
//! end: how the end goes changes no mark, and an end that failed is a warning.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use rustix::event::PollFlags;
use rustix::process::Signal;

use super::HandlerError;
use super::batch_output::{Answers, log_stderr};
use super::bounded_lines::{MAX_LINE, Splitter};
use super::child::{KILL_GRACE, NO_PIDFD_POLL, OUTPUT_GRACE, has_exited, pidfd_open, poll_ready};
use super::group::LiveGroup;
use super::subreaper;
use crate::duration;

/// A running batch process.
pub(super) struct BatchProcess {
    child: Child,
    /// Its process group, ended with it.
    group: LiveGroup,
    /// Batches of lines for its stdin. A thread of its own writes them, so a process
    /// that stops reading cannot block the tick past the timeout; dropping this
    /// closes its stdin once what was sent is written.
    pub(super) input: mpsc::Sender<Arc<[u8]>>,
    pub(super) answers: Answers,
    /// The end of its stderr, as read so far.
    stderr_tail: Arc<Mutex<Vec<u8>>>,
    /// Closed when the thread logging its stderr is done.
    stderr_logged: mpsc::Receiver<()>,
    /// The program as the schedule file names it, for warnings.
    name: String,
}

/// How a process let finish ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Finish {
    /// It exited within its grace.
    OnItsOwn,
    /// It exited after SIGTERM.
    Terminated,
    /// It was still there `KILL_GRACE` after SIGTERM.
    Killed,
}

impl BatchProcess {
    /// Starts `program` (`name` in the schedule file) in a process group of its own,
    /// with its stdin fed and its stderr logged by threads of their own.
    pub(super) fn start(
        name: &str,
        program: &Path,
        args: &[String],
        dir: &Path,
        env: &BTreeMap<String, String>,
    ) -> Result<BatchProcess, HandlerError> {
        let mut cmd = Command::new(program);
        cmd.args(args)
            .current_dir(dir)
            .envs(env)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd.process_group(0);
        let mut group = LiveGroup::reserve();
        let mut child = cmd.spawn().map_err(|source| HandlerError::Spawn {
            program: program.display().to_string(),
            source,
        })?;
        group.started(child.id());
        let stdout = child.stdout.take().expect("stdout is piped");
        let stderr = child.stderr.take().expect("stderr is piped");
        let stderr_tail = Arc::new(Mutex::new(Vec::new()));
        let (stderr_done, stderr_logged) = mpsc::channel::<()>();
        let tail = Arc::clone(&stderr_tail);
        // The tick's span: the handler's stderr lines name its tier.
        let span = tracing::Span::current();
        thread::spawn(move || {
            let _in_span = span.enter();
            log_stderr(stderr, &tail);
            drop(stderr_done);
        });
        let mut stdin = child.stdin.take().expect("stdin is piped");
        let (input, batches) = mpsc::channel::<Arc<[u8]>>();
        thread::spawn(move || {
            // Ends when the handler drops its sender (the end of input: the pipe is
            // closed, and the process reads its end of file) or the process stops
            // reading for good.
            for batch in batches {
                if stdin
                    .write_all(&batch)
                    .and_then(|()| stdin.flush())
                    .is_err()
                {
                    return;
                }
            }
        });
        tracing::debug!("batch handler started: {}", program.display());
        Ok(BatchProcess {
            child,
            group,
            input,
            answers: Answers {
                stdout,
                splitter: Splitter::new(MAX_LINE),
                buffer: vec![0; 64 * 1024],
                lines: Vec::new(),
                ended: false,
            },
            stderr_tail,
            stderr_logged,
            name: name.to_string(),
        })
    }

    /// Its pid, which is its group's id.
    pub(super) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Kills it and its group at once (it is stuck, or done for); returns how it
    /// ended, as text.
    pub(super) fn kill(self) -> String {
        let BatchProcess {
            mut child,
            mut group,
            input,
            stderr_logged,
            ..
        } = self;
        drop(input);
        // Killed before the wait, while the leader's pid still holds the group's id.
        group.end();
        let status = match child.wait() {
            Ok(status) => status.to_string(),
            Err(e) => e.to_string(),
        };
        drop(group);
        subreaper::after_handler();
        // The end of its stderr (and the count of lines not logged) is logged before
        // the tick goes on, unless a process that left the group holds the pipe.
        let _ = stderr_logged.recv_timeout(OUTPUT_GRACE);
        status
    }

    /// The tick has no more input for it: closes its stdin and gives it `grace` to
    /// exit on its own, then SIGTERM to its group and SIGKILL `KILL_GRACE` later.
    /// An exit other than 0, or one that had to be forced, is a warning naming the
    /// program and its grace (with `grace` 0, SIGTERM is what was asked for, and
    /// only a SIGKILL is one).
    pub(super) fn finish(self, grace: Duration) {
        let BatchProcess {
            mut child,
            mut group,
            input,
            mut answers,
            stderr_tail,
            stderr_logged,
            name,
        } = self;
        drop(input);
        let input_ended = Instant::now();
        let pid = child.id();
        let pidfd = pidfd_open(pid);
        let mut finish = Finish::OnItsOwn;
        if !wait_exit(pid, pidfd.as_ref(), &mut answers, input_ended + grace) {
            group.signal(Signal::TERM);
            finish = if wait_exit(
                pid,
                pidfd.as_ref(),
                &mut answers,
                Instant::now() + KILL_GRACE,
            ) {
                Finish::Terminated
            } else {
                Finish::Killed
            };
        }
        let took = input_ended.elapsed();
        // What it left in its group goes with it, before it is reaped (see `group`).
        group.end();
        let status = child
            .wait()
            .unwrap_or_else(|_| ExitStatus::from_raw(0x7f00));
        drop(group);
        subreaper::after_handler();
        let _ = stderr_logged.recv_timeout(OUTPUT_GRACE);
        let tail = std::mem::take(&mut *stderr_tail.lock().unwrap_or_else(|e| e.into_inner()));
        match what_to_say(&name, finish, status, grace, took, &tail) {
            (true, line) => tracing::warn!("{line}"),
            (false, line) => tracing::debug!("{line}"),
        }
    }
}

/// Waits until the process has exited (true) or `deadline` passed (false), reading
/// and dropping what it writes on stdout meanwhile. It is not reaped: its group must
/// be ended first.
fn wait_exit(pid: u32, pidfd: Option<&OwnedFd>, answers: &mut Answers, deadline: Instant) -> bool {
    loop {
        if has_exited(pid) {
            return true;
        }
        let now = Instant::now();
        if now >= deadline {
            return false;
        }
        let mut wait = deadline - now;
        if pidfd.is_none() {
            wait = wait.min(NO_PIDFD_POLL);
        }
        let fds = [
            pidfd.map(|p| (p.as_fd(), PollFlags::IN)),
            (!answers.ended).then(|| (answers.stdout.as_fd(), PollFlags::IN)),
        ];
        if poll_ready(fds, Some(wait)).is_ok_and(|ready| ready[1]) {
            match answers.stdout.read(&mut answers.buffer) {
                Ok(0) => answers.ended = true,
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => answers.ended = true,
            }
        }
    }
}

/// The line about a process's end, and whether it is a warning: what the program
/// did, how long it was given, that its answers stand, and what its stderr said last.
fn what_to_say(
    program: &str,
    finish: Finish,
    status: ExitStatus,
    grace: Duration,
    took: Duration,
    stderr_tail: &[u8],
) -> (bool, String) {
    let grace = duration::compact(grace);
    let kept = "the records it answered keep their marks";
    let said = said_last(stderr_tail);
    match finish {
        Finish::OnItsOwn if status.success() => (
            false,
            format!(
                "the batch handler {program} exited on its own {:.1}s after the end of its input",
                took.as_secs_f64()
            ),
        ),
        Finish::OnItsOwn => (
            true,
            format!(
                "the batch handler {program} ended badly: {status}, {:.1}s after the end of its input (handler.stop_grace {grace}); {kept}{said}",
                took.as_secs_f64()
            ),
        ),
        Finish::Terminated => (
            grace != "0s",
            format!(
                "the batch handler {program} did not exit within handler.stop_grace ({grace}) of the end of its input: stopped with SIGTERM ({status}); {kept}; raise handler.stop_grace if its end needs longer{said}"
            ),
        ),
        Finish::Killed => (
            true,
            format!(
                "the batch handler {program} did not exit within handler.stop_grace ({grace}) of the end of its input, nor {} after SIGTERM: killed with SIGKILL; {kept}; raise handler.stop_grace if its end needs longer, and end on SIGTERM{said}",
                duration::compact(KILL_GRACE)
            ),
        ),
    }
}

/// `; its stderr ended: "…"`: the last few lines of what the process wrote there,
/// or nothing.
fn said_last(tail: &[u8]) -> String {
    let text = String::from_utf8_lossy(tail);
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.is_empty())
        .collect();
    if lines.is_empty() {
        return String::new();
    }
    let last = lines[lines.len().saturating_sub(3)..].join(" / ");
    // The end counts most: cut from the front.
    let chars: Vec<char> = last.chars().collect();
    let last = if chars.len() > 300 {
        format!("…{}", chars[chars.len() - 300..].iter().collect::<String>())
    } else {
        last
    };
    format!("; its stderr ended: {last:?}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: i32) -> ExitStatus {
        ExitStatus::from_raw(code << 8)
    }

    #[test]
    fn an_end_on_its_own_with_0_is_no_warning() {
        let (warn, line) = what_to_say(
            "./h.py",
            Finish::OnItsOwn,
            status(0),
            Duration::from_secs(30),
            Duration::from_millis(200),
            b"",
        );
        assert!(!warn);
        assert_eq!(
            line,
            "the batch handler ./h.py exited on its own 0.2s after the end of its input"
        );
    }

    #[test]
    fn a_failed_end_says_its_status_and_stderr() {
        let (warn, line) = what_to_say(
            "./h.py",
            Finish::OnItsOwn,
            status(3),
            Duration::from_secs(30),
            Duration::from_millis(1200),
            b"Traceback\n  File x\nOSError: disk full\n\n",
        );
        assert!(warn);
        assert_eq!(
            line,
            "the batch handler ./h.py ended badly: exit status: 3, 1.2s after the end of its input (handler.stop_grace 30s); the records it answered keep their marks; its stderr ended: \"Traceback /   File x / OSError: disk full\""
        );
    }

    #[test]
    fn a_sigterm_is_a_warning_unless_the_grace_is_0() {
        let term = ExitStatus::from_raw(Signal::TERM.as_raw());
        let (warn, line) = what_to_say(
            "./h.py",
            Finish::Terminated,
            term,
            Duration::from_secs(1),
            Duration::from_secs(1),
            b"",
        );
        assert!(warn);
        assert_eq!(
            line,
            "the batch handler ./h.py did not exit within handler.stop_grace (1s) of the end of its input: stopped with SIGTERM (signal: 15 (SIGTERM)); the records it answered keep their marks; raise handler.stop_grace if its end needs longer"
        );
        let (warn, _) = what_to_say(
            "./h.py",
            Finish::Terminated,
            term,
            Duration::ZERO,
            Duration::ZERO,
            b"",
        );
        assert!(!warn, "with stop_grace 0s, SIGTERM is what was asked for");
        let (warn, line) = what_to_say(
            "./h.py",
            Finish::Killed,
            ExitStatus::from_raw(Signal::KILL.as_raw()),
            Duration::ZERO,
            Duration::from_secs(2),
            b"",
        );
        assert!(warn);
        assert!(
            line.contains("nor 2s after SIGTERM: killed with SIGKILL"),
            "{line}"
        );
    }

    #[test]
    fn a_long_stderr_is_cut_from_the_front() {
        let tail = "x".repeat(1000);
        let said = said_last(tail.as_bytes());
        assert!(said.starts_with("; its stderr ended: \"…xxx"), "{said}");
        assert_eq!(said.chars().filter(|&c| c == 'x').count(), 300);
    }
}

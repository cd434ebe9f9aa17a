//! One handler process, run to its end by the calling thread alone: spawned, fed its
//! input, its output kept, its exit or its timeout awaited, its group killed.
//!
//! There are no helper threads: one poll(2) loop writes the input without blocking,
//! reads stdout and stderr, and waits for the exit through a pidfd, with the timeout as
//! poll's deadline. Four threads per record cost more than the process they watched.
//! The process is spawned without a `pre_exec` hook, so std uses posix_spawn (a vfork
//! underneath) instead of fork: a fork copies the tick's page tables, and measured at
//! about half the records a second. What the hook did, dying with the tick, the
//! watchdog does (`watchdog`), for the whole group.
//!
//! Once the process exited, its group is killed and its output pipes are read for at
//! most `OUTPUT_GRACE`: a process that escaped the group (`setsid`) and keeps a pipe
//! open costs that much, not more, and the output says the stream was still open.

use std::io::Read;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec, poll};
use rustix::io::Errno;
use rustix::process::{
    Pid, PidfdFlags, Signal, WaitId, WaitIdOptions, pidfd_open as open_pidfd, waitid,
};

use super::group::LiveGroup;
use super::subreaper;

/// How much of each output stream is kept, from the end.
pub(super) const OUTPUT_TAIL: usize = 4096;
/// How long a handler has between SIGTERM and SIGKILL (a batch process too, at its end).
pub(super) const KILL_GRACE: Duration = Duration::from_secs(2);
/// How long the output pipes are read once the process exited and its group was
/// killed: long enough for killed group members to die and close them, short next to
/// a second per record.
pub(super) const OUTPUT_GRACE: Duration = Duration::from_millis(50);
/// How often the exit is looked for where there is no pidfd (Linux before 5.3).
pub(super) const NO_PIDFD_POLL: Duration = Duration::from_millis(10);
/// How often a running handler looks at its tick's cancel flag.
const CANCEL_POLL: Duration = Duration::from_millis(100);

/// How a handler process ended.
pub(super) struct Ended {
    pub status: ExitStatus,
    /// It ran out of time and was killed.
    pub timed_out: bool,
    /// It was stopped because its tick asked (`cancel`): the tick's hold lapsed, or a
    /// stop's `handler.stop_grace` ran out.
    pub cancelled: bool,
    /// `[stdout] …` and `[stderr] …`, bounded.
    pub output: String,
    /// The end of stdout as it was written, after an exit with `SNOOZE_EXIT` only.
    pub stdout: String,
}

/// The end of one output stream.
struct Tail {
    name: &'static str,
    /// Open (read side) until the end of file.
    fd: Option<std::fs::File>,
    kept: Vec<u8>,
    total: usize,
}

impl Tail {
    fn new(name: &'static str, fd: Option<OwnedFd>) -> Self {
        Tail {
            name,
            fd: fd.map(std::fs::File::from),
            kept: Vec::new(),
            total: 0,
        }
    }

    /// Reads what the stream has; closes it at its end or on an error.
    fn read(&mut self, buf: &mut [u8]) {
        let Some(fd) = &mut self.fd else { return };
        match fd.read(buf) {
            Ok(0) => self.fd = None,
            Ok(k) => self.push(&buf[..k]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => self.fd = None,
        }
    }

    fn push(&mut self, data: &[u8]) {
        self.total += data.len();
        self.kept.extend_from_slice(data);
        if self.kept.len() > 2 * OUTPUT_TAIL {
            self.kept.drain(..self.kept.len() - OUTPUT_TAIL);
        }
    }

    /// A note if the stream was still open when it stopped being read. Notes go before
    /// the tails, so that the last line (what `-v` shows of a failure) is the handler's.
    fn note(&self, out: &mut String) {
        if self.fd.is_some() {
            out.push_str(&format!(
                "[{}] still open {}ms after the handler exited (a process it started holds it); not read further\n",
                self.name,
                OUTPUT_GRACE.as_millis()
            ));
        }
    }

    fn render(&mut self, out: &mut String) {
        if self.kept.len() > OUTPUT_TAIL {
            self.kept.drain(..self.kept.len() - OUTPUT_TAIL);
        }
        if !self.kept.is_empty() {
            let cut = if self.total > self.kept.len() {
                format!(" (last {} of {} bytes)", self.kept.len(), self.total)
            } else {
                String::new()
            };
            out.push_str(&format!(
                "[{}{cut}] {}\n",
                self.name,
                String::from_utf8_lossy(&self.kept).trim_end()
            ));
        }
    }
}

/// Runs `cmd` (its stdio is set here) with `input` on its stdin, for at most `timeout`
/// before its group gets SIGTERM, then SIGKILL after `KILL_GRACE`; the same once
/// `cancel` is set.
pub(super) fn run(
    cmd: &mut Command,
    input: &[u8],
    timeout: Duration,
    cancel: Option<&AtomicBool>,
) -> std::io::Result<Ended> {
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut group = LiveGroup::reserve();
    let mut child = cmd.spawn()?;
    group.started(child.id());
    let ended = watch(&mut child, &mut group, input, timeout, cancel);
    drop(group);
    subreaper::after_handler();
    Ok(ended)
}

/// A pidfd of the process `pid`, readable once it exits; `None` where the kernel has
/// none (Linux before 5.3).
pub(super) fn pidfd_open(pid: u32) -> Option<OwnedFd> {
    open_pidfd(as_pid(pid)?, PidfdFlags::empty()).ok()
}

fn as_pid(pid: u32) -> Option<Pid> {
    Pid::from_raw(i32::try_from(pid).ok()?)
}

/// Whether the child has exited, without reaping it: its group must be killed while
/// its pid still holds the group id (see `group`). An error (it is no child to wait
/// for: reaped by someone else) counts as exited, rather than a wait for nothing.
pub(super) fn has_exited(pid: u32) -> bool {
    let Some(pid) = as_pid(pid) else {
        return true;
    };
    // NOWAIT leaves the child waitable, for std's `Child::wait`.
    let options = WaitIdOptions::EXITED | WaitIdOptions::NOHANG | WaitIdOptions::NOWAIT;
    !matches!(waitid(WaitId::Pid(pid), options), Ok(None))
}

/// Waits until one of `fds` is ready, for at most `wait` (`None`: no limit); an absent
/// one is not waited on. Says which are ready: none after the wait ran out, an error
/// (EINTR: a signal came) when poll(2) failed.
pub(super) fn poll_ready<const N: usize>(
    fds: [Option<(BorrowedFd<'_>, PollFlags)>; N],
    wait: Option<Duration>,
) -> rustix::io::Result<[bool; N]> {
    let mut polled: Vec<PollFd<'_>> = fds
        .iter()
        .flatten()
        .map(|&(fd, events)| PollFd::from_borrowed_fd(fd, events))
        .collect();
    // Rounded up to whole milliseconds, so that a wait never ends just short of its
    // deadline.
    let timeout = wait.map(|w| {
        let ms = w.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as i64;
        Timespec {
            tv_sec: ms / 1000,
            tv_nsec: (ms % 1000 * 1_000_000) as _,
        }
    });
    poll(&mut polled, timeout.as_ref())?;
    let mut ready = [false; N];
    let mut answers = polled.iter();
    for (slot, fd) in ready.iter_mut().zip(&fds) {
        if fd.is_some() {
            *slot = answers.next().is_some_and(|p| !p.revents().is_empty());
        }
    }
    Ok(ready)
}

fn watch(
    child: &mut Child,
    group: &mut LiveGroup,
    input: &[u8],
    timeout: Duration,
    cancel: Option<&AtomicBool>,
) -> Ended {
    let pid = child.id();
    let pidfd = pidfd_open(pid);
    let mut stdin = child.stdin.take();
    if let Some(s) = &stdin {
        // Non-blocking, so that poll(2) says when there is room.
        let _ = rustix::io::ioctl_fionbio(s, true);
    }
    let mut written = 0;
    let mut tails = [
        Tail::new("stdout", child.stdout.take().map(OwnedFd::from)),
        Tail::new("stderr", child.stderr.take().map(OwnedFd::from)),
    ];
    let mut buf = [0u8; 8192];
    let mut deadline = Instant::now() + timeout;
    // 0: running; 1: SIGTERM sent; 2: SIGKILL sent.
    let mut stage = 0;
    let mut status: Option<(ExitStatus, Instant)> = None;
    let mut cancelled = false;
    loop {
        if stage == 0 && status.is_none() && cancel.is_some_and(|c| c.load(Ordering::Relaxed)) {
            cancelled = true;
            deadline = Instant::now();
        }
        if status.is_none() && has_exited(pid) {
            // Whatever the handler left in its group goes with it, before it is reaped.
            group.end();
            stdin = None;
            let s = child
                .wait()
                .unwrap_or_else(|_| ExitStatus::from_raw(0x7f00));
            status = Some((s, Instant::now()));
        }
        let now = Instant::now();
        if let Some((_, exited)) = status {
            if tails.iter().all(|t| t.fd.is_none()) || now >= exited + OUTPUT_GRACE {
                break;
            }
        } else if stage < 2 && now >= deadline {
            stage += 1;
            if stage == 1 {
                group.signal(Signal::TERM);
                deadline = now + KILL_GRACE;
            } else {
                group.signal(Signal::KILL);
            }
            continue;
        }
        let until = match status {
            Some((_, exited)) => Some(exited + OUTPUT_GRACE),
            None if stage < 2 => Some(deadline),
            None => None,
        };
        let mut wait = until.map(|u| u.saturating_duration_since(now));
        if pidfd.is_none() && status.is_none() {
            wait = Some(wait.map_or(NO_PIDFD_POLL, |w| w.min(NO_PIDFD_POLL)));
        }
        if cancel.is_some() && stage == 0 && status.is_none() {
            wait = Some(wait.map_or(CANCEL_POLL, |w| w.min(CANCEL_POLL)));
        }
        let fds = [
            stdin.as_ref().map(|s| (s.as_fd(), PollFlags::OUT)),
            tails[0].fd.as_ref().map(|f| (f.as_fd(), PollFlags::IN)),
            tails[1].fd.as_ref().map(|f| (f.as_fd(), PollFlags::IN)),
            pidfd
                .as_ref()
                .filter(|_| status.is_none())
                .map(|p| (p.as_fd(), PollFlags::IN)),
        ];
        let Ok(ready) = poll_ready(fds, wait) else {
            continue; // EINTR
        };
        if ready[0] && !write_some(stdin.as_ref(), input, &mut written) {
            stdin = None;
        }
        for (i, t) in tails.iter_mut().enumerate() {
            if ready[1 + i] {
                t.read(&mut buf);
            }
        }
    }
    let (status, _) = status.expect("the loop ends after the exit");
    ended(status, &mut tails, stage > 0 && !cancelled, cancelled)
}

/// Writes what it can of the rest of `input` (from `written`) to `stdin`, which is
/// non-blocking; returns whether stdin is still wanted: all written, or a handler
/// that does not read its stdin (EPIPE), and it is not.
fn write_some(stdin: Option<&std::process::ChildStdin>, input: &[u8], written: &mut usize) -> bool {
    let Some(s) = stdin else {
        return false;
    };
    match rustix::io::write(s, &input[*written..]) {
        Ok(w) => {
            *written += w;
            *written < input.len()
        }
        // A full pipe: the rest when poll says there is room.
        Err(e) => e == Errno::AGAIN && *written < input.len(),
    }
}

/// How the process ended, with what its output streams kept.
fn ended(status: ExitStatus, tails: &mut [Tail; 2], timed_out: bool, cancelled: bool) -> Ended {
    // Read for its `retry-after:` line only where the exit asks for a later try.
    let stdout = if status.code() == Some(super::SNOOZE_EXIT) {
        String::from_utf8_lossy(&tails[0].kept).into_owned()
    } else {
        String::new()
    };
    let mut output = String::new();
    for t in tails.iter() {
        t.note(&mut output);
    }
    for t in tails.iter_mut() {
        t.render(&mut output);
    }
    output.truncate(output.trim_end().len());
    Ended {
        status,
        timed_out,
        cancelled,
        output,
        stdout,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str, input: &[u8], timeout: Duration) -> Ended {
        run(
            Command::new("sh").args(["-c", script]),
            input,
            timeout,
            None,
        )
        .unwrap()
    }

    #[test]
    fn input_reaches_the_handler_and_both_streams_come_back() {
        let big = vec![b'x'; 300_000];
        let e = sh(
            "wc -c; echo oops >&2; exit 3",
            &big,
            Duration::from_secs(10),
        );
        assert_eq!(e.status.code(), Some(3));
        assert_eq!(e.output, "[stdout] 300000\n[stderr] oops");
        assert!(!e.timed_out);
    }

    #[test]
    fn a_handler_that_ignores_its_input_is_fine() {
        let big = vec![b'x'; 1_000_000];
        let e = sh("exit 0", &big, Duration::from_secs(10));
        assert_eq!(e.status.code(), Some(0));
    }

    #[test]
    fn the_tail_of_long_output_is_kept() {
        let e = sh(
            "head -c 100000 /dev/zero | tr '\\0' x",
            b"",
            Duration::from_secs(10),
        );
        assert!(
            e.output
                .starts_with("[stdout (last 4096 of 100000 bytes)] xxx"),
            "{}",
            &e.output[..60]
        );
    }

    #[test]
    fn a_hang_gets_sigterm_at_the_timeout() {
        let e = sh("sleep 30", b"", Duration::from_millis(200));
        assert!(e.timed_out);
        assert_eq!(e.status.signal(), Some(Signal::TERM.as_raw()));
    }

    #[test]
    fn an_escaped_process_holding_stdout_costs_a_short_grace() {
        let dir = tempfile::tempdir().unwrap();
        let ready = dir.path().join("escaped");
        let script = format!(
            "setsid sh -c 'touch {0}; exec sleep 5' & while [ ! -e {0} ]; do sleep 0.01; done; echo hi",
            ready.display()
        );
        let started = Instant::now();
        let e = sh(&script, b"", Duration::from_secs(10));
        assert!(started.elapsed() < Duration::from_secs(4), "not waited out");
        assert!(
            e.output
                .starts_with("[stdout] still open 50ms after the handler exited"),
            "{}",
            e.output
        );
        assert!(
            e.output.ends_with("not read further\n[stdout] hi"),
            "{}",
            e.output
        );
    }
}

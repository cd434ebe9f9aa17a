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
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

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

pub(super) fn pidfd_open(pid: u32) -> Option<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    // SAFETY: a non-negative answer is a descriptor now ours alone.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) })
}

/// Whether the child has exited, without reaping it: its group must be killed while
/// its pid still holds the group id (see `group`). An error (it is no child to wait
/// for: reaped by someone else) counts as exited, rather than a wait for nothing.
pub(super) fn has_exited(pid: u32) -> bool {
    // SAFETY: waitid writes one siginfo_t into the zeroed one we pass; WNOWAIT leaves
    // the child waitable, for std's `Child::wait`.
    unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        let r = libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        );
        r != 0 || info.si_pid() != 0
    }
}

fn set_nonblocking(fd: libc::c_int) {
    // SAFETY: fcntl on a descriptor the caller owns.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
    }
}

/// A pollfd that poll(2) ignores.
pub(super) const UNUSED: libc::pollfd = libc::pollfd {
    fd: -1,
    events: 0,
    revents: 0,
};

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
        set_nonblocking(s.as_raw_fd());
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
                group.signal(libc::SIGTERM);
                deadline = now + KILL_GRACE;
            } else {
                group.signal(libc::SIGKILL);
            }
            continue;
        }
        let mut fds = [UNUSED; 4];
        if let Some(s) = &stdin {
            fds[0] = polled(s.as_raw_fd(), libc::POLLOUT);
        }
        for (i, t) in tails.iter().enumerate() {
            if let Some(fd) = &t.fd {
                fds[1 + i] = polled(fd.as_raw_fd(), libc::POLLIN);
            }
        }
        if let (Some(p), None) = (&pidfd, status) {
            fds[3] = polled(p.as_raw_fd(), libc::POLLIN);
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
        // Rounded up, so that a wait never ends just short of its deadline.
        let ms = wait.map_or(-1, |w| {
            w.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as i32
        });
        // SAFETY: poll reads and writes the array of four pollfds we pass; an fd of -1
        // is ignored.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
        if n <= 0 {
            continue; // a deadline, or EINTR
        }
        if fds[0].revents != 0 && !write_some(stdin.as_ref(), input, &mut written) {
            stdin = None;
        }
        for (i, t) in tails.iter_mut().enumerate() {
            if fds[1 + i].revents != 0 {
                t.read(&mut buf);
            }
        }
    }
    let (status, _) = status.expect("the loop ends after the exit");
    ended(status, &mut tails, stage > 0 && !cancelled, cancelled)
}

/// A pollfd waiting for `events` on `fd`.
pub(super) fn polled(fd: libc::c_int, events: libc::c_short) -> libc::pollfd {
    libc::pollfd {
        fd,
        events,
        revents: 0,
    }
}

/// Writes what it can of the rest of `input` (from `written`) to `stdin`, which is
/// non-blocking; returns whether stdin is still wanted: all written, or a handler
/// that does not read its stdin (EPIPE), and it is not.
fn write_some(stdin: Option<&std::process::ChildStdin>, input: &[u8], written: &mut usize) -> bool {
    let Some(s) = stdin else {
        return false;
    };
    let left = &input[*written..];
    // SAFETY: writes from a live slice to a descriptor we own.
    let w = unsafe { libc::write(s.as_raw_fd(), left.as_ptr().cast(), left.len()) };
    if w > 0 {
        *written += w as usize;
    }
    let again = w < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::WouldBlock;
    !(*written >= input.len() || (w < 0 && !again))
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
        assert_eq!(e.status.signal(), Some(libc::SIGTERM));
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

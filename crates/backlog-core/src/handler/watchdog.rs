//! A watchdog process that kills the live handler groups when the tick dies, however
//! it dies (SIGKILL included).
//!
//! Handlers are spawned the cheap way (posix_spawn, a vfork underneath), which leaves
//! no place for the `PR_SET_PDEATHSIG` a forked child would set between fork and exec;
//! and a death signal only ever reached the direct child anyway, never its own
//! children. Instead, once per tick process, a child is forked that holds the read end
//! of a pipe: the tick writes each handler group's id to it as the group starts (`+`)
//! and ends (`-`). When the tick dies, the kernel closes the write end; the watchdog
//! reads the end of file, SIGKILLs every group still on its list, and exits. The watchdog
//! runs in a process group of its own, so a Ctrl-C or a kill of the tick's group does
//! not take it first.
//!
//! The forked child runs only async-signal-safe code (raw reads, kill, `_exit`), with
//! its list on its stack: the tick may have other threads, whose locks the child
//! inherits held. A message is an `i32` written atomically (a pipe write of at most
//! `PIPE_BUF` bytes never interleaves); the write end is non-blocking, so a stalled
//! watchdog costs the tick a lost message, never a hang: the host registry
//! (`registry`) covers what the watchdog misses.

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::OnceLock;

use rustix::pipe::{PipeFlags, pipe_with};

struct Watchdog {
    pid: i32,
    /// The write end of the pipe; the tick's death closes it.
    write: OwnedFd,
}

static WATCHDOG: OnceLock<Option<Watchdog>> = OnceLock::new();

/// Starts the watchdog, once per process. A failure is logged and leaves the host
/// registry as the only cover.
pub(super) fn start() {
    WATCHDOG.get_or_init(|| match fork_watchdog() {
        Ok(w) => Some(w),
        Err(e) => {
            tracing::warn!(
                "cannot start the handler watchdog ({e}): a tick killed with SIGKILL leaves its handlers running until the next tick on this host"
            );
            None
        }
    });
}

/// The watchdog's pid: a child of the tick that is no orphan.
pub(super) fn pid() -> Option<i32> {
    WATCHDOG.get().and_then(|w| w.as_ref()).map(|w| w.pid)
}

pub(super) fn watch(pgid: i32) {
    send(pgid);
}

pub(super) fn unwatch(pgid: i32) {
    send(-pgid);
}

fn send(message: i32) {
    let Some(Some(w)) = WATCHDOG.get() else {
        return;
    };
    // A full pipe (EAGAIN) or a dead watchdog (EPIPE; SIGPIPE is ignored by the Rust
    // runtime) only loses the message.
    let _ = rustix::io::write(&w.write, &message.to_ne_bytes());
}

fn fork_watchdog() -> std::io::Result<Watchdog> {
    let (read, write) = pipe_with(PipeFlags::CLOEXEC)?;
    // The write end only: the watchdog's reads block.
    let _ = rustix::io::ioctl_fionbio(&write, true);
    // SAFETY: fork(2) has no wrapper that could be safe: the child is a copy of a
    // process whose other threads may hold locks (the allocator's among them) that no
    // one will release there. It is sound because the child runs only `watch_over`,
    // which makes async-signal-safe system calls, touches nothing but its own stack,
    // and never returns into the code of the tick.
    match unsafe { libc::fork() } {
        -1 => Err(std::io::Error::last_os_error()),
        // SAFETY: this is the freshly forked child that `watch_over` requires.
        0 => unsafe { watch_over(read.as_raw_fd()) },
        pid => Ok(Watchdog { pid, write }),
    }
}

/// The watchdog's life: collect group ids until the end of file, kill the groups left.
///
/// # Safety
/// Call only in a freshly forked child: it takes over the process's descriptors and
/// signals, and ends it.
unsafe fn watch_over(read: libc::c_int) -> ! {
    const FD: libc::c_int = 3;
    // SAFETY: this is a forked copy of a threaded process, where only async-signal-safe
    // calls are sound, and every call below is one: a plain system call that neither
    // allocates nor takes a lock another thread may have held at the fork. Each acts on
    // this child's own descriptors, signal dispositions and mask, or on the groups it
    // was told of; the pointers passed point into arrays on this stack or to static C
    // strings; and `_exit` ends the child without running the tick's exit code or any
    // destructor. The calls stay raw: descriptors are taken over by number, and
    // signal dispositions set, where no safe wrapper can exist.
    unsafe {
        libc::setpgid(0, 0);
        // The tick's signal-hook handlers were copied with its memory: reset them, so
        // that a signal meant for the tick is not handled here as if it were the tick.
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        libc::signal(libc::SIGHUP, libc::SIG_IGN);
        libc::signal(libc::SIGTERM, libc::SIG_DFL);
        libc::signal(libc::SIGQUIT, libc::SIG_DFL);
        let mut mask: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut mask);
        libc::pthread_sigmask(libc::SIG_SETMASK, &mask, std::ptr::null_mut());
        libc::prctl(libc::PR_SET_NAME, c"backlog-watch".as_ptr());
        // Hold nothing of the tick's: not its output (a reader waiting for the tick's
        // end of file would wait for ours) and not its handlers' pipes.
        if read != FD {
            libc::dup2(read, FD);
        }
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        for fd in 0..3 {
            if null >= 0 && null != fd {
                libc::dup2(null, fd);
            }
        }
        if libc::syscall(libc::SYS_close_range, FD as u32 + 1, u32::MAX, 0) != 0 {
            for fd in FD + 1..4096 {
                libc::close(fd);
            }
        }
        let mut groups = [0i32; 4096];
        let mut live = 0usize;
        let mut buf = [0i32; 256];
        loop {
            let n = libc::read(FD, buf.as_mut_ptr().cast(), std::mem::size_of_val(&buf));
            if n == 0 {
                break;
            }
            if n < 0 {
                if *libc::__errno_location() == libc::EINTR {
                    continue;
                }
                break;
            }
            let count = (n as usize / 4).min(buf.len());
            for &message in &buf[..count] {
                if message > 0 {
                    if live < groups.len() {
                        groups[live] = message;
                        live += 1;
                    }
                } else if let Some(i) = groups[..live].iter().position(|&g| g == -message) {
                    live -= 1;
                    groups[i] = groups[live];
                }
            }
        }
        for &pgid in &groups[..live] {
            libc::kill(-pgid, libc::SIGKILL);
        }
        libc::_exit(0)
    }
}

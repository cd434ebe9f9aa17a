//! What `/proc/<pid>/stat` says about a process: its state, parent, process group and
//! start time.
//!
//! The start time (clock ticks since boot) is what makes a pid an identity: a pid is
//! reused, a pid with the same start time is not. The orphan sweep and the host
//! registry both lean on it, and on `CLOCK_BOOTTIME`, the clock the kernel takes it from,
//! so that a time read here can be compared with a process's start.

use rustix::time::{ClockId, clock_gettime};

/// The fields of one process's `stat` line that the handler's process tree needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct ProcStat {
    /// `R`, `S`, `Z` (a zombie, dead and not yet reaped), …
    pub state: u8,
    pub ppid: i32,
    pub pgid: i32,
    /// Clock ticks since boot.
    pub start: u64,
}

impl ProcStat {
    /// The process `pid` as it is now, or `None` when there is no such process.
    pub fn of(pid: i32) -> Option<ProcStat> {
        let mut buf = [0u8; 512];
        let path = format!("/proc/{pid}/stat");
        let n = read_into(&path, &mut buf)?;
        ProcStat::parse(&buf[..n])
    }

    /// Parses a `stat` line. The command name, in parentheses, may hold spaces and
    /// parentheses itself, so the fields are counted from its last `)`.
    fn parse(line: &[u8]) -> Option<ProcStat> {
        let close = line.iter().rposition(|&b| b == b')')?;
        let rest = std::str::from_utf8(line.get(close + 2..)?).ok()?;
        let mut fields = rest.split_ascii_whitespace();
        // Fields 3 onwards: state, ppid, pgrp, session, tty_nr, tpgid, flags, minflt,
        // cminflt, majflt, cmajflt, utime, stime, cutime, cstime, priority, nice,
        // num_threads, itrealvalue, starttime (22).
        let state = *fields.next()?.as_bytes().first()?;
        let ppid = fields.next()?.parse().ok()?;
        let pgid = fields.next()?.parse().ok()?;
        let start = fields.nth(16)?.parse().ok()?;
        Some(ProcStat {
            state,
            ppid,
            pgid,
            start,
        })
    }
}

/// Reads a small file into `buf` without allocating beyond its path: it is read once
/// per child in a sweep.
fn read_into(path: &str, buf: &mut [u8]) -> Option<usize> {
    use std::io::Read;
    let mut file = std::fs::File::open(path).ok()?;
    let mut n = 0;
    while n < buf.len() {
        match file.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    Some(n)
}

/// Clock ticks per second, the unit of a start time.
pub(super) fn ticks_per_second() -> u64 {
    static TICKS: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        let t = rustix::param::clock_ticks_per_second();
        if t > 0 { t } else { 100 }
    })
}

/// Now on the kernel's boot-time clock, in the clock ticks of a start time, rounded
/// down: a process started before this reading has a start time of at most this, one
/// started after it has a start time of at least this.
pub(super) fn boot_ticks_now() -> u64 {
    let ts = clock_gettime(ClockId::Boottime);
    let tps = ticks_per_second();
    ts.tv_sec as u64 * tps + ts.tv_nsec as u64 * tps / 1_000_000_000
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_with_spaces_and_parentheses_is_skipped() {
        let line = b"4242 (a (b) c) S 1 4242 4242 0 -1 4194560 107 0 0 0 0 0 0 0 20 0 1 0 987654 2269184 131 18446744073709551615\n";
        assert_eq!(
            ProcStat::parse(line),
            Some(ProcStat {
                state: b'S',
                ppid: 1,
                pgid: 4242,
                start: 987654
            })
        );
        assert_eq!(ProcStat::parse(b"4242 (x) S 1"), None);
    }

    #[test]
    fn this_process_started_before_now() {
        let me = ProcStat::of(std::process::id() as i32).expect("this process is in /proc");
        assert!(me.start <= boot_ticks_now());
        assert_eq!(ProcStat::of(-1), None);
    }
}

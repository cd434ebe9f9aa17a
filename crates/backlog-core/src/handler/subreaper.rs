//! The tick as the reaper of its handlers' orphans.
//!
//! A handler may leave processes behind: in its group (killed with the group when the
//! handler ends) or escaped from it (`setsid`). As a child subreaper
//! (`PR_SET_CHILD_SUBREAPER`) the tick inherits every such process whose parent dies,
//! instead of init: it can kill them, and it must reap them, or a long-running daemon
//! collects zombies.
//!
//! Reaping must never steal an exit status that someone else waits for: each handler's
//! own thread waits for its direct child (std's `Child`), and code elsewhere in the
//! process may wait for children of its own. So there is no `waitpid(-1)`. A sweep lists
//! the tick's children (`/proc/self/task/*/children`) and judges each one:
//!
//! - the watchdog, and the leader of a live handler group (the live-group table), are
//!   someone's direct children: spared;
//! - a child in the tick's own process group was started by other code of this process
//!   (handlers always lead a group of their own): spared;
//! - any other child is an orphan of some handler. A zombie that is not a group leader
//!   is reaped (no handler's direct child is one); otherwise it is killed, or reaped
//!   when dead, only if it started before every live handler was reserved — a
//!   descendant of a live handler cannot have started before that handler, and a
//!   handler is reserved before its spawn, so a child whose spawn is under way on
//!   another thread is spared too.
//!
//! Only the `backlog` program itself adopts orphans (`adopt_orphans`, called by the
//! commands that run ticks): a program that embeds the library may have children of
//! its own in other process groups, which a sweep cannot tell from a handler's
//! orphans, so it keeps init as their reaper and its children are never touched.
//!
//! A child is reaped by its own pid (`waitid(P_PID, …)`), and it is still our unreaped
//! child when it is judged, so its pid cannot have been reused in between. A sweep
//! costs a read of the task folder and of each child's `stat`: it runs at most once a
//! second, after a handler ends, and when the last handler is dropped (the tick's end).

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use rustix::process::{
    Pid, Signal, WaitId, WaitIdOptions, getpid, kill_process, set_child_subreaper, waitid,
};

use super::group::live_snapshot;
use super::proc_stat::{ProcStat, boot_ticks_now, ticks_per_second};
use super::signal::signal_group;
use super::watchdog;

/// The least time between two sweeps after handlers end.
const SWEEP_EVERY: Duration = Duration::from_secs(1);

/// Whether this process adopts and sweeps its handlers' orphans.
static ADOPTING: AtomicBool = AtomicBool::new(false);

/// Makes this process the reaper of its handlers' orphans from the next handler on:
/// for the `backlog` program, whose only children are its handlers and its watchdog.
pub fn adopt_orphans() {
    ADOPTING.store(true, Ordering::Relaxed);
}

/// Makes this process the reaper of its handlers' orphans, once, if it adopts them.
pub(super) fn become_subreaper() {
    if !ADOPTING.load(Ordering::Relaxed) {
        return;
    }
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // The kernel reads the argument as a flag: any pid turns the attribute on.
        if let Err(e) = set_child_subreaper(Some(getpid())) {
            tracing::debug!(
                "cannot become a child subreaper ({}): orphans of handlers go to init",
                std::io::Error::from(e)
            );
        }
    });
}

/// After a handler ended: sweeps, if the last sweep was long enough ago.
pub(super) fn after_handler() {
    if !ADOPTING.load(Ordering::Relaxed) {
        return;
    }
    static LAST: AtomicU64 = AtomicU64::new(0);
    let now = boot_ticks_now();
    let every = SWEEP_EVERY.as_secs() * ticks_per_second();
    let last = LAST.load(Ordering::Relaxed);
    if now >= last + every
        && LAST
            .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    {
        sweep();
    }
}

/// Kills and reaps the orphans that no live handler can own; returns how many it
/// killed.
pub(super) fn sweep() -> usize {
    // One sweep at a time: two would judge the same child twice.
    static SWEEPING: Mutex<Vec<i32>> = Mutex::new(Vec::new());
    let Ok(mut leaders) = SWEEPING.try_lock() else {
        return 0;
    };
    // Read before the table: a handler reserved after this reading has children that
    // started after it.
    let now = boot_ticks_now();
    let bound = live_snapshot(&mut leaders).map(|earliest| earliest.min(now));
    let me = std::process::id() as i32;
    let Some(ours) = ProcStat::of(me) else {
        return 0;
    };
    let watchdog = watchdog::pid();
    let mut killed = 0;
    for child in children() {
        if Some(child) == watchdog || leaders.contains(&child) {
            if Some(child) == watchdog && ProcStat::of(child).is_some_and(|s| s.state == b'Z') {
                reap(child); // killed by someone: nothing to watch with any more
            }
            continue;
        }
        let Some(stat) = ProcStat::of(child) else {
            continue;
        };
        if stat.ppid != me || stat.pgid == ours.pgid {
            continue;
        }
        let before_every_live_handler = bound.is_some_and(|b| stat.start < b);
        if stat.state == b'Z' {
            if stat.pgid != child || before_every_live_handler {
                reap(child);
            }
        } else if before_every_live_handler {
            tracing::debug!("killing process {child}, an orphan a handler left");
            if stat.pgid == child {
                signal_group(child, Signal::KILL);
            }
            // Our own unreaped child: its pid cannot have been reused.
            if let Some(pid) = Pid::from_raw(child.max(0)) {
                let _ = kill_process(pid, Signal::KILL);
            }
            killed += 1;
        }
    }
    killed
}

/// The tick ends (its last handler is dropped): kills every orphan, and reaps them.
pub(super) fn sweep_at_end() {
    if !ADOPTING.load(Ordering::Relaxed) {
        return;
    }
    for _ in 0..5 {
        if sweep() == 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Reaps one child of ours that a sweep judged to be nobody else's, if it has exited.
fn reap(pid: i32) {
    if let Some(pid) = Pid::from_raw(pid.max(0)) {
        let _ = waitid(
            WaitId::Pid(pid),
            WaitIdOptions::EXITED | WaitIdOptions::NOHANG,
        );
    }
}

/// The pids of this process's children, from every thread's `children` file (each
/// thread has its own: a child belongs to the thread that forked it, an orphan to the
/// thread the kernel chose).
fn children() -> Vec<i32> {
    let mut pids = Vec::new();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return pids;
    };
    for task in tasks.flatten() {
        if let Ok(text) = std::fs::read_to_string(task.path().join("children")) {
            pids.extend(
                text.split_ascii_whitespace()
                    .filter_map(|p| p.parse::<i32>().ok()),
            );
        }
    }
    pids
}

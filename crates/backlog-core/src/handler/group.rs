//! The process groups of this process's live handlers, in a table a signal handler can
//! read.
//!
//! Every handler process (per record or batch) leads a process group of its own. While
//! it lives its group id sits in a fixed table of atomics: a second SIGINT or SIGTERM
//! walks the table and kills every group from inside the signal handler
//! (`kill_live_groups` only loads atomics and calls kill(2), both async-signal-safe),
//! then exits. The same entry tells the watchdog (`watchdog`) and the host registry
//! (`registry`) about the group, so that the group also dies when the tick is killed
//! with SIGKILL; and its reservation time tells the orphan sweep (`subreaper`) which of
//! the tick's children may still belong to a live handler.
//!
//! The invariant that keeps a group id from naming someone else's group: an entry is
//! cleared, and the group killed, while its leader is still unreaped (running or a
//! zombie). Linux does not hand out a pid that is still some process's group id, and
//! the leader's pid is that group id, so until the leader is reaped the id can only
//! name the handler's own group. The slot then stays reserved (pending) until the
//! owner has reaped the leader: the orphan sweep spares every child that started after
//! a reservation, so it never reaps a leader its owner is about to wait for.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering};

use rustix::process::Signal;

use super::proc_stat::boot_ticks_now;
use super::signal::signal_group;
use super::{registry, watchdog};

/// Live groups one process can track: above the largest concurrency a tick allows,
/// plus batch handlers.
const SLOTS: usize = 1024;
/// A slot reserved by a spawn under way, its group not known yet.
const PENDING: i32 = -1;

static PGIDS: [AtomicI32; SLOTS] = [const { AtomicI32::new(0) }; SLOTS];
/// When each slot was reserved (boot-clock ticks); 0 while free.
static RESERVED_AT: [AtomicU64; SLOTS] = [const { AtomicU64::new(0) }; SLOTS];
/// Where the next reservation starts looking.
static NEXT: AtomicUsize = AtomicUsize::new(0);
/// Handlers running without a slot (the table was full): while there are any, the
/// orphan sweep cannot tell their children from orphans and kills none.
static UNTRACKED: AtomicUsize = AtomicUsize::new(0);

/// One handler's group, from just before its spawn until it is killed.
#[derive(Debug)]
pub(super) struct LiveGroup {
    /// The table's slot; `None` when it was full (counted in `UNTRACKED`).
    slot: Option<usize>,
    /// Reserved and not yet ended.
    live: bool,
    pgid: i32,
    /// The boot clock just before the spawn, in ticks: the leader's start time is at
    /// least this.
    reserved_at: u64,
}

impl LiveGroup {
    /// Takes a slot before the process exists, so that the orphan sweep, which runs on
    /// other threads, already counts the child as this handler's.
    pub fn reserve() -> LiveGroup {
        let start = NEXT.fetch_add(1, Ordering::Relaxed) % SLOTS;
        let slot = (0..SLOTS).map(|i| (start + i) % SLOTS).find(|&i| {
            PGIDS[i]
                .compare_exchange(0, PENDING, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
        });
        let reserved_at = boot_ticks_now();
        match slot {
            Some(i) => RESERVED_AT[i].store(reserved_at.max(1), Ordering::SeqCst),
            None => {
                UNTRACKED.fetch_add(1, Ordering::SeqCst);
                static WARNED: AtomicBool = AtomicBool::new(false);
                if !WARNED.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        "more than {SLOTS} handlers at once: the ones beyond are not killed on a second signal"
                    );
                }
            }
        }
        LiveGroup {
            slot,
            live: true,
            pgid: 0,
            reserved_at,
        }
    }

    /// The handler process started: its pid is its group's id.
    pub fn started(&mut self, pid: u32) {
        let Ok(pgid) = i32::try_from(pid) else {
            return;
        };
        self.pgid = pgid;
        if let Some(i) = self.slot {
            PGIDS[i].store(pgid, Ordering::SeqCst);
        }
        watchdog::watch(pgid);
        registry::record(self.slot, pgid, self.reserved_at, boot_ticks_now());
    }

    /// Sends `signal` to the whole group.
    pub fn signal(&self, signal: Signal) {
        if self.pgid > 0 {
            signal_group(self.pgid, signal);
        }
    }

    /// Kills what is left of the group. Call before the leader is reaped (see the
    /// module's invariant): the slot goes back to pending, so that a signal no longer
    /// kills the group while the orphan sweep still spares its leader, until the owner
    /// has reaped it and drops this.
    pub fn end(&mut self) {
        if !std::mem::take(&mut self.live) {
            return;
        }
        if self.pgid > 0 {
            signal_group(self.pgid, Signal::KILL);
            watchdog::unwatch(self.pgid);
            registry::clear(self.slot);
        }
        if let Some(i) = self.slot {
            PGIDS[i].store(PENDING, Ordering::SeqCst);
        }
        self.pgid = 0;
    }
}

impl Drop for LiveGroup {
    /// Ends the group if it was not, and frees its slot: the leader is reaped (or was
    /// never spawned).
    fn drop(&mut self) {
        self.end();
        match self.slot {
            Some(i) => {
                RESERVED_AT[i].store(0, Ordering::SeqCst);
                PGIDS[i].store(0, Ordering::SeqCst);
            }
            None => {
                UNTRACKED.fetch_sub(1, Ordering::SeqCst);
            }
        }
    }
}

/// What the orphan sweep must spare: the groups (leaders) of live handlers, and the
/// earliest boot-clock tick at which a live handler's process may have started.
/// `None` as the bound when a handler runs untracked: then nothing may be taken for
/// an orphan.
pub(super) fn live_snapshot(leaders: &mut Vec<i32>) -> Option<u64> {
    leaders.clear();
    let mut earliest = u64::MAX;
    for i in 0..SLOTS {
        let pgid = PGIDS[i].load(Ordering::SeqCst);
        if pgid == 0 {
            continue;
        }
        if pgid > 0 {
            leaders.push(pgid);
        }
        // A slot just reserved may not show its time yet: 0 spares everything.
        earliest = earliest.min(RESERVED_AT[i].load(Ordering::SeqCst));
    }
    (UNTRACKED.load(Ordering::SeqCst) == 0).then_some(earliest)
}

/// SIGKILLs every live handler group of this process. Async-signal-safe: it only loads
/// atomics and calls kill(2), so a signal handler may call it (then `_exit`).
pub fn kill_live_groups() {
    for slot in &PGIDS {
        let pgid = slot.load(Ordering::SeqCst);
        if pgid > 0 {
            signal_group(pgid, Signal::KILL);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_is_pending_from_its_reservation_until_its_leader_is_reaped() {
        let mut group = LiveGroup::reserve();
        let slot = group.slot.expect("the table has room");
        assert_eq!(PGIDS[slot].load(Ordering::SeqCst), PENDING);
        assert!(RESERVED_AT[slot].load(Ordering::SeqCst) > 0);
        let mut leaders = Vec::new();
        let bound = live_snapshot(&mut leaders).expect("tracked");
        assert!(bound <= group.reserved_at.max(1));
        group.end();
        assert_eq!(
            PGIDS[slot].load(Ordering::SeqCst),
            PENDING,
            "spared until reaped"
        );
        drop(group);
        assert_eq!(PGIDS[slot].load(Ordering::SeqCst), 0);
        assert_eq!(RESERVED_AT[slot].load(Ordering::SeqCst), 0);
    }
}

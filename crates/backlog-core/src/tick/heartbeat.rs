//! The heartbeat: renews a tick's holds on a thread of its own, and tells the tick
//! whether they are fresh enough to hand out another record.
//!
//! A hold lives one lease past its last renewal. The tick hands a record out only
//! while the last renewal is less than half a lease old, measured on a clock that no
//! setting of the wall clock moves nor a suspend stops (see `Reading`): a
//! tick that was paused (SIGSTOP, a frozen or suspended VM, a write lock another
//! process held for longer than the lease) may find on waking that another tick has taken its
//! records, and must not trust the page it read before. A renewal that comes after a
//! gap of three quarters of a lease or more does not make the holds fresh again: they
//! may have run out in between, so the tick stops for good (its marks then land only
//! where it still holds, see `Store::mark`). A renewal the database refuses for lack
//! of room (`Fault::DiskFull`) stops the handing out at once: the marks of what the
//! tick would hand out next could not be written either. Other failures (a lock wait,
//! a lost connection) may clear by the next beat, and are borne for half a lease.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use chrono::Utc;
use rustix::time::{ClockId, clock_gettime};

use crate::duration;
use crate::store::{Fault, Heartbeat, StoreError};

/// A reading of two clocks, in nanoseconds: the monotonic one, which no setting of
/// the wall clock moves, and the wall clock, which goes on while the machine is
/// suspended (a laptop's lid, a VM paused by its host) where the monotonic one stops.
/// A hold's age is the larger of the two spans, so a tick that wakes from a SIGSTOP or
/// from a suspend longer than its lease sees its holds ran out, as the database does;
/// a wall clock set back costs nothing, one set forward only stops a tick early. The
/// check before each record reads the coarse clocks (a few ms behind, at a seventh of
/// the cost: a precise reading was over a percent of a fast tick's time per record).
#[derive(Debug, Clone, Copy)]
struct Reading {
    monotonic: u64,
    wall: u64,
}

fn read_clock(clock: ClockId) -> u64 {
    let t = clock_gettime(clock);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

impl Reading {
    fn now() -> Reading {
        Reading {
            monotonic: read_clock(ClockId::Monotonic),
            wall: read_clock(ClockId::Realtime),
        }
    }

    #[cfg(target_os = "linux")]
    fn coarse() -> Reading {
        Reading {
            monotonic: read_clock(ClockId::MonotonicCoarse),
            wall: read_clock(ClockId::RealtimeCoarse),
        }
    }

    #[cfg(not(target_os = "linux"))]
    fn coarse() -> Reading {
        Reading::now()
    }

    /// The span since `earlier`, by whichever clock says it is longer.
    fn since(self, earlier: Reading) -> Duration {
        Duration::from_nanos(
            self.monotonic
                .saturating_sub(earlier.monotonic)
                .max(self.wall.saturating_sub(earlier.wall)),
        )
    }
}

/// What the heartbeat thread and the tick share.
struct State {
    /// When the holds were last renewed by a beat (a `Reading`, taken when the beat
    /// started, so it never looks fresher than it is). Taking a page does not count:
    /// on PostgreSQL it renews only that page's claims.
    renewed_monotonic: AtomicU64,
    renewed_wall: AtomicU64,
    /// Set once the holds may have run out; never cleared.
    lapsed: AtomicBool,
    /// Set once the tick's running handlers must stop: its holds lapsed, or a stop was
    /// asked and `handler.stop_grace` is over. Never cleared.
    cancel: AtomicBool,
    /// Set once a beat was refused for lack of room; never cleared.
    refused: AtomicBool,
    /// Why they lapsed, or why beats fail (and since when).
    why: Mutex<Why>,
}

#[derive(Default)]
struct Why {
    lapsed: Option<String>,
    failing: Option<(Instant, String)>,
    /// The first beat refused for lack of room.
    refused: Option<String>,
}

/// Renews a tick's holds until dropped.
pub(super) struct HeartbeatThread {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<thread::JoinHandle<()>>,
    state: Arc<State>,
    lease: Duration,
}

impl State {
    fn renewed(&self) -> Reading {
        Reading {
            monotonic: self.renewed_monotonic.load(Ordering::Acquire),
            wall: self.renewed_wall.load(Ordering::Acquire),
        }
    }

    /// Records a renewal that started at `at` (never moving back).
    fn renew(&self, at: Reading) {
        self.renewed_monotonic
            .fetch_max(at.monotonic, Ordering::AcqRel);
        self.renewed_wall.fetch_max(at.wall, Ordering::AcqRel);
    }

    /// How long ago the holds were last renewed, read precisely or coarsely.
    fn age(&self, now: Reading) -> Duration {
        now.since(self.renewed())
    }

    fn lapse(&self, why: String) {
        let mut state = self
            .why
            .lock()
            .expect("the heartbeat state is never poisoned");
        if state.lapsed.is_none() {
            tracing::warn!("{why}");
            state.lapsed = Some(why);
        }
        self.lapsed.store(true, Ordering::Release);
        self.cancel.store(true, Ordering::Release);
    }
}

impl HeartbeatThread {
    /// Starts beating every quarter lease; the holds count as renewed now.
    pub(super) fn start(mut heartbeat: Box<dyn Heartbeat>, lease: Duration) -> Self {
        let (stop, stopped) = mpsc::channel::<()>();
        // The holds count as renewed now: the coarse reading, a little behind, so the
        // first check never finds them renewed in its future.
        let start = Reading::coarse();
        let state = Arc::new(State {
            renewed_monotonic: AtomicU64::new(start.monotonic),
            renewed_wall: AtomicU64::new(start.wall),
            lapsed: AtomicBool::new(false),
            cancel: AtomicBool::new(false),
            refused: AtomicBool::new(false),
            why: Mutex::new(Why::default()),
        });
        let shared = Arc::clone(&state);
        let span = tracing::Span::current();
        let thread = thread::spawn(move || {
            let _in_span = span.enter();
            let state = shared;
            while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(lease / 4) {
                let started = Reading::now();
                let gap = state.age(started);
                match heartbeat.beat(Utc::now() + lease) {
                    Ok(()) if gap >= lease * 3 / 4 => state.lapse(format!(
                        "this tick's holds went {} without renewal (its lease is {}): the tick was paused or cut off, and another tick may have taken its records; it hands out no more",
                        duration::compact(Duration::from_secs(gap.as_secs().max(1))),
                        duration::compact(lease)
                    )),
                    Ok(()) => {
                        state.renew(started);
                        state.why.lock().expect("never poisoned").failing = None;
                    }
                    Err(StoreError::HoldLapsed(why)) => state.lapse(format!(
                        "this tick's hold lapsed ({why}); it hands out no more"
                    )),
                    Err(e) => {
                        tracing::warn!("cannot renew this tick's claims: {e}");
                        let mut why = state.why.lock().expect("never poisoned");
                        let since = why.failing.as_ref().map_or_else(Instant::now, |(t, _)| *t);
                        why.failing = Some((since, e.to_string()));
                        if e.fault() == Fault::DiskFull && why.refused.is_none() {
                            why.refused = Some(e.to_string());
                            state.refused.store(true, Ordering::Release);
                        }
                    }
                }
            }
        });
        HeartbeatThread {
            stop: Some(stop),
            thread: Some(thread),
            state,
            lease,
        }
    }

    /// Set once the holds may have run out: handlers still running then stop.
    pub(super) fn lapsed_flag(&self) -> &AtomicBool {
        &self.state.lapsed
    }

    /// Set once the tick's running handlers must stop: its holds lapsed, or the
    /// grace after a stop is over (`cancel`). The handlers' `Context::cancel`.
    pub(super) fn cancel_flag(&self) -> &AtomicBool {
        &self.state.cancel
    }

    /// Stops the handlers still running (the grace after a stop is over); the holds
    /// are fine, so the tick still marks what they answered before.
    pub(super) fn cancel(&self) {
        self.state.cancel.store(true, Ordering::Release);
    }

    /// The holds may have run out (a store said so, or the tick found it out): from
    /// now on the tick hands out nothing, and its running handlers stop.
    pub(super) fn lapse(&self, why: String) {
        self.state.lapse(why);
    }

    /// Why the tick's holds lapsed, now that `lost` of its marks were refused for want
    /// of them; from now on they count as lapsed.
    pub(super) fn lapsed_for(&self, lost: u64) -> String {
        let why = match self.stale() {
            Some(Stale::Lapsed(why) | Stale::Failing(why)) => why,
            None => format!(
                "this tick's hold on {lost} of its records lapsed (another tick took them); it hands out no more"
            ),
        };
        self.state.lapse(why.clone());
        why
    }

    /// Why the tick must hand out no more records, if it must: its holds lapsed (a
    /// renewal came, or would come, three quarters of a lease or more after the one
    /// before), or were last renewed half a lease ago or more (beats failing), or a
    /// beat was refused for lack of room.
    pub(super) fn stale(&self) -> Option<Stale> {
        let age = self.state.age(Reading::coarse());
        if !self.state.lapsed.load(Ordering::Acquire) && age < self.lease / 2 {
            if !self.state.refused.load(Ordering::Acquire) {
                return None;
            }
            let why = self.state.why.lock().expect("never poisoned");
            let e = why.refused.as_deref().unwrap_or_default();
            return Some(Stale::Failing(format!(
                "the database refused to renew this tick's claims ({e}); it hands out no more"
            )));
        }
        let seconds = |d: Duration| duration::compact(Duration::from_secs(d.as_secs().max(1)));
        if age >= self.lease * 3 / 4 && !self.state.lapsed.load(Ordering::Acquire) {
            self.state.lapse(format!(
                "this tick's holds went {} without renewal (its lease is {}): the tick was paused or cut off, and another tick may have taken its records; it hands out no more",
                seconds(age),
                duration::compact(self.lease)
            ));
        }
        let why = self.state.why.lock().expect("never poisoned");
        if let Some(lapsed) = &why.lapsed {
            return Some(Stale::Lapsed(lapsed.clone()));
        }
        // Beats that fail are the database's error; a beat that did not come in time
        // (the tick paused, its heartbeat starved or stuck) is a hold about to lapse.
        match &why.failing {
            Some((_, e)) => Some(Stale::Failing(format!(
                "claims not renewed for {} ({e}); stopped taking records before they run out",
                seconds(age)
            ))),
            None => Some(Stale::Lapsed(format!(
                "claims not renewed for {} (the tick was paused, or its heartbeat could not run; its lease is {}); stopped taking records before they run out",
                seconds(age),
                duration::compact(self.lease)
            ))),
        }
    }
}

/// Why a tick hands out no more records.
pub(super) enum Stale {
    /// Its holds may have run out, or will before long with no renewal in sight (the
    /// tick or its heartbeat could not run): another tick may have its records.
    Lapsed(String),
    /// Its heartbeat has failed for half a lease (the database): before they run out.
    Failing(String),
}

impl HeartbeatThread {
    /// Stops beating, before the tick lets its holds go (a beat that found them gone
    /// would call them lapsed).
    pub(super) fn stop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for HeartbeatThread {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A heartbeat whose beats take `takes` each, then fail when `fails`.
    struct Slow {
        takes: Duration,
        fails: bool,
    }

    impl Heartbeat for Slow {
        fn beat(&mut self, _: chrono::DateTime<Utc>) -> Result<(), StoreError> {
            thread::sleep(self.takes);
            if self.fails {
                return Err(StoreError::Schema("the server is gone".into()));
            }
            Ok(())
        }
    }

    /// A heartbeat whose every beat the database refuses for lack of room.
    struct Full;

    impl Heartbeat for Full {
        fn beat(&mut self, _: chrono::DateTime<Utc>) -> Result<(), StoreError> {
            Err(StoreError::disk_full("renewing claims"))
        }
    }

    #[test]
    fn a_beat_refused_for_lack_of_room_stops_the_tick_at_once() {
        let lease = Duration::from_millis(800);
        let mut thread = HeartbeatThread::start(Box::new(Full), lease);
        assert!(thread.stale().is_none(), "fresh before the first beat");
        // The first beat comes at a quarter lease, well before half of one.
        thread::sleep(lease * 3 / 8);
        let stale = thread.stale();
        thread.stop();
        assert!(matches!(
            stale,
            Some(Stale::Failing(why)) if why.contains("refused to renew") && why.contains("disk is full")
        ));
    }

    /// What `stale` says once half a lease passed without a renewal.
    fn stale_after_half_a_lease(beat: Slow) -> Stale {
        let lease = Duration::from_millis(800);
        let mut thread = HeartbeatThread::start(Box::new(beat), lease);
        thread::sleep(lease * 5 / 8);
        let stale = thread.stale().expect("no renewal for over half a lease");
        thread.stop();
        stale
    }

    #[test]
    fn a_beat_that_cannot_come_in_time_is_a_lapse_and_failing_beats_the_databases() {
        // The first beat starts at a quarter lease and is still running at five eighths.
        let stuck = Slow {
            takes: Duration::from_millis(700),
            fails: false,
        };
        assert!(matches!(
            stale_after_half_a_lease(stuck),
            Stale::Lapsed(why) if why.contains("its heartbeat could not run")
        ));
        let failing = Slow {
            takes: Duration::ZERO,
            fails: true,
        };
        assert!(matches!(
            stale_after_half_a_lease(failing),
            Stale::Failing(why) if why.contains("the server is gone")
        ));
    }
}

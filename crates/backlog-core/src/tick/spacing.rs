//! The spacing of starts: a `Spacer` spaces handler starts evenly to keep to `handler.rate`.
//!
//! Starts are spaced one interval apart, not allowed in bursts: a tick that waited
//! for its page does not make up for lost time by starting several at once. A batch
//! of n records counts as n starts. The rate is the fleet's: every runner of the same
//! table and tier (or `handler.rate_group`) reserves its starts in the database
//! (`Store::reserve_starts`), so four runners at `20/s` start 20 a second in all, not
//! 80. With `rate = "auto"` the interval is the fleet's adapted pace (`adapted.rs`),
//! read again as the tick reserves its starts.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::adapted::Adapted;
use crate::config::AutoRate;
use crate::handler::Handled;
use crate::rate::Rate;
use crate::store::Store;

/// How a tick's starts are spaced: at a fixed rate, or at the pace the fleet adapts
/// to the counterpart's answers (`rate = "auto"`).
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Spacing {
    Fixed(Rate),
    Adapted(AutoRate),
}

impl Spacing {
    /// The spacing `handler.rate` asks for, if any.
    pub(super) fn of(rate: Option<Rate>, auto: Option<&AutoRate>) -> Option<Spacing> {
        match (rate, auto) {
            (_, Some(auto)) => Some(Spacing::Adapted(auto.clone())),
            (Some(rate), None) => Some(Spacing::Fixed(rate)),
            (None, None) => None,
        }
    }

    /// Starts a second, where the rate is fixed.
    pub(super) fn fixed(&self) -> Option<f64> {
        match self {
            Spacing::Fixed(rate) => Some(rate.per_second()),
            Spacing::Adapted(_) => None,
        }
    }
}

/// How often a waiting tick looks at its stop flag.
pub(super) const STOP_CHECK: Duration = Duration::from_millis(50);

/// How much of the rate a runner reserves at once, at least: a tenth of a second's
/// starts (two at `20/s`), so that a fast rate costs the database ten reservations a
/// second, not one a start, and a runner that ends leaves little of it unused.
const RESERVE_AHEAD: Duration = Duration::from_millis(100);

/// The name of the rate a tick of `window` on `table` shares with the other runners:
/// its table and tier's (a `backlog retry`'s window is 0), or its group's.
pub(super) fn rate_name(table: &str, window: Duration, group: Option<&str>) -> String {
    match group {
        Some(group) => format!("group {group}"),
        None => format!("table {table}, tier {}s", window.as_secs()),
    }
}

/// A rate's name as a person reads it: its tier by name, not by seconds (`table
/// BACKLOG, tier 1d, counterpart acme` for `table BACKLOG, tier 86400s, counterpart
/// acme`).
pub(super) fn readable(name: &str) -> String {
    let Some((table, rest)) = name.split_once(", tier ") else {
        return name.to_string();
    };
    let digits = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    match (
        rest[..digits].parse::<u64>(),
        rest[digits..].strip_prefix('s'),
    ) {
        (Ok(secs), Some(after)) => {
            format!("{table}, tier {}{after}", crate::duration::tier_name(secs))
        }
        _ => name.to_string(),
    }
}

pub(super) struct Spacer {
    interval: Option<Duration>,
    /// With `rate = "auto"`: the fleet's pace, which sets `interval`.
    adapted: Option<Adapted>,
    /// The name of the rate shared with every runner of it (`Store::reserve_starts`);
    /// none where this tick spaces its starts alone.
    shared: Option<String>,
    /// The fewest starts a reservation takes (see `RESERVE_AHEAD`).
    chunk: u64,
    /// Starts reserved and not used yet: runs of them, each from when and how many.
    reserved: VecDeque<(Instant, u64)>,
    /// The earliest the next start may be, where this tick spaces its starts alone.
    next: Instant,
}

impl Spacer {
    /// Starts spaced as `spacing` says: shared, when `shared` names it, with every
    /// runner of the same name (an adapted pace is always the fleet's, under `shared`'s
    /// name, or the tick's alone when it has none).
    pub(super) fn new(spacing: Option<Spacing>, shared: Option<String>) -> Self {
        let (interval, adapted) = match spacing {
            None => (None, None),
            Some(Spacing::Fixed(rate)) => (Some(rate.interval()), None),
            Some(Spacing::Adapted(auto)) => {
                let adapted = Adapted::new(auto, shared.clone());
                (Some(Duration::from_secs(1)), Some(adapted))
            }
        };
        Spacer {
            shared: shared.filter(|_| interval.is_some()),
            interval,
            adapted,
            chunk: chunk(interval),
            reserved: VecDeque::new(),
            next: Instant::now(),
        }
    }

    /// Sends an adapted pace's unsent news (as the tick ends).
    pub(super) fn flush(&mut self, store: &mut dyn Store) {
        if let Some(adapted) = &mut self.adapted {
            adapted.flush(store);
        }
    }

    /// Counts a handler's outcome in an adapted pace (before the breaker counts it);
    /// says whether the pace took an overload on itself, so that the breaker leaves it
    /// be (`Adapted::outcome`).
    pub(super) fn outcome(
        &mut self,
        handled: &Handled,
        took: Duration,
        ended: Instant,
        store: &mut dyn Store,
    ) -> bool {
        self.adapted
            .as_mut()
            .is_some_and(|adapted| adapted.outcome(handled, took, ended, store))
    }

    /// How long until `records` more may start; where the rate is shared, reserves
    /// their starts first (call it before `wait`, for the same records). A reservation
    /// the database refuses is said once, and the tick keeps to the rate alone.
    pub(super) fn delay(&mut self, records: usize, store: &mut dyn Store) -> Duration {
        if let Some(adapted) = &mut self.adapted {
            let interval = adapted.interval(store);
            // The pace was cut: the starts this runner reserved at the old pace are
            // let go (under the rate, never over it), or they would go out at the pace
            // that overloaded the counterpart, and their refusals cut it again.
            if self.interval.is_some_and(|old| interval > old.mul_f64(1.5)) {
                self.reserved.clear();
            }
            self.interval = Some(interval);
            self.chunk = chunk(self.interval);
        }
        let Some(interval) = self.interval else {
            return Duration::ZERO;
        };
        self.drop_missed(interval);
        if let Some(name) = &self.shared {
            let have: u64 = self.reserved.iter().map(|r| r.1).sum();
            if have < records as u64 {
                let want = (records as u64 - have).max(self.chunk);
                let reserved = match self.adapted {
                    Some(_) => store.reserve_adapted_starts(name, want, interval),
                    None => store.reserve_starts(name, want, interval),
                };
                match reserved {
                    Ok(Some(wait)) => self.reserved.push_back((Instant::now() + wait, want)),
                    // No table to share it in: alone.
                    Ok(None) => self.shared = None,
                    Err(e) => {
                        tracing::warn!(
                            "cannot reserve handler starts with the other runners ({e}); this tick keeps to handler.rate alone"
                        );
                        self.shared = None;
                    }
                }
            }
        }
        self.first().saturating_duration_since(Instant::now())
    }

    /// Drops the reserved starts whose time passed an interval ago or more (the tick's
    /// handlers were all busy): used late, they would go out back to back, a burst.
    fn drop_missed(&mut self, interval: Duration) {
        let now = Instant::now();
        while let Some((at, left)) = self.reserved.front_mut() {
            if now < *at + interval {
                return;
            }
            let missed = ((now - *at).as_nanos() / interval.as_nanos().max(1)) as u64;
            let skipped = missed.min(*left);
            *at += interval.saturating_mul(skipped as u32);
            *left -= skipped;
            if *left == 0 {
                self.reserved.pop_front();
            }
        }
    }

    /// When the next start may be.
    fn first(&self) -> Instant {
        match (&self.shared, self.reserved.front()) {
            (Some(_), Some((at, _))) => *at,
            _ => self.next,
        }
    }

    /// Waits until `records` more may start, and counts them. Returns false, at once,
    /// if `stop` is set meanwhile: a rate of a few an hour must not hold a stopping tick.
    pub(super) fn wait(&mut self, records: usize, stop: &AtomicBool) -> bool {
        if self.interval.is_none() {
            return true;
        }
        loop {
            if stop.load(Ordering::Relaxed) {
                return false;
            }
            let now = Instant::now();
            let first = self.first();
            if now >= first {
                self.started(records);
                return true;
            }
            std::thread::sleep((first - now).min(STOP_CHECK));
        }
    }

    /// Counts `records` starts made now, once `delay` for them said none need wait.
    pub(super) fn started(&mut self, records: usize) {
        let Some(interval) = self.interval else {
            return;
        };
        if self.shared.is_some() {
            self.use_reserved(records as u64, interval);
        } else {
            self.next = Instant::now().max(self.next) + interval.saturating_mul(records as u32);
        }
    }

    /// Whether the pace holds nothing worth keeping: its rate is shared (the database
    /// keeps it), it has no starts reserved that are still to come, and an adapted pace
    /// has no news unsent.
    pub(super) fn idle(&mut self) -> bool {
        if let Some(interval) = self.interval {
            self.drop_missed(interval);
        }
        self.shared.is_some()
            && self.reserved.is_empty()
            && self.adapted.as_ref().is_none_or(Adapted::quiet)
    }

    /// Whether the rate is shared with the other runners (the database has not refused it).
    pub(super) fn is_shared(&self) -> bool {
        self.shared.is_some()
    }

    /// Counts `n` reserved starts as used, the earliest first.
    fn use_reserved(&mut self, mut n: u64, interval: Duration) {
        while n > 0 {
            let Some((at, left)) = self.reserved.front_mut() else {
                return;
            };
            let used = n.min(*left);
            *at += interval.saturating_mul(used as u32);
            *left -= used;
            n -= used;
            if *left == 0 {
                self.reserved.pop_front();
            }
        }
    }
}

/// The fewest starts a reservation takes at `interval` (see `RESERVE_AHEAD`).
fn chunk(interval: Option<Duration>) -> u64 {
    interval
        .map_or(1, |i| {
            (RESERVE_AHEAD.as_secs_f64() / i.as_secs_f64().max(1e-9)).ceil() as u64
        })
        .max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rates_name_reads_with_its_tier_by_name() {
        assert_eq!(
            readable("table BACKLOG, tier 86400s, counterpart acme"),
            "table BACKLOG, tier 1d, counterpart acme"
        );
        assert_eq!(readable("table T, tier 0s"), "table T, tier retry");
        assert_eq!(
            readable("group api, counterpart 7"),
            "group api, counterpart 7"
        );
    }

    #[test]
    fn starts_are_spaced_by_the_interval() {
        let stop = AtomicBool::new(false);
        let mut pace = Spacer::new(Some(Spacing::Fixed(Rate::parse("50/s").unwrap())), None);
        let started = Instant::now();
        for _ in 0..6 {
            assert!(pace.wait(1, &stop));
        }
        // Five intervals of 20 ms lie between six starts.
        assert!(started.elapsed() >= Duration::from_millis(100));
    }

    #[test]
    fn a_stop_ends_the_wait() {
        let stop = AtomicBool::new(false);
        let mut pace = Spacer::new(Some(Spacing::Fixed(Rate::parse("1/h").unwrap())), None);
        assert!(pace.wait(1, &stop));
        stop.store(true, Ordering::Relaxed);
        assert!(!pace.wait(1, &stop), "an hour's wait ends with the stop");
    }
}

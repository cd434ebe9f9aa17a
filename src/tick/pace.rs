//! The pace: spaces handler starts evenly to keep to `handler.rate`.
//!
//! Starts are spaced one interval apart, not allowed in bursts: a tick that waited
//! for its page does not make up for lost time by starting several at once. A batch
//! of n records counts as n starts.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::rate::Rate;

/// How often a waiting tick looks at its stop flag.
const STOP_CHECK: Duration = Duration::from_millis(50);

pub(super) struct Pace {
    interval: Option<Duration>,
    /// The earliest the next start may be.
    next: Instant,
}

impl Pace {
    pub(super) fn new(rate: Option<Rate>) -> Self {
        Pace {
            interval: rate.map(|r| r.interval()),
            next: Instant::now(),
        }
    }

    /// How long until the next start may be.
    pub(super) fn delay(&self) -> Duration {
        match self.interval {
            None => Duration::ZERO,
            Some(_) => self.next.saturating_duration_since(Instant::now()),
        }
    }

    /// Waits until `records` more may start. Returns false, at once, if `stop` is set
    /// meanwhile: a rate of a few an hour must not hold a stopping tick.
    pub(super) fn wait(&mut self, records: usize, stop: &AtomicBool) -> bool {
        let Some(interval) = self.interval else {
            return true;
        };
        loop {
            if stop.load(Ordering::Relaxed) {
                return false;
            }
            let now = Instant::now();
            if now >= self.next {
                self.next = now.max(self.next) + interval.saturating_mul(records as u32);
                return true;
            }
            std::thread::sleep((self.next - now).min(STOP_CHECK));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_are_spaced_by_the_interval() {
        let stop = AtomicBool::new(false);
        let mut pace = Pace::new(Some(Rate::parse("50/s").unwrap()));
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
        let mut pace = Pace::new(Some(Rate::parse("1/h").unwrap()));
        assert!(pace.wait(1, &stop));
        stop.store(true, Ordering::Relaxed);
        assert!(!pace.wait(1, &stop), "an hour's wait ends with the stop");
    }
}

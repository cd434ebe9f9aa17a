//! Strategies whose delay is a function of the number of consecutive failures: the
//! Fibonacci sequence, the arctan curve, Sidekiq's polynomial with jitter, and the
//! "buckets" variant that draws from a widening range. A success resets the count and
//! waits `on_success`.

use std::f64::consts::PI;

use super::{Delay, Outcome, Strategy};

/// Which curve gives the delay after the n-th consecutive failure.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SequenceKind {
    /// a, b, a+b, …
    Fibonacci {
        /// The delay after the first failure (seconds).
        first: f64,
        /// The delay after the second failure (seconds).
        second: f64,
    },
    /// `1440·(2/π)·arctan(n³/15)` minutes: fast growth that flattens below a day.
    Arctan,
    /// Sidekiq: `n⁴ + 15 + rand(10·(n+1))` seconds, n counting retries from 0.
    Sidekiq,
    /// Uniform between n³ and (n+2)³ seconds, n counting retries from 0.
    Buckets,
}

/// A delay that follows a fixed curve of the failure count, capped.
#[derive(Debug, Clone)]
pub struct Sequence {
    /// The curve.
    pub kind: SequenceKind,
    /// Every delay is at most this (seconds).
    pub max: f64,
    /// The wait after a success.
    pub on_success: f64,
}

/// The arctan curve in minutes, for `n` attempts.
pub fn arctan_minutes(n: u32) -> f64 {
    1440.0 * (2.0 / PI) * (f64::from(n).powi(3) / 15.0).atan()
}

impl Sequence {
    /// The curve, uncapped, with no wait after a success.
    #[cfg(test)]
    pub fn new(kind: SequenceKind) -> Self {
        Sequence {
            kind,
            max: f64::INFINITY,
            on_success: 0.0,
        }
    }

    /// The delay after the n-th consecutive failure (n ≥ 1); `fib` is the Fibonacci
    /// pair carried from the previous failure, so a long run stays linear.
    fn after(&self, n: u32, fib: &mut (f64, f64), rng: &mut fastrand::Rng) -> f64 {
        let retry = f64::from(n - 1);
        let d = match self.kind {
            SequenceKind::Fibonacci { first, second } => {
                *fib = if n == 1 {
                    (first, second)
                } else {
                    (fib.1, fib.0 + fib.1)
                };
                fib.0
            }
            SequenceKind::Arctan => arctan_minutes(n) * 60.0,
            SequenceKind::Sidekiq => {
                retry.powi(4) + 15.0 + (rng.f64() * 10.0 * (retry + 1.0)).floor()
            }
            SequenceKind::Buckets => {
                let (low, high) = (retry.powi(3), (retry + 2.0).powi(3));
                low + (high - low) * rng.f64()
            }
        };
        d.min(self.max)
    }
}

impl Strategy for Sequence {
    fn delays(&self, outcomes: &[Outcome], rng: &mut fastrand::Rng) -> Vec<Delay> {
        let mut failures = 0u32;
        let mut fib = (0.0, 0.0);
        outcomes
            .iter()
            .map(|ok| {
                if *ok {
                    failures = 0;
                    Delay::Wait(self.on_success)
                } else {
                    failures += 1;
                    Delay::Wait(self.after(failures, &mut fib, rng))
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backoff::tests::waits;

    #[test]
    fn fibonacci_from_two_and_three_capped_at_twenty() {
        let fib = Sequence {
            kind: SequenceKind::Fibonacci {
                first: 2.0,
                second: 3.0,
            },
            max: 20.0,
            on_success: 1.0,
        };
        assert_eq!(
            waits(&fib, "0 0 0 0 0 0 1"),
            [2.0, 3.0, 5.0, 8.0, 13.0, 20.0, 1.0]
        );
    }

    /// f(1) = 61.0 min = 1.017 h (a circulating table says 1.022 h: a slip), f(2) ≈ 7.49 h,
    /// f(3) ≈ 16.25 h, f(11) ≈ 23.83 h, never above 24 h.
    #[test]
    fn arctan_values() {
        let round = |x: f64, places: i32| (x * 10f64.powi(places)).round() / 10f64.powi(places);
        assert_eq!(arctan_minutes(0), 0.0);
        assert_eq!(round(arctan_minutes(1), 1), 61.0);
        assert_eq!(round(arctan_minutes(1) / 60.0, 3), 1.017);
        assert_eq!(round(arctan_minutes(2) / 60.0, 2), 7.49);
        assert_eq!(round(arctan_minutes(3) / 60.0, 2), 16.25);
        assert_eq!(round(arctan_minutes(11) / 60.0, 2), 23.83);
        assert!((0..10_000).all(|n| arctan_minutes(n) < 1440.0));
    }

    #[test]
    fn sidekiq_and_buckets_stay_in_their_ranges() {
        let sidekiq = waits(&Sequence::new(SequenceKind::Sidekiq), "0 0 0 0 0");
        for (n, d) in sidekiq.iter().enumerate() {
            let n = n as f64;
            let low = n.powi(4) + 15.0;
            assert!(*d >= low && *d < low + 10.0 * (n + 1.0), "retry {n}: {d}");
        }
        let buckets = waits(&Sequence::new(SequenceKind::Buckets), "0 0 0 0 0");
        for (n, d) in buckets.iter().enumerate() {
            let n = n as f64;
            assert!(*d >= n.powi(3) && *d <= (n + 2.0).powi(3), "retry {n}: {d}");
        }
    }
}

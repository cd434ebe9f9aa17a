//! Exponential backoff: the delay doubles (or grows by `factor`) with each consecutive
//! failure, up to `max`; a success resets it. Two forms are in use: the classic one
//! (`initial·factorⁿ⁻¹`: 1, 2, 4, …) and the httpx/urllib3 one (0, b, 2b, 4b, …: the first
//! retry is immediate). Jitter spreads retries of jobs that failed together.

use super::{Delay, Outcome, Strategy};

/// How randomness is mixed into an exponential delay `d` (AWS's names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Jitter {
    /// No jitter: every delay is exactly `d`, so jobs that failed together retry together.
    None,
    /// Uniform in [0, d].
    Full,
    /// d/2 plus uniform in [0, d/2].
    Equal,
    /// Uniform in [initial, 3 × the previous delay], capped: the next delay depends on
    /// the last one drawn, not on the failure count.
    Decorrelated,
}

/// A delay that grows by a factor with each consecutive failure, up to a cap; a success
/// resets it to the first delay.
#[derive(Debug, Clone)]
pub struct Exponential {
    /// The first delay in seconds (in the httpx form: the backoff factor `b`).
    pub initial: f64,
    /// What each further failure multiplies the delay by.
    pub factor: f64,
    /// The cap on a delay, before jitter (seconds).
    pub max: f64,
    /// The httpx form: 0 for the first retry, then `initial·factorⁿ⁻²`.
    pub httpx: bool,
    /// How randomness spreads the delays.
    pub jitter: Jitter,
}

impl Exponential {
    /// `initial·factorⁿ⁻¹` after the n-th consecutive failure, capped at `max`.
    pub fn classic(initial: f64, factor: f64, max: f64) -> Self {
        Exponential {
            initial,
            factor,
            max,
            httpx: false,
            jitter: Jitter::None,
        }
    }

    /// httpx/urllib3's `backoff_factor·2ⁿ⁻¹` with the first retry immediate: 0, b, 2b, 4b…
    pub fn httpx(backoff_factor: f64, max: f64) -> Self {
        Exponential {
            initial: backoff_factor,
            factor: 2.0,
            max,
            httpx: true,
            jitter: Jitter::None,
        }
    }

    /// The delay after the n-th consecutive failure (n ≥ 1), before jitter.
    pub fn base(&self, n: u32) -> f64 {
        let d = if self.httpx {
            if n <= 1 {
                0.0
            } else {
                self.initial * self.factor.powi(n as i32 - 2)
            }
        } else {
            self.initial * self.factor.powi(n as i32 - 1)
        };
        d.min(self.max)
    }
}

impl Strategy for Exponential {
    fn delays(&self, outcomes: &[Outcome], rng: &mut fastrand::Rng) -> Vec<Delay> {
        let mut failures = 0u32;
        let mut previous = self.initial;
        outcomes
            .iter()
            .map(|ok| {
                if *ok {
                    failures = 0;
                    previous = self.initial;
                    return Delay::Wait(0.0);
                }
                failures += 1;
                let d = self.base(failures);
                let d = match self.jitter {
                    Jitter::None => d,
                    Jitter::Full => d * rng.f64(),
                    Jitter::Equal => d / 2.0 + d / 2.0 * rng.f64(),
                    Jitter::Decorrelated => {
                        let high = (previous * 3.0).max(self.initial);
                        (self.initial + (high - self.initial) * rng.f64()).min(self.max)
                    }
                };
                previous = d;
                Delay::Wait(d)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backoff::tests::waits;

    #[test]
    fn doubles_to_its_cap_and_resets_on_success() {
        let exp = Exponential::classic(1.0, 2.0, 200.0);
        assert_eq!(
            waits(&exp, "0 0 0 0 0 0 0 0 0 0 1 1 1"),
            [
                1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 200.0, 200.0, 0.0, 0.0, 0.0
            ]
        );
    }

    #[test]
    fn the_httpx_form_retries_at_once_first() {
        assert_eq!(
            waits(&Exponential::httpx(0.5, 120.0), "0 0 0 0 0"),
            [0.0, 0.5, 1.0, 2.0, 4.0]
        );
    }

    #[test]
    fn jitter_stays_within_its_bounds() {
        for (jitter, low, high) in [(Jitter::Full, 0.0, 1.0), (Jitter::Equal, 0.5, 1.0)] {
            let exp = Exponential {
                jitter,
                ..Exponential::classic(1.0, 2.0, 1000.0)
            };
            let got = waits(&exp, "0 0 0 0 0 0");
            for (n, d) in got.iter().enumerate() {
                let base = 2f64.powi(n as i32);
                assert!(*d >= low * base && *d <= high * base, "{jitter:?} {n}: {d}");
            }
        }
        let dec = Exponential {
            jitter: Jitter::Decorrelated,
            ..Exponential::classic(1.0, 2.0, 50.0)
        };
        let got = waits(&dec, &"0 ".repeat(100));
        assert!(got.iter().all(|d| (1.0..=50.0).contains(d)), "{got:?}");
    }
}

//! The additive/multiplicative family (LILD, LIMD, MILD, MIMD): each outcome moves the
//! previous delay, a failure one way and a success the other, within [min, max]. It is
//! the congestion-control idea (TCP's AIMD) applied to retries: it reacts to a
//! counterpart's recovery as well as to its failures. A constant delay is the case where
//! neither moves it.

use super::{Delay, Outcome, Strategy};

/// How an outcome moves the delay.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Step {
    /// Add this (negative to decrease).
    Add(f64),
    /// Multiply by this (below 1 to decrease).
    Mul(f64),
}

impl Step {
    fn apply(self, d: f64) -> f64 {
        match self {
            Step::Add(x) => d + x,
            Step::Mul(x) => d * x,
        }
    }
}

/// A delay moved by each outcome. The first attempt's delay is `initial`.
#[derive(Debug, Clone)]
pub struct Adaptive {
    /// The delay after the first attempt, whatever its outcome (seconds).
    pub initial: f64,
    /// How a failure moves the delay.
    pub on_failure: Step,
    /// How a success moves the delay.
    pub on_success: Step,
    /// The delay never goes below this (seconds).
    pub min: f64,
    /// The delay never goes above this (seconds).
    pub max: f64,
}

impl Adaptive {
    /// The same delay after every outcome.
    pub fn constant(delay: f64) -> Self {
        Adaptive {
            initial: delay,
            on_failure: Step::Add(0.0),
            on_success: Step::Add(0.0),
            min: 0.0,
            max: f64::INFINITY,
        }
    }
}

impl Strategy for Adaptive {
    fn delays(&self, outcomes: &[Outcome], _rng: &mut fastrand::Rng) -> Vec<Delay> {
        let mut d = self.initial;
        outcomes
            .iter()
            .enumerate()
            .map(|(i, ok)| {
                if i > 0 {
                    d = if *ok {
                        self.on_success
                    } else {
                        self.on_failure
                    }
                    .apply(d)
                    .clamp(self.min, self.max);
                }
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
    fn mimd_doubles_on_failure_and_halves_on_success() {
        let mimd = Adaptive {
            initial: 3.0,
            on_failure: Step::Mul(2.0),
            on_success: Step::Mul(0.5),
            min: 2.0,
            max: f64::INFINITY,
        };
        assert_eq!(
            waits(&mimd, "0 0 0 0 1 1 1 1 1 0 0 0"),
            [
                3.0, 6.0, 12.0, 24.0, 12.0, 6.0, 3.0, 2.0, 2.0, 4.0, 8.0, 16.0
            ]
        );
    }

    #[test]
    fn lild_adds_on_failure_and_subtracts_on_success() {
        let lild = Adaptive {
            initial: 3.0,
            on_failure: Step::Add(4.0),
            on_success: Step::Add(-5.0),
            min: 1.0,
            max: f64::INFINITY,
        };
        assert_eq!(
            waits(&lild, "0 0 0 1 1 1 1 0 0 0"),
            [3.0, 7.0, 11.0, 6.0, 1.0, 1.0, 1.0, 5.0, 9.0, 13.0]
        );
    }

    #[test]
    fn constant_never_moves() {
        assert_eq!(waits(&Adaptive::constant(5.0), "0 1 0"), [5.0, 5.0, 5.0]);
    }
}

//! How many retries fit in a timeout, and how long a number of retries takes.
//!
//! The exact count comes from adding up the strategy's own delays after consecutive
//! failures, so caps, jitter (under a seed) and give-ups are all counted; a closed form,
//! where the strategy has one, is shown beside it by the caller.

use backlog_core::backoff::{Delay, FAILURE, Strategy};

/// Retries stop being counted past this, so a strategy of zero delays still ends.
const MOST: usize = 100_000;

/// What a strategy costs in time when every attempt fails: the answer to "how many
/// retries before the timeout" and "how long do n retries take".
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Budget {
    /// Retries whose waits add up to no more than the timeout.
    pub retries: usize,
    /// The waits of those retries, added up (seconds).
    pub total: f64,
    /// The strategy gave up before the timeout.
    pub gave_up: bool,
    /// Counting stopped at `MOST` retries (delays of zero, or nearly).
    pub unbounded: bool,
}

/// The retries of `strategy` that fit in `timeout` seconds, or the first `retries` of
/// them when given.
pub fn budget(
    strategy: &dyn Strategy,
    timeout: Option<f64>,
    retries: Option<usize>,
    rng: &mut fastrand::Rng,
) -> Budget {
    let n = retries.unwrap_or(MOST).min(MOST);
    let delays = strategy.delays(&vec![FAILURE; n], rng);
    let mut b = Budget {
        retries: 0,
        total: 0.0,
        gave_up: false,
        unbounded: false,
    };
    for d in delays {
        match d {
            Delay::GiveUp => {
                b.gave_up = true;
                return b;
            }
            Delay::Wait(s) if timeout.is_some_and(|t| b.total + s > t) => return b,
            Delay::Wait(s) => {
                b.total += s;
                b.retries += 1;
            }
        }
    }
    b.unbounded = retries.is_none();
    b
}

#[cfg(test)]
mod tests {
    use super::*;
    use backlog_core::backoff::{Adaptive, Exponential, Limited};

    fn rng() -> fastrand::Rng {
        fastrand::Rng::with_seed(1)
    }

    #[test]
    fn httpx_with_factor_half_fits_six_retries_in_thirty_seconds() {
        let b = budget(
            &Exponential::httpx(0.5, 120.0),
            Some(30.0),
            None,
            &mut rng(),
        );
        assert_eq!(
            (b.retries, b.total),
            (6, 15.5),
            "0 + 0.5 + 1 + 2 + 4 + 8; the 7th would reach 31.5"
        );
    }

    #[test]
    fn a_cap_is_counted() {
        let b = budget(
            &Exponential::classic(1.0, 2.0, 10.0),
            Some(100.0),
            None,
            &mut rng(),
        );
        assert_eq!((b.retries, b.total), (12, 95.0), "1 2 4 8 then 10s");
    }

    #[test]
    fn the_inverse_adds_up_a_number_of_retries() {
        let b = budget(
            &Exponential::classic(1.0, 2.0, f64::INFINITY),
            None,
            Some(5),
            &mut rng(),
        );
        assert_eq!((b.retries, b.total), (5, 31.0));
    }

    #[test]
    fn give_ups_and_zero_delays_end_the_count() {
        let mut limited = Limited::new(Adaptive::constant(1.0));
        limited.max_attempts = Some(4);
        let b = budget(&limited, Some(100.0), None, &mut rng());
        assert_eq!((b.retries, b.gave_up), (3, true));
        let b = budget(&Adaptive::constant(0.0), Some(1.0), None, &mut rng());
        assert!(b.unbounded);
    }
}

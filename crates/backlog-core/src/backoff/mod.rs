//! Retry strategies: how long to wait before the next attempt, given what the attempts
//! so far did.
//!
//! Every strategy is a pure function of its parameters, the outcome history and a
//! seeded RNG passed in: no global randomness, so `backoff delays`, the budget and any
//! later plot or simulation see the same curve for the same seed. Delays are in
//! seconds (as `f64`, since several strategies produce fractions).

mod adaptive;
pub mod catalog;
mod exponential;
mod progressive;
mod sequence;

pub use adaptive::{Adaptive, Step};
pub use exponential::{Exponential, Jitter};
pub use progressive::Progressive;
pub use sequence::{Sequence, SequenceKind};

/// What an attempt did.
pub type Outcome = bool;
/// The attempt failed: the strategy waits, or gives up.
pub const FAILURE: Outcome = false;

/// The wait after an attempt.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Delay {
    /// Wait this many seconds, then try again.
    Wait(f64),
    /// Stop trying.
    GiveUp,
}

impl Delay {
    /// The wait in seconds; none for giving up.
    pub fn seconds(self) -> Option<f64> {
        match self {
            Delay::Wait(s) => Some(s),
            Delay::GiveUp => None,
        }
    }
}

/// A retry strategy.
pub trait Strategy {
    /// The wait after each outcome in `outcomes` (one delay per outcome).
    fn delays(&self, outcomes: &[Outcome], rng: &mut fastrand::Rng) -> Vec<Delay>;
}

impl Strategy for Box<dyn Strategy> {
    fn delays(&self, outcomes: &[Outcome], rng: &mut fastrand::Rng) -> Vec<Delay> {
        self.as_ref().delays(outcomes, rng)
    }
}

/// Shortens each delay by how late the attempt it follows came, given when each outcome
/// was seen (seconds): "subtract the time actually waited". An attempt planned for
/// `t` that ran at `t + late` makes the next wait `late` shorter (never below zero), so
/// attempts keep to the strategy's grid instead of drifting later with every late tick.
pub fn subtract_waited(delays: &[Delay], times: &[f64]) -> Vec<Delay> {
    let mut out: Vec<Delay> = Vec::with_capacity(delays.len());
    for (i, d) in delays.iter().enumerate() {
        let late = match (
            i.checked_sub(1).and_then(|p| out.get(p)),
            i.checked_sub(1).and_then(|p| times.get(p)),
            times.get(i),
        ) {
            (Some(Delay::Wait(planned)), Some(prev), Some(now)) => (now - prev - planned).max(0.0),
            _ => 0.0,
        };
        out.push(match d {
            Delay::Wait(s) => Delay::Wait((s - late).max(0.0)),
            Delay::GiveUp => Delay::GiveUp,
        });
    }
    out
}

/// Delays worked out beforehand, replayed: for strategies that borrow what they need.
pub struct Fixed(pub Vec<Delay>);

impl Strategy for Fixed {
    fn delays(&self, outcomes: &[Outcome], _rng: &mut fastrand::Rng) -> Vec<Delay> {
        self.0.iter().copied().take(outcomes.len()).collect()
    }
}

/// Limits and jitter around any strategy.
pub struct Limited<S> {
    /// The strategy whose delays are limited and jittered.
    pub inner: S,
    /// Give up once this many attempts were made.
    pub max_attempts: Option<usize>,
    /// Give up once the waits so far add up to more than this (seconds).
    pub max_total: Option<f64>,
    /// Spread each wait uniformly over [d(1−j), d(1+j)].
    pub jitter: Option<f64>,
}

impl<S> Limited<S> {
    /// No limits and no jitter, until the fields are set.
    pub fn new(inner: S) -> Self {
        Limited {
            inner,
            max_attempts: None,
            max_total: None,
            jitter: None,
        }
    }
}

impl<S: Strategy> Strategy for Limited<S> {
    fn delays(&self, outcomes: &[Outcome], rng: &mut fastrand::Rng) -> Vec<Delay> {
        let mut total = 0.0;
        let mut gave_up = false;
        self.inner
            .delays(outcomes, rng)
            .into_iter()
            .enumerate()
            .map(|(i, d)| {
                let Delay::Wait(mut s) = d else {
                    return Delay::GiveUp;
                };
                if let Some(j) = self.jitter {
                    s *= 1.0 - j + 2.0 * j * rng.f64();
                }
                total += s;
                gave_up |= self.max_attempts.is_some_and(|m| i + 1 >= m)
                    || self.max_total.is_some_and(|m| total > m);
                if gave_up {
                    Delay::GiveUp
                } else {
                    Delay::Wait(s)
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parses `0 0 1` into outcomes.
    pub fn outcomes(text: &str) -> Vec<Outcome> {
        text.split_whitespace().map(|o| o == "1").collect()
    }

    pub fn waits(strategy: &dyn Strategy, text: &str) -> Vec<f64> {
        let mut rng = fastrand::Rng::with_seed(1);
        strategy
            .delays(&outcomes(text), &mut rng)
            .into_iter()
            .map(|d| d.seconds().unwrap_or(-1.0))
            .collect()
    }

    #[test]
    fn subtracting_the_time_waited_keeps_attempts_on_the_grid() {
        let planned = [Delay::Wait(60.0), Delay::Wait(60.0), Delay::Wait(60.0)];
        // Seen at 0 s; the retry planned for 60 s ran at 90 s, the next (planned 120 s) at 150 s.
        let got = subtract_waited(&planned, &[0.0, 90.0, 150.0]);
        assert_eq!(
            got,
            [Delay::Wait(60.0), Delay::Wait(30.0), Delay::Wait(30.0)]
        );
        let on_time = subtract_waited(&planned, &[0.0, 60.0, 120.0]);
        assert_eq!(on_time, planned);
    }

    #[test]
    fn limits_give_up_after_attempts_or_total_time() {
        let exp = Exponential::classic(1.0, 2.0, f64::INFINITY);
        let mut limited = Limited::new(exp);
        limited.max_attempts = Some(3);
        assert_eq!(waits(&limited, "0 0 0 0"), [1.0, 2.0, -1.0, -1.0]);
        limited.max_attempts = None;
        limited.max_total = Some(10.0);
        assert_eq!(
            waits(&limited, "0 0 0 0"),
            [1.0, 2.0, 4.0, -1.0],
            "1 + 2 + 4 + 8 > 10"
        );
    }

    #[test]
    fn a_jitter_factor_stays_in_its_band_and_a_seed_reproduces_it() {
        let mut limited = Limited::new(Exponential::classic(10.0, 1.0, f64::INFINITY));
        limited.jitter = Some(0.2);
        let all = waits(&limited, &"0 ".repeat(200));
        assert!(all.iter().all(|d| (8.0..=12.0).contains(d)), "{all:?}");
        assert_eq!(all, waits(&limited, &"0 ".repeat(200)));
    }
}

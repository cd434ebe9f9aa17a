//! An adaptive pace: the rate of handler starts found from a counterpart's answers,
//! for `[handler] rate = "auto"` and `backoff simulate --capacity`.
//!
//! A user rarely knows the rate their counterpart takes, and it changes. The pace
//! starts low and grows while calls go through, and falls by a factor on an overload
//! signal (a `retry_after` answer, exit 75, a timeout): TCP's congestion control applied
//! to the starts of handlers. Two phases, as TCP has them:
//!
//! - *slow start*: until the first overload, each call that goes through adds one start
//!   a second (at most doubling the pace each second, or each start when slower than
//!   one a second), so a fresh pace finds a counterpart's capacity in a few seconds;
//! - then the [`Rule`]: AIMD adds a fixed share of the pace it last had to cut from,
//!   each second (a pace cut from 40/s to 20/s climbs back by 2/s a second), MIMD
//!   multiplies.
//!
//! An overload cuts the pace once per burst: a refusal of a call that started before
//! the last cut says nothing new (that call went out at the old pace), as TCP halves
//! its window once per round trip. Cuts that follow one another with no call going
//! through between them (a counterpart down for its maintenance) keep AIMD's step as
//! it was: the pace falls to `rate_min`, and once the counterpart answers again it
//! climbs back at the step of the capacity it last had, in seconds rather than hours.
//! The constants were chosen with `backoff simulate --capacity` (docs/benchmarks.md, issue
//! 46).

/// How the pace moves once slow start is over.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum Rule {
    /// Additive increase, multiplicative decrease: each second of calls going through
    /// adds `increase` times the pace of the last cut; an overload multiplies the pace
    /// by `decrease`.
    Aimd {
        /// The share of the last cut's pace added each second (0.05: 5 %).
        increase: f64,
        /// The factor of a cut (0.5 halves it).
        decrease: f64,
    },
    /// Multiplicative increase and decrease: each second of calls going through
    /// multiplies the pace by `1 + increase`; an overload by `decrease`.
    Mimd {
        /// The growth a second (0.1: 10 %).
        increase: f64,
        /// The factor of a cut.
        decrease: f64,
    },
}

impl Rule {
    /// The pace `rate = "auto"` uses: AIMD, 5 % of the last cut's pace a second,
    /// halved on overload (docs/benchmarks.md, issue 46: against 2 %, 10 % and cuts to 0.7
    /// and 0.85 it refused the fewest calls for as much of the capacity).
    pub const AUTO: Rule = Rule::Aimd {
        increase: 0.05,
        decrease: 0.5,
    };

    /// MIMD as `backoff simulate` compares it: 10 % a second up, halved on overload.
    pub const MIMD: Rule = Rule::Mimd {
        increase: 0.1,
        decrease: 0.5,
    };

    /// `aimd` or `mimd`, as tables name it.
    pub fn name(&self) -> &'static str {
        match self {
            Rule::Aimd { .. } => "aimd",
            Rule::Mimd { .. } => "mimd",
        }
    }

    fn decrease(&self) -> f64 {
        match *self {
            Rule::Aimd { decrease, .. } | Rule::Mimd { decrease, .. } => decrease,
        }
    }
}

/// What a pace is at a moment, to keep and share: the fleet's row in `backlog_paces`
/// holds it, so that every runner of a rate moves one pace (`Store::sync_pace`).
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct PaceState {
    /// Starts a second.
    pub per_second: f64,
    /// Until the first overload.
    pub slow_start: bool,
    /// When the pace was last cut, in seconds on the clock of the calls' starts
    /// (negative infinity: never).
    pub cut_at: f64,
    /// The pace just before the last cut that calls had gone through since the one
    /// before: AIMD's step is a share of it.
    pub cut_from: f64,
    /// Whether a call went through since the last cut (a cut with none keeps
    /// `cut_from`).
    pub went_through_since_cut: bool,
    /// Whether calls had gone through before the last cut (since the one before it):
    /// the counterpart took calls and was busy, not down.
    pub took_before_cut: bool,
}

/// A pace of starts that moves with the counterpart's answers. Times are seconds on
/// the caller's clock (any origin, never going back).
#[derive(Debug, Clone)]
pub struct Pace {
    rule: Rule,
    min: f64,
    max: f64,
    /// Starts a second now.
    rate: f64,
    /// Until the first overload.
    slow_start: bool,
    /// When the pace was last cut; a refusal of a call started before it is not news.
    cut_at: f64,
    /// The pace just before the last cut that calls had gone through since the one
    /// before: AIMD's step is a share of it.
    cut_from: f64,
    /// Whether a call went through since the last cut.
    went_through_since_cut: bool,
    /// Whether calls had gone through before the last cut.
    took_before_cut: bool,
}

impl Pace {
    /// A pace that starts at `start` starts a second, within [`min`, `max`].
    pub fn new(rule: Rule, start: f64, min: f64, max: f64) -> Pace {
        let start = start.clamp(min, max);
        Pace {
            rule,
            min,
            max,
            rate: start,
            slow_start: true,
            cut_at: f64::NEG_INFINITY,
            cut_from: start,
            went_through_since_cut: false,
            took_before_cut: false,
        }
    }

    /// A pace as `state` left it, within [`min`, `max`] (a runner's bounds may differ
    /// from those of the runner that wrote it).
    pub fn restore(rule: Rule, state: PaceState, min: f64, max: f64) -> Pace {
        Pace {
            rule,
            min,
            max,
            rate: state.per_second.clamp(min, max),
            slow_start: state.slow_start,
            cut_at: state.cut_at,
            cut_from: state.cut_from,
            went_through_since_cut: state.went_through_since_cut,
            took_before_cut: state.took_before_cut,
        }
    }

    /// What the pace is now, to keep.
    pub fn state(&self) -> PaceState {
        PaceState {
            per_second: self.rate,
            slow_start: self.slow_start,
            cut_at: self.cut_at,
            cut_from: self.cut_from,
            went_through_since_cut: self.went_through_since_cut,
            took_before_cut: self.took_before_cut,
        }
    }

    /// Starts a second now.
    pub fn per_second(&self) -> f64 {
        self.rate
    }

    /// Whether the pace answers an overload by itself, so that a breaker may leave it
    /// be: it can still fall (above `min` by more than the micro-start a second the
    /// fleet's row rounds to), and the counterpart is busy rather than down (calls went
    /// through since the last cut, or before it). A counterpart that took nothing
    /// between two cuts, or a pace at its floor, is the breaker's.
    pub fn absorbs_overload(&self) -> bool {
        self.rate - self.min >= 1e-6 && (self.went_through_since_cut || self.took_before_cut)
    }

    /// Whether the pace is still in slow start (no overload seen yet).
    pub fn in_slow_start(&self) -> bool {
        self.slow_start
    }

    /// A call went through: the pace grows by one call's share of a second's growth.
    pub fn went_through(&mut self) {
        // One call is 1/rate of a second at this pace, or a whole step when slower
        // than one a second (a pace of 1/m would otherwise take a day to move).
        let share = 1.0 / self.rate.max(1.0);
        self.went_through_since_cut = true;
        self.rate = if self.slow_start {
            self.rate * (1.0 + share)
        } else {
            match self.rule {
                Rule::Aimd { increase, .. } => {
                    self.rate + increase * self.cut_from.max(self.min) * share
                }
                Rule::Mimd { increase, .. } => self.rate * (1.0 + increase).powf(share),
            }
        }
        .min(self.max);
    }

    /// The counterpart was overloaded by a call that started at `started`; `now` is
    /// when that was learnt. Cuts the pace, unless that call went out before the last
    /// cut; says whether it cut.
    pub fn overloaded(&mut self, started: f64, now: f64) -> bool {
        if started < self.cut_at {
            return false;
        }
        // In slow start the pace grew from where it began (`cut_from`) only by calls
        // that went through.
        self.took_before_cut =
            self.went_through_since_cut || (self.slow_start && self.rate > self.cut_from);
        // A cut that follows a cut with no call through between them says the
        // counterpart takes nothing now, not that its capacity is this pace: the step
        // stays the one of the pace it last took.
        if self.slow_start || self.went_through_since_cut {
            self.cut_from = self.rate;
        }
        self.slow_start = false;
        self.went_through_since_cut = false;
        self.rate = (self.rate * self.rule.decrease()).max(self.min);
        self.cut_at = now;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slow_start_doubles_a_second_then_a_cut_ends_it() {
        let mut pace = Pace::new(Rule::AUTO, 4.0, 0.1, 1000.0);
        for _ in 0..4 {
            pace.went_through();
        }
        // Four calls at 4/s (a second's worth) roughly double it.
        assert!((7.0..=9.0).contains(&pace.per_second()), "{pace:?}");
        assert!(pace.overloaded(1.0, 1.1));
        assert!(!pace.in_slow_start());
        let cut = pace.per_second();
        assert!((cut - 0.5 * 8.0).abs() < 1.0, "{pace:?}");
    }

    #[test]
    fn a_refusal_of_a_call_from_before_the_cut_does_not_cut_again() {
        let mut pace = Pace::new(Rule::AUTO, 40.0, 1.0, 1000.0);
        assert!(pace.overloaded(5.0, 5.1));
        let once = pace.per_second();
        assert!(!pace.overloaded(5.05, 5.12), "started before the cut");
        assert_eq!(pace.per_second(), once);
        assert!(pace.overloaded(5.2, 5.3), "started after it: news");
        assert!(pace.per_second() < once);
    }

    #[test]
    fn aimd_climbs_by_a_share_of_the_last_cut_a_second() {
        let mut pace = Pace::new(Rule::AUTO, 40.0, 1.0, 1000.0);
        pace.overloaded(0.0, 0.0);
        assert_eq!(pace.per_second(), 20.0);
        // A second of calls at about 20/s adds 5 % of 40: 2/s.
        for _ in 0..20 {
            pace.went_through();
        }
        assert!((pace.per_second() - 22.0).abs() < 0.1, "{pace:?}");
    }

    #[test]
    fn mimd_grows_by_a_factor_a_second() {
        let mut pace = Pace::new(Rule::MIMD, 40.0, 1.0, 1000.0);
        pace.overloaded(0.0, 0.0);
        assert_eq!(pace.per_second(), 20.0);
        for _ in 0..20 {
            pace.went_through();
        }
        assert!((pace.per_second() - 22.0).abs() < 0.2, "{pace:?}");
    }

    #[test]
    fn bounds_hold() {
        let mut pace = Pace::new(Rule::AUTO, 1.0, 0.5, 3.0);
        for _ in 0..100 {
            pace.went_through();
        }
        assert_eq!(pace.per_second(), 3.0);
        for t in 0..100 {
            pace.overloaded(t as f64, t as f64);
        }
        assert_eq!(pace.per_second(), 0.5);
    }

    #[test]
    fn a_restored_pace_goes_on_where_it_was() {
        let mut pace = Pace::new(Rule::AUTO, 40.0, 1.0, 1000.0);
        pace.overloaded(3.0, 3.5);
        let mut again = Pace::restore(Rule::AUTO, pace.state(), 1.0, 1000.0);
        assert_eq!(again.state(), pace.state());
        assert!(!again.overloaded(3.2, 3.6), "the cut is kept: not news");
        let tight = Pace::restore(Rule::AUTO, pace.state(), 1.0, 5.0);
        assert_eq!(tight.per_second(), 5.0, "within this runner's bounds");
    }

    #[test]
    fn cuts_with_nothing_through_between_them_keep_the_step() {
        // A counterpart of 40/s goes down: every call is refused and the pace falls to
        // its floor; when it is back, the pace climbs at 5 % of 40/s a second again.
        let mut pace = Pace::new(Rule::AUTO, 40.0, 1.0 / 60.0, 1000.0);
        pace.overloaded(0.0, 0.0);
        for t in 1..20 {
            pace.overloaded(f64::from(t), f64::from(t));
        }
        assert_eq!(pace.per_second(), 1.0 / 60.0, "{pace:?}");
        assert_eq!(pace.state().cut_from, 40.0, "{pace:?}");
        // One call through at the floor moves it a whole step: 2/s.
        pace.went_through();
        assert!((pace.per_second() - 2.0).abs() < 0.05, "{pace:?}");
        // Calls go through at 4/s, then the next cut: the capacity now is that pace.
        for _ in 0..40 {
            pace.went_through();
        }
        let before = pace.per_second();
        pace.overloaded(30.0, 30.0);
        assert_eq!(pace.state().cut_from, before, "{pace:?}");
    }

    #[test]
    fn a_busy_counterpart_is_the_paces_and_a_down_one_the_breakers() {
        let mut pace = Pace::new(Rule::AUTO, 1.0, 1.0 / 60.0, 1000.0);
        for _ in 0..10 {
            pace.went_through();
        }
        // Calls went through, then a refusal: busy.
        assert!(pace.overloaded(1.0, 1.0));
        assert!(pace.absorbs_overload(), "{pace:?}");
        // Refused again a round trip later with nothing through between: down.
        assert!(pace.overloaded(2.0, 2.0));
        assert!(!pace.absorbs_overload(), "{pace:?}");
        // One call through: busy again.
        pace.went_through();
        assert!(pace.absorbs_overload(), "{pace:?}");
        // Restored from the fleet's row in slow start (which keeps no "went
        // through"), a pace that grew took calls.
        let grown = Pace::restore(
            Rule::AUTO,
            Pace::new(Rule::AUTO, 1.0, 0.1, 9.0).state(),
            0.1,
            9.0,
        );
        let mut grown = Pace::restore(
            Rule::AUTO,
            PaceState {
                per_second: 4.0,
                ..grown.state()
            },
            0.1,
            9.0,
        );
        grown.overloaded(0.0, 0.0);
        assert!(grown.absorbs_overload(), "{grown:?}");
        // A counterpart that refuses the very first call is down.
        let mut fresh = Pace::new(Rule::AUTO, 1.0, 1.0 / 60.0, 1000.0);
        fresh.overloaded(0.0, 0.0);
        assert!(!fresh.absorbs_overload(), "{fresh:?}");
        // At the floor (as the row rounds it: 0.016667 for 1/m) nothing is absorbed.
        let state = PaceState {
            per_second: 0.016_667,
            ..pace.state()
        };
        let floor = Pace::restore(Rule::AUTO, state, 1.0 / 60.0, 1000.0);
        assert!(!floor.absorbs_overload(), "{floor:?}");
    }

    #[test]
    fn a_slow_pace_moves_a_step_a_call() {
        // One a minute: each call that goes through doubles it in slow start.
        let mut pace = Pace::new(Rule::AUTO, 1.0 / 60.0, 1.0 / 3600.0, 10.0);
        pace.went_through();
        assert!((pace.per_second() - 2.0 / 60.0).abs() < 1e-9);
    }
}

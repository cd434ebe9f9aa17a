//! `backoff simulate --capacity`: one tick of a fleet's handlers against a
//! counterpart that takes so many calls a second and refuses the rest (an HTTP 429
//! with `Retry-After`), under a fixed pace, none, or an adaptive one.
//!
//! The counterpart is a token bucket: it refills at its capacity and holds at most a
//! second of it, so a burst is taken and a pace above the capacity is refused once the
//! bucket is empty. Its capacity may change during the tick (a quota raised). Every
//! call takes `latency`, answered or refused. A refused record is snoozed to a later
//! slot (the tick does not call it again), and a breaker, when set, stops the tick
//! after so many refusals in a row; the rest of the band then waits for the next slot
//! too. The fleet's lanes (runners × handlers) share one pace, as `rate` is shared
//! through the tool's tables; the simulation leaves out that sharing's own delay.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use serde::Serialize;

use backlog_core::pace::{Pace, Rule};

/// The counterpart and the fleet.
#[derive(Debug, Clone)]
pub struct Counterpart {
    /// Its capacity (calls a second) from each time on (seconds from the tick's
    /// start): the first from 0.
    pub capacity: Vec<(f64, f64)>,
    /// Seconds each call takes, answered or refused.
    pub latency: f64,
    /// Handlers at once across the fleet.
    pub lanes: usize,
    /// Records in the tick's band.
    pub records: usize,
    /// Refusals in a row that stop the tick (the breaker), if any.
    pub stop_after: Option<usize>,
}

impl Counterpart {
    fn capacity_at(&self, t: f64) -> f64 {
        self.capacity
            .iter()
            .rev()
            .find(|(from, _)| *from <= t)
            .or(self.capacity.first())
            .map_or(1.0, |(_, c)| *c)
    }

    /// Calls it would take in `[0, until]`: the integral of its capacity.
    fn calls_possible(&self, until: f64) -> f64 {
        let mut total = 0.0;
        for (i, (from, c)) in self.capacity.iter().enumerate() {
            let to = self.capacity.get(i + 1).map_or(until, |(next, _)| *next);
            total += c * (to.min(until) - from.min(until)).max(0.0);
        }
        total
    }
}

/// A pace to compare.
#[derive(Debug, Clone, Copy)]
pub enum Contender {
    /// Starts as fast as the lanes allow.
    Unpaced,
    /// A fixed rate, starts a second (`rate = "38/s"`).
    Fixed(f64),
    /// An adaptive pace from `start`, within [`min`, `max`].
    Adaptive {
        /// How it moves.
        rule: Rule,
        /// Starts a second at first.
        start: f64,
        /// The slowest it goes.
        min: f64,
        /// The fastest it goes.
        max: f64,
    },
}

impl Contender {
    /// How tables name it: `none`, `fixed 38/s`, `aimd`, `mimd`.
    pub fn name(&self) -> String {
        match self {
            Contender::Unpaced => "none".into(),
            Contender::Fixed(rate) => format!("fixed {}/s", trim(*rate)),
            Contender::Adaptive { rule, .. } => rule.name().into(),
        }
    }
}

fn trim(x: f64) -> String {
    let text = format!("{x:.2}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// How a pace did.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The contender, as [`Contender::name`] says.
    pub name: String,
    /// Calls made.
    pub calls: u64,
    /// Calls the counterpart refused.
    pub refused: u64,
    /// Records that went through in the tick.
    pub through: u64,
    /// Records left to a later slot: refused, or not called once the breaker stopped
    /// the tick.
    pub left: u64,
    /// Whether the breaker stopped the tick.
    pub tripped: bool,
    /// Seconds from the tick's start to its last answer.
    pub seconds: f64,
    /// Calls that went through a second, over the tick, as a share of what the
    /// counterpart would have taken in that time.
    pub of_capacity: f64,
    /// The pace when the tick ended (starts a second); none when unpaced.
    pub final_pace: Option<f64>,
    /// For each change of capacity after the first: seconds until the pace reached 0.7
    /// of the new capacity (none if it never did in the tick).
    pub followed_in: Vec<Option<f64>>,
}

/// A call in its handler: when it ends, when it started, whether it went through.
#[derive(Debug, PartialEq)]
struct InFlight {
    ends: f64,
    started: f64,
    through: bool,
}

impl Eq for InFlight {}
impl PartialOrd for InFlight {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for InFlight {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.ends.total_cmp(&other.ends)
    }
}

/// Runs one tick of `contender` against `counterpart`.
pub fn simulate(contender: Contender, counterpart: &Counterpart) -> Report {
    let mut pace = match contender {
        Contender::Adaptive {
            rule,
            start,
            min,
            max,
        } => Some(Pace::new(rule, start, min, max)),
        _ => None,
    };
    let interval = |pace: &Option<Pace>| match (contender, pace) {
        (_, Some(p)) => 1.0 / p.per_second(),
        (Contender::Fixed(rate), None) => 1.0 / rate,
        _ => 0.0,
    };
    let mut in_flight: BinaryHeap<Reverse<InFlight>> = BinaryHeap::new();
    let (mut calls, mut refused, mut through) = (0u64, 0u64, 0u64);
    let (mut in_a_row, mut tripped) = (0usize, false);
    // The bucket: a second of capacity, full at the start.
    let mut tokens = counterpart.capacity_at(0.0);
    let mut filled_at = 0.0;
    let mut last_start = f64::NEG_INFINITY;
    let mut now: f64 = 0.0;
    let changes: Vec<(f64, f64)> = counterpart.capacity.iter().skip(1).copied().collect();
    let mut followed_in: Vec<Option<f64>> = vec![None; changes.len()];
    let mut answer = |call: InFlight,
                      pace: &mut Option<Pace>,
                      in_a_row: &mut usize,
                      refused: &mut u64,
                      through: &mut u64| {
        if call.through {
            *through += 1;
            *in_a_row = 0;
            if let Some(p) = pace {
                p.went_through();
            }
        } else {
            *refused += 1;
            // An overload lowers the pace; a busy counterpart's refusal is the
            // pace's alone, as in a tick (`Pace::absorbs_overload`).
            let absorbed = pace.as_mut().is_some_and(|p| {
                p.overloaded(call.started, call.ends);
                p.absorbs_overload()
            });
            if !absorbed {
                *in_a_row += 1;
            }
        }
        if let Some(p) = pace {
            for (i, (at, capacity)) in changes.iter().enumerate() {
                if followed_in[i].is_none() && call.ends >= *at && p.per_second() >= 0.7 * capacity
                {
                    followed_in[i] = Some(call.ends - at);
                }
            }
        }
    };
    while calls < counterpart.records as u64 && !tripped {
        // A lane: when all are busy, the next answer frees one.
        if in_flight.len() >= counterpart.lanes.max(1) {
            let Reverse(call) = in_flight.pop().expect("a busy lane");
            now = now.max(call.ends);
            answer(call, &mut pace, &mut in_a_row, &mut refused, &mut through);
            tripped = counterpart.stop_after.is_some_and(|k| in_a_row >= k);
            continue;
        }
        let next = (last_start + interval(&pace)).max(now);
        // Answers that come before the next start move the pace first.
        if let Some(Reverse(first)) = in_flight.peek()
            && first.ends <= next
        {
            let Reverse(call) = in_flight.pop().expect("peeked");
            now = now.max(call.ends);
            answer(call, &mut pace, &mut in_a_row, &mut refused, &mut through);
            tripped = counterpart.stop_after.is_some_and(|k| in_a_row >= k);
            continue;
        }
        now = next;
        last_start = now;
        // The bucket refills at the capacity of each stretch since it was last seen.
        let capacity = counterpart.capacity_at(now);
        tokens = (tokens + counterpart.calls_possible(now) - counterpart.calls_possible(filled_at))
            .min(capacity);
        filled_at = now;
        let went_through = tokens >= 1.0;
        if went_through {
            tokens -= 1.0;
        }
        calls += 1;
        in_flight.push(Reverse(InFlight {
            ends: now + counterpart.latency,
            started: now,
            through: went_through,
        }));
    }
    while let Some(Reverse(call)) = in_flight.pop() {
        now = now.max(call.ends);
        answer(call, &mut pace, &mut in_a_row, &mut refused, &mut through);
    }
    let seconds = now;
    let possible = counterpart.calls_possible(seconds).max(1.0);
    Report {
        name: contender.name(),
        calls,
        refused,
        through,
        left: counterpart.records as u64 - through,
        tripped,
        seconds,
        of_capacity: (through as f64 / possible).min(1.0),
        final_pace: pace.map(|p| p.per_second()),
        followed_in,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The counterpart: 40 calls a second, 2 runners × 16 handlers, 1,200
    /// records, the breaker at 10 refusals in a row.
    fn forty() -> Counterpart {
        Counterpart {
            capacity: vec![(0.0, 40.0)],
            latency: 0.1,
            lanes: 32,
            records: 1200,
            stop_after: Some(10),
        }
    }

    fn auto() -> Contender {
        Contender::Adaptive {
            rule: Rule::AUTO,
            start: 1.0,
            min: 1.0 / 60.0,
            max: 500.0,
        }
    }

    #[test]
    fn unpaced_calls_trip_the_breaker_and_leave_the_band() {
        let report = simulate(Contender::Unpaced, &forty());
        assert!(report.tripped, "{report:?}");
        assert!(report.through < 200, "{report:?}");
    }

    #[test]
    fn a_fixed_pace_under_the_capacity_takes_everything() {
        let report = simulate(Contender::Fixed(38.0), &forty());
        assert_eq!((report.through, report.refused), (1200, 0), "{report:?}");
        assert!(report.of_capacity > 0.9, "{report:?}");
    }

    #[test]
    fn aimd_finds_the_capacity_by_itself() {
        let report = simulate(auto(), &forty());
        assert!(!report.tripped, "{report:?}");
        assert!(report.through >= 1020, "85 %: {report:?}");
        assert!(report.refused * 100 <= report.calls * 15, "{report:?}");
        assert!(report.of_capacity >= 0.7, "{report:?}");
    }

    #[test]
    fn aimd_follows_a_raised_capacity_within_30_seconds() {
        let raised = Counterpart {
            capacity: vec![(0.0, 40.0), (20.0, 80.0)],
            records: 4000,
            ..forty()
        };
        let report = simulate(auto(), &raised);
        let followed = report.followed_in[0].expect("it followed");
        assert!(followed <= 30.0, "{report:?}");
    }
}

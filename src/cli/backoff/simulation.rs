//! `backoff simulate`: many records hit an outage of the counterpart at once; how does
//! each strategy, or a progressive schedule, get them through?
//!
//! Each record makes its first attempt when it fails (at once, or spread over an
//! arrival window), then retries as its strategy says; every attempt before the outage
//! ends fails, the first one after succeeds. Randomness comes from the seed, one stream
//! per record, so a run is reproduced exactly.
//!
//! A schedule may carry its breaker (`handler.stop_after_failures`): a tick then calls
//! the counterpart for the first K records of its band (newest first) and stops, and
//! the rest wait for their next tick. The schedule, not the outcome, says when a record
//! is tried next, so the breaker changes how many calls a down counterpart gets, not
//! when a record gets through.

use std::collections::HashMap;

use chrono::{DateTime, TimeZone, Utc};
use serde::Serialize;

use backlog_core::backoff::{Delay, FAILURE, Strategy};
use backlog_core::schedule::Schedule;
use backlog_core::schedule::next_attempt;

/// What the counterpart does and who suffers it.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// How many records fail at the start of the outage.
    pub records: usize,
    /// Seconds from the first failure until the counterpart answers again.
    pub outage: f64,
    /// The records' first attempts are spread uniformly over this many seconds.
    pub arrival: f64,
    /// A record not through after this many seconds is counted as never.
    pub horizon: f64,
    /// The seed of every random draw (jitter, arrivals, spread): the same seed, the same
    /// report.
    pub seed: u64,
}

/// A way of retrying to compare.
pub enum Contender<'a> {
    /// A retry strategy, as `backoff delays` builds it.
    Strategy(&'a dyn Strategy),
    /// A progressive schedule: records are tried on its tiers' ticks; with a breaker
    /// (failures in a row, cool-down in seconds), the fleet stops calling after that
    /// many failures in a row, and calls once a cool-down while the counterpart is down.
    Schedule(&'a Schedule, Option<(u32, f64)>),
}

/// How a contender did.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The contender, as the table of `backoff simulate` names it.
    pub name: String,
    /// Calls made to the counterpart, per record, on average.
    pub calls_per_record: f64,
    /// Seconds from the end of the outage to each record's success.
    pub p50: Option<f64>,
    /// The 99th percentile of those seconds; none when no record got through.
    pub p99: Option<f64>,
    /// The longest of those seconds; none when no record got through.
    pub max: Option<f64>,
    /// Records whose strategy gave up.
    pub gave_up: usize,
    /// Records not through within the horizon.
    pub never: usize,
    /// The most calls in any one minute.
    pub peak_calls_per_minute: u64,
}

/// The day a schedule's simulated clock starts: a Monday at midnight, so tick slots
/// line up as they do in real life.
fn epoch() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 5, 0, 0, 0).unwrap()
}

/// A record's own random stream.
fn record_rng(seed: u64, record: usize) -> fastrand::Rng {
    fastrand::Rng::with_seed(seed ^ (record as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15))
}

/// The times (seconds) a record attempts, until one succeeds, the strategy gives up, or
/// the horizon passes; and how it ended.
fn attempts(
    contender: &Contender,
    scenario: &Scenario,
    record: usize,
    first: f64,
) -> (Vec<f64>, Option<bool>) {
    let mut times = vec![first];
    let done = |t: f64| t >= scenario.outage;
    if done(first) {
        return (times, Some(true));
    }
    match contender {
        Contender::Strategy(strategy) => {
            let mut planned = 64;
            loop {
                times.truncate(1);
                let delays = strategy.delays(
                    &vec![FAILURE; planned],
                    &mut record_rng(scenario.seed, record),
                );
                let mut t = first;
                for d in delays {
                    let Delay::Wait(s) = d else {
                        return (times, None);
                    };
                    t += s;
                    if t - first > scenario.horizon {
                        return (times, Some(false));
                    }
                    times.push(t);
                    if done(t) {
                        return (times, Some(true));
                    }
                }
                planned *= 2;
            }
        }
        Contender::Schedule(schedule, _) => {
            let inserted = epoch() + chrono::Duration::milliseconds((first * 1000.0) as i64);
            let id = record.to_string();
            let mut from = inserted + chrono::Duration::milliseconds(1);
            times.clear();
            while let Some((_, at)) = next_attempt(schedule, inserted, Some(&id), from) {
                let t = (at - epoch()).num_milliseconds() as f64 / 1000.0;
                if t - first > scenario.horizon {
                    return (times, Some(false));
                }
                times.push(t);
                if done(t) {
                    return (times, Some(true));
                }
                from = at + chrono::Duration::milliseconds(1);
            }
            (times, None)
        }
    }
}

/// When each of `records` jobs that failed together at time 0, and keep failing,
/// retries within `horizon` seconds (the first failure itself not counted).
pub fn retry_times(
    contender: &Contender,
    records: usize,
    horizon: f64,
    seed: u64,
) -> Vec<Vec<f64>> {
    let scenario = Scenario {
        records,
        outage: f64::INFINITY,
        arrival: 0.0,
        horizon,
        seed,
    };
    (0..records)
        .map(|r| {
            let (times, _) = attempts(contender, &scenario, r, 0.0);
            times
                .into_iter()
                .filter(|t| *t > 0.0 && *t <= horizon)
                .collect()
        })
        .collect()
}

fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    Some(sorted[rank - 1])
}

/// Takes out the calls the fleet's breaker spares the counterpart while it is down:
/// ticks in time order, each tick's due records newest first (the band's order). A
/// closed breaker lets calls through until `limit` failures in a row, then opens for
/// `cooldown` seconds, in which no call is made; after it one call goes through
/// (half-open), which fails during the outage and opens it for another cool-down.
fn trip_breakers(
    runs: &mut [(f64, Vec<f64>, Option<bool>)],
    outage: f64,
    limit: usize,
    cooldown: f64,
) {
    let mut due: HashMap<u64, Vec<(f64, usize)>> = HashMap::new();
    for (record, (first, times, _)) in runs.iter().enumerate() {
        for t in times.iter().filter(|t| **t < outage) {
            due.entry(t.to_bits()).or_default().push((*first, record));
        }
    }
    let mut ticks: Vec<(u64, Vec<(f64, usize)>)> = due.into_iter().collect();
    ticks.sort_by(|a, b| f64::from_bits(a.0).total_cmp(&f64::from_bits(b.0)));
    let (mut failures, mut open_until) = (0usize, None::<f64>);
    let mut spared: std::collections::HashSet<(usize, u64)> = std::collections::HashSet::new();
    for (tick, mut records) in ticks {
        let at = f64::from_bits(tick);
        let calls = match open_until {
            Some(until) if at < until => 0,
            // Half-open: one trial, which fails while the counterpart is down.
            Some(_) => 1,
            None => limit.saturating_sub(failures).min(records.len()),
        };
        if open_until.is_some() {
            if calls == 1 {
                open_until = Some(at + cooldown);
            }
        } else {
            failures += calls;
            if failures >= limit {
                open_until = Some(at + cooldown);
            }
        }
        records.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        spared.extend(records.into_iter().skip(calls).map(|(_, r)| (r, tick)));
    }
    for (record, (_, times, _)) in runs.iter_mut().enumerate() {
        times.retain(|t| !spared.contains(&(record, t.to_bits())));
    }
}

/// Runs the scenario for one contender.
pub fn simulate(name: &str, contender: &Contender, scenario: &Scenario) -> Report {
    let mut arrivals = fastrand::Rng::with_seed(scenario.seed);
    let mut per_minute: HashMap<i64, u64> = HashMap::new();
    let (mut calls, mut gave_up, mut never) = (0usize, 0usize, 0usize);
    let mut to_success = Vec::with_capacity(scenario.records);
    let mut runs: Vec<(f64, Vec<f64>, Option<bool>)> = (0..scenario.records)
        .map(|record| {
            let first = scenario.arrival * arrivals.f64();
            let (times, ended) = attempts(contender, scenario, record, first);
            (first, times, ended)
        })
        .collect();
    if let Contender::Schedule(_, Some((limit, cooldown))) = contender {
        trip_breakers(&mut runs, scenario.outage, *limit as usize, *cooldown);
    }
    for (first, times, ended) in runs {
        calls += times.len();
        for t in &times {
            *per_minute.entry((t / 60.0).floor() as i64).or_default() += 1;
        }
        match ended {
            // From the recovery, or from the record's own failure if that came later.
            Some(true) => {
                to_success.push(times.last().copied().unwrap_or(first) - scenario.outage.max(first))
            }
            Some(false) => never += 1,
            None => gave_up += 1,
        }
    }
    to_success.sort_by(f64::total_cmp);
    Report {
        name: name.to_string(),
        calls_per_record: calls as f64 / scenario.records.max(1) as f64,
        p50: percentile(&to_success, 0.50),
        p99: percentile(&to_success, 0.99),
        max: to_success.last().copied(),
        gave_up,
        never,
        peak_calls_per_minute: per_minute.values().copied().max().unwrap_or(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use backlog_core::backoff::{Adaptive, Exponential};
    use backlog_core::schedule::{Cadence, Tier};
    use std::time::Duration;

    fn scenario(records: usize, outage: f64) -> Scenario {
        Scenario {
            records,
            outage,
            arrival: 0.0,
            horizon: 400.0 * 86_400.0,
            seed: 1,
        }
    }

    #[test]
    fn a_constant_minute_retries_in_lockstep() {
        let r = simulate(
            "constant",
            &Contender::Strategy(&Adaptive::constant(60.0)),
            &scenario(10, 600.0),
        );
        assert_eq!(r.calls_per_record, 11.0, "attempts at 0, 60, …, 600");
        assert_eq!(
            (r.p50, r.max),
            (Some(0.0), Some(0.0)),
            "the attempt at 600 s meets the recovery"
        );
        assert_eq!(r.peak_calls_per_minute, 10, "all ten in the same minute");
    }

    #[test]
    fn exponential_overshoots_the_recovery() {
        let r = simulate(
            "exp",
            &Contender::Strategy(&Exponential::classic(1.0, 2.0, f64::INFINITY)),
            &scenario(5, 100.0),
        );
        assert_eq!(r.calls_per_record, 8.0, "0 1 3 7 15 31 63 127");
        assert_eq!(r.p50, Some(27.0), "127 s, 27 s after the recovery");
    }

    #[test]
    fn a_spread_tier_lowers_the_peak_of_a_schedule() {
        let schedule = |spread| {
            let mut tier = Tier::new(
                Duration::from_secs(86_400),
                Cadence::Every(Duration::from_secs(300)),
            );
            tier.spread = spread;
            let mut schedule = Schedule::new(vec![tier]);
            schedule.limit = 1000;
            schedule
        };
        let (plain, spread) = (schedule(1), schedule(4));
        let s = scenario(400, 3600.0);
        let a = simulate("plain", &Contender::Schedule(&plain, None), &s);
        let b = simulate("spread", &Contender::Schedule(&spread, None), &s);
        assert_eq!(a.peak_calls_per_minute, 400, "every record on every tick");
        assert!(
            b.peak_calls_per_minute < 200,
            "about a quarter per tick: {}",
            b.peak_calls_per_minute
        );
        assert!(b.calls_per_record < a.calls_per_record);
        assert_eq!(a.p50, Some(0.0));
    }

    #[test]
    fn a_breaker_spares_a_down_counterpart_without_delaying_anyone() {
        let mut schedule = Schedule::new(vec![Tier::new(
            Duration::from_secs(86_400),
            Cadence::Every(Duration::from_secs(300)),
        )]);
        schedule.limit = 1000;
        let s = scenario(400, 3600.0);
        let plain = simulate("plain", &Contender::Schedule(&schedule, None), &s);
        let breaker = simulate(
            "breaker",
            &Contender::Schedule(&schedule, Some((10, 60.0))),
            &s,
        );
        // Eleven ticks in the outage (every 5 minutes from 300 s): 400 calls each; with
        // the breaker, 10 at the first (it trips), then one trial a tick, each past its
        // minute's cool-down; then the tick at the recovery, where all get through.
        assert_eq!(plain.calls_per_record, 12.0);
        assert_eq!(breaker.calls_per_record, (10.0 + 10.0 + 400.0) / 400.0);
        // A cool-down longer than the outage: the first tick's 10 calls, then none.
        let long = Contender::Schedule(&schedule, Some((10, 7200.0)));
        let long = simulate("long cool-down", &long, &s);
        assert_eq!(long.calls_per_record, (10.0 + 400.0) / 400.0);
        assert_eq!((breaker.p50, breaker.max), (plain.p50, plain.max));
    }
}

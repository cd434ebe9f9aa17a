//! What a schedule means: each tier's band and how often a record is tried there, the
//! tries over a record's life, the age after which it is never tried again, warnings,
//! and when a record of a given age is tried next.
//!
//! Pure arithmetic on a validated `Schedule`; tick times follow the same slots as the
//! daemon (`Cadence::next_slot`), so what `explain` says is what the daemon does.

use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use serde::Serialize;

use backlog_core::backoff::Delay;
use backlog_core::curve::{Curve, Due};
use backlog_core::duration;
use backlog_core::record::{Record, Scalar};
use backlog_core::schedule::{BandMode, Cadence, Schedule, next_attempt};

/// One tier, explained.
#[derive(Debug, Clone, Serialize)]
pub struct TierPlan {
    /// The tier's 1-based number.
    pub tier: usize,
    /// Its window, compact (`7d`).
    pub window: String,
    /// Its cadence, as the schedule file writes it.
    pub cadence: String,
    /// Ages over this (from 0 when `"0s"`)…
    pub younger: String,
    /// …up to this.
    pub older: String,
    /// The time between ticks, on average (cron expressions over four weeks).
    pub period_seconds: f64,
    /// The longest time between two ticks.
    pub longest_gap_seconds: f64,
    /// How many times a record is tried while it is in this tier's band.
    pub tries: f64,
}

/// A schedule, explained.
#[derive(Debug, Clone, Serialize)]
pub struct Explanation {
    /// Whether the bands are disjoint or cumulative.
    pub bands: BandMode,
    /// Each tier, in the schedule's order.
    pub tiers: Vec<TierPlan>,
    /// Tries over a record's whole life, if it never succeeds, by the tiers alone.
    pub total_tries: f64,
    /// The same under the `[retry]` curve, when the file has one (see `with_retry`).
    pub retry: Option<RetryPlan>,
    /// Past this age a record is never tried again.
    pub never_after: String,
    /// What in the schedule may not do what its author meant: a band a record can pass
    /// through untried, overlapping bands.
    pub warnings: Vec<String>,
}

/// What the `[retry]` curve leaves of the tiers' tries.
#[derive(Debug, Clone, Serialize)]
pub struct RetryPlan {
    /// The strategy, as the file names it.
    pub strategy: String,
    /// Tries over the life of a record that keeps failing, the curve's waits
    /// observed (the mean over a sample of ids: spread and jitter draw by id).
    pub tries: f64,
    /// Some id reached `CAP` tries, where counting stopped: `tries` is a floor.
    pub capped: bool,
}

impl RetryPlan {
    /// The most tries counted for one id.
    pub const CAP: usize = 10_000;
}

/// When a record of a given age is tried next.
#[derive(Debug, Clone, Serialize)]
pub struct NextTry {
    /// The age asked about, compact.
    pub age: String,
    /// The tier whose band holds the record now, if any.
    pub in_tier: Option<usize>,
    /// The tier that tries it next and when; absent when it is never tried again.
    pub by_tier: Option<usize>,
    /// When that tier tries it (UTC); absent when it is never tried again.
    pub at: Option<DateTime<Utc>>,
    /// When the `[retry]` curve's wait for this record ends, when that is after now:
    /// no tick takes it before.
    pub retry_until: Option<DateTime<Utc>>,
    /// The `[retry]` strategy gave up on the record: no tick takes it again.
    pub retry_gave_up: bool,
}

impl NextTry {
    /// What keeps the record from the tiers' next slots, if anything, as a clause:
    /// `once its [retry] wait ends at …`.
    pub fn retry_note(&self) -> Option<String> {
        if self.retry_gave_up {
            return Some("its [retry] strategy gave up on it".into());
        }
        self.retry_until
            .map(|t| format!("its [retry] wait ends at {}", duration::instant(t)))
    }

    /// Why no tier tries the record again (when `at` is none).
    pub fn never_why(&self) -> String {
        match self.retry_note() {
            Some(note) if self.retry_gave_up => note,
            Some(note) => format!("{note}, after it leaves the last tier's band"),
            None => "older than the last window".into(),
        }
    }
}

/// The period and longest gap of a cadence. A cron expression is sampled over four
/// weeks from a Monday, long enough to see weekly patterns.
fn rhythm(cadence: &Cadence) -> (f64, f64) {
    match cadence {
        Cadence::Every(d) => (d.as_secs_f64(), d.as_secs_f64()),
        // A cron expression (or a cadence a later core adds): walk the same slots the
        // daemon fires at, in the schedule's time zone.
        _ => {
            let start = Utc.with_ymd_and_hms(2026, 1, 5, 0, 0, 0).unwrap();
            let end = start + chrono::Duration::days(28);
            let mut t = start;
            let (mut count, mut gap, mut first) = (0u32, 0f64, None);
            while let Some(next) = cadence.next_slot(t) {
                if next > end {
                    break;
                }
                if count > 0 {
                    gap = gap.max((next - t).num_seconds() as f64);
                }
                first.get_or_insert(next);
                count += 1;
                t = next;
            }
            if let Some(first) = first {
                // The gap that wraps around the four weeks.
                gap = gap.max((first + chrono::Duration::days(28) - t).num_seconds() as f64);
            }
            let period = if count == 0 {
                f64::INFINITY
            } else {
                28.0 * 86_400.0 / f64::from(count)
            };
            (period, if count == 0 { f64::INFINITY } else { gap })
        }
    }
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

/// Explains a schedule.
pub fn explain(schedule: &Schedule) -> Explanation {
    let mut tiers = Vec::new();
    let mut warnings = Vec::new();
    for (i, tier) in schedule.tiers.iter().enumerate() {
        let band = schedule.band(tier.window);
        let (period, gap) = rhythm(&tier.cadence);
        let length = secs(band.older) - secs(band.younger);
        if gap > length {
            warnings.push(format!(
                "tier {}: its band ({band}) is {} long, but it can go {} without a tick: a record can pass through it untried",
                i + 1,
                duration::compact(band.older - band.younger),
                duration::rough(Duration::from_secs(gap.min(1e12) as u64))
            ));
        }
        tiers.push(TierPlan {
            tier: i + 1,
            window: duration::compact(tier.window),
            cadence: if tier.spread > 1 {
                format!("{}, 1/{} a tick", tier.cadence, tier.spread)
            } else {
                tier.cadence.to_string()
            },
            younger: duration::compact(band.younger),
            older: duration::compact(band.older),
            period_seconds: period,
            longest_gap_seconds: gap,
            tries: length / period / f64::from(tier.spread.max(1)),
        });
    }
    if schedule.bands == BandMode::Cumulative && schedule.tiers.len() > 1 {
        warnings.push(
            "bands overlap (cumulative): a record is tried by every tier whose window it has not outgrown, so young records are tried by all tiers at once".to_string(),
        );
    }
    let last = schedule.tiers.last().map(|t| t.window).unwrap_or_default();
    Explanation {
        bands: schedule.bands,
        total_tries: tiers.iter().map(|t| t.tries).sum(),
        retry: None,
        tiers,
        never_after: duration::compact(last),
        warnings,
    }
}

/// When a pending record aged `age` at `now` is tried next, by the tiers' slots.
pub fn next_try(schedule: &Schedule, age: Duration, now: DateTime<Utc>) -> NextTry {
    let inserted = now - chrono::Duration::from_std(age).unwrap_or(chrono::Duration::MAX);
    NextTry::at(schedule, age, next_attempt(schedule, inserted, None, now))
}

impl NextTry {
    /// A record of age `age`, tried next by `best` (a tier and its slot), if by any.
    fn at(schedule: &Schedule, age: Duration, best: Option<(usize, DateTime<Utc>)>) -> Self {
        let in_tier = schedule.tiers.iter().position(|tier| {
            let band = schedule.band(tier.window);
            (age > band.younger || band.younger.is_zero()) && age <= band.older
        });
        NextTry {
            age: duration::rough(age),
            in_tier: in_tier.map(|i| i + 1),
            by_tier: best.map(|(n, _)| n),
            at: best.map(|(_, t)| t),
            retry_until: None,
            retry_gave_up: false,
        }
    }
}

/// When a pending record is tried next, as the ticks decide it: the first slot from
/// `from` (now, or the end of a failure's keep) of a tier whose band holds it then and
/// that takes it (a spread tier takes it one tick in `spread`), once the `[retry]`
/// curve's wait is over. None when its age cannot be read, or is in the future.
pub fn next_try_of(
    schedule: &Schedule,
    curve: Option<&Curve>,
    record: &Record,
    now: DateTime<Utc>,
    from: DateTime<Utc>,
) -> Option<NextTry> {
    let age = record.age(now)?.to_std().ok()?;
    let inserted = now - chrono::Duration::from_std(age).ok()?;
    let due = curve.map_or(Due::From(None), |c| c.due(record));
    let best = match due {
        Due::Never => None,
        Due::From(until) => next_attempt(
            schedule,
            inserted,
            Some(&record.id.to_string()),
            until.map_or(from, |t| t.max(from)),
        ),
    };
    Some(NextTry {
        retry_until: match due {
            Due::From(until) => until.filter(|t| *t > now),
            Due::Never => None,
        },
        retry_gave_up: due == Due::Never,
        ..NextTry::at(schedule, age, best)
    })
}

/// Tries over the life of a record that keeps failing under the `[retry]` curve: the
/// mean over a sample of ids (a spread tier and a jittered wait draw by id), each
/// counted up to `RetryPlan::CAP`.
pub fn retry_tries(schedule: &Schedule, curve: &Curve, strategy: &str) -> RetryPlan {
    const SAMPLE: i64 = 8;
    // A fixed day, so the figure does not change with today's date.
    let inserted = Utc.with_ymd_and_hms(2024, 1, 1, 0, 0, 0).unwrap();
    let (mut total, mut capped) = (0usize, false);
    for id in 0..SAMPLE {
        let waits = curve.waits(&Scalar::Int(id), RetryPlan::CAP);
        let key = id.to_string();
        let mut from = inserted;
        let mut count = 0;
        while let Some((_, at)) = next_attempt(schedule, inserted, Some(&key), from) {
            count += 1;
            if count == RetryPlan::CAP {
                capped = true;
                break;
            }
            let Some(Delay::Wait(s)) = waits.get(count - 1) else {
                break; // the strategy gave up
            };
            from = at + chrono::Duration::milliseconds(((s * 1000.0) as i64).max(1));
        }
        total += count;
    }
    RetryPlan {
        strategy: strategy.to_string(),
        tries: total as f64 / SAMPLE as f64,
        capped,
    }
}

/// A number of tries as people write it: `288`, `37.5`.
pub fn tries(n: f64) -> String {
    let rounded = (n * 10.0).round() / 10.0;
    if rounded.fract() == 0.0 {
        format!("{rounded:.0}")
    } else {
        format!("{rounded:.1}")
    }
}

impl Explanation {
    /// The explanation as a table and a few sentences.
    pub fn render(&self, file: &str) -> String {
        let mut out = format!(
            "{file}: {}, {} bands

",
            backlog_core::schedule::tiers(self.tiers.len()),
            serde_json::to_value(self.bands)
                .unwrap()
                .as_str()
                .unwrap_or_default()
        );
        let width = self
            .tiers
            .iter()
            .map(|t| t.cadence.len())
            .max()
            .unwrap_or(0)
            .max(7);
        out.push_str(&format!(
            "{:>4}  {:<7} {:<width$}  {:<26} {:>13}\n",
            "tier", "window", "cadence", "band", "tries in band"
        ));
        for t in &self.tiers {
            let band = if t.younger == "0s" {
                format!("ages 0 to {}", t.older)
            } else {
                format!("ages over {} up to {}", t.younger, t.older)
            };
            out.push_str(&format!(
                "{:>4}  {:<7} {:<width$}  {:<26} {:>13}\n",
                t.tier,
                t.window,
                t.cadence,
                band,
                tries(t.tries)
            ));
        }
        out.push_str(&format!(
            "\n{} about {} over its life; past {} it is never tried again.\n",
            if self.retry.is_some() {
                "By the tiers alone, a pending record would be tried"
            } else {
                "A pending record is tried"
            },
            match tries(self.total_tries) {
                one if one == "1" => "1 time".to_string(),
                n => format!("{n} times"),
            },
            self.never_after
        ));
        if let Some(retry) = &self.retry {
            out.push_str(&format!(
                "Under [retry] ({}), a record that keeps failing is tried about {}{} times over its life, each try after the strategy's wait.\n",
                retry.strategy,
                if retry.capped { "more than " } else { "" },
                tries(retry.tries)
            ));
        }
        for w in &self.warnings {
            out.push_str(&format!("warning: {w}\n"));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use backlog_core::chrono_tz;
    use backlog_core::schedule::{Tier, parse_cron};

    fn schedule(bands: BandMode, tiers: &[(u64, Cadence)]) -> Schedule {
        let tiers = (tiers.iter())
            .map(|(w, c)| Tier::new(Duration::from_secs(*w), c.clone()))
            .collect();
        let mut schedule = Schedule::new(tiers);
        schedule.bands = bands;
        schedule.limit = 100;
        schedule
    }

    const H: u64 = 3600;

    #[test]
    fn a_tier_slower_than_its_band_is_long_gets_a_warning() {
        let s = schedule(
            BandMode::Disjoint,
            &[
                (H, Cadence::Every(Duration::from_secs(300))),
                (7 * H, Cadence::Every(Duration::from_secs(12 * H))),
            ],
        );
        assert_eq!(
            explain(&s).warnings,
            [
                "tier 2: its band (ages over 1h up to 7h) is 6h long, but it can go 12h without a tick: a record can pass through it untried"
            ]
        );
    }

    #[test]
    fn a_weekday_cron_tier_has_the_weekend_as_its_longest_gap() {
        let cron = Cadence::Cron(
            Box::new(parse_cron("*/10 8-18 * * mon-fri").unwrap()),
            "*/10 8-18 * * mon-fri".into(),
            chrono_tz::Tz::UTC,
        );
        let (period, gap) = rhythm(&cron);
        assert_eq!(
            gap,
            (2.0 * 86_400.0) + (13.0 * 3600.0) + 600.0,
            "Friday 18:50 to Monday 08:00"
        );
        assert_eq!(period, 28.0 * 86_400.0 / (4.0 * 5.0 * 66.0));
    }

    #[test]
    fn the_next_try_is_the_first_slot_while_the_record_is_in_a_band() {
        let s = schedule(
            BandMode::Disjoint,
            &[
                (86_400, Cadence::Every(Duration::from_secs(300))),
                (7 * 86_400, Cadence::Every(Duration::from_secs(H))),
            ],
        );
        let now = Utc.with_ymd_and_hms(2026, 11, 21, 12, 34, 0).unwrap();
        let next = next_try(&s, Duration::from_secs(3 * 86_400), now);
        assert_eq!(
            (next.in_tier, next.by_tier, next.at),
            (
                Some(2),
                Some(2),
                Some(Utc.with_ymd_and_hms(2026, 11, 21, 13, 0, 0).unwrap())
            )
        );
        // 23h58m old: the 5-minute tier's next slot (12:35) comes while it is still in band 1.
        let next = next_try(&s, Duration::from_secs(86_400 - 120), now);
        assert_eq!(
            (next.by_tier, next.at),
            (
                Some(1),
                Some(Utc.with_ymd_and_hms(2026, 11, 21, 12, 35, 0).unwrap())
            )
        );
        // 23h59m30s old: it leaves band 1 at 12:34:30, so the hourly tier takes it at 13:00.
        let next = next_try(&s, Duration::from_secs(86_400 - 30), now);
        assert_eq!((next.in_tier, next.by_tier), (Some(1), Some(2)));
        let next = next_try(&s, Duration::from_secs(8 * 86_400), now);
        assert_eq!((next.in_tier, next.by_tier, next.at), (None, None, None));
    }
}

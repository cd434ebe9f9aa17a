//! Where the backlog stands: records by status and age band, the oldest pending record,
//! and each tier's last tick from the run log, with the tiers that are overdue.
//!
//! Age rows are disjoint (between consecutive windows) whatever the band mode, so the
//! counts add up to the table; each count is an index range on the inserted-at column.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;

use backlog_core::config::Config;
use backlog_core::duration;
use backlog_core::store::{Pause, Range, RunRow, Runner, Store, StoreError};
use backlog_core::timestamp::TimestampFormat;

mod check;
mod check_alerts;
pub mod history;
pub mod paces;
mod render;
pub mod slot;
mod thresholds;

pub use check::{Check, CheckLevel, check};
pub use slot::Slot;
pub use thresholds::{Thresholds, judge, oldest_waiting};

/// Records of one age range, by status.
#[derive(Debug, Clone, Serialize)]
pub struct AgeRow {
    /// The ages it covers, as `status` prints them: `0 to 1h`, `over 1h up to 1d`,
    /// `over 30d (never tried again)`, or the records stamped in the future.
    pub label: String,
    /// The tier whose windows bound this range, if any.
    pub tier: Option<usize>,
    /// Records of the range by status; statuses with none may be missing.
    pub counts: BTreeMap<String, u64>,
}

/// The oldest pending record.
#[derive(Debug, Clone, Serialize)]
pub struct OldestPending {
    /// Its id.
    pub id: backlog_core::Scalar,
    /// Its inserted-at value as the column holds it.
    pub inserted_at: String,
    /// Its age at the status's `now`, roughly (`2d 13h`); none when the inserted-at value
    /// cannot be read.
    pub age: Option<String>,
    /// Older than the last window: no tier tries it any more.
    pub never_tried_again: bool,
}

/// One tier's last tick and whether it is overdue.
#[derive(Debug, Clone, Serialize)]
pub struct TierStatus {
    /// The tier's 1-based number.
    pub tier: usize,
    /// Its window, compact (`7d`).
    pub window: String,
    /// Its cadence, as the schedule file writes it.
    pub cadence: String,
    /// Its last tick in the run log (one runner's); none if it never ticked.
    pub last_tick: Option<RunRow>,
    /// The slot that tick belongs to, summed over every runner that ticked in it:
    /// what a fleet did at the tier's last scheduled time.
    pub last_slot: Option<Slot>,
    /// When the tick after the last one is due by the cadence (UTC); for a tier that
    /// never ticked, its first slot after the first tick of any tier (a tier is not
    /// late before its first slot came); none before any tick.
    pub next_due: Option<DateTime<Utc>>,
    /// How late the tier is, past a grace of a minute or a tenth of its period.
    pub overdue_seconds: Option<u64>,
    /// The tier's period (its cadence's interval, or the mean gap of its cron).
    pub period_seconds: f64,
    /// Why it does not tick, if a person paused it (or every tier).
    pub paused: Option<Pause>,
    /// Its tick that ended before its band did, with no tick since that took the
    /// rest: the tier is due now (`Store::unfinished_runs`).
    pub unfinished: Option<Unfinished>,
    /// Its ticks of the last 24 hours that ended before their band did (a database
    /// restarted under one, a runner cut off, a kill): how many, and the newest.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended_early_24h: Option<EndedEarly>,
}

/// A tier's ticks of the last 24 hours that ended before their band did.
#[derive(Debug, Clone, Serialize)]
pub struct EndedEarly {
    /// How many.
    pub ticks: u64,
    /// The newest's run-log row.
    pub last: RunRow,
}

/// A tier's tick that ended before its band did: stopped by a signal, its holds
/// lapsed, failed, or killed.
#[derive(Debug, Clone, Serialize)]
pub struct Unfinished {
    /// The run-log row of that tick (`outcome`: stopped, lapsed, failed, abandoned).
    pub run: RunRow,
    /// The pending records of the tier's band now (`status` counts them; the tier
    /// list alone, as the daemon reads it, leaves them out).
    pub left: Option<u64>,
    /// Nothing took the rest by the tier's next slot after that tick (and a grace):
    /// the daemon or the crontab line is not running.
    pub late: bool,
}

impl Unfinished {
    /// `stopped, 506 left`, as `status` and the check say it.
    pub fn describe(&self) -> String {
        match self.left {
            Some(n) => format!("{}, {n} left", self.run.outcome),
            None => self.run.outcome.clone(),
        }
    }
}

/// Where the backlog of a schedule file stands: what `backlog status` prints, and what
/// `status --check`, the metrics and the web pages judge.
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    /// The database, as messages name it (never with its password).
    pub database: String,
    /// The backlog table.
    pub table: String,
    /// The clock the ages and the overdue times are measured from (UTC).
    pub now: DateTime<Utc>,
    /// The first tick of any tier the run log holds: when the tool began on this table.
    pub first_tick: Option<DateTime<Utc>>,
    /// Statuses in display order: pending first, then success, then the rest.
    pub statuses: Vec<String>,
    /// The names shown for status values (`table.labels`): the columns' headings.
    pub labels: backlog_core::config::Labels,
    /// One row per tier's age range, youngest first, with the records too old for any tier
    /// and those stamped in the future in rows of their own.
    pub ages: Vec<AgeRow>,
    /// The pending record inserted first, if any is pending.
    pub oldest_pending: Option<OldestPending>,
    /// Each tier, in the schedule's order.
    pub tiers: Vec<TierStatus>,
    /// The pause of every tier, if there is one.
    pub paused: Option<Pause>,
    /// Attempts of the last 24 hours that did not succeed, by outcome (from the
    /// attempts, so none when `[history]` is off).
    pub failures_24h: BTreeMap<String, u64>,
    /// The ticks of the table running now, on every host, with what each holds.
    pub runners: Vec<Runner>,
    /// The paces `rate = "auto"` found for this table's tiers (or its `rate_group`),
    /// and per `rate_key` value, by name.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub paces: Vec<paces::AdaptedPace>,
}

/// Reads where the backlog of `config` stands at `now`. Reads only.
pub fn status(
    config: &Config,
    store: &mut dyn Store,
    now: DateTime<Utc>,
) -> Result<Status, StoreError> {
    let format = store.inspect()?;
    let windows: Vec<Duration> = config.schedule.tiers.iter().map(|t| t.window).collect();
    let last = *windows.last().expect("a schedule has tiers");
    let ages = age_rows(store, age_ranges(&windows, format, now))?;

    let mut statuses: Vec<String> = config.table.pending.clone();
    for s in std::iter::once(&config.table.success).chain(ages.iter().flat_map(|r| r.counts.keys()))
    {
        if !statuses.contains(s) {
            statuses.push(s.clone());
        }
    }

    let oldest_pending = store.oldest_pending()?.map(|r| {
        let age = r.age(now).and_then(|a| a.to_std().ok());
        OldestPending {
            id: r.id.clone(),
            inserted_at: r.inserted_at().to_string(),
            age: age.map(duration::rough),
            never_tried_again: age.is_some_and(|a| a > last),
        }
    });

    let first_tick = store.first_tick()?;
    let failures_24h = store
        .attempt_counts(now - chrono::Duration::hours(24))?
        .into_iter()
        .filter(|(outcome, _)| {
            outcome != "success" && !backlog_core::store::ACTIONS.contains(&&**outcome)
        })
        .collect();
    let mut tiers = tiers(config, store, now)?;
    // What an unfinished tier left: the pending records of its band, from the counts
    // above (a cumulative band holds the younger tiers' ranges too).
    let cumulative = config.schedule.bands == backlog_core::schedule::BandMode::Cumulative;
    for t in &mut tiers {
        let n = t.tier;
        if let Some(u) = t.unfinished.as_mut() {
            u.left = Some(
                ages.iter()
                    .filter(|r| r.tier.is_some_and(|k| k == n || (cumulative && k < n)))
                    .flat_map(|r| r.counts.iter())
                    .filter(|(status, _)| config.table.pending.contains(status))
                    .map(|(_, c)| c)
                    .sum(),
            );
        }
    }

    Ok(Status {
        database: store.describe(),
        table: config.table.name.clone(),
        now,
        first_tick,
        statuses,
        labels: config.table.labels.clone(),
        ages,
        oldest_pending,
        tiers,
        paused: store.pauses()?.into_iter().find(|p| p.window_secs == 0),
        failures_24h,
        // Live by the real clock, as their heartbeats beat, whatever `now` is.
        runners: store.runners(config.database.claim_lease, Utc::now())?,
        paces: paces::of(config, store)?,
    })
}

/// The ranges of inserted-at values `status` counts by: the future, each tier's
/// band, and what is older than the last tier; each with its label and tier number.
fn age_ranges(
    windows: &[Duration],
    format: TimestampFormat,
    now: DateTime<Utc>,
) -> Vec<(String, Option<usize>, Range)> {
    let at = |age: Duration| {
        format.encode(now - chrono::Duration::from_std(age).unwrap_or(chrono::Duration::MAX))
    };
    let mut ranges = vec![(
        "in the future (clock skew: tried once they are not)".to_string(),
        None,
        Range {
            from: Some(format.encode(now)),
            from_exclusive: true,
            ..Range::default()
        },
    )];
    let mut younger = Duration::ZERO;
    for (i, window) in windows.iter().enumerate() {
        let label = if younger.is_zero() {
            format!("0 to {}", duration::compact(*window))
        } else {
            format!(
                "over {} up to {}",
                duration::compact(younger),
                duration::compact(*window)
            )
        };
        ranges.push((
            label,
            Some(i + 1),
            Range {
                from: Some(at(*window)),
                to: Some(at(younger)),
                to_inclusive: younger.is_zero(),
                ..Range::default()
            },
        ));
        younger = *window;
    }
    let last = windows.last().copied().unwrap_or_default();
    ranges.push((
        format!("over {} (never tried again)", duration::compact(last)),
        None,
        Range {
            to: Some(at(last)),
            ..Range::default()
        },
    ));
    ranges
}

/// The records of each range, counted by status; the open-ended future range only
/// where it holds any.
fn age_rows(
    store: &mut dyn Store,
    ranges: Vec<(String, Option<usize>, Range)>,
) -> Result<Vec<AgeRow>, StoreError> {
    let mut ages = Vec::new();
    for (label, tier, range) in ranges {
        let mut counts: BTreeMap<String, u64> =
            store.count_by_status(&range)?.into_iter().collect();
        // The open-ended "future" range also catches text that sorts after timestamps.
        if tier.is_none() && range.to.is_none() {
            counts.retain(|_, n| *n > 0);
            if counts.is_empty() {
                continue;
            }
        }
        ages.push(AgeRow {
            label,
            tier,
            counts,
        });
    }
    Ok(ages)
}

/// Each tier's last tick and its slot over every runner, when it is next due and
/// whether it is overdue at `now`: what `status` shows and what the daemon's
/// `tier_overdue` alert checks. Reads the run log and the pauses only, so a daemon
/// may ask every minute.
pub fn tiers(
    config: &Config,
    store: &mut dyn Store,
    now: DateTime<Utc>,
) -> Result<Vec<TierStatus>, StoreError> {
    let runs = store.last_runs()?;
    let unfinished = store.unfinished_runs(config.database.claim_lease)?;
    let early = store.ended_early(Duration::from_secs(24 * 3600), config.database.claim_lease)?;
    let first_tick = store.first_tick()?;
    let pauses = store.pauses()?;
    let pause_of = |window: u64| pauses.iter().find(|p| p.window_secs == window).cloned();
    let plan = crate::explain::explain(&config.schedule);
    let mut slots = Vec::new();
    for tier in &config.schedule.tiers {
        let last = runs.iter().find(|r| r.window_secs == tier.window.as_secs());
        slots.push(match last {
            Some(last) => slot::slot_of(tier, store, last)?,
            None => None,
        });
    }
    Ok(config
        .schedule
        .tiers
        .iter()
        .zip(slots)
        .enumerate()
        .map(|(i, (tier, last_slot))| {
            let last_tick = runs
                .iter()
                .find(|r| r.window_secs == tier.window.as_secs())
                .cloned();
            let next_due = match &last_tick {
                Some(r) => tier.cadence.next_due(r.clock),
                None => first_tick.and_then(|f| tier.cadence.next_due(f)),
            };
            let period = plan.tiers[i].period_seconds;
            // A daemon's tick comes up to the tier's jitter after its slot: not late.
            let grace = chrono::Duration::seconds((period / 10.0).max(60.0) as i64)
                + chrono::Duration::from_std(tier.jitter).unwrap_or_default();
            // A paused tier is not late: a person stopped it.
            let paused = pause_of(tier.window.as_secs()).is_some() || pause_of(0).is_some();
            let overdue_seconds = next_due
                .filter(|due| !paused && now > *due + grace)
                .map(|due| (now - due).num_seconds() as u64);
            let unfinished = unfinished
                .iter()
                .find(|r| r.window_secs == tier.window.as_secs())
                .map(|run| Unfinished {
                    late: !paused
                        && tier
                            .cadence
                            .next_due(run.clock)
                            .is_some_and(|due| now > due + grace),
                    run: run.clone(),
                    left: None,
                });
            let ended_early_24h = early
                .iter()
                .find(|(r, _)| r.window_secs == tier.window.as_secs())
                .map(|(run, n)| EndedEarly {
                    ticks: *n,
                    last: run.clone(),
                });
            TierStatus {
                unfinished,
                ended_early_24h,
                last_slot,
                tier: i + 1,
                window: duration::compact(tier.window),
                cadence: tier.cadence.to_string(),
                last_tick,
                next_due,
                overdue_seconds,
                period_seconds: period,
                paused: pause_of(tier.window.as_secs()),
            }
        })
        .collect())
}

/// How long a finished tick took, in seconds.
pub fn seconds_taken(run: &RunRow) -> Option<f64> {
    let parse = |s: &str| DateTime::parse_from_rfc3339(s).ok();
    let (a, b) = (parse(&run.started_at)?, parse(run.finished_at.as_deref()?)?);
    Some((b - a).num_milliseconds() as f64 / 1000.0)
}

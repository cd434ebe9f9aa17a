//! The backlog's history as `status --json` writes it (`history`) and the dashboard
//! draws it: per tier and over all tiers, the ticks per UTC hour over the last 7 days
//! and per UTC day over the last 90, each with the records handled and failed, the
//! pending count and the handler time's p50 and p95, from the run log
//! (`store::history`). Buckets without a tick are left out.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;

use backlog_core::config::Config;
use backlog_core::duration;
use backlog_core::store::history::{Bucket, Counts};
use backlog_core::store::{HandlerTimes, Store, StoreError};

/// The history of a backlog, in UTC buckets.
#[derive(Debug, Clone, Serialize)]
pub struct History {
    /// The buckets' time zone: always `UTC`.
    pub timezone: &'static str,
    /// The first tick that recorded its pending count and handler times: the run log
    /// holds neither before it (rows of releases before the history).
    pub recorded_since: Option<DateTime<Utc>>,
    /// Per UTC hour, over the last 7 days (the current hour included).
    pub hourly: Series,
    /// Per UTC day, over the last 90 days (today included).
    pub daily: Series,
}

/// One bucket size over its span.
#[derive(Debug, Clone, Serialize)]
pub struct Series {
    /// The first bucket's start.
    pub from: DateTime<Utc>,
    /// The end of the last bucket (the hour after now's).
    pub until: DateTime<Utc>,
    /// Every tier together: counts and handler times summed over the tiers' ticks;
    /// pending as the sum of each tier's latest count at or before the bucket (the
    /// bands are apart, so their pending records add up).
    pub all: Vec<Point>,
    /// Each tier of the schedule (and any other window the run log holds), its
    /// buckets with at least one tick.
    pub tiers: Vec<TierSeries>,
}

/// One tier's buckets.
#[derive(Debug, Clone, Serialize)]
pub struct TierSeries {
    /// The tier's 1-based number; none for a window the schedule has no tier of.
    pub tier: Option<usize>,
    /// Its window, compact (`1d`).
    pub window: String,
    /// Its buckets with a tick, oldest first.
    pub points: Vec<Point>,
}

/// The ticks of one bucket.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Point {
    /// What they did: `start`, `ticks`, `handled`, `succeeded`, `failed`, `pending`.
    #[serde(flatten)]
    pub counts: Counts,
    /// Handler calls whose time was recorded.
    pub timed: u64,
    /// The median handler time, in milliseconds, interpolated within its log-2
    /// bucket (less than a factor of 2 from the truth).
    pub p50_ms: Option<f64>,
    /// The 95th percentile handler time, in milliseconds.
    pub p95_ms: Option<f64>,
}

/// Reads the history of `config`'s table up to `now`.
pub fn history(
    config: &Config,
    store: &mut dyn Store,
    now: DateTime<Utc>,
) -> Result<History, StoreError> {
    let read = store.history(now)?;
    let windows: Vec<Duration> = config.schedule.tiers.iter().map(|t| t.window).collect();
    let series = |buckets: &[Bucket], from, until| Series {
        from,
        until,
        all: all(buckets),
        tiers: tiers(&windows, buckets),
    };
    Ok(History {
        timezone: "UTC",
        recorded_since: read.recorded_since,
        hourly: series(&read.hourly, read.hours_from, read.until),
        daily: series(&read.daily, read.days_from, read.until),
    })
}

fn point(b: &Bucket) -> Point {
    Point {
        counts: b.counts.clone(),
        timed: b.times.total(),
        p50_ms: quantile(&b.times, 0.5),
        p95_ms: quantile(&b.times, 0.95),
    }
}

/// A quantile in milliseconds, to a hundredth.
fn quantile(times: &HandlerTimes, q: f64) -> Option<f64> {
    times.quantile_ms(q).map(|ms| (ms * 100.0).round() / 100.0)
}

/// Each tier's points, the schedule's tiers first (each listed, with or without a
/// tick), then any other window of the run log.
fn tiers(windows: &[Duration], buckets: &[Bucket]) -> Vec<TierSeries> {
    let mut by_window: BTreeMap<u64, Vec<Point>> =
        windows.iter().map(|w| (w.as_secs(), Vec::new())).collect();
    for b in buckets {
        by_window.entry(b.window_secs).or_default().push(point(b));
    }
    let mut out: Vec<TierSeries> = by_window
        .into_iter()
        .map(|(secs, mut points)| {
            points.sort_by_key(|p| p.counts.start);
            TierSeries {
                tier: windows
                    .iter()
                    .position(|w| w.as_secs() == secs)
                    .map(|i| i + 1),
                window: duration::compact(Duration::from_secs(secs)),
                points,
            }
        })
        .collect();
    out.sort_by_key(|t| (t.tier.is_none(), t.tier));
    out
}

/// Every tier's ticks together, per bucket.
fn all(buckets: &[Bucket]) -> Vec<Point> {
    let mut starts: BTreeMap<DateTime<Utc>, Vec<&Bucket>> = BTreeMap::new();
    for b in buckets {
        starts.entry(b.counts.start).or_default().push(b);
    }
    // Each tier's latest pending count so far, carried to the buckets it did not tick in.
    let mut latest: BTreeMap<u64, u64> = BTreeMap::new();
    starts
        .into_iter()
        .map(|(start, of)| {
            let mut times = HandlerTimes::default();
            for b in &of {
                times.merge(&b.times);
                if let Some(p) = b.counts.pending {
                    latest.insert(b.window_secs, p);
                }
            }
            let sum = |f: fn(&Counts) -> u64| of.iter().map(|b| f(&b.counts)).sum();
            point(&Bucket {
                window_secs: 0,
                counts: Counts {
                    start,
                    ticks: sum(|c| c.ticks),
                    handled: sum(|c| c.handled),
                    succeeded: sum(|c| c.succeeded),
                    failed: sum(|c| c.failed),
                    pending: (!latest.is_empty()).then(|| latest.values().sum()),
                },
                times,
            })
        })
        .collect()
}

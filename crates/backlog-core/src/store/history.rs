//! The backlog's history from the run log: per tier, records handled and failed and the
//! pending count per UTC hour over the last 7 days and per UTC day over the last 90,
//! with the handler's time as p50 and p95 per bucket. Summed in the database, written
//! once over the dialects; hours and days are the first 13 and 10 characters of the
//! tick's clock as RFC 3339 UTC text, which every dialect writes alike.
//!
//! Handler times are kept per tick as a histogram of fixed log-2 buckets
//! (`backlog_run_times`, a row per non-empty bucket), so that merged ticks give the
//! quantiles of all their attempts, not an average of each tick's. Those rows are the
//! history's only, and are pruned past [`KEPT_DAYS`]; the run log is not (the metrics'
//! totals, `first_tick` and the unfinished tiers read all of it).

use chrono::{DateTime, Duration, DurationRound, Utc};

use super::StoreError;
use super::sql::{Sql, Value, failed};
use super::tables::Table;

/// Each tick's handler times, by bucket: the histogram `HandlerTimes` merges.
pub const TABLE: Table = Table {
    name: "backlog_run_times",
    columns: "run_id {bigint} NOT NULL, bucket {int} NOT NULL, attempts {bigint} NOT NULL",
    key: Some("run_id, bucket"),
    indexes: &[],
    mark: "attempts",
};

/// The histogram's buckets: bucket 0 holds times under 1 ms, bucket `i` those in
/// [2^(i-1), 2^i) ms, the last everything from 2^(BUCKETS-2) ms (35 minutes) on.
pub const BUCKETS: usize = 23;

/// How many days of handler times the history keeps (the daily charts show 90).
pub const KEPT_DAYS: i64 = 91;

/// Hours the hourly history covers, the current one included.
pub const HOURS: i64 = 7 * 24;

/// Days the daily history covers, today included.
pub const DAYS: i64 = 90;

/// Handler times counted in log-2 buckets of milliseconds (`BUCKETS`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HandlerTimes {
    /// Attempts per bucket, `BUCKETS` long once anything is counted.
    pub counts: Vec<u64>,
}

impl HandlerTimes {
    /// The bucket of a handler that took `took`.
    pub fn bucket(took: std::time::Duration) -> usize {
        let ms = took.as_secs_f64() * 1000.0;
        if ms < 1.0 {
            return 0;
        }
        ((ms.log2().floor() as usize) + 1).min(BUCKETS - 1)
    }

    /// Counts one attempt that took `took`.
    pub fn add(&mut self, took: std::time::Duration) {
        self.add_to(Self::bucket(took), 1);
    }

    fn add_to(&mut self, bucket: usize, n: u64) {
        if self.counts.len() < BUCKETS {
            self.counts.resize(BUCKETS, 0);
        }
        self.counts[bucket.min(BUCKETS - 1)] += n;
    }

    /// Adds another histogram's counts.
    pub fn merge(&mut self, other: &HandlerTimes) {
        for (i, n) in other.counts.iter().enumerate().filter(|(_, n)| **n > 0) {
            self.add_to(i, *n);
        }
    }

    /// Attempts counted.
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// The `q` quantile (0 to 1) in milliseconds, interpolated geometrically within
    /// its bucket (linearly in the first, from 0); none when nothing is counted. The
    /// last bucket has no upper bound: its lower one is said.
    pub fn quantile_ms(&self, q: f64) -> Option<f64> {
        let total = self.total();
        if total == 0 {
            return None;
        }
        let rank = (q.clamp(0.0, 1.0) * total as f64).max(1.0);
        let mut below = 0u64;
        for (i, &n) in self.counts.iter().enumerate() {
            if n == 0 || ((below + n) as f64) < rank {
                below += n;
                continue;
            }
            let within = (rank - below as f64) / n as f64;
            return Some(match i {
                0 => within,
                i if i == BUCKETS - 1 => 2f64.powi(i as i32 - 1),
                i => 2f64.powi(i as i32 - 1) * 2f64.powf(within),
            });
        }
        None
    }
}

/// One tier's ticks within one UTC hour or day, summed.
#[derive(Debug, Clone, PartialEq)]
pub struct Bucket {
    /// The tier's window in seconds.
    pub window_secs: u64,
    /// What its ticks did.
    pub counts: Counts,
    /// Their handlers' times.
    pub times: HandlerTimes,
}

/// The ticks of one UTC hour or day, summed (as `status --json` writes them).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Counts {
    /// The bucket's start (UTC).
    pub start: DateTime<Utc>,
    /// Ticks whose clock falls in it.
    pub ticks: u64,
    /// Records handed to the handler.
    pub handled: u64,
    /// Records marked with the success status.
    pub succeeded: u64,
    /// Records marked with any other status.
    pub failed: u64,
    /// The pending records those ticks found in their band, the largest of their
    /// counts; none when none recorded it (run-log rows of releases before the
    /// history).
    pub pending: Option<u64>,
}

/// The run log of a table as the history charts read it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct History {
    /// Per tier and UTC hour, over the last `HOURS` hours.
    pub hourly: Vec<Bucket>,
    /// Per tier and UTC day, over the last `DAYS` days.
    pub daily: Vec<Bucket>,
    /// The first hour and day those cover (UTC).
    pub hours_from: DateTime<Utc>,
    /// The first day the daily buckets cover (UTC).
    pub days_from: DateTime<Utc>,
    /// The end of both: the hour after `now`'s (UTC).
    pub until: DateTime<Utc>,
    /// The clock of the first tick (of any tier) that recorded its handler times and
    /// pending count, if any did: the history holds none of either before it.
    pub recorded_since: Option<DateTime<Utc>>,
}

/// The history of `table` up to `now`.
pub fn read(
    sql: &mut dyn Sql,
    s: &str,
    table: &str,
    now: DateTime<Utc>,
) -> Result<History, StoreError> {
    let hour = now.duration_trunc(Duration::hours(1)).unwrap_or(now);
    let day = now.duration_trunc(Duration::days(1)).unwrap_or(now);
    let until = hour + Duration::hours(1);
    let hours_from = hour - Duration::hours(HOURS - 1);
    let days_from = day - Duration::days(DAYS - 1);
    let recorded = sql
        .query(
            &format!(
                "SELECT {} FROM {s}backlog_runs WHERE table_name = ?1 AND window_secs > 0 AND pending IS NOT NULL ORDER BY clock LIMIT 1",
                sql.rfc3339("clock")
            ),
            &[table.into()],
        )
        .map_err(failed("reading the run log"))?;
    Ok(History {
        hourly: buckets(sql, s, table, 13, hours_from, until)?,
        daily: buckets(sql, s, table, 10, days_from, until)?,
        hours_from,
        days_from,
        until,
        recorded_since: recorded
            .first()
            .and_then(|r| r[0].text())
            .and_then(|t| instant(&t)),
    })
}

fn instant(text: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// The ticks of `table` with a clock in [from, until), summed by tier and by the
/// first `chars` characters of their clock (13: the hour, 10: the day).
fn buckets(
    sql: &mut dyn Sql,
    s: &str,
    table: &str,
    chars: usize,
    from: DateTime<Utc>,
    until: DateTime<Utc>,
) -> Result<Vec<Bucket>, StoreError> {
    let (int, at) = (sql.bigint(), sql.rfc3339("r.clock"));
    let key = format!("substr({at}, 1, {chars})");
    let range = format!(
        "r.table_name = ?1 AND r.window_secs > 0 AND r.clock >= {} AND r.clock < {}",
        sql.time("?2"),
        sql.time("?3")
    );
    let params = [table.into(), sql.time_value(from), sql.time_value(until)];
    let context = "reading the run log's history";
    let counts = sql
        .query(
            &format!(
                "SELECT r.window_secs, {key}, count(*), CAST(sum(r.selected) AS {int}), CAST(sum(r.succeeded) AS {int}), CAST(sum(r.failed) AS {int}), CAST(max(r.pending) AS {int})
                 FROM {s}backlog_runs r WHERE {range} GROUP BY r.window_secs, {key}"
            ),
            &params,
        )
        .map_err(failed(context))?;
    let times = sql
        .query(
            &format!(
                "SELECT r.window_secs, {key}, t.bucket, CAST(sum(t.attempts) AS {int})
                 FROM {s}backlog_runs r JOIN {s}backlog_run_times t ON t.run_id = r.id
                 WHERE {range} GROUP BY r.window_secs, {key}, t.bucket"
            ),
            &params,
        )
        .map_err(failed(context))?;
    let n = |v: &Value| v.int().unwrap_or(0).max(0) as u64;
    // "2026-12-02T18" or "2026-12-02": the hour's or the day's start.
    let start = |v: &Value| {
        let text = v.text()?;
        let full = match text.len() {
            13 => format!("{text}:00:00Z"),
            _ => format!("{text}T00:00:00Z"),
        };
        instant(&full)
    };
    let mut out: Vec<Bucket> = counts
        .iter()
        .filter_map(|r| {
            Some(Bucket {
                window_secs: n(&r[0]),
                counts: Counts {
                    start: start(&r[1])?,
                    ticks: n(&r[2]),
                    handled: n(&r[3]),
                    succeeded: n(&r[4]),
                    failed: n(&r[5]),
                    pending: r[6].int().map(|p| p.max(0) as u64),
                },
                times: HandlerTimes::default(),
            })
        })
        .collect();
    out.sort_by_key(|b| (b.window_secs, b.counts.start));
    for r in &times {
        let (window, Some(at)) = (n(&r[0]), start(&r[1])) else {
            continue;
        };
        if let Ok(i) = out.binary_search_by_key(&(window, at), |b| (b.window_secs, b.counts.start))
        {
            out[i].times.add_to(n(&r[2]) as usize, n(&r[3]));
        }
    }
    Ok(out)
}

/// Writes the handler times of the run-log row `run_id`, a row per non-empty bucket.
pub fn write_times(
    sql: &mut dyn Sql,
    s: &str,
    run_id: i64,
    times: &HandlerTimes,
) -> Result<(), StoreError> {
    let rows: Vec<(usize, u64)> = times
        .counts
        .iter()
        .copied()
        .enumerate()
        .filter(|(_, n)| *n > 0)
        .collect();
    if rows.is_empty() {
        return Ok(());
    }
    let mut params: Vec<Value> = Vec::with_capacity(rows.len() * 3);
    for (bucket, n) in &rows {
        params.extend([run_id.into(), (*bucket as i64).into(), (*n as i64).into()]);
    }
    sql.execute(
        &format!(
            "INSERT INTO {s}backlog_run_times (run_id, bucket, attempts) VALUES {}",
            super::sql::rows_of(rows.len(), 3, 1)
        ),
        &params,
    )
    .map_err(failed("writing the run log's handler times"))?;
    Ok(())
}

/// Deletes the handler times of the oldest ticks whose clock is more than
/// `KEPT_DAYS` before `now`, a few ticks a call (each tick calls it once, and adds one).
pub fn prune_times(sql: &mut dyn Sql, s: &str, now: DateTime<Utc>) -> Result<(), StoreError> {
    let context = "pruning backlog_run_times";
    let before = now - Duration::days(KEPT_DAYS);
    for _ in 0..PRUNE_STEP {
        let oldest = sql
            .query(
                &format!(
                    "SELECT r.id FROM {s}backlog_runs r WHERE r.id = (SELECT min(run_id) FROM {s}backlog_run_times) AND r.clock < {}",
                    sql.time("?1")
                ),
                &[sql.time_value(before)],
            )
            .map_err(failed(context))?;
        let Some(id) = oldest.first().and_then(|r| r[0].int()) else {
            return Ok(());
        };
        sql.execute(
            &format!("DELETE FROM {s}backlog_run_times WHERE run_id = ?1"),
            &[id.into()],
        )
        .map_err(failed(context))?;
    }
    Ok(())
}

/// The most ticks' handler times `prune_times` deletes a call.
const PRUNE_STEP: usize = 4;

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration as Std;

    #[test]
    fn buckets_are_log_two_of_milliseconds() {
        assert_eq!(HandlerTimes::bucket(Std::from_micros(500)), 0);
        assert_eq!(HandlerTimes::bucket(Std::from_millis(1)), 1);
        assert_eq!(HandlerTimes::bucket(Std::from_millis(3)), 2);
        assert_eq!(HandlerTimes::bucket(Std::from_millis(100)), 7);
        assert_eq!(HandlerTimes::bucket(Std::from_secs(100_000)), BUCKETS - 1);
    }

    #[test]
    fn quantiles_of_merged_ticks_are_those_of_all_their_attempts() {
        // One tick of 99 fast attempts, one of a single slow one: the p50 of both is
        // fast, where an average of the two ticks' p50 would be half a second.
        let mut fast = HandlerTimes::default();
        (0..99).for_each(|_| fast.add(Std::from_millis(10)));
        let mut slow = HandlerTimes::default();
        slow.add(Std::from_millis(1000));
        let mut all = fast.clone();
        all.merge(&slow);
        let p50 = all.quantile_ms(0.5).unwrap();
        assert!((8.0..16.0).contains(&p50), "{p50}");
        let p95 = all.quantile_ms(0.95).unwrap();
        assert!((8.0..16.0).contains(&p95), "{p95}");
        assert!(slow.quantile_ms(0.5).unwrap() >= 512.0);
        assert_eq!(HandlerTimes::default().quantile_ms(0.5), None);
    }
}

//! Totals over the tool's own tables, for the metrics: the run log summed by tier and
//! outcome, and the attempts' durations in histogram buckets. Both backends keep these
//! tables alike, so the statements are written once.

use super::StoreError;
use super::sql::{Sql, failed};

/// The ticks of one tier that ended one way, summed.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct RunTotals {
    /// The tier's window in seconds; 0 for `backlog retry` runs.
    pub window_secs: u64,
    /// `done`, `stopped`, `tripped`, `lapsed`, `failed`, `abandoned`, `running`.
    pub outcome: String,
    /// How many ticks (run-log rows) ended this way.
    pub ticks: u64,
    /// Records handed to the handler, over those ticks.
    pub selected: u64,
    /// Records marked with the success status, over those ticks.
    pub succeeded: u64,
    /// Records marked with any other status, over those ticks.
    pub failed: u64,
    /// Records left to other ticks holding them, over those ticks.
    pub skipped: u64,
    /// Records handled but not marked because the tick no longer held them.
    pub lost: u64,
}

/// The run log of `table`, summed by tier (retries are window 0) and outcome.
pub fn runs(sql: &mut dyn Sql, s: &str, table: &str) -> Result<Vec<RunTotals>, StoreError> {
    let rows = sql
        .query(
            &format!(
                "SELECT window_secs, outcome, count(*), CAST(sum(selected) AS {int}), CAST(sum(succeeded) AS {int}), CAST(sum(failed) AS {int}), CAST(sum(skipped) AS {int}), CAST(sum(lost) AS {int})
                 FROM {s}backlog_runs WHERE table_name = ?1 AND bands NOT IN ('snooze', 'give-up') GROUP BY window_secs, outcome ORDER BY window_secs, outcome",
                int = sql.bigint()
            ),
            &[table.into()],
        )
        .map_err(failed("reading the run log"))?;
    let n = |v: &super::sql::Value| v.int().unwrap_or(0).max(0) as u64;
    Ok(rows
        .iter()
        .map(|r| RunTotals {
            window_secs: n(&r[0]),
            outcome: r[1].text().unwrap_or_default(),
            ticks: n(&r[2]),
            selected: n(&r[3]),
            succeeded: n(&r[4]),
            failed: n(&r[5]),
            skipped: n(&r[6]),
            lost: n(&r[7]),
        })
        .collect())
}

/// The upper bounds, in seconds, of the handler-duration histogram's buckets.
pub const DURATION_BUCKETS: [f64; 12] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// The attempts kept of one tier in histogram form: how many took at most each
/// bound of `DURATION_BUCKETS` (cumulative), all of them, and their summed seconds.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct DurationHistogram {
    /// The tier's window in seconds; 0 for `backlog retry` runs.
    pub window_secs: u64,
    /// Attempts that took at most each bound of `DURATION_BUCKETS`, in its order.
    pub buckets: Vec<u64>,
    /// Every attempt kept of the tier, however long it took (Prometheus's `+Inf` bucket).
    pub count: u64,
    /// Their handler time added up, in seconds.
    pub sum_seconds: f64,
}

/// The attempts kept of `table`, by tier, as histograms.
pub fn durations(
    sql: &mut dyn Sql,
    s: &str,
    table: &str,
) -> Result<Vec<DurationHistogram>, StoreError> {
    let int = sql.bigint();
    let buckets: Vec<String> = DURATION_BUCKETS
        .iter()
        .map(|b| {
            format!(
                "CAST(sum(CASE WHEN took_ms <= {} THEN 1 ELSE 0 END) AS {int})",
                (b * 1000.0) as i64
            )
        })
        .collect();
    let rows = sql
        .query(
            &format!(
                "SELECT window_secs, count(*), CAST(sum(took_ms) AS {int}), {} FROM {s}backlog_attempts WHERE table_name = ?1 AND outcome NOT IN ({}) GROUP BY window_secs ORDER BY window_secs",
                buckets.join(", "),
                super::attempts::ACTIONS.map(|o| format!("'{o}'")).join(", ")
            ),
            &[table.into()],
        )
        .map_err(failed("reading backlog_attempts"))?;
    let n = |v: &super::sql::Value| v.int().unwrap_or(0).max(0) as u64;
    Ok(rows
        .iter()
        .map(|r| DurationHistogram {
            window_secs: n(&r[0]),
            count: n(&r[1]),
            sum_seconds: n(&r[2]) as f64 / 1000.0,
            buckets: r[3..].iter().map(n).collect(),
        })
        .collect())
}

/// One tick of the run log, as a plot of ticks over time needs it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RecentRun {
    /// The run log's row id.
    pub run_id: i64,
    /// The tier's window in seconds.
    pub window_secs: u64,
    /// The tick's clock.
    pub clock: chrono::DateTime<chrono::Utc>,
    /// Records handed to the handler.
    pub selected: u64,
    /// Records marked with the success status.
    pub succeeded: u64,
    /// Records marked with any other status.
    pub failed: u64,
    /// How it ended, as `RunRow::outcome`.
    pub outcome: String,
}

/// The newest `limit` ticks of `table` (retries left out), oldest first.
pub fn recent(
    sql: &mut dyn Sql,
    s: &str,
    table: &str,
    limit: usize,
) -> Result<Vec<RecentRun>, StoreError> {
    // The clock is text on SQLite and a timestamptz on PostgreSQL: read as RFC 3339, both.
    let rows = sql
        .query(
            &format!(
                "SELECT id, window_secs, {clock}, selected, succeeded, failed, outcome
                 FROM {s}backlog_runs WHERE table_name = ?1 AND window_secs > 0 ORDER BY id DESC LIMIT ?2",
                clock = sql.rfc3339("clock")
            ),
            &[table.into(), (limit as i64).into()],
        )
        .map_err(failed("reading the run log"))?;
    let n = |v: &super::sql::Value| v.int().unwrap_or(0).max(0) as u64;
    let mut runs: Vec<RecentRun> = rows
        .iter()
        .filter_map(|r| {
            let text = r[2].text()?;
            let clock = chrono::DateTime::parse_from_rfc3339(&text)
                .ok()?
                .with_timezone(&chrono::Utc);
            Some(RecentRun {
                run_id: r[0].int().unwrap_or(0),
                window_secs: n(&r[1]),
                clock,
                selected: n(&r[3]),
                succeeded: n(&r[4]),
                failed: n(&r[5]),
                outcome: r[6].text().unwrap_or_default(),
            })
        })
        .collect();
    runs.reverse();
    Ok(runs)
}

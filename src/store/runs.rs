//! The run log's reads and a tick's last write, as every backend keeps `backlog_runs`:
//! what `status` and `--if-due` read, and the row a tick closes. (Opening a row stays
//! with each backend: it closes the rows of silent ticks and collects what they held,
//! which each backend holds its own way.)

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::sql::{Sql, Value, failed};
use super::{RunEnd, RunRow, StoreError};

/// A time of the run log, as `Sql::rfc3339` gives it.
fn instant(text: &str) -> Result<DateTime<Utc>, StoreError> {
    DateTime::parse_from_rfc3339(text)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| {
            StoreError::Schema(format!(
                "backlog_runs holds a time {text:?} that is not RFC 3339: {e}"
            ))
        })
}

/// The clock of the last tick of `window` on `table` that did not fail.
pub(super) fn last_tick(
    sql: &mut dyn Sql,
    s: &str,
    table: &str,
    window: Duration,
) -> Result<Option<DateTime<Utc>>, StoreError> {
    let rows = sql
        .query(
            &format!(
                "SELECT {} FROM {s}backlog_runs WHERE table_name = ?1 AND window_secs = ?2 AND outcome NOT IN ('failed', 'lapsed') ORDER BY id DESC LIMIT 1",
                sql.rfc3339("clock")
            ),
            &[table.into(), (window.as_secs() as i64).into()],
        )
        .map_err(failed("reading the run log"))?;
    rows.first()
        .and_then(|r| r[0].text())
        .map(|t| instant(&t))
        .transpose()
}

/// The last run of each tier's window on `table` (retries, window 0, left out).
pub(super) fn last_runs(
    sql: &mut dyn Sql,
    s: &str,
    table: &str,
) -> Result<Vec<RunRow>, StoreError> {
    let rows = sql
        .query(
            &format!(
                "SELECT id, window_secs, {}, {}, {}, selected, succeeded, failed, skipped, outcome, error
                 FROM {s}backlog_runs
                 WHERE id IN (SELECT max(id) FROM {s}backlog_runs WHERE table_name = ?1 AND window_secs > 0 GROUP BY window_secs)
                 ORDER BY window_secs",
                sql.rfc3339("clock"),
                sql.rfc3339("started_at"),
                sql.rfc3339("finished_at")
            ),
            &[table.into()],
        )
        .map_err(failed("reading the run log"))?;
    let n = |v: &Value| v.int().unwrap_or(0).max(0) as u64;
    rows.iter()
        .map(|r| {
            Ok(RunRow {
                run_id: r[0].int().unwrap_or_default(),
                window_secs: n(&r[1]),
                clock: instant(&r[2].text().unwrap_or_default())?,
                started_at: r[3].text().unwrap_or_default(),
                finished_at: r[4].text(),
                selected: n(&r[5]),
                succeeded: n(&r[6]),
                failed: n(&r[7]),
                skipped: n(&r[8]),
                outcome: r[9].text().unwrap_or_default(),
                error: r[10].text(),
            })
        })
        .collect()
}

/// Closes the run-log row `run_id`, at the database's time.
pub(super) fn finish(
    sql: &mut dyn Sql,
    s: &str,
    run_id: i64,
    end: &RunEnd,
) -> Result<(), StoreError> {
    sql.execute(
        &format!(
            "UPDATE {s}backlog_runs SET finished_at = {}, selected = ?2, succeeded = ?3, failed = ?4, skipped = ?5, outcome = ?6, error = ?7, lost = ?8 WHERE id = ?1",
            sql.now()
        ),
        &[
            run_id.into(),
            (end.selected as i64).into(),
            (end.succeeded as i64).into(),
            (end.failed as i64).into(),
            (end.skipped as i64).into(),
            end.outcome.into(),
            end.error.as_deref().into(),
            (end.lost as i64).into(),
        ],
    )
    .map_err(failed("writing the run log"))?;
    Ok(())
}

//! The run log, as every backend keeps `backlog_runs`: the row a tick opens (after
//! closing the rows of silent ticks; what they held each backend collects its own way)
//! and closes, and what `status` and `--if-due` read.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::fault::housekeeping;
use super::sql::{Sql, Value, failed};
use super::{KEPT_OWNER, RunEnd, RunRow, RunStart, StoreError};

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

/// Opens the run-log row of `run` on `table` and returns its id. First the rows of
/// ticks that stopped beating for a whole lease are closed as `abandoned`; then
/// `collect` drops what the backend's holds kept past their time, and a step of the
/// attempts past `history.keep` is pruned.
pub(super) fn open(
    sql: &mut dyn Sql,
    s: &str,
    table: &str,
    run: &RunStart,
    collect: &mut dyn FnMut(&mut dyn Sql) -> Result<(), StoreError>,
) -> Result<i64, StoreError> {
    let context = "writing the run log";
    let lease_us = i64::try_from(run.lease.as_micros()).unwrap_or(i64::MAX);
    sql.execute(
        &format!(
            "UPDATE {s}backlog_runs SET outcome = 'abandoned', error = 'no heartbeat since ' || {since} || ': the tick was killed or lost its database'
             WHERE table_name = ?1 AND outcome = 'running' AND heartbeat_at < {silent}",
            since = sql.rfc3339("heartbeat_at"),
            silent = sql.ago("?2"),
        ),
        &[table.into(), lease_us.into()],
    )
    .map_err(failed(context))?;
    collect(sql)?;
    super::own::prune_attempts(sql, s, table, &run.history)?;
    let (clock, now) = (sql.time("?7"), sql.now());
    let params = [
        table.into(),
        (run.window.as_secs() as i64).into(),
        run.tier.map(|t| t as i64).into(),
        (run.younger.as_secs() as i64).into(),
        (run.older.as_secs() as i64).into(),
        run.bands.into(),
        sql.time_value(run.now),
        run.owner.as_str().into(),
    ];
    sql.insert_returning_id(
        &format!(
            "INSERT INTO {s}backlog_runs (table_name, window_secs, tier, band_from_secs, band_to_secs, bands, clock, started_at, heartbeat_at, outcome, owner)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, {clock}, {now}, {now}, 'running', ?8)"
        ),
        &params,
    )
    .map_err(failed(context))
}

/// Drops the failures the servers' claims kept past the end of their slot. Housekeeping:
/// a claim another session is writing may hold its row for a while, and what is not
/// dropped now a later tick drops (a kept failure past its slot is free to take anyway).
#[cfg_attr(not(any(feature = "postgres", feature = "mysql")), allow(dead_code))] // the servers' claims
pub(super) fn collect_kept(sql: &mut dyn Sql, s: &str, table: &str) -> Result<(), StoreError> {
    let now = sql.now();
    housekeeping(
        sql.execute(
            &format!(
                "DELETE FROM {s}backlog_claims WHERE table_name = ?1 AND owner = ?2 AND expires_at < {now}"
            ),
            &[table.into(), KEPT_OWNER.into()],
        )
        .map(drop)
        .map_err(failed("dropping failures kept past their slot")),
    )
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

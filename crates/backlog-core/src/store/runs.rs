//! The run log, as every backend keeps `backlog_runs`: the row a tick opens (after
//! closing the rows of silent ticks; what they held each backend collects its own way)
//! and closes, and what `status` and `--if-due` read.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::StoreError;
use super::sql::{Sql, Value, failed};

/// A tick as the run log records it when it starts.
#[derive(Debug, Clone)]
pub struct RunStart {
    /// The tier's window (zero for `backlog retry`): which tier the run-log row is about.
    pub window: Duration,
    /// The tier's 1-based number; none for a window no tier has, or a run that is no tick.
    pub tier: Option<usize>,
    /// The band's lower age bound (exclusive, unless zero).
    pub younger: Duration,
    /// The band's upper age bound (inclusive).
    pub older: Duration,
    /// How the bands were computed: `disjoint` or `cumulative` (see `BandMode`), or
    /// `retry` / `not started` for a run that is not a tick of a band.
    pub bands: &'static str,
    /// The tick's `now` (pinned or real).
    pub now: DateTime<Utc>,
    /// The tick's name in holds and the run log, unique across hosts: `host/pid/ms/n`,
    /// with the tick's start in Unix milliseconds and its number in the process.
    pub owner: String,
    /// The claims' lease: a run still `running` with no heartbeat for a whole lease was
    /// killed or cut off (its claims have run out), and `begin_run` closes it as
    /// `abandoned`.
    pub lease: Duration,
    /// How long attempts are kept, and how many a record: `begin_run` deletes a step
    /// of those past `keep`, and the marks keep each record's newest.
    pub history: crate::config::HistoryConfig,
}

/// How a tick ended, for the run log.
#[derive(Debug, Clone, Default)]
pub struct RunEnd {
    /// Records handed to the handler.
    pub selected: u64,
    /// Records marked with the success status.
    pub succeeded: u64,
    /// Records marked with any other status.
    pub failed: u64,
    /// Records of the band held by another tick, or marked by one since they were read.
    pub skipped: u64,
    /// Handled, but not marked: the tick no longer held them, or their group of marks
    /// could not be written.
    pub lost: u64,
    /// `done`, `stopped` (a signal ended it early), `tripped` (the breaker), `lapsed`
    /// (its holds ran out) or `failed`.
    pub outcome: &'static str,
    /// Why the tick did not end `done`: the error, the broken handler, the lapse or
    /// the breaker's reason.
    pub error: Option<String>,
    /// The pending records of its band as the tick read it (see `Tally::pending`);
    /// none for a run that is no tick of a band.
    pub pending: Option<u64>,
    /// How long its handlers took, for the history.
    pub times: super::HandlerTimes,
}

/// The last tick of one window, from the run log.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RunRow {
    /// The run log's row id: the `run_id` of `backlog status` and `--json`.
    pub run_id: i64,
    /// The tier's window in seconds; 0 for `backlog retry` runs.
    pub window_secs: u64,
    /// The tick's `now`.
    pub clock: DateTime<Utc>,
    /// When the tick started by the runner's real clock (not `clock`), RFC 3339 UTC with
    /// milliseconds.
    pub started_at: String,
    /// When it ended, in the same form; none while it runs (or if it died unrecorded).
    pub finished_at: Option<String>,
    /// Records handed to the handler.
    pub selected: u64,
    /// Records marked with the success status.
    pub succeeded: u64,
    /// Records marked with any other status.
    pub failed: u64,
    /// Records the tick left to other ticks holding them.
    pub skipped: u64,
    /// `running`, `done`, `stopped`, `tripped`, `lapsed`, `failed`, or `abandoned`
    /// (it stopped renewing its lease without finishing: killed, or its host went
    /// away).
    pub outcome: String,
    /// Why it did not end `done` (see `RunEnd::error`); for `abandoned`, since when
    /// it was silent.
    pub error: Option<String>,
    /// Records handled but not marked: the tick no longer held them.
    pub lost: u64,
    /// The tick's name in the holds, `host/pid/started-ms/n`: the runner that ran it.
    pub owner: String,
}

impl RunRow {
    /// The runner (`host/pid`) of the tick, from its owner name, read from the right
    /// (a host name may hold a `/`).
    pub fn runner(&self) -> &str {
        self.owner.rsplitn(3, '/').nth(2).unwrap_or(&self.owner)
    }
}

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
pub fn last_tick(
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

/// The clock of the first tick on `table` the run log holds (retries left out): when
/// the tool began working this table, as far as the log remembers.
pub fn first_tick(
    sql: &mut dyn Sql,
    s: &str,
    table: &str,
) -> Result<Option<DateTime<Utc>>, StoreError> {
    let rows = sql
        .query(
            &format!(
                "SELECT {} FROM {s}backlog_runs WHERE table_name = ?1 AND window_secs > 0 ORDER BY id LIMIT 1",
                sql.rfc3339("clock")
            ),
            &[table.into()],
        )
        .map_err(failed("reading the run log"))?;
    rows.first()
        .and_then(|r| r[0].text())
        .map(|t| instant(&t))
        .transpose()
}

/// The run log's columns a `RunRow` is read from, in its order.
fn row_columns(sql: &dyn Sql) -> String {
    format!(
        "id, window_secs, {}, {}, {}, selected, succeeded, failed, skipped, outcome, error, lost, owner",
        sql.rfc3339("clock"),
        sql.rfc3339("started_at"),
        sql.rfc3339("finished_at")
    )
}

/// Reads the rows of a query over `row_columns`.
fn run_rows(rows: &[Vec<Value>]) -> Result<Vec<RunRow>, StoreError> {
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
                lost: n(&r[11]),
                owner: r[12].text().unwrap_or_default(),
            })
        })
        .collect()
}

/// The last run of each tier's window on `table` (retries, window 0, left out).
pub fn last_runs(sql: &mut dyn Sql, s: &str, table: &str) -> Result<Vec<RunRow>, StoreError> {
    let rows = sql
        .query(
            &format!(
                "SELECT {} FROM {s}backlog_runs
                 WHERE id IN (SELECT max(id) FROM {s}backlog_runs WHERE table_name = ?1 AND window_secs > 0 GROUP BY window_secs)
                 ORDER BY window_secs",
                row_columns(&*sql)
            ),
            &[table.into()],
        )
        .map_err(failed("reading the run log"))?;
    run_rows(&rows)
}

/// How many of a window's newest ticks `since` reads: the run log is never pruned, so
/// a year of a 5-minute tier is 100,000 rows and more; a slot's ticks, a runner's each
/// (a hundred runners, each ticking again after a stop), are among the newest.
pub const NEWEST_READ: usize = 1000;

/// The ticks of `window` on `table` whose clock is at or after `since`, oldest first,
/// among its `NEWEST_READ` newest (an index range, whatever the run log's length):
/// the ticks of a tier's last slot, which the fleet's runners share.
pub fn since(
    sql: &mut dyn Sql,
    s: &str,
    table: &str,
    window: Duration,
    since: DateTime<Utc>,
) -> Result<Vec<RunRow>, StoreError> {
    let rows = sql
        .query(
            &format!(
                // A derived table, not `id IN (… LIMIT n)`, which MySQL refuses.
                "SELECT {} FROM (SELECT * FROM {s}backlog_runs WHERE table_name = ?1 AND window_secs = ?2 ORDER BY id DESC LIMIT {NEWEST_READ}) r
                 WHERE clock >= {} ORDER BY id",
                row_columns(&*sql),
                sql.time("?3")
            ),
            &[
                table.into(),
                (window.as_secs() as i64).into(),
                sql.time_value(since),
            ],
        )
        .map_err(failed("reading the run log"))?;
    run_rows(&rows)
}

/// The outcomes of a tick that ended before its band did, so that the rest of the
/// band waits for someone to take it: a signal (`stopped`), a lapse of its holds, a
/// failure (the database, a write), or a kill (`abandoned`).
pub const UNFINISHED: [&str; 4] = ["stopped", "lapsed", "failed", "abandoned"];

/// Each tier's unfinished tick on `table`: per window, the newest run that ended
/// early (`UNFINISHED`, or still `running` with no heartbeat for a whole `lease`:
/// killed, and not yet closed as `abandoned`) when no tick of that window started
/// after it ended and ran to its end, or runs now. A tick that started before it
/// ended does not count: it read the band while the stopped tick held part of it,
/// and stepped over that part. Any runner's finished tick clears any runner's stop.
pub fn unfinished(
    sql: &mut dyn Sql,
    s: &str,
    table: &str,
    lease: Duration,
) -> Result<Vec<RunRow>, StoreError> {
    let lease_us = i64::try_from(lease.as_micros()).unwrap_or(i64::MAX);
    let outcomes = UNFINISHED.map(|o| format!("'{o}'")).join(", ");
    let silent = sql.ago("?2");
    let ended_early =
        format!("(outcome IN ({outcomes}) OR (outcome = 'running' AND heartbeat_at < {silent}))");
    let rows = sql
        .query(
            &format!(
                "SELECT {columns} FROM {s}backlog_runs r
                 WHERE id IN (SELECT max(id) FROM {s}backlog_runs WHERE table_name = ?1 AND window_secs > 0 AND {ended_early} GROUP BY window_secs)
                 AND NOT EXISTS (
                     SELECT 1 FROM {s}backlog_runs c
                     WHERE c.table_name = r.table_name AND c.window_secs = r.window_secs AND c.id > r.id
                     AND (c.outcome IN ('done', 'tripped') OR (c.outcome = 'running' AND c.heartbeat_at >= {silent}))
                     AND c.started_at >= coalesce(r.finished_at, r.heartbeat_at, r.started_at))
                 ORDER BY window_secs",
                columns = row_columns(&*sql),
            ),
            &[table.into(), lease_us.into()],
        )
        .map_err(failed("reading the run log"))?;
    run_rows(&rows)
}

/// Per window, the ticks on `table` alive in the last `span` that ended before their
/// band did (`UNFINISHED`, or still `running` with no heartbeat for a whole `lease`:
/// its connection lost, killed, not yet closed as `abandoned`): how many, and the
/// newest. What a check says happened meanwhile (a database restarted under a tick, a
/// runner cut off), once the ticks after finished the band.
pub fn ended_early(
    sql: &mut dyn Sql,
    s: &str,
    table: &str,
    span: Duration,
    lease: Duration,
) -> Result<Vec<(RunRow, u64)>, StoreError> {
    let us = |d: Duration| i64::try_from(d.as_micros()).unwrap_or(i64::MAX);
    let outcomes = UNFINISHED.map(|o| format!("'{o}'")).join(", ");
    let (since, silent) = (sql.ago("?2"), sql.ago("?3"));
    let early = format!(
        "table_name = ?1 AND window_secs > 0 AND heartbeat_at >= {since} AND (outcome IN ({outcomes}) OR (outcome = 'running' AND heartbeat_at < {silent}))"
    );
    let counts = sql
        .query(
            &format!(
                "SELECT window_secs, count(*) FROM {s}backlog_runs WHERE {early} GROUP BY window_secs"
            ),
            &[table.into(), us(span).into(), us(lease).into()],
        )
        .map_err(failed("reading the run log"))?;
    let newest = sql
        .query(
            &format!(
                "SELECT {columns} FROM {s}backlog_runs
                 WHERE id IN (SELECT max(id) FROM {s}backlog_runs WHERE {early} GROUP BY window_secs)
                 ORDER BY window_secs",
                columns = row_columns(&*sql),
            ),
            &[table.into(), us(span).into(), us(lease).into()],
        )
        .map_err(failed("reading the run log"))?;
    Ok(run_rows(&newest)?
        .into_iter()
        .map(|run| {
            let n = counts
                .iter()
                .find(|c| c[0].int() == Some(run.window_secs as i64))
                .and_then(|c| c[1].int())
                .unwrap_or(1);
            (run, n as u64)
        })
        .collect())
}

/// Opens the run-log row of `run` on `table` and returns its id. First the rows of
/// ticks that stopped beating for a whole lease are closed as `abandoned`; then
/// `collect` drops what the backend's holds kept past their time, and a step of the
/// attempts past `history.keep` is pruned.
pub fn open(
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
    super::fault::housekeeping(super::history::prune_times(sql, s, run.now))?;
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

/// Closes the run-log row `run_id`, at the database's time, with its handler times.
pub fn finish(sql: &mut dyn Sql, s: &str, run_id: i64, end: &RunEnd) -> Result<(), StoreError> {
    sql.execute(
        &format!(
            "UPDATE {s}backlog_runs SET finished_at = {}, selected = ?2, succeeded = ?3, failed = ?4, skipped = ?5, outcome = ?6, error = ?7, lost = ?8, pending = ?9 WHERE id = ?1",
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
            end.pending.map(|p| p as i64).into(),
        ],
    )
    .map_err(failed("writing the run log"))?;
    super::history::write_times(sql, s, run_id, &end.times)
}

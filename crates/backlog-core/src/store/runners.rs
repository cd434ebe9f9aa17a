//! The fleet as the run log sees it: the ticks of a table running now, on any host,
//! with what each holds. A tick is live while its run-log row is open and its
//! heartbeat (or its start) is recent; read through the shared statements, once for
//! every backend.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::sql::{Sql, Value, failed};
use super::{KEPT_OWNER, StoreError};

/// A tick running now.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Runner {
    /// Its name in the holds and claims: `host/pid/started-ms/n`.
    pub owner: String,
    /// The host it runs on.
    pub host: String,
    /// Its process id on that host.
    pub pid: u32,
    /// The tier's window in seconds; 0 for a `backlog retry` (or snooze, give-up).
    pub window_secs: u64,
    /// When it started, by the database's clock (SQLite: its host's).
    pub since: DateTime<Utc>,
    /// When its heartbeat last renewed its holds (its start, before the first beat).
    pub renewed: DateTime<Utc>,
    /// What it holds now: a number of records claimed (a server), or the span of
    /// inserted-at values it has read (SQLite); none while it holds nothing.
    pub holds: Option<Holding>,
}

/// What a live tick holds.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Holding {
    /// Records claimed one by one (PostgreSQL, MySQL).
    Records(u64),
    /// Every pending record from `low` to `high` (SQLite's span).
    Span {
        /// The oldest inserted-at value of the span.
        low: String,
        /// The newest.
        high: String,
    },
}

fn instant(value: &Value) -> DateTime<Utc> {
    value
        .text()
        .and_then(|t| DateTime::parse_from_rfc3339(&t).ok())
        .map_or(DateTime::<Utc>::MIN_UTC, |t| t.with_timezone(&Utc))
}

/// Whether a run-log row is a live tick's: open, and heard from (its heartbeat, or its
/// start) less than `silent_us` microseconds ago (a placeholder).
pub fn live_run(sql: &dyn Sql, silent_us: &str) -> String {
    format!(
        "finished_at IS NULL AND coalesce(heartbeat_at, started_at) > {}",
        sql.ago(silent_us)
    )
}

/// The ticks of `table` whose run-log row is open and whose heartbeat came less than
/// `silent` ago, oldest first, with what each holds: SQLite's spans live by this host's
/// clock `spans_at`, or, without it, a server's claims.
pub fn live(
    sql: &mut dyn Sql,
    s: &str,
    table: &str,
    silent: Duration,
    spans_at: Option<DateTime<Utc>>,
) -> Result<Vec<Runner>, StoreError> {
    let silent_us = i64::try_from(silent.as_micros()).unwrap_or(i64::MAX);
    let rows = sql
        .query(
            &format!(
                "SELECT owner, window_secs, {started}, {renewed} FROM {s}backlog_runs
                 WHERE table_name = ?1 AND {live} ORDER BY id",
                started = sql.rfc3339("started_at"),
                renewed = sql.rfc3339("coalesce(heartbeat_at, started_at)"),
                live = live_run(sql, "?2"),
            ),
            &[table.into(), silent_us.into()],
        )
        .map_err(failed("reading the run log"))?;
    if rows.is_empty() {
        return Ok(Vec::new());
    }
    let held = match spans_at {
        Some(now) => spans(sql, table, now)?,
        None => claimed(sql, s, table)?,
    };
    Ok(rows
        .iter()
        .map(|row| {
            let owner = row[0].text().unwrap_or_default();
            // `host/pid/started-ms/n`, read from the right: a host name may hold a `/`.
            let mut parts = owner.rsplitn(4, '/').skip(2);
            let pid = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
            let host = parts.next().unwrap_or_default().to_string();
            Runner {
                holds: held
                    .iter()
                    .find(|(o, _)| *o == owner)
                    .map(|(_, h)| h.clone()),
                host,
                pid,
                window_secs: row[1].int().unwrap_or(0).max(0) as u64,
                since: instant(&row[2]),
                renewed: instant(&row[3]),
                owner,
            }
        })
        .collect())
}

/// The records each live tick claims on a server.
fn claimed(sql: &mut dyn Sql, s: &str, table: &str) -> Result<Vec<(String, Holding)>, StoreError> {
    let now = sql.now();
    Ok(sql
        .query(
            &format!(
                "SELECT owner, count(*) FROM {s}backlog_claims
                 WHERE table_name = ?1 AND owner <> ?2 AND expires_at > {now} GROUP BY owner"
            ),
            &[table.into(), KEPT_OWNER.into()],
        )
        .map_err(failed("reading the tool's claims"))?
        .iter()
        .map(|row| {
            let n = row[1].int().unwrap_or(0).max(0) as u64;
            (row[0].text().unwrap_or_default(), Holding::Records(n))
        })
        .collect())
}

/// The span each live tick holds on SQLite, by this host's clock `now`.
fn spans(
    sql: &mut dyn Sql,
    table: &str,
    now: DateTime<Utc>,
) -> Result<Vec<(String, Holding)>, StoreError> {
    Ok(sql
        .query(
            "SELECT owner, low, high FROM backlog_holds WHERE table_name = ?1 AND expires_at > ?2",
            &[table.into(), now.timestamp_millis().into()],
        )
        .map_err(failed("reading the tool's holds"))?
        .iter()
        .map(|row| {
            let span = Holding::Span {
                low: row[1].text().unwrap_or_default(),
                high: row[2].text().unwrap_or_default(),
            };
            (row[0].text().unwrap_or_default(), span)
        })
        .collect())
}

/// How many live ticks of the same table and tier (`window_secs`) opened their run-log
/// row before the tick `run_id`: its place in the fleet, where it starts in the band
/// (see `tick::place::stagger`).
pub fn before(
    sql: &mut dyn Sql,
    s: &str,
    table: &str,
    window_secs: u64,
    run_id: i64,
    silent: Duration,
) -> Result<u64, StoreError> {
    let silent_us = i64::try_from(silent.as_micros()).unwrap_or(i64::MAX);
    let window = i64::try_from(window_secs).unwrap_or(i64::MAX);
    let rows = sql
        .query(
            &format!(
                "SELECT count(*) FROM {s}backlog_runs
                 WHERE table_name = ?1 AND window_secs = ?2 AND id < ?3 AND {live}",
                live = live_run(sql, "?4"),
            ),
            &[table.into(), window.into(), run_id.into(), silent_us.into()],
        )
        .map_err(failed("reading the run log"))?;
    Ok(rows.first().and_then(|r| r[0].int()).unwrap_or(0).max(0) as u64)
}

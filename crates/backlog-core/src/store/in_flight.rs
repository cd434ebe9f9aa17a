//! What is held now, as the dashboard's in-flight list reads it: on a server the live
//! rows of `backlog_claims` (a record each), on SQLite the live spans of
//! `backlog_holds` (a tick's range of inserted-at values) and the failures
//! `backlog_tried` keeps. Read through the shared statements, once for every backend;
//! reading creates nothing.

use chrono::{DateTime, Utc};

use super::sql::{Sql, Value, failed};
use super::{KEPT_OWNER, StoreError};

/// A record a tick holds now (or, kept, a failure held back until its slot ends).
#[derive(Debug, Clone)]
pub struct ClaimRow {
    /// The record's id, as text.
    pub record_id: String,
    /// The tick that holds it; the keep's marker for a kept failure.
    pub owner: String,
    /// When the claim was taken; none for SQLite's kept failures, which do not say.
    pub claimed_at: Option<DateTime<Utc>>,
    /// When it runs out unless renewed (a kept failure: when its slot ends).
    pub expires_at: DateTime<Utc>,
}

/// A SQLite tick's span: every pending record whose inserted-at value lies between
/// `low` and `high` is the tick's until `expires_at`.
#[derive(Debug, Clone)]
pub struct SpanRow {
    /// The tick that holds it.
    pub owner: String,
    /// The oldest inserted-at value of the span, as the column holds it.
    pub low: String,
    /// The newest inserted-at value of the span, as the column holds it.
    pub high: String,
    /// When the span runs out unless the tick's heartbeat renews it.
    pub expires_at: DateTime<Utc>,
}

/// What is held now on a table.
#[derive(Debug, Clone)]
pub enum InFlight {
    /// The tool's tables are not there yet: nothing ever ticked.
    Nothing,
    /// A server's claims: the live ones, and the failures kept until their slot ends.
    Claims {
        /// The records live ticks hold.
        held: Vec<ClaimRow>,
        /// The failures kept from the ticks.
        kept: Vec<ClaimRow>,
    },
    /// SQLite's spans, and the failures kept until their slot ends.
    Spans {
        /// The spans live ticks hold.
        spans: Vec<SpanRow>,
        /// The failures kept from the ticks.
        kept: Vec<ClaimRow>,
    },
}

fn time_of(value: &Value, what: &str) -> Result<DateTime<Utc>, StoreError> {
    let text = value.text().unwrap_or_default();
    DateTime::parse_from_rfc3339(&text)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| {
            StoreError::Schema(format!(
                "{what} holds a time {text:?} that is not RFC 3339: {e}"
            ))
        })
}

fn millis(value: &Value) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(value.int().unwrap_or(0)).unwrap_or_default()
}

/// The live claims of `table` on a server, at most `limit` of the ticks' and of the
/// kept failures' each, the longest-lived first.
pub fn claims(
    sql: &mut dyn Sql,
    s: &str,
    table: &str,
    limit: usize,
) -> Result<InFlight, StoreError> {
    let mut read = |kept: bool| -> Result<Vec<ClaimRow>, StoreError> {
        let rows = sql
            .query(
                &format!(
                    "SELECT record_id, owner, {claimed}, {expires} FROM {s}backlog_claims
                     WHERE table_name = ?1 AND owner {op} ?2 AND expires_at > {now}
                     ORDER BY expires_at DESC, record_id LIMIT ?3",
                    claimed = sql.rfc3339("claimed_at"),
                    expires = sql.rfc3339("expires_at"),
                    now = sql.now(),
                    op = if kept { "=" } else { "<>" },
                ),
                &[table.into(), KEPT_OWNER.into(), (limit as i64).into()],
            )
            .map_err(failed("reading the tool's claims"))?;
        rows.iter()
            .map(|row| {
                Ok(ClaimRow {
                    record_id: row[0].text().unwrap_or_default(),
                    owner: row[1].text().unwrap_or_default(),
                    claimed_at: Some(time_of(&row[2], "backlog_claims")?),
                    expires_at: time_of(&row[3], "backlog_claims")?,
                })
            })
            .collect()
    };
    Ok(InFlight::Claims {
        held: read(false)?,
        kept: read(true)?,
    })
}

/// The live spans of `table` on SQLite and its kept failures (at most `limit`), by
/// this host's clock `now`, as SQLite's holds count time (unix milliseconds).
pub fn spans(
    sql: &mut dyn Sql,
    table: &str,
    now: DateTime<Utc>,
    limit: usize,
) -> Result<InFlight, StoreError> {
    let now_ms = now.timestamp_millis();
    let spans = sql
        .query(
            "SELECT owner, low, high, expires_at FROM backlog_holds
             WHERE table_name = ?1 AND expires_at > ?2 ORDER BY expires_at DESC",
            &[table.into(), now_ms.into()],
        )
        .map_err(failed("reading the tool's holds"))?
        .iter()
        .map(|row| SpanRow {
            owner: row[0].text().unwrap_or_default(),
            low: row[1].text().unwrap_or_default(),
            high: row[2].text().unwrap_or_default(),
            expires_at: millis(&row[3]),
        })
        .collect();
    let kept = sql
        .query(
            "SELECT record_id, until_ms FROM backlog_tried
             WHERE table_name = ?1 AND expires_ms > ?2 ORDER BY until_ms DESC LIMIT ?3",
            &[table.into(), now_ms.into(), (limit as i64).into()],
        )
        .map_err(failed("reading the failures kept"))?
        .iter()
        .map(|row| ClaimRow {
            record_id: row[0].text().unwrap_or_default(),
            owner: KEPT_OWNER.to_string(),
            claimed_at: None,
            expires_at: millis(&row[1]),
        })
        .collect();
    Ok(InFlight::Spans { spans, kept })
}

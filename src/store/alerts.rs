//! `backlog_alerts`: when an alert of each tier and kind was last sent, and how many
//! were held back since, kept in the database so that every runner on every host
//! (crontab ticks are separate processes) sends at most one per `alert_every`.
//!
//! The right to send is claimed by a compare-and-set on the row (or by inserting it
//! first): of two runners that fail at once, one changes the row and sends, the other
//! changes nothing, reads again and counts itself held back.

use super::StoreError;
use super::sql::{Sql, failed};

/// The table: a row per table, tier window and kind of alert.
pub(super) const TABLE: super::tables::Table = super::tables::Table {
    name: "backlog_alerts",
    columns: "table_name {key} NOT NULL,
        window_secs {bigint} NOT NULL,
        kind {key} NOT NULL,
        last_sent_ms {bigint} NOT NULL,
        held_back {bigint} NOT NULL DEFAULT 0",
    key: Some("table_name, window_secs, kind"),
    indexes: &[],
    mark: "held_back",
};

/// What a runner may do with an alert it raised.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// Send it: this runner won the right; `held_back` alerts of the same tier and
    /// kind were held back since the last one sent.
    Send {
        /// How many were held back since the last one sent.
        held_back: u64,
    },
    /// Another alert of the tier and kind went out less than `alert_every` ago: this
    /// one is counted and not sent.
    HeldBack,
}

/// How often a claim reads again after another runner changed the row under it.
const TRIES: usize = 5;

/// Claims the right to send an alert of `kind` about the tier of `window_secs` at
/// `now_ms` (the tick's clock), one per `every_ms`.
pub(super) fn claim(
    sql: &mut dyn Sql,
    s: &str,
    table: &str,
    window_secs: u64,
    kind: &str,
    now_ms: i64,
    every_ms: i64,
) -> Result<Claim, StoreError> {
    let key = [table.into(), (window_secs as i64).into(), kind.into()];
    let which = "table_name = ?1 AND window_secs = ?2 AND kind = ?3";
    let mut last_error = None;
    for _ in 0..TRIES {
        let rows = sql
            .query(
                &format!("SELECT last_sent_ms, held_back FROM {s}backlog_alerts WHERE {which}"),
                &key,
            )
            .map_err(failed("reading backlog_alerts"))?;
        let Some(row) = rows.first() else {
            // The first alert of its kind: the runner whose row goes in sends it; a
            // second one's insert fails on the key and it reads the row again.
            let inserted = sql.execute(
                &format!(
                    "INSERT INTO {s}backlog_alerts (table_name, window_secs, kind, last_sent_ms, held_back) VALUES (?1, ?2, ?3, ?4, 0)"
                ),
                &[key[0].clone(), key[1].clone(), key[2].clone(), now_ms.into()],
            );
            match inserted {
                Ok(_) => return Ok(Claim::Send { held_back: 0 }),
                Err(e) => last_error = Some(e),
            }
            continue;
        };
        let (last_sent, held_back) = (row[0].int().unwrap_or(0), row[1].int().unwrap_or(0));
        if last_sent > now_ms.saturating_sub(every_ms) {
            sql.execute(
                &format!("UPDATE {s}backlog_alerts SET held_back = held_back + 1 WHERE {which}"),
                &key,
            )
            .map_err(failed("writing backlog_alerts"))?;
            return Ok(Claim::HeldBack);
        }
        let changed = sql
            .execute(
                &format!(
                    "UPDATE {s}backlog_alerts SET last_sent_ms = ?4, held_back = 0 WHERE {which} AND last_sent_ms = ?5 AND held_back = ?6"
                ),
                &[
                    key[0].clone(),
                    key[1].clone(),
                    key[2].clone(),
                    now_ms.into(),
                    last_sent.into(),
                    held_back.into(),
                ],
            )
            .map_err(failed("writing backlog_alerts"))?;
        if changed == 1 {
            return Ok(Claim::Send {
                held_back: held_back.max(0) as u64,
            });
        }
    }
    Err(StoreError::Database {
        context: "claiming an alert in backlog_alerts (other runners kept changing it)".into(),
        source: last_error.unwrap_or_else(|| "the row changed under every try".into()),
    })
}

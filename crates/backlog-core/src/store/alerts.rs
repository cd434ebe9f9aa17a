//! `backlog_alerts`: when an alert of each tier and kind was last sent, and how many
//! were held back since, kept in the database so that every runner on every host
//! (crontab ticks are separate processes) sends at most one per `alert_every`.
//!
//! The right to send is claimed by a compare-and-set on the row (or by inserting it
//! first): of two runners that fail at once, one changes the row and sends, the other
//! changes nothing, reads again and counts itself held back. A claim is given back
//! ([`release`]) when its alert could not be delivered: an alert counts as sent only
//! once it was, so the next one of its tier and kind is not held back by a failure.
//!
//! Rows of window 0 (no tier has it) are about the file's alert channels rather than
//! a tier: what ticks found wrong with them ([`AlertTrouble`]), for `status --check`.

use super::StoreError;
use super::sql::{Sql, failed};

/// The table: a row per table, tier window and kind of alert.
pub const TABLE: super::tables::Table = super::tables::Table {
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
        /// When the last one went out (ms since the epoch), none for the first: what
        /// a release of this claim puts back.
        last_sent_ms: Option<i64>,
    },
    /// Another alert of the tier and kind went out less than `alert_every` ago: this
    /// one is counted and not sent.
    HeldBack,
}

/// How often a claim reads again after another runner changed the row under it.
const TRIES: usize = 5;

/// Claims the right to send an alert of `kind` about the tier of `window_secs` at
/// `now_ms` (the tick's clock), one per `every_ms`.
pub fn claim(
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
                Ok(_) => {
                    return Ok(Claim::Send {
                        held_back: 0,
                        last_sent_ms: None,
                    });
                }
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
                last_sent_ms: Some(last_sent),
            });
        }
    }
    Err(StoreError::Database {
        context: "claiming an alert in backlog_alerts (other runners kept changing it)".into(),
        source: last_error.unwrap_or_else(|| "the row changed under every try".into()),
    })
}

/// Gives back the claim `claimed` made at `now_ms` for an alert that could not be
/// delivered: the row says again when the last one went out (the epoch for none), and
/// counts this one among those held back, with any held back meanwhile. A row another
/// runner has claimed since (past `alert_every`) is left as it is.
#[allow(clippy::too_many_arguments)] // the row's key, the claim and when it was made
pub fn release(
    sql: &mut dyn Sql,
    s: &str,
    table: &str,
    window_secs: u64,
    kind: &str,
    now_ms: i64,
    claimed: Claim,
) -> Result<(), StoreError> {
    let Claim::Send {
        held_back,
        last_sent_ms,
    } = claimed
    else {
        return Ok(());
    };
    let held_back = i64::try_from(held_back).unwrap_or(i64::MAX - 1) + 1;
    sql.execute(
        &format!(
            "UPDATE {s}backlog_alerts SET last_sent_ms = ?4, held_back = held_back + ?5 WHERE table_name = ?1 AND window_secs = ?2 AND kind = ?3 AND last_sent_ms = ?6"
        ),
        &[
            table.into(),
            (window_secs as i64).into(),
            kind.into(),
            last_sent_ms.unwrap_or(0).into(),
            held_back.into(),
            now_ms.into(),
        ],
    )
    .map_err(failed("writing backlog_alerts"))?;
    Ok(())
}

/// The window of the rows about the file's alert channels: no tier has it.
const CHANNELS: i64 = 0;

/// Something a tick found wrong with an alert channel (a variable `[alert]` names not
/// set where it ran, a delivery that failed), kept until a tick finds it right again:
/// the ticks' environment, not that of whoever runs `status --check`, is what sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlertTrouble {
    /// What is wrong, as the alerts name it.
    pub what: String,
    /// When a tick last found it (ms since the epoch, by the tick's clock).
    pub last_ms: i64,
    /// How many times in a row ticks found it.
    pub count: u64,
}

/// The troubles of `table`'s alert channels.
pub fn troubles(sql: &mut dyn Sql, s: &str, table: &str) -> Result<Vec<AlertTrouble>, StoreError> {
    let rows = sql
        .query(
            &format!(
                "SELECT kind, last_sent_ms, held_back FROM {s}backlog_alerts WHERE table_name = ?1 AND window_secs = ?2 ORDER BY kind"
            ),
            &[table.into(), CHANNELS.into()],
        )
        .map_err(failed("reading backlog_alerts"))?;
    Ok(rows
        .iter()
        .map(|row| AlertTrouble {
            what: row[0].text().unwrap_or_default(),
            last_ms: row[1].int().unwrap_or(0),
            count: row[2].int().unwrap_or(0).max(0) as u64,
        })
        .collect())
}

/// Notes that a tick found `what` wrong at `now_ms`: once more in a row.
pub fn note_trouble(
    sql: &mut dyn Sql,
    s: &str,
    table: &str,
    what: &str,
    now_ms: i64,
) -> Result<(), StoreError> {
    let params = [table.into(), CHANNELS.into(), what.into(), now_ms.into()];
    let update = format!(
        "UPDATE {s}backlog_alerts SET last_sent_ms = ?4, held_back = held_back + 1 WHERE table_name = ?1 AND window_secs = ?2 AND kind = ?3"
    );
    let changed = sql
        .execute(&update, &params)
        .map_err(failed("writing backlog_alerts"))?;
    if changed > 0 {
        return Ok(());
    }
    let insert = format!(
        "INSERT INTO {s}backlog_alerts (table_name, window_secs, kind, last_sent_ms, held_back) VALUES (?1, ?2, ?3, ?4, 1)"
    );
    // Another tick's insert came first: the row is there to count on.
    if sql.execute(&insert, &params).is_err() {
        sql.execute(&update, &params)
            .map_err(failed("writing backlog_alerts"))?;
    }
    Ok(())
}

/// Notes that a tick found `what` right again.
pub fn clear_trouble(
    sql: &mut dyn Sql,
    s: &str,
    table: &str,
    what: &str,
) -> Result<(), StoreError> {
    sql.execute(
        &format!(
            "DELETE FROM {s}backlog_alerts WHERE table_name = ?1 AND window_secs = ?2 AND kind = ?3"
        ),
        &[table.into(), CHANNELS.into(), what.into()],
    )
    .map_err(failed("writing backlog_alerts"))?;
    Ok(())
}

/// The prefix of the rows that say a tier alerted and has not ticked clean since:
/// `open:tick_failed`, one per kind, its `last_sent_ms` when it first went out.
const OPEN: &str = "open:";

/// Notes that an alert of `kind` about the tier of `window_secs` went out at
/// `since_ms`, so that its next clean tick sends `resolved`: a row per kind, kept
/// from the first (a row already there stays as it is).
pub fn open(
    sql: &mut dyn Sql,
    s: &str,
    table: &str,
    window_secs: u64,
    kind: &str,
    since_ms: i64,
) -> Result<(), StoreError> {
    let kind = format!("{OPEN}{kind}");
    let key = [
        table.into(),
        (window_secs as i64).into(),
        kind.as_str().into(),
    ];
    let there = format!(
        "SELECT 1 FROM {s}backlog_alerts WHERE table_name = ?1 AND window_secs = ?2 AND kind = ?3"
    );
    if !sql
        .query(&there, &key)
        .map_err(failed("reading backlog_alerts"))?
        .is_empty()
    {
        return Ok(());
    }
    let insert = format!(
        "INSERT INTO {s}backlog_alerts (table_name, window_secs, kind, last_sent_ms, held_back) VALUES (?1, ?2, ?3, ?4, 0)"
    );
    let mut params = key.to_vec();
    params.push(since_ms.into());
    match sql.execute(&insert, &params) {
        Ok(_) => Ok(()),
        // Another runner's row went in first: the tier is open all the same.
        Err(e) => match sql.query(&there, &key) {
            Ok(rows) if !rows.is_empty() => Ok(()),
            _ => Err(StoreError::Database {
                context: "writing backlog_alerts".into(),
                source: e,
            }),
        },
    }
}

/// Takes the open alerts of the tier of `window_secs`: the kinds and when each first
/// went out, deleted as they are read. A row is this caller's only if its delete
/// took it, so of two runners that tick clean at once one sends `resolved`.
pub fn take_open(
    sql: &mut dyn Sql,
    s: &str,
    table: &str,
    window_secs: u64,
) -> Result<Vec<(String, i64)>, StoreError> {
    let rows = sql
        .query(
            &format!(
                "SELECT kind, last_sent_ms FROM {s}backlog_alerts WHERE table_name = ?1 AND window_secs = ?2 AND kind LIKE ?3 ORDER BY kind"
            ),
            &[
                table.into(),
                (window_secs as i64).into(),
                format!("{OPEN}%").as_str().into(),
            ],
        )
        .map_err(failed("reading backlog_alerts"))?;
    let mut taken = Vec::new();
    for row in rows {
        let kind = row[0].text().unwrap_or_default();
        let deleted = sql
            .execute(
                &format!(
                    "DELETE FROM {s}backlog_alerts WHERE table_name = ?1 AND window_secs = ?2 AND kind = ?3"
                ),
                &[table.into(), (window_secs as i64).into(), kind.as_str().into()],
            )
            .map_err(failed("writing backlog_alerts"))?;
        if deleted == 1
            && let Some(kind) = kind.strip_prefix(OPEN)
        {
            taken.push((kind.to_string(), row[1].int().unwrap_or(0)));
        }
    }
    Ok(taken)
}

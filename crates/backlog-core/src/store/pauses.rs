//! `backlog_pauses`: tiers a person paused, kept in the database so every runner on
//! every host obeys (`run`, the daemon, the crontab lines).
//!
//! A pause is lifted by a person (`backlog resume`), never by the tool: `--until` says
//! when it was meant to end, and past it `status --check` warns, so a pause is not
//! forgotten, and a counterpart still down at that hour is not hammered at 3 a.m.

use chrono::{DateTime, TimeZone as _, Utc};

use super::StoreError;
use super::sql::{Sql, Value, failed};

/// The table: a row per paused tier (window 0: every tier).
pub const TABLE: super::tables::Table = super::tables::Table {
    name: "backlog_pauses",
    columns: "table_name {key} NOT NULL,
        window_secs {bigint} NOT NULL,
        since_ms {bigint} NOT NULL,
        until_ms {bigint},
        reason {text},
        by_whom {text} NOT NULL",
    key: Some("table_name, window_secs"),
    indexes: &[],
    mark: "by_whom",
};

/// A pause of one tier, or of all (`window_secs` 0).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Pause {
    /// The tier's window in seconds; 0: every tier of the table.
    pub window_secs: u64,
    /// When it was paused.
    pub since: DateTime<Utc>,
    /// When the person meant it to end (it lasts until `backlog resume` all the same).
    pub until: Option<DateTime<Utc>>,
    /// Why, in the words of the person who paused it (`backlog pause --reason`).
    pub reason: Option<String>,
    /// Who paused it: user@host.
    pub by: String,
}

impl Pause {
    /// `the 7d tier` or `every tier`.
    pub fn what(&self) -> String {
        match self.window_secs {
            0 => "every tier".into(),
            w => format!(
                "the {} tier",
                crate::duration::compact(std::time::Duration::from_secs(w))
            ),
        }
    }

    /// The command that lifts it: `backlog resume`, or `backlog resume --window 7d`.
    pub fn resume_command(&self) -> String {
        match self.window_secs {
            0 => "backlog resume".into(),
            w => format!(
                "backlog resume --window {}",
                crate::duration::compact(std::time::Duration::from_secs(w))
            ),
        }
    }

    /// One line: `paused since … by …: reason; meant to end at …`.
    pub fn describe(&self) -> String {
        let show = crate::duration::instant;
        let mut text = format!("paused since {} by {}", show(self.since), self.by);
        if let Some(reason) = &self.reason {
            text.push_str(&format!(": {reason}"));
        }
        if let Some(until) = self.until {
            text.push_str(&format!("; meant to end at {}", show(until)));
        }
        text
    }
}

/// Pauses a tier (or every tier), replacing an earlier pause of the same.
pub fn pause(sql: &mut dyn Sql, s: &str, table: &str, pause: &Pause) -> Result<(), StoreError> {
    sql.execute(
        &format!(
            "INSERT INTO {s}backlog_pauses (table_name, window_secs, since_ms, until_ms, reason, by_whom)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6) {}",
            sql.upsert(
                &["table_name", "window_secs"],
                &["since_ms", "until_ms", "reason", "by_whom"]
            )
        ),
        &[
            table.into(),
            (pause.window_secs as i64).into(),
            pause.since.timestamp_millis().into(),
            pause.until.map(|t| t.timestamp_millis()).into(),
            pause.reason.as_deref().into(),
            pause.by.as_str().into(),
        ],
    )
    .map_err(failed("writing backlog_pauses"))?;
    Ok(())
}

/// Lifts the pause of a tier (`Some(window)`) or every pause of the table (`None`);
/// returns how many were lifted.
pub fn resume(
    sql: &mut dyn Sql,
    s: &str,
    table: &str,
    window_secs: Option<u64>,
) -> Result<u64, StoreError> {
    let context = "writing backlog_pauses";
    match window_secs {
        Some(w) => sql.execute(
            &format!("DELETE FROM {s}backlog_pauses WHERE table_name = ?1 AND window_secs = ?2"),
            &[table.into(), (w as i64).into()],
        ),
        None => sql.execute(
            &format!("DELETE FROM {s}backlog_pauses WHERE table_name = ?1"),
            &[table.into()],
        ),
    }
    .map_err(failed(context))
}

/// The pauses of the table, every-tier first, then by window.
pub fn list(sql: &mut dyn Sql, s: &str, table: &str) -> Result<Vec<Pause>, StoreError> {
    let rows = sql
        .query(
            &format!(
                "SELECT window_secs, since_ms, until_ms, reason, by_whom FROM {s}backlog_pauses WHERE table_name = ?1 ORDER BY window_secs"
            ),
            &[table.into()],
        )
        .map_err(failed("reading backlog_pauses"))?;
    let time = |v: &Value| v.int().and_then(|ms| Utc.timestamp_millis_opt(ms).single());
    Ok(rows
        .iter()
        .map(|r| Pause {
            window_secs: r[0].int().unwrap_or(0) as u64,
            since: time(&r[1]).unwrap_or_default(),
            until: time(&r[2]),
            reason: r[3].text(),
            by: r[4].text().unwrap_or_default(),
        })
        .collect())
}

//! The `[table]` section: the user's table as the tool sees it, its columns and the
//! status values a tick reads and writes. A record marked successful is never one a
//! tick takes again: `success` may not be among the `pending` statuses.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::KeyError;
use super::retry::{RawRetry, RetryConfig, resolve_retry};
use crate::timestamp::FormatSetting;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTable {
    name: String,
    id: String,
    status: String,
    inserted_at: String,
    #[serde(default)]
    inserted_at_format: FormatSetting,
    inserted_at_timezone: Option<String>,
    pending: Option<Vec<String>>,
    success: Option<String>,
    error: Option<String>,
    given_up: Option<String>,
    give_up_after: Option<u32>,
    #[serde(default)]
    labels: BTreeMap<String, String>,
}

/// The `[table]` section: names and status values of the user's table.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct TableConfig {
    /// The user's table, as `table.name` writes it (PostgreSQL: optionally `schema.table`).
    pub name: String,
    /// The column that identifies a record (`table.id`): pages and marks find records
    /// by it.
    pub id: String,
    /// The column holding each record's status (`table.status`): the only column of the
    /// user's table the tool writes, unless `[retry]` names two more.
    pub status: String,
    /// The column holding when the record was inserted (`table.inserted_at`): a
    /// record's age, and so its band, is measured from it.
    pub inserted_at: String,
    /// How the inserted-at values are written; `auto` detects it from the column.
    pub inserted_at_format: FormatSetting,
    /// The zone a `timestamp` (without time zone) column is written in; UTC if unset.
    pub inserted_at_timezone: Option<chrono_tz::Tz>,
    /// The statuses a tick takes records in (`table.pending`): by default `NEW` and
    /// `ERROR`, so a failed record is tried again as the schedule comes round.
    pub pending: Vec<String>,
    /// The status a record gets when its handler succeeds (`table.success`).
    pub success: String,
    /// The status a record gets when its handler fails, times out or crashes
    /// (`table.error`), unless `handler.exit_codes` maps its exit code to another.
    pub error: String,
    /// The status of a record the tool gave up on (`table.given_up`, off unless set):
    /// one still pending past the last tier's window, or failed `give_up_after` times.
    /// Not pending; `backlog retry` takes it all the same.
    pub given_up: Option<String>,
    /// How many failures in a row give a record up (`table.give_up_after`), counted in
    /// the tool's own tables; none: only age gives up.
    pub give_up_after: Option<u32>,
    /// The `[retry]` section, if the file has one.
    pub retry: Option<RetryConfig>,
    /// Names people read for status values (`table.labels`), where the column holds
    /// codes: `{ "0" = "pending", "1" = "done" }`. Shown in logs, summaries, `show`,
    /// `status` and the dashboard; the table, the JSON and the metrics keep the values.
    pub labels: Labels,
    /// Columns other sections of the file name (`handler.rate_key`), as the file's key
    /// and the column: `inspect` checks that the table has them.
    pub other_columns: Vec<(&'static str, String)>,
}

/// The names of status values (`table.labels`), for what people read.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[serde(transparent)]
#[non_exhaustive]
pub struct Labels(pub BTreeMap<String, String>);

impl Labels {
    /// A status as people read it: its label, or the value itself.
    pub fn of<'a>(&'a self, status: &'a str) -> &'a str {
        self.0.get(status).map_or(status, String::as_str)
    }
}

impl TableConfig {
    /// A table with the given names and the default statuses (`NEW`/`ERROR` pending,
    /// `SUCCESS`, `ERROR`) and detected timestamp format.
    pub fn new(name: &str, id: &str, status: &str, inserted_at: &str) -> Self {
        TableConfig {
            name: name.into(),
            id: id.into(),
            status: status.into(),
            inserted_at: inserted_at.into(),
            inserted_at_format: FormatSetting::Auto,
            inserted_at_timezone: None,
            pending: vec!["NEW".into(), "ERROR".into()],
            success: "SUCCESS".into(),
            error: "ERROR".into(),
            given_up: None,
            give_up_after: None,
            retry: None,
            labels: Labels::default(),
            other_columns: Vec::new(),
        }
    }

    /// A status as people read it: its label (`table.labels`), or the value itself.
    pub fn label<'a>(&'a self, status: &'a str) -> &'a str {
        self.labels.of(status)
    }

    /// Whether a record with this status is one a tick takes (it is in `pending`).
    pub fn is_pending(&self, status: &str) -> bool {
        self.pending.iter().any(|p| p == status)
    }
}

pub(super) fn resolve_table(
    raw: RawTable,
    retry: Option<RawRetry>,
) -> Result<TableConfig, KeyError> {
    for (key, value) in [
        ("name", &raw.name),
        ("id", &raw.id),
        ("status", &raw.status),
        ("inserted_at", &raw.inserted_at),
    ] {
        if value.trim().is_empty() {
            return Err(KeyError::new(format!(
                "table.{key} is empty; give the name as it is in the database"
            )));
        }
    }
    let mut table = TableConfig::new(&raw.name, &raw.id, &raw.status, &raw.inserted_at);
    table.inserted_at_format = raw.inserted_at_format;
    table.inserted_at_timezone = raw
        .inserted_at_timezone
        .map(|name| {
            name.parse().map_err(|_| {
                format!("table.inserted_at_timezone: {name:?} is not a time zone name; use an IANA name like \"Europe/Paris\" or \"UTC\"")
            })
        })
        .transpose()?;
    if let Some(pending) = raw.pending {
        if pending.is_empty() {
            return Err(
                "table.pending is empty; list the statuses to retry, like [\"NEW\", \"ERROR\"]"
                    .into(),
            );
        }
        table.pending = pending;
    }
    table.retry = retry.map(resolve_retry).transpose()?;
    if let Some((value, _)) = raw.labels.iter().find(|(_, l)| l.trim().is_empty()) {
        return Err(KeyError::new(format!(
            "table.labels: the label of {value:?} is empty; give the name to show for it, like labels = {{ \"0\" = \"pending\" }}"
        )));
    }
    table.labels = Labels(raw.labels);
    table.success = raw.success.unwrap_or(table.success);
    table.error = raw.error.unwrap_or(table.error);
    if table.is_pending(&table.success) {
        return Err(KeyError::new(format!(
            "table.success {:?} is also in table.pending; a record marked successful would be tried forever",
            table.success
        )));
    }
    table.given_up = raw.given_up;
    table.give_up_after = raw.give_up_after;
    check_giving_up(&table)?;
    Ok(table)
}

/// The most failures `table.give_up_after` counts.
pub const GIVE_UP_AFTER_MAX: u32 = 1000;

/// `given_up` is a status of its own, neither pending nor success, and
/// `give_up_after` needs it.
fn check_giving_up(table: &TableConfig) -> Result<(), KeyError> {
    match &table.given_up {
        Some(s) if s.trim().is_empty() => {
            return Err(
                "table.given_up is empty; name the status of a record the tool gave up on, like \"DEAD\", or leave it out".into(),
            );
        }
        Some(s) if table.is_pending(s) => {
            return Err(KeyError::new(format!(
                "table.given_up {s:?} is also in table.pending; a record given up on would be tried again: give it a status of its own, like \"DEAD\""
            )));
        }
        Some(s) if *s == table.success => {
            return Err(KeyError::new(format!(
                "table.given_up {s:?} is table.success; a record given up on would read as done: give it a status of its own, like \"DEAD\""
            )));
        }
        _ => {}
    }
    match table.give_up_after {
        Some(_) if table.given_up.is_none() => Err(
            "table.give_up_after needs table.given_up, the status a record gets once given up on, like given_up = \"DEAD\"".into(),
        ),
        Some(n) if n == 0 || n > GIVE_UP_AFTER_MAX => Err(KeyError::new(format!(
            "table.give_up_after = {n} is out of range; give 1 to {GIVE_UP_AFTER_MAX} failures"
        ))),
        _ => Ok(()),
    }
}

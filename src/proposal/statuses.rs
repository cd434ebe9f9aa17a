//! The statuses `init` proposes from a status column's values: which look pending,
//! failed or done, and the guesses where none does, in the case of the table's own.

use backlog_core::store::{Kind, TableColumn};

use super::Request;
use crate::error::Error;

/// A column's values and how many records hold each, the most common first.
pub(super) type Values = Vec<(String, u64)>;

/// Words of a status a record waits in, and of one that failed and is tried again
/// (compared in lower case, with `-` and spaces as `_`).
const PENDING: &[&str] = &[
    "new",
    "pending",
    "queued",
    "queue",
    "waiting",
    "ready",
    "todo",
    "open",
    "created",
    "scheduled",
    "unsent",
    "unprocessed",
    "initial",
    "received",
    "submitted",
    "retry",
    "retrying",
    "retryable",
];
const FAILED: &[&str] = &[
    "error",
    "errored",
    "errors",
    "failed",
    "failure",
    "fail",
    "failing",
    "retry",
    "retrying",
    "retryable",
    "temp_fail",
    "tempfail",
];
/// Words of a status a record is done in.
const DONE: &[&str] = &[
    "success",
    "succeeded",
    "successful",
    "done",
    "sent",
    "delivered",
    "complete",
    "completed",
    "ok",
    "processed",
    "finished",
    "closed",
    "shipped",
    "paid",
    "synced",
    "published",
    "acknowledged",
    "acked",
    "accepted",
    "imported",
    "exported",
    "uploaded",
    "notified",
    "handled",
];

/// What a status value looks like.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Look {
    Pending,
    Failed,
    Done,
    Neither,
}

pub(super) fn look(value: &str) -> Look {
    let word = value.trim().to_lowercase().replace(['-', ' '], "_");
    if FAILED.contains(&word.as_str()) {
        Look::Failed
    } else if PENDING.contains(&word.as_str()) {
        Look::Pending
    } else if DONE.contains(&word.as_str()) {
        Look::Done
    } else {
        Look::Neither
    }
}

/// The statuses proposed from a status column's values.
pub(super) struct Statuses {
    pub(super) pending: Vec<String>,
    pub(super) success: String,
    pub(super) error: String,
    /// How they were read, for the file's comment and the output: a line each.
    pub(super) said: Vec<String>,
}

impl Statuses {
    /// The statuses proposed from the column's values (and an enumeration's labels no
    /// record holds yet, counted 0), those given by flags taken as given.
    pub(super) fn of(
        column: &TableColumn,
        values: &[(String, u64)],
        table: &str,
        given: &Request<'_>,
    ) -> Result<Statuses, Error> {
        let mut values: Values = values.to_vec();
        for label in &column.labels {
            if !values.iter().any(|(v, _)| v == label) {
                values.push((label.clone(), 0));
            }
        }
        let given_any =
            !given.pending.is_empty() || given.success.is_some() || given.error.is_some();
        let of = |wanted: &[Look]| -> Vec<&(String, u64)> {
            values
                .iter()
                .filter(|(v, _)| wanted.contains(&look(v)))
                .collect()
        };
        let show = |list: &[&(String, u64)]| {
            list.iter()
                .map(|(v, n)| format!("{v:?} {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        // The statuses records wait in first, then those of failed records.
        let mut waiting = of(&[Look::Pending, Look::Failed]);
        waiting.sort_by_key(|(v, _)| look(v) == Look::Failed);
        let done = of(&[Look::Done]);
        if !values.is_empty() && waiting.is_empty() && done.is_empty() && !given_any {
            return Err(Error::Usage(format!(
                "none of {}'s values ({}) looks like a status backlog knows (NEW, PENDING, ERROR, SUCCESS, DONE…); give them with --pending, --success and --error (like --pending 0 --success 1 --error 2){}",
                column.name,
                show(&values.iter().collect::<Vec<_>>()),
                if given.status.is_some() {
                    String::new()
                } else {
                    ", or name another column with --status".to_string()
                }
            )));
        }
        // Written like the table's own values: `SUCCESS` beside `NEW`, `success` beside
        // `new`, `Success` beside `New`; an empty table takes the tool's own, `NEW`.
        let like = |word: &str| {
            let all = |f: fn(&str) -> bool| !values.is_empty() && values.iter().all(|(v, _)| f(v));
            if all(|v| !v.chars().any(char::is_uppercase)) {
                word.to_lowercase()
            } else if all(|v| {
                let mut c = v.chars();
                c.next().is_some_and(char::is_uppercase) && !c.any(char::is_uppercase)
            }) {
                let mut c = word.chars();
                c.next().map_or_else(String::new, |f| {
                    f.to_uppercase()
                        .chain(c.flat_map(char::to_lowercase))
                        .collect()
                })
            } else {
                word.to_uppercase()
            }
        };
        let mut said = Vec::new();
        if values.is_empty() {
            said.push(format!(
                "table {table} has no record with a status yet, so the statuses are guesses: set them to those your application writes"
            ));
        }
        let mut pending: Vec<String> = if !given.pending.is_empty() {
            said.push(format!("pending: {:?}, as --pending says", given.pending));
            given.pending.to_vec()
        } else if waiting.is_empty() {
            let new = like("new");
            said.push(format!(
                "no value looks pending (so {new:?}, a guess: set table.pending to the status your application inserts records with)"
            ));
            vec![new]
        } else {
            said.push(format!("pending: {}", show(&waiting)));
            if !waiting.iter().any(|(v, _)| look(v) == Look::Pending) {
                said.push(format!(
                    "no value looks like a new record's status (only failed ones): a record your application inserts with another status than {} is never selected; add it to table.pending",
                    waiting.iter().map(|(v, _)| format!("{v:?}")).collect::<Vec<_>>().join(", ")
                ));
            }
            waiting.iter().map(|(v, _)| v.clone()).collect()
        };
        let success = match (given.success, done.first()) {
            (Some(v), _) => {
                said.push(format!("done: {v:?}, as --success says"));
                v.to_string()
            }
            (None, Some((v, _))) => {
                said.push(format!("done: {}", show(&done)));
                v.clone()
            }
            (None, None) => {
                let success = like("success");
                said.push(format!(
                    "no value looks done yet (so success = {success:?}, a guess: set it to what your application writes when a record went through)"
                ));
                success
            }
        };
        let failed = of(&[Look::Failed]);
        let error = match (given.error, failed.first()) {
            (Some(v), _) => {
                said.push(format!("failed: {v:?}, as --error says"));
                v.to_string()
            }
            (None, Some((v, _))) => v.clone(),
            // An enumeration takes no new label: a failure keeps a pending one.
            (None, None) if column.kind == Kind::Enum => {
                let e = pending[0].clone();
                said.push(format!(
                    "no value looks failed, so a failed record is written back as {e:?} (table.error), still pending; add a label of its own to tell failures apart"
                ));
                e
            }
            (None, None) => {
                let e = like("error");
                said.push(format!(
                    "no value looks failed yet (so error = {e:?}, also pending, a guess: a failed record is tried again on the schedule)"
                ));
                if given.pending.is_empty() {
                    pending.push(e.clone());
                }
                e
            }
        };
        let named = |v: &str| pending.iter().any(|p| p == v) || v == success || v == error;
        let neither: Vec<&(String, u64)> = values.iter().filter(|(v, _)| !named(v)).collect();
        if !neither.is_empty() {
            said.push(format!("neither, so never selected: {}", show(&neither)));
        }
        Ok(Statuses {
            pending,
            success,
            error,
            said,
        })
    }
}

//! A row of the records list: what a person on call asks first of a record, as `show`
//! says it: its last error (cut to a line; whole in the cell's title and on the
//! record's page), its failures kept, and when a tick takes it next, or why none does
//! (given up; snoozed, by whom and until when). A few reads a record, a page of
//! records at most.

use chrono::{DateTime, Utc};
use maud::{Markup, html};

use super::pages;
use crate::error::Error;
use crate::operate::Kept;
use backlog::explain::NextTry;
use backlog_core::config::Config;
use backlog_core::record::Record;
use backlog_core::store::{Attempt, AttemptQuery, Store};

/// The characters of a record's last error its row shows (the rest is in the cell's
/// title, and on the record's page).
const ERROR_SHOWN: usize = 120;

/// A record as the list shows it.
pub(super) struct Row {
    pub(super) record: Record,
    /// Its newest failure kept, if any.
    last_failure: Option<Attempt>,
    /// Its failures kept (the history keeps a record's newest `max_per_record`).
    failures: u64,
    /// When a tick takes it next (`operate::next_try`, as `show` says it); none for a
    /// given-up record, which only a retry takes, and one whose age cannot be read.
    next: Option<NextTry>,
    /// Why it is kept from the ticks, if it is (a snooze, a failure's slot).
    kept: Option<(Kept, DateTime<Utc>)>,
    given_up: bool,
}

/// What the list says of each of `records`: a few reads a record, a page at most.
pub(super) fn rows(
    config: &Config,
    store: &mut dyn Store,
    records: Vec<Record>,
    now: DateTime<Utc>,
) -> Result<Vec<Row>, Error> {
    let store_err = Error::store(store.describe());
    let curve = backlog_core::curve::Curve::of(&config.table)?;
    let held = store
        .holders(&records.iter().collect::<Vec<_>>())
        .map_err(&store_err)?;
    let mut rows = Vec::with_capacity(records.len());
    for (record, held) in records.into_iter().zip(held) {
        let of = |limit, successes| AttemptQuery {
            record_id: Some(record.id.to_string()),
            limit,
            successes,
            ..AttemptQuery::default()
        };
        let last_failure = store.attempts(&of(1, false)).map_err(&store_err)?.pop();
        let failures = store.attempt_count(&of(1, false)).map_err(&store_err)?;
        let kept = match &held {
            Some(h) if h.owner.is_none() => {
                let newest = store.attempts(&of(1, true)).map_err(&store_err)?;
                Some((Kept::of(newest.first()), h.until))
            }
            _ => None,
        };
        let given_up = config.table.given_up.as_deref() == Some(&*record.status);
        let next = (!given_up)
            .then(|| crate::operate::next_try(config, curve.as_ref(), &record, held.as_ref(), now))
            .flatten();
        rows.push(Row {
            record,
            last_failure,
            failures,
            next,
            kept,
            given_up,
        });
    }
    Ok(rows)
}

impl Row {
    /// The row's cells after the record's own (id, status, inserted): last error,
    /// failures, next try.
    pub(super) fn cells(&self, now: DateTime<Utc>) -> Markup {
        html! {
            @match &self.last_failure {
                Some(a) => { td.error title={ (a.detail) @if !a.output.is_empty() { "\n" (a.output) } } {
                    (pages::cut(super::data::error_line(a), ERROR_SHOWN)) } },
                None => { td.muted { "none kept" } },
            }
            td.num { (self.failures) }
            td { (next_cell(self, now)) }
        }
    }
}

/// The cell that says when a tick takes a record next, or why none does.
fn next_cell(row: &Row, now: DateTime<Utc>) -> Markup {
    html! {
        @if row.given_up {
            "never: given up (a retry brings it back)"
        } @else if let Some(next) = &row.next {
            @match (next.by_tier, next.at) {
                (Some(n), Some(at)) => {
                    span title=(pages::when(at)) { (pages::ago(at, now)) }
                    div.detail { "by tier " (n) @if let Some(note) = next.retry_note() { ", once " (note) } }
                },
                _ => { "never: " (next.never_why()) },
            }
        } @else {
            "–"
        }
        @if let Some((why, until)) = &row.kept {
            @if why.is_snooze() { div.detail.snoozed { (why.describe()) ", until " (pages::when(*until)) } }
        }
    }
}

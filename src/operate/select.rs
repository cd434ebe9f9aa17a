//! Which records a person's action takes (`retry`, `snooze`, `give-up`, and the
//! dashboard's): ids, or a filter (a status, a tier's band, an age, the outcome or
//! the text of their failures), of which only pending records are kept.

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::error::Error;
use backlog_core::config::Config;
use backlog_core::record::Record;
use backlog_core::store::{AttemptQuery, BandQuery, Cursor, Store};

/// Which records an action takes.
#[derive(Debug, Clone)]
pub enum Selection {
    /// These ids.
    Ids(Vec<String>),
    /// The pending records a filter picks.
    Filter(Filter),
}

/// The pending records an action takes: all that every given part picks, at most
/// `limit`.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Filter {
    /// Only this status, which must be pending; none: every pending status.
    pub status: Option<String>,
    /// Only the records in this tier's band (by its window) at `now`.
    pub tier: Option<Duration>,
    /// Only records inserted before this.
    pub before: Option<DateTime<Utc>>,
    /// Only records with a failed attempt of this outcome (`error`, `timeout`…).
    pub outcome: Option<String>,
    /// Only records with a failed attempt whose detail or output holds this text, in
    /// any case.
    pub error_contains: Option<String>,
    /// At most this many.
    pub limit: usize,
    /// The clock a tier's band is placed by.
    pub now: DateTime<Utc>,
}

impl Filter {
    /// A filter of every pending record, up to `limit`, with the bands placed at `now`.
    pub fn new(limit: usize, now: DateTime<Utc>) -> Self {
        Filter {
            status: None,
            tier: None,
            before: None,
            outcome: None,
            error_contains: None,
            limit,
            now,
        }
    }
}

/// The records an action would take, and why the others named are not taken.
#[derive(Debug, Clone, Default)]
pub struct RetryPlan {
    /// The pending records found, in the selection's order.
    pub records: Vec<Record>,
    /// One line per id left out, with why: no such record, or not pending.
    pub refused: Vec<String>,
    /// The filter's limit, when more records match it than it took.
    pub more_than: Option<usize>,
}

/// How many failed attempts a filter on attempts reads, newest first, at most: the
/// records it finds are those it reads of.
pub const ATTEMPTS_READ: usize = 20_000;

/// Attempts read at once (each with its output, up to 4 KiB).
const ATTEMPTS_PAGE: usize = 500;

/// Looks the records of a selection up for `action` (`retry`, `snooze`, `give-up`),
/// which takes pending records only.
pub fn plan(
    config: &Config,
    store: &mut dyn Store,
    selection: &Selection,
    action: &str,
) -> Result<RetryPlan, Error> {
    match selection {
        Selection::Ids(ids) => by_ids(config, store, ids, action),
        Selection::Filter(filter) => {
            // One more than the limit read: whether more match, to say so.
            let wider = Filter {
                limit: filter.limit + 1,
                ..filter.clone()
            };
            let mut records = filtered(config, store, &wider, action)?;
            let more = records.len() > filter.limit;
            records.truncate(filter.limit);
            Ok(RetryPlan {
                records,
                refused: Vec::new(),
                more_than: more.then_some(filter.limit),
            })
        }
    }
}

fn by_ids(
    config: &Config,
    store: &mut dyn Store,
    ids: &[String],
    action: &str,
) -> Result<RetryPlan, Error> {
    let store_err = Error::store(store.describe());
    let mut plan = RetryPlan::default();
    for id in ids {
        let found = match store.find(id) {
            // Said as the store says it: `"abc" is not an id of table …`.
            Err(e @ backlog_core::store::StoreError::NotAnId { .. }) => {
                plan.refused.push(e.to_string());
                continue;
            }
            found => found.map_err(&store_err)?,
        };
        match found {
            None => plan.refused.push(format!("{id:?}: no such record")),
            Some(r) if !config.table.is_pending(&r.status) => plan.refused.push(format!(
                "{id:?}: {} is not pending (a {action} takes records of {})",
                r.status,
                config.table.pending.join(", ")
            )),
            Some(r) if plan.records.iter().any(|p| p.id == r.id) => plan
                .refused
                .push(format!("{id:?}: record {} is named twice", r.id)),
            Some(r) => plan.records.push(r),
        }
    }
    Ok(plan)
}

/// The pending records `filter` picks: read from the failed attempts it names, else
/// from its tier's band (newest first, as a tick reads it), else the oldest of its
/// statuses.
fn filtered(
    config: &Config,
    store: &mut dyn Store,
    filter: &Filter,
    action: &str,
) -> Result<Vec<Record>, Error> {
    let store_err = Error::store(store.describe());
    let statuses = match &filter.status {
        Some(status) if !config.table.is_pending(status) => {
            return Err(Error::Usage(format!(
                "--status {status:?} is not one of table.pending ({}): a {action} takes pending records only",
                config.table.pending.join(", ")
            )));
        }
        Some(status) => vec![status.clone()],
        // A retry takes given-up records (`for_retry`), but only those it is asked for
        // by id or by their status: a filter of failures does not bring them back.
        None => config
            .table
            .pending
            .iter()
            .filter(|s| config.table.given_up.as_ref() != Some(*s))
            .cloned()
            .collect(),
    };
    let band = filter
        .tier
        .map(|window| {
            super::tier_window(config, window)?;
            Ok::<_, Error>(config.schedule.band(window).span(filter.now))
        })
        .transpose()?;
    let keep = |r: &Record| {
        statuses.iter().any(|s| **s == *r.status)
            && match (filter.before, r.inserted_time) {
                (Some(before), Some(t)) => t < before,
                (Some(_), None) => false,
                (None, _) => true,
            }
            && band.as_ref().is_none_or(|b| {
                r.inserted_time
                    .is_some_and(|t| t >= b.from && (t < b.to || (b.to_inclusive && t == b.to)))
            })
    };
    if filter.outcome.is_some() || filter.error_contains.is_some() {
        return from_attempts(store, filter, &keep);
    }
    if let Some(span) = &band {
        return from_band(store, filter, span, &keep);
    }
    store
        .oldest_of(&statuses, filter.before, filter.limit)
        .map_err(&store_err)
}

/// The records of the newest failed attempts of `filter`'s outcome and text that
/// `keep` keeps, newest first.
fn from_attempts(
    store: &mut dyn Store,
    filter: &Filter,
    keep: &dyn Fn(&Record) -> bool,
) -> Result<Vec<Record>, Error> {
    let mut records: Vec<Record> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let query = AttemptQuery {
        outcomes: filter.outcome.iter().cloned().collect(),
        ..AttemptQuery::default()
    };
    let text = ErrorText::new(filter.error_contains.as_deref().unwrap_or_default());
    attempts_holding(store, &query, &text, &mut |store, a| {
        if records.len() >= filter.limit {
            return Ok(false);
        }
        if seen.insert(a.record_id.clone())
            && let Some(r) = store
                .find(&a.record_id)
                .map_err(Error::store(store.describe()))?
            && keep(&r)
        {
            records.push(r);
        }
        Ok(records.len() < filter.limit)
    })?;
    Ok(records)
}

/// What a failure's error must hold to be picked (`--error-contains`, the dashboard's
/// `error_contains`): a text, in any case, in the attempt's detail or output.
/// Matched here, not by the database: every database folds the case of non-ASCII
/// text its own way (SQLite's LOWER only ASCII's).
#[derive(Debug, Clone)]
pub struct ErrorText(Option<String>);

impl ErrorText {
    /// The text to look for; empty (or blank) picks every failure.
    pub fn new(text: &str) -> Self {
        ErrorText(
            Some(text.trim())
                .filter(|t| !t.is_empty())
                .map(str::to_lowercase),
        )
    }

    /// Whether it picks every failure.
    pub fn is_any(&self) -> bool {
        self.0.is_none()
    }

    /// Whether `attempt`'s detail or output holds the text.
    pub fn holds(&self, attempt: &backlog_core::store::Attempt) -> bool {
        self.0.as_deref().is_none_or(|t| {
            attempt.detail.to_lowercase().contains(t) || attempt.output.to_lowercase().contains(t)
        })
    }
}

/// Hands `visit` the attempts `query` picks (its outcomes and tier; not its limit or
/// offset) whose error holds `text`, newest first, with the store to look records up
/// in, until it says stop (false), reading
/// at most `ATTEMPTS_READ` of them. Returns whether it stopped at that bound with more
/// left unread: what a page that counts them says.
pub fn attempts_holding(
    store: &mut dyn Store,
    query: &AttemptQuery,
    text: &ErrorText,
    visit: &mut dyn FnMut(&mut dyn Store, backlog_core::store::Attempt) -> Result<bool, Error>,
) -> Result<bool, Error> {
    let store_err = Error::store(store.describe());
    let mut query = AttemptQuery {
        limit: ATTEMPTS_PAGE,
        offset: 0,
        ..query.clone()
    };
    while query.offset < ATTEMPTS_READ {
        let attempts = store.attempts(&query).map_err(&store_err)?;
        let read = attempts.len();
        for a in attempts.into_iter().filter(|a| text.holds(a)) {
            if !visit(&mut *store, a)? {
                return Ok(false);
            }
        }
        if read < ATTEMPTS_PAGE {
            return Ok(false);
        }
        query.offset += ATTEMPTS_PAGE;
    }
    Ok(true)
}

/// The records of a tier's band now that `keep` keeps, newest first, as a tick reads
/// them.
fn from_band(
    store: &mut dyn Store,
    filter: &Filter,
    span: &backlog_core::schedule::Span,
    keep: &dyn Fn(&Record) -> bool,
) -> Result<Vec<Record>, Error> {
    let store_err = Error::store(store.describe());
    let mut records: Vec<Record> = Vec::new();
    let format = store.inspect().map_err(&store_err)?;
    let query = BandQuery {
        from: format.encode(span.from),
        to: format.encode(span.to),
        to_inclusive: span.to_inclusive,
        take_tried: true,
        clock: filter.now,
        wants_all: true,
    };
    let mut after: Option<Cursor> = None;
    while records.len() < filter.limit {
        let page = store
            .select(&query, after.as_ref(), 1_000)
            .map_err(&store_err)?;
        let Some(last) = page.last() else {
            break;
        };
        after = Some(Cursor::after(last));
        let full = page.len() == 1_000;
        records.extend(page.into_iter().filter(|r| keep(r)));
        if !full {
            break;
        }
    }
    records.truncate(filter.limit);
    Ok(records)
}

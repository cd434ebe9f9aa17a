//! Giving up on records that outlived the schedule: a pending record older than the
//! last tier's window is in no band, so no tick would ever take it again; with
//! `table.given_up` set, each tick of the last tier marks such records with that
//! status at its end, an attempt `given_up` each, so they are counted (`status`, the
//! metrics, the dashboard) instead of staying pending for ever. With
//! `table.give_up_after`, a record is given up on at that failure in a row
//! (`FailureCounts`). `backlog retry` brings one back.

use std::collections::HashMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::options::TickOptions;
use super::retry::give_up_records;
use crate::config::TableConfig;
use crate::duration;
use crate::error::Error;
use crate::handler::{Ending, Handled, Outcome};
use crate::record::Record;
use crate::schedule::Schedule;
use crate::store::{Store, StoreError};

/// The most records one tick gives up on; the next tick of the tier goes on.
const AT_MOST: usize = 1_000;

/// At the end of a tick of the last tier (`opts.window`), gives up on the pending
/// records older than that window (by `opts.now`); how many. Nothing where
/// `table.given_up` is unset, or the tick is of another tier.
pub(super) fn past_last_tier(
    schedule: &Schedule,
    table: &TableConfig,
    store: &mut dyn Store,
    opts: &TickOptions,
) -> Result<u64, Error> {
    let Some((last, records)) = outlived(schedule, table, store, opts)? else {
        return Ok(0);
    };
    let why = format!(
        "given up: still pending past the last tier ({})",
        duration::compact(last)
    );
    let done = give_up_records(table, store, records, &why, opts)?;
    Ok(done.failed)
}

/// How many records [`past_last_tier`] would give up on at the end of this tick:
/// what a dry run of the last tier says beside what it would hand over.
pub(super) fn would_give_up(
    schedule: &Schedule,
    table: &TableConfig,
    store: &mut dyn Store,
    opts: &TickOptions,
) -> Result<u64, Error> {
    Ok(outlived(schedule, table, store, opts)?.map_or(0, |(_, r)| r.len() as u64))
}

/// The last tier's window and the pending records older than it (by `opts.now`), up
/// to [`AT_MOST`], where a tick of `opts.window` gives them up: a tick of the last
/// tier with `table.given_up` set; none otherwise, or when there are none.
fn outlived(
    schedule: &Schedule,
    table: &TableConfig,
    store: &mut dyn Store,
    opts: &TickOptions,
) -> Result<Option<(std::time::Duration, Vec<Record>)>, Error> {
    let Some(last) = schedule.tiers.last() else {
        return Ok(None);
    };
    if table.given_up.is_none() || last.window != opts.window {
        return Ok(None);
    }
    let Some(before) = cutoff(opts.now, last.window) else {
        return Ok(None);
    };
    let records = store
        .oldest_of(&table.pending, Some(before), AT_MOST)
        .map_err(Error::store(store.describe()))?;
    Ok((!records.is_empty()).then_some((last.window, records)))
}

/// The inserted-at time before which a record is older than `window` at `now`.
fn cutoff(now: DateTime<Utc>, window: std::time::Duration) -> Option<DateTime<Utc>> {
    now.checked_sub_signed(chrono::Duration::from_std(window).ok()?)
}

/// Failures in a row, where `table.give_up_after` counts them: what the records of the
/// pages taken had, and the count each mark writes. The failure that reaches the
/// limit gives the record up (`table.given_up`) instead of marking it as failed.
pub(super) struct FailureCounts {
    /// The limit and the status of a record given up on; none: nothing is counted.
    limit: Option<(u32, Arc<str>)>,
    /// The counts read for the records taken, by id.
    read: HashMap<String, u32>,
}

impl FailureCounts {
    pub(super) fn of(table: &TableConfig) -> Self {
        FailureCounts {
            limit: table
                .give_up_after
                .zip(table.given_up.as_deref())
                .map(|(n, status)| (n, Arc::from(status))),
            read: HashMap::new(),
        }
    }

    /// Reads the counts of records just taken, before their handlers answer.
    pub(super) fn read(
        &mut self,
        records: &[Record],
        store: &mut dyn Store,
    ) -> Result<(), StoreError> {
        if self.limit.is_none() || records.is_empty() {
            return Ok(());
        }
        let ids: Vec<String> = records.iter().map(|r| r.id.to_string()).collect();
        self.read.extend(store.failure_counts(&ids)?);
        Ok(())
    }

    /// The status a handled record gets, and the count its mark writes (see
    /// `Mark::failures`): a try that failed and left the record pending counts one
    /// more, up to the limit, where it gives the record up; any other try, and giving
    /// up, clear it; what was no try (a person's snooze, a stop) leaves it. A handler's
    /// "not before" is a failed try, and counts.
    pub(super) fn count(
        &mut self,
        record: &Record,
        handled: &mut Handled,
        status: Arc<str>,
        pending: &[String],
    ) -> (Arc<str>, Option<u32>) {
        let Some((limit, given_up)) = &self.limit else {
            return (status, None);
        };
        if handled.ending == Ending::GivenUp {
            // Given up on: a retry that brings it back starts the count again.
            return (status, Some(0));
        }
        let a_try = matches!(
            handled.ending,
            Ending::Answered | Ending::TimedOut | Ending::Crashed(_)
        );
        if !a_try {
            return (status, None);
        }
        let id = record.id.to_string();
        let before = self.read.remove(&id).unwrap_or(0);
        if handled.outcome == Outcome::Success || !pending.iter().any(|p| **p == *status) {
            return (status, Some(0));
        }
        let now = before.saturating_add(1);
        if now < *limit {
            return (status, Some(now));
        }
        handled.detail =
            format!("{}; given up after {now} failures in a row", handled.detail).into();
        (Arc::clone(given_up), Some(0))
    }
}

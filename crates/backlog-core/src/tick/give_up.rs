//! Giving up on records that outlived the schedule: a pending record older than the
//! last tier's window is in no band, so no tick would ever take it again; with
//! `table.given_up` set, each tick of the last tier marks such records with that
//! status at its end, an attempt `given_up` each, so they are counted (`status`, the
//! metrics, the dashboard) instead of staying pending for ever. With
//! `table.give_up_after`, a record is given up on at that failure in a row
//! (`failure_counts.rs`). `backlog retry` brings one back.

use chrono::{DateTime, Utc};

use super::options::TickOptions;
use super::retry::give_up_records;
use crate::config::TableConfig;
use crate::duration;
use crate::error::Error;
use crate::record::Record;
use crate::schedule::Schedule;
use crate::store::Store;

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
    if done.failed > 0 {
        super::trace::event(
            "backlog.records.given_up",
            vec![
                opentelemetry::KeyValue::new("backlog.reason", why),
                opentelemetry::KeyValue::new("backlog.records", done.failed as i64),
            ],
        );
    }
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

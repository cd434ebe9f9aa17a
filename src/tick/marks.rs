//! The marks: a tick's counts, and the statuses it writes in groups.
//!
//! Every record handed out is settled here once, on the tick's thread, in the order
//! the answers came back: counted, reported, and queued for its mark. A group is
//! written when it is full or has waited `mark_interval`. The store writes a mark only
//! where the tick still holds the record (`Store::mark`); a mark that lands nowhere is
//! taken back out of the counts and counted as lost, never as a success.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

use super::options::Event;
use crate::handler::{Handled, Outcome};
use crate::record::Record;
use crate::store::{Mark, Store, StoreError};

/// The running counts of a tick.
#[derive(Debug, Default)]
pub(super) struct Tally {
    pub(super) selected: u64,
    pub(super) succeeded: u64,
    pub(super) failed: u64,
    pub(super) skipped: u64,
    pub(super) deferred: u64,
    pub(super) lost: u64,
    /// Shares its statuses with the marks.
    pub(super) statuses: BTreeMap<Arc<str>, u64>,
    pub(super) stopped: bool,
    pub(super) breaker: Option<String>,
    /// Why the tick stopped because its holds lapsed, if it did.
    pub(super) lapsed: Option<String>,
    /// Records left alone because their inserted-at value cannot be read, and the first.
    pub(super) unreadable: u64,
    pub(super) unreadable_sample: Option<String>,
}

impl Tally {
    /// Counts a record left alone for its unreadable inserted-at value.
    pub(super) fn unreadable(&mut self, record: &Record) {
        self.unreadable += 1;
        self.unreadable_sample.get_or_insert_with(|| {
            format!(
                "record {}: {:?}",
                record.id,
                record.inserted_at().to_string()
            )
        });
    }
}

/// Writes a tick's marks in groups: a group goes when it is full, or when it has
/// waited `interval` since the last write.
pub(super) struct Marks<'o> {
    pub(super) tally: Tally,
    owner: &'o str,
    /// Handled, not yet written, and whether each was a success (a lost mark is taken
    /// back out of the count it went into, whatever its status).
    marks: Vec<Mark>,
    succeeded: Vec<bool>,
    /// Shared with the marks: a status is allocated once a tick, not once a record.
    success: Arc<str>,
    error: Arc<str>,
    /// The tick's clock, written to `[retry]`'s `since` column.
    now: DateTime<Utc>,
    /// Until when a record that failed and stays pending is kept from other ticks:
    /// the schedule's next try of it.
    keep: &'o dyn Fn(&Record) -> Option<DateTime<Utc>>,
    /// The statuses a record can be taken in again.
    pending: Vec<String>,
    last_write: Instant,
    /// Marks per transaction, at most.
    group: usize,
    interval: Duration,
}

impl<'o> Marks<'o> {
    pub(super) fn new(
        table: &crate::TableConfig,
        owner: &'o str,
        now: DateTime<Utc>,
        group: usize,
        interval: Duration,
        keep: &'o dyn Fn(&Record) -> Option<DateTime<Utc>>,
    ) -> Self {
        Marks {
            tally: Tally::default(),
            owner,
            marks: Vec::new(),
            succeeded: Vec::new(),
            success: table.success.as_str().into(),
            error: table.error.as_str().into(),
            now,
            keep,
            pending: table.pending.clone(),
            last_write: Instant::now(),
            group: group.max(1),
            interval,
        }
    }

    /// Counts a handled record and queues its mark, writing the group when due.
    pub(super) fn settle(
        &mut self,
        record: &Record,
        handled: Handled,
        store: &mut dyn Store,
        on_event: &mut dyn FnMut(Event<'_>),
    ) -> Result<(), StoreError> {
        let tally = &mut self.tally;
        tally.selected += 1;
        let status = match &handled.outcome {
            Outcome::Success => {
                tally.succeeded += 1;
                Arc::clone(&self.success)
            }
            Outcome::Error => {
                tally.failed += 1;
                Arc::clone(&self.error)
            }
            Outcome::Status(s) => {
                tally.failed += 1;
                Arc::from(s.as_str())
            }
        };
        log_outcome(record, &handled, &status);
        on_event(Event::Handled {
            record,
            handled: &handled,
            status: &status,
        });
        *tally.statuses.entry(Arc::clone(&status)).or_default() += 1;
        self.succeeded.push(handled.outcome == Outcome::Success);
        let failed_and_pending =
            handled.outcome != Outcome::Success && self.pending.iter().any(|p| **p == *status);
        self.marks.push(Mark {
            at: self.now,
            id: record.id.clone(),
            keep_until: if failed_and_pending {
                (self.keep)(record)
            } else {
                None
            },
            status,
        });
        if self.marks.len() >= self.group || self.last_write.elapsed() >= self.interval {
            self.write(store)?;
        }
        Ok(())
    }

    /// Writes the marks now if they would otherwise wait past their interval for the
    /// next answer (a tick about to sleep `wait` to keep to its rate).
    pub(super) fn write_before(
        &mut self,
        wait: Duration,
        store: &mut dyn Store,
    ) -> Result<(), StoreError> {
        if self.last_write.elapsed() + wait >= self.interval {
            self.write(store)?;
        }
        Ok(())
    }

    /// Writes the marks not yet written; those the tick no longer held are lost.
    pub(super) fn write(&mut self, store: &mut dyn Store) -> Result<(), StoreError> {
        if self.marks.is_empty() {
            return Ok(());
        }
        let lost = store.mark(self.owner, &self.marks)?;
        if !lost.is_empty() {
            let mut ids = Vec::new();
            for &i in &lost {
                let status = Arc::clone(&self.marks[i].status);
                self.uncount(&status, self.succeeded[i]);
                if ids.len() < 10 {
                    ids.push(self.marks[i].id.to_string());
                }
            }
            tracing::warn!(
                "{} marks lost: records {}{} were handled after this tick's hold on them lapsed (another tick may hold them now); not marked, they keep their status",
                lost.len(),
                ids.join(", "),
                if lost.len() > ids.len() { ", …" } else { "" }
            );
        }
        self.marks.clear();
        self.succeeded.clear();
        self.last_write = Instant::now();
        Ok(())
    }

    /// Takes a lost mark back out of the counts.
    fn uncount(&mut self, status: &Arc<str>, succeeded: bool) {
        let tally = &mut self.tally;
        tally.lost += 1;
        if succeeded {
            tally.succeeded -= 1;
        } else {
            tally.failed -= 1;
        }
        if let Some(n) = tally.statuses.get_mut(status) {
            *n -= 1;
            if *n == 0 {
                tally.statuses.remove(status);
            }
        }
    }
}

fn log_outcome(record: &Record, handled: &Handled, status: &str) {
    if handled.outcome == Outcome::Success {
        tracing::debug!("record {}: {status} ({})", record.id, handled.detail);
    } else {
        tracing::debug!(
            "record {}: {status} ({}){}",
            record.id,
            handled.detail,
            tail_for_log(&handled.output)
        );
    }
    if !handled.output.is_empty() {
        tracing::trace!("record {} output:\n{}", record.id, handled.output);
    }
}

/// The last line of a failed handler's output, so `-v` shows why without `-vv`.
fn tail_for_log(output: &str) -> String {
    output
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .map(|l| format!(": {l}"))
        .unwrap_or_default()
}

//! Holding records: what a tick writes so that no other tick hands out the records it
//! hands out (claims on a server, spans on SQLite), the marks that end a hold, and the
//! heartbeat that renews it.

use chrono::{DateTime, Utc};

use super::{Attempt, BandQuery, Cursor, Page, StoreError};
use crate::record::{Record, Scalar};

/// How a tick holds the records it hands out, so that no two ticks hold one at once:
/// taking pages, marking, letting go, renewing (see the module's doc).
pub trait Holds {
    /// Reads the next page of the band, like `select`, and holds for `owner` until
    /// `lease_until` the records it wants that are still pending and that no live tick
    /// holds, atomically: a record another tick marked or holds in the meantime is
    /// skipped, never handed over twice at once.
    fn take(
        &mut self,
        owner: &str,
        band: &BandQuery,
        after: Option<&Cursor>,
        limit: usize,
        lease_until: DateTime<Utc>,
        wanted: &dyn Fn(&Record) -> bool,
    ) -> Result<Page, StoreError>;

    /// Writes the statuses, in one transaction, of the records the owner still holds;
    /// the records are no longer the owner's to hand over (a backend may keep holding
    /// them until `release`). Returns the places in `marks` of those it no longer held
    /// (its hold lapsed and another tick may have them): not written, they are lost.
    fn mark(&mut self, owner: &str, marks: &[Mark]) -> Result<Vec<usize>, StoreError>;

    /// How many marks a tick writes per transaction, at most, unless told otherwise;
    /// asked again after each group, so a backend may size the next by what the last
    /// cost (SQLite's grow on a table whose rows are scattered).
    fn mark_group(&self) -> usize {
        1000
    }

    /// A writer of this store's marks on a connection of its own, for a tick to write
    /// a group while it takes the next pages: on a server, the marks are the largest
    /// part of a tick's time, and the server can write one group while it reads the
    /// next. None where the tick writes them itself (SQLite has one writer at a time).
    fn mark_writer(&mut self) -> Result<Option<Box<dyn MarkWriter>>, StoreError> {
        Ok(None)
    }

    /// Says which of `records`, about to go to a handler, a person's action took over
    /// from the owner's queue since its page was read (their places in `records`): the
    /// tick skips them. A backend whose tick holds records a person may take over
    /// (SQLite's spans: see `sqlite::takeover`) notes here, before they go, that they
    /// are in hand. None on a server, where a tick's claims are its own until marked.
    fn hand_over(&mut self, _owner: &str, _records: &[Record]) -> Result<Vec<usize>, StoreError> {
        Ok(Vec::new())
    }

    /// Lets go of everything the owner still holds: the tick is over.
    fn release(&mut self, owner: &str) -> Result<(), StoreError>;

    /// How many records of the band, still pending, another tick than `owner` holds
    /// now, or are kept after a failure from ticks like this one: counted as skipped
    /// once, as a tick begins, by a backend whose pages for `band` step over them
    /// unread (PostgreSQL's, locking only the rows no other tick holds, for a tick that
    /// wants every record). None where the pages read them and count them there. (A
    /// hold that runs out during the tick may see its record counted and then taken.)
    fn held_by_others(
        &mut self,
        _owner: &str,
        _band: &BandQuery,
    ) -> Result<Option<u64>, StoreError> {
        Ok(None)
    }

    /// A handle, on a connection of its own, that extends the owner's leases while the
    /// tick's own connection waits on a handler.
    fn heartbeat(&self, owner: &str, run_id: i64) -> Result<Box<dyn Heartbeat>, StoreError>;

    /// Holds for `owner`, until `lease_until`, those of `records` that are still
    /// pending and that no live tick holds, and returns them (`backlog retry`). A
    /// failure kept from the ticks until its slot ends is taken all the same: a
    /// person asked for it.
    fn take_records(
        &mut self,
        owner: &str,
        records: Vec<Record>,
        lease_until: DateTime<Utc>,
    ) -> Result<Vec<Record>, StoreError>;

    /// Who holds a record now, if anyone: a tick, or the keep of a failure until its
    /// slot ends.
    fn holder(&mut self, record: &Record) -> Result<Option<Held>, StoreError>;

    /// `holder` of each of `records`, in their order: a dry run asks it of a page. One
    /// record at a time unless a backend reads them together.
    fn holders(&mut self, records: &[&Record]) -> Result<Vec<Option<Held>>, StoreError> {
        records.iter().map(|r| self.holder(r)).collect()
    }

    /// How many records live ticks hold now, and how many failures are kept from the
    /// ticks until their slot ends.
    fn held_counts(&mut self) -> Result<(u64, u64), StoreError>;
}

/// Writes a tick's marks on a connection of its own, on another thread, while the
/// tick goes on taking pages on its store's (see `Store::mark_writer`).
pub trait MarkWriter: Send {
    /// As `Store::mark`.
    fn mark(&mut self, owner: &str, marks: &[Mark]) -> Result<Vec<usize>, StoreError>;
}

/// Extends a tick's claims from another thread.
pub trait Heartbeat: Send {
    /// Extends the owner's live holds to `lease_until`. A hold that already ran out is
    /// not brought back (another tick may have taken its records since):
    /// `StoreError::HoldLapsed` says so.
    fn beat(&mut self, lease_until: DateTime<Utc>) -> Result<(), StoreError>;
}

/// A new status for a record, written once its handler returned.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Mark {
    /// The record's id.
    pub id: Scalar,
    /// The record's inserted-at value, where it could be read: on a table partitioned
    /// on that column, a backend finds the marked rows in the partitions of their
    /// values only (PostgreSQL), not by their id in every partition.
    pub inserted_at: Option<Scalar>,
    /// Shared by the marks of a status (a tick writes few distinct ones).
    pub status: std::sync::Arc<str>,
    /// When the record was handled (the tick's clock): written to `[retry]`'s `since`
    /// column, when the table has one.
    pub at: DateTime<Utc>,
    /// For a record that failed and stays pending: no tick whose clock is before this
    /// time (the end of its tier's slot, by the tick's clock) takes it again, so a
    /// failing counterpart sees one try per slot whatever the number of runners.
    pub keep_until: Option<DateTime<Utc>>,
    /// The attempt to keep in `backlog_attempts` with the mark (in its transaction),
    /// when `[history]` keeps this one.
    pub attempt: Option<Box<Attempt>>,
    /// The mark ends a try (its handler ran): only a try counts in `[retry]`'s count
    /// and time columns, not a person's snooze or giving up.
    pub tried: bool,
    /// The record's failures in a row once this mark is written, where they are
    /// counted (`table.give_up_after`): kept in `backlog_failures`, 0 removing its row;
    /// none leaves the count as it is.
    pub failures: Option<u32>,
}

impl Mark {
    /// A try's mark: record `id` gets `status`, handled at `at`; no inserted-at value,
    /// nothing kept past it, no attempt, no count of failures (change those fields
    /// after). What a database crate's test, or the driver test kit, writes.
    pub fn new(id: Scalar, status: &str, at: DateTime<Utc>) -> Mark {
        Mark {
            id,
            inserted_at: None,
            status: status.into(),
            at,
            keep_until: None,
            attempt: None,
            tried: true,
            failures: None,
        }
    }
}

/// Who holds a record, and until when.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Held {
    /// The tick that holds it (host/pid/…); none when it is kept after a failure, so
    /// no tick takes it before the schedule's next try.
    pub owner: Option<String>,
    /// When the hold runs out, unless renewed.
    pub until: DateTime<Utc>,
}

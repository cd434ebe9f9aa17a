//! Where the backlog lives: one trait, one file per backend.
//!
//! The tick talks to a `Store` only through the operations below. They are shaped so a
//! backend can keep the two promises of the design cheaply: records are read a page at
//! a time in keyset order (memory does not grow with the band), and a record is handed
//! to a handler only while this tick holds it in the tool's own tables, so two ticks
//! never hold it at once. How a backend holds records is its own affair: PostgreSQL,
//! whose runners may be on many hosts and share one band, claims each record; SQLite,
//! whose ticks are all on one host and take the database's single write lock anyway,
//! holds the span of inserted-at values a tick has read (one row per tick, so a record
//! costs the tool no write beyond its status). Holds carry a lease that a heartbeat
//! renews; a tick that dies stops renewing, and its records are free again once the
//! lease runs out.

mod alerts;
mod attempts;
mod band;
mod band_statuses;
mod claims;
mod columns;
mod error;
mod failures;
mod fault;
mod in_flight;
#[cfg(feature = "mysql")]
mod mysql;
mod own;
mod pauses;
#[cfg(feature = "postgres")]
mod postgres;
mod runs;
mod samples;
mod sql;
#[cfg(feature = "sqlite")]
mod sqlite;
mod tables;
mod totals;

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};

pub use alerts::Claim;
pub use attempts::{ACTIONS, Attempt, AttemptQuery, GIVEN_UP, SNOOZED};
pub use band::{BandQuery, Cursor, Page, Range};
pub use error::StoreError;
pub use fault::Fault;
pub use in_flight::{ClaimRow, InFlight, SpanRow};
#[cfg(feature = "mysql")]
pub use mysql::MysqlStore;
pub use own::Own;
use own::write_with_marks;
pub use pauses::Pause;
#[cfg(feature = "postgres")]
pub use postgres::PostgresStore;
pub use runs::{RunEnd, RunRow, RunStart};
#[cfg(feature = "sqlite")]
pub use sqlite::SqliteStore;
pub use totals::{DURATION_BUCKETS, DurationHistogram, RecentRun, RunTotals};

use crate::config::{DatabaseConfig, DatabaseUrl, TableConfig};
use crate::record::{Record, Scalar};
use crate::timestamp::TimestampFormat;

/// The owner of a claim kept on a record that failed, until the schedule's next try of
/// it (PostgreSQL and MySQL, whose runners claim each record): no runner takes it
/// before then (see `Mark::keep_until`), and no tick's `release` or heartbeat touches
/// it. Such a claim's `claimed_at` is that next try by the clock of the tick that
/// failed it, and its `expires_at` the same wait on the database's clock: a tick takes
/// the record once its own clock reaches the first, or the database's the second (so a
/// tick run with a pinned clock, `--now`, keeps nothing from the real ticks for long).
#[cfg_attr(not(any(feature = "postgres", feature = "mysql")), allow(dead_code))] // the servers' claims
pub(crate) const KEPT_OWNER: &str = "backlog: failed in this slot";

/// A name quoted as an SQL identifier (every backend quotes with double quotes; MySQL
/// once its session reads them so, see `mysql`).
fn quote(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// The name `doctor` proposes for an index on the inserted-at column.
fn index_name(table: &str, column: &str) -> String {
    format!("{table}_by_{column}")
        .to_ascii_lowercase()
        .replace(|c: char| !c.is_ascii_alphanumeric() && c != '_', "_")
}

/// Marks grouped by what one UPDATE writes: the status, and the `[retry]` time in the
/// `since` column's format when there is one and the mark ends a try (none: the
/// status alone is written).
#[cfg_attr(not(any(feature = "postgres", feature = "mysql")), allow(dead_code))] // the servers' claims
fn group_marks(
    marks: &[Mark],
    since_format: Option<TimestampFormat>,
) -> BTreeMap<(&str, Option<Scalar>), Vec<&Scalar>> {
    let mut groups: BTreeMap<_, Vec<&Scalar>> = BTreeMap::new();
    for m in marks {
        let since = since_format.filter(|_| m.tried).map(|f| f.encode(m.at));
        groups.entry((&*m.status, since)).or_default().push(&m.id);
    }
    groups
}

/// How the database runs a band query, for `backlog doctor`.
#[derive(Debug, Clone)]
pub struct QueryPlan {
    /// The plan reads an index range on the inserted-at column.
    pub uses_index: bool,
    /// The plan as the database prints it.
    pub detail: String,
    /// The statement that would give the band query an index, when it has none.
    pub create_index: Option<String>,
}

/// Distinct inserted-at values `scan_inserted_at` reads a page at a time.
const SCAN_PAGE: usize = 10_000;

/// What a scan of the inserted-at column found.
#[derive(Debug, Clone, Default)]
pub struct InsertedAtScan {
    /// Distinct values read.
    pub read: usize,
    /// Whether it read the whole column (else it stopped at its time budget).
    pub complete: bool,
    /// The values that cannot be read, or carry another UTC offset, in column order.
    pub bad: Vec<String>,
}

/// A new status for a record, written once its handler returned.
#[derive(Debug, Clone)]
pub struct Mark {
    /// The record's id.
    pub id: Scalar,
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

/// Who holds a record, and until when.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Held {
    /// The tick that holds it (host/pid/…); none when it is kept after a failure, so
    /// no tick takes it before the schedule's next try.
    pub owner: Option<String>,
    /// When the hold runs out, unless renewed.
    pub until: DateTime<Utc>,
}

/// A backend holding the backlog table and the tool's own tables.
pub trait Store {
    /// The database, for messages (never with a password).
    fn describe(&self) -> String;

    /// Checks that the table and its columns exist and decides the inserted-at format.
    /// Reads only; changes nothing.
    fn inspect(&mut self) -> Result<TimestampFormat, StoreError>;

    /// Creates the tool's own tables (run log, claims) if they are missing.
    fn ensure_own_tables(&mut self) -> Result<(), StoreError>;

    /// Up to `limit` pending records of the band, newest first, after `after`.
    fn select(
        &mut self,
        band: &BandQuery,
        after: Option<&Cursor>,
        limit: usize,
    ) -> Result<Vec<Record>, StoreError>;

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

    /// The clock (`now`) of the last tick of `window` on this table that did not fail,
    /// from the run log; none if it never ran.
    fn last_tick(&mut self, window: Duration) -> Result<Option<DateTime<Utc>>, StoreError> {
        let own = self.own("backlog_runs")?;
        if !own.exists {
            return Ok(None);
        }
        runs::last_tick(own.sql, &own.prefix, own.table, window)
    }

    /// The number of records of each status whose inserted-at value is in `range`.
    fn count_by_status(&mut self, range: &Range) -> Result<Vec<(String, u64)>, StoreError>;

    /// The pending record with the oldest inserted-at value.
    fn oldest_pending(&mut self) -> Result<Option<Record>, StoreError> {
        let pending = self.table().pending.clone();
        Ok(self.oldest_of(&pending, None, 1)?.pop())
    }

    /// Up to `limit` records of these statuses, oldest first, inserted before `before`
    /// if given (after `inspect`).
    fn oldest_of(
        &mut self,
        statuses: &[String],
        before: Option<DateTime<Utc>>,
        limit: usize,
    ) -> Result<Vec<Record>, StoreError>;

    /// The table the store was opened on, as the schedule file describes it.
    fn table(&self) -> &TableConfig;

    /// The time by the clock every runner of this backlog shares: the database
    /// server's where there is one (PostgreSQL), so runners on hosts whose clocks
    /// disagree compute the same bands and agree on when a tier is due; this host's
    /// otherwise (SQLite's runners are all on the host that has the file).
    fn clock(&mut self) -> Result<DateTime<Utc>, StoreError> {
        Ok(Utc::now())
    }

    /// The record with this id (given as text, as a user types it).
    fn find(&mut self, id: &str) -> Result<Option<Record>, StoreError>;

    /// How the database runs the band query (after `inspect`).
    fn band_plan(&mut self) -> Result<QueryPlan, StoreError>;

    /// Reads the inserted-at column's distinct values in order, a page at a time, until
    /// its end or `budget` has passed, and returns what it read and the values the
    /// detected format cannot read, or that carry another UTC offset than the column's
    /// (text compares them wrongly): what `doctor` lists.
    fn scan_inserted_at(&mut self, budget: Duration) -> Result<InsertedAtScan, StoreError> {
        let started = std::time::Instant::now();
        let format = self.inspect()?;
        let mut scan = InsertedAtScan::default();
        let mut after: Option<Scalar> = None;
        loop {
            let values = self.inserted_at_page(after.as_ref(), SCAN_PAGE)?;
            scan.read += values.len();
            scan.bad.extend(
                values
                    .iter()
                    .filter(|v| format.decode(v).is_none() || format.other_offset(v))
                    .map(ToString::to_string),
            );
            if values.len() < SCAN_PAGE {
                scan.complete = true;
                return Ok(scan);
            }
            if started.elapsed() >= budget {
                return Ok(scan);
            }
            after = values.last().cloned();
        }
    }

    /// Up to `limit` distinct non-NULL inserted-at values above `after`, in the column's
    /// order (an index range when the column has an index).
    fn inserted_at_page(
        &mut self,
        after: Option<&Scalar>,
        limit: usize,
    ) -> Result<Vec<Scalar>, StoreError>;

    /// The clock of the first tick on this table the run log holds; none if none ran.
    fn first_tick(&mut self) -> Result<Option<DateTime<Utc>>, StoreError> {
        let own = self.own("backlog_runs")?;
        if !own.exists {
            return Ok(None);
        }
        runs::first_tick(own.sql, &own.prefix, own.table)
    }

    /// The last run of each window on this table, newest first.
    fn last_runs(&mut self) -> Result<Vec<RunRow>, StoreError> {
        let own = self.own("backlog_runs")?;
        if !own.exists {
            return Ok(Vec::new());
        }
        runs::last_runs(own.sql, &own.prefix, own.table)
    }

    /// Opens a run-log row and returns its id, after closing as `abandoned` the rows
    /// of ticks on this table that stopped beating without ending.
    fn begin_run(&mut self, run: &RunStart) -> Result<i64, StoreError>;

    /// Closes a run-log row.
    fn finish_run(&mut self, run_id: i64, end: &RunEnd) -> Result<(), StoreError> {
        fault::retrying("writing the run log", || {
            let own = self.own("backlog_runs")?;
            runs::finish(own.sql, &own.prefix, run_id, end)
        })
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

    /// How many records live ticks hold now, and how many failures are kept from the
    /// ticks until their slot ends.
    fn held_counts(&mut self) -> Result<(u64, u64), StoreError>;

    /// The tool's own tables, for what every backend does alike (see [`Own`]); its
    /// `exists` says whether the tool's table `table` is there.
    #[doc(hidden)]
    fn own(&mut self, table: &str) -> Result<Own<'_>, StoreError>;
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

/// Opens the store a schedule file names.
pub fn open(database: &DatabaseConfig, table: &TableConfig) -> Result<Box<dyn Store>, StoreError> {
    match &database.url {
        #[cfg(feature = "sqlite")]
        DatabaseUrl::Sqlite(path) => Ok(Box::new(SqliteStore::open(
            path,
            database.busy_timeout,
            table.clone(),
        )?)),
        #[cfg(feature = "postgres")]
        DatabaseUrl::Postgres(url) => Ok(Box::new(PostgresStore::open(
            url,
            &database.schema,
            table.clone(),
        )?)),
        #[cfg(feature = "mysql")]
        DatabaseUrl::Mysql(url) => Ok(Box::new(MysqlStore::open(
            url,
            &database.schema,
            database.busy_timeout,
            table.clone(),
        )?)),
    }
}

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

pub mod alerts;
pub mod answers;
pub mod attempts;
pub mod band;
pub mod band_statuses;
pub mod breakers;
pub mod claims;
pub mod columns;
pub mod driver;
pub mod error;
pub mod failures;
pub mod fault;
pub mod history;
pub mod holds;
pub mod in_flight;
pub mod own;
pub mod paces;
pub mod pauses;
pub mod rates;
pub mod reaches;
pub mod reads;
pub mod runners;
pub mod runs;
pub mod samples;
pub mod shape;
pub mod sql;
pub mod tables;
pub mod totals;

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};

pub use alerts::{AlertTrouble, Claim};
pub use attempts::{ACTIONS, Attempt, AttemptQuery, GIVEN_UP, SNOOZED};
pub use band::{BandQuery, Cursor, Page, Range, earlier};
pub use breakers::BreakerState;
pub use error::StoreError;
pub use fault::Fault;
pub use history::{HandlerTimes, History};
pub use holds::{Heartbeat, Held, Holds, Mark, MarkWriter};
pub use in_flight::{ClaimRow, InFlight, SpanRow};
pub use own::Own;
pub use own::write_with_marks;
pub use paces::{PaceNews, PaceNow, PaceRow};
pub use pauses::Pause;
pub use reads::SCAN_PAGE;
pub use reads::{InsertedAtScan, QueryPlan, Reads, Survey};
pub use runners::{Holding, Runner};
pub use runs::{RunEnd, RunRow, RunStart, UNFINISHED};
pub use shape::{Kind, TableColumn, TableShape};
pub use totals::{DURATION_BUCKETS, DurationHistogram, RecentRun, RunTotals};

use crate::config::TableConfig;
use crate::record::{Record, Scalar};
use crate::timestamp::TimestampFormat;

/// The owner of a claim kept on a record that failed, until the schedule's next try of
/// it (PostgreSQL and MySQL, whose runners claim each record): no runner takes it
/// before then (see `Mark::keep_until`), and no tick's `release` or heartbeat touches
/// it. Such a claim's `claimed_at` is that next try by the clock of the tick that
/// failed it, and its `expires_at` the same wait on the database's clock: a tick takes
/// the record once its own clock reaches the first, or the database's the second (so a
/// tick run with a pinned clock, `--now`, keeps nothing from the real ticks for long).
pub const KEPT_OWNER: &str = "backlog: failed in this slot";

/// A name quoted as an SQL identifier (every backend quotes with double quotes; MySQL
/// once its session reads them so, see `mysql`).
pub fn quote(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// The name `doctor` proposes for an index on the inserted-at column: at most 63
/// characters, which every database takes (PostgreSQL cuts longer ones, MySQL refuses
/// them), a longer one cut and told apart by a digest of the whole.
pub fn index_name(table: &str, column: &str) -> String {
    let name = format!("{table}_by_{column}")
        .to_ascii_lowercase()
        .replace(|c: char| !c.is_ascii_alphanumeric() && c != '_', "_");
    if name.len() <= 63 {
        return name;
    }
    let digest = crate::digest::of(name.as_bytes());
    format!("{}_{:08x}", &name[..54], digest as u32)
}

/// Marks grouped by what one UPDATE writes: the status, and the `[retry]` time in the
/// `since` column's format when there is one and the mark ends a try (none: the
/// status alone is written).
pub fn group_marks(
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

/// A backend holding the backlog table and the tool's own tables: what a database crate
/// implements (with `Reads`, `Survey` and `Holds`), and what the tick and the commands
/// call. A caller calls `inspect`, then `ensure_own_tables` where it writes, before the
/// rest: the backends of this repository panic on a read before `inspect` (the
/// driver test kit keeps that order).
pub trait Store: Reads + Survey + Holds {
    /// The database, for messages (never with a password).
    fn describe(&self) -> String;

    /// Checks that the table and its columns exist and decides the inserted-at format.
    /// Reads only; changes nothing.
    fn inspect(&mut self) -> Result<TimestampFormat, StoreError>;

    /// Creates the tool's own tables (run log, claims) if they are missing.
    fn ensure_own_tables(&mut self) -> Result<(), StoreError>;

    /// The clock (`now`) of the last tick of `window` on this table that did not fail,
    /// from the run log; none if it never ran.
    fn last_tick(&mut self, window: Duration) -> Result<Option<DateTime<Utc>>, StoreError> {
        let own = self.own("backlog_runs")?;
        if !own.exists {
            return Ok(None);
        }
        runs::last_tick(own.sql, &own.prefix, own.table, window)
    }

    /// The pending record with the oldest inserted-at value.
    fn oldest_pending(&mut self) -> Result<Option<Record>, StoreError> {
        let pending = self.table().pending.clone();
        Ok(self.oldest_of(&pending, None, 1)?.pop())
    }

    /// The table the store was opened on, as the schedule file describes it.
    fn table(&self) -> &TableConfig;

    /// The time by the clock every runner of this backlog shares: the database
    /// server's where there is one (PostgreSQL), so runners on hosts whose clocks
    /// disagree compute the same bands and agree on when a tier is due; this host's
    /// otherwise (SQLite's runners are all on the host that has the file).
    fn clock(&mut self) -> Result<DateTime<Utc>, StoreError> {
        Ok(Utc::now())
    }

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

    /// The ticks of `window` whose clock is at or after `since`, oldest first, among
    /// its newest (`runs::since`): a slot's ticks, however many runners shared it.
    fn runs_since(
        &mut self,
        window: Duration,
        since: DateTime<Utc>,
    ) -> Result<Vec<RunRow>, StoreError> {
        let own = self.own("backlog_runs")?;
        if !own.exists {
            return Ok(Vec::new());
        }
        runs::since(own.sql, &own.prefix, own.table, window, since)
    }

    /// Per window, the ticks alive in the last `span` that ended before their band
    /// did, how many and the newest (`runs::ended_early`); a tick silent for `lease`
    /// counts.
    fn ended_early(
        &mut self,
        span: Duration,
        lease: Duration,
    ) -> Result<Vec<(RunRow, u64)>, StoreError> {
        let own = self.own("backlog_runs")?;
        if !own.exists {
            return Ok(Vec::new());
        }
        runs::ended_early(own.sql, &own.prefix, own.table, span, lease)
    }

    /// Each tier's unfinished tick: the newest of its window that ended before its band
    /// did (a signal, a lapse, a failure, a kill: silent for `lease`) with no tick of
    /// that window started since and run to its end. Such a tier is due now: the next
    /// start (the daemon, `--if-due`, any runner) takes the rest of its band.
    fn unfinished_runs(&mut self, lease: Duration) -> Result<Vec<RunRow>, StoreError> {
        let own = self.own("backlog_runs")?;
        if !own.exists {
            return Ok(Vec::new());
        }
        runs::unfinished(own.sql, &own.prefix, own.table, lease)
    }

    /// The run log's history up to `now` (`history::read`): per tier, the ticks per UTC
    /// hour over 7 days and per UTC day over 90.
    fn history(&mut self, now: DateTime<Utc>) -> Result<History, StoreError> {
        let own = self.own("backlog_run_times")?;
        if !own.exists {
            return Ok(History::default());
        }
        history::read(own.sql, &own.prefix, own.table, now)
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

    /// The tool's own tables, for what every backend does alike (see [`Own`]); its
    /// `exists` says whether the tool's table `table` is there. A database crate
    /// implements it with its connection as an `Sql` (its dialect): the run log,
    /// attempts, pauses, alerts, rates and breakers are then written for it, by the
    /// provided methods above and the traits' defaults.
    fn own(&mut self, table: &str) -> Result<Own<'_>, StoreError>;
}

pub use driver::open;

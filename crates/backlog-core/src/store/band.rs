//! A band as a store reads it: its bounds in the inserted-at column's own format,
//! where a page ended, what a page took, and a range of values to count.

use chrono::{DateTime, Utc};

use crate::record::{Record, Scalar};

/// The bounds of a band, encoded in the inserted-at column's format.
#[derive(Debug, Clone)]
pub struct BandQuery {
    /// Inclusive lower bound (the oldest inserted-at value in the band).
    pub from: Scalar,
    /// Exclusive upper bound (the newest inserted-at value), inclusive when `to_inclusive`.
    pub to: Scalar,
    /// Set when the band reaches age 0, so a record is taken from the moment it exists.
    pub to_inclusive: bool,
    /// Take records that failed earlier in their tier's slot too, though they are
    /// kept from other ticks until the slot ends (`backlog run --retry-failed`).
    pub take_tried: bool,
    /// The tick's clock (`--now`, or the real time): a failure is kept until the end
    /// of its slot by this clock (see `Mark::keep_until`), so a tick reproduced with a
    /// pinned clock sees the slots that clock is in.
    pub clock: DateTime<Utc>,
    /// The tick wants every record it reads (no `spread`, no `[retry]` delay). Only
    /// then may a backend lock a page's rows as it reads them: a row locked and not
    /// wanted would be skipped by a tick that wants it (another tier's, a
    /// `--retry-failed` run) and missed for its slot.
    pub wants_all: bool,
}

/// Where the previous page ended: the last record's inserted-at value and id. Pages go
/// newest first, by (inserted-at, id) descending.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor {
    /// The inserted-at value of the page's last record.
    pub inserted_at: Scalar,
    /// The id of the page's last record, which breaks ties between equal inserted-at
    /// values.
    pub id: Scalar,
}

/// One page of a band as `take` leaves it.
#[derive(Debug, Default)]
pub struct Page {
    /// Where the page ended, for the next one; none when it read nothing.
    pub cursor: Option<Cursor>,
    /// How many records the page read: fewer than asked for means the band's end.
    pub read: usize,
    /// The records now this tick's to hand over, in band order.
    pub taken: Vec<Record>,
    /// Records the tick did not want (its spread share, a `[retry]` delay not over).
    pub deferred: u64,
    /// Records another live tick holds, or that one marked since the page was read.
    pub skipped: u64,
}

impl Cursor {
    /// Where a page that ends with `record` ends.
    pub fn after(record: &Record) -> Cursor {
        Cursor {
            inserted_at: record.inserted_at(),
            id: record.id.clone(),
        }
    }
}

impl Page {
    /// The page's accounting, from the records read, whether each (by its place in
    /// `read`) is now this tick's were it wanted, and what the tick wants. The records
    /// taken stay in the vector they were read into.
    pub fn sorted(
        mut read: Vec<Record>,
        ours: impl Fn(usize, &Record) -> bool,
        wanted: &dyn Fn(&Record) -> bool,
    ) -> Page {
        let mut page = Page {
            cursor: read.last().map(Cursor::after),
            read: read.len(),
            ..Page::default()
        };
        let mut i = 0;
        read.retain(|record| {
            let mine = ours(i, record);
            i += 1;
            if !wanted(record) {
                page.deferred += 1;
                false
            } else if !mine {
                page.skipped += 1;
                false
            } else {
                true
            }
        });
        page.taken = read;
        page
    }
}

/// A range of inserted-at values for counting: `from` inclusive unless `from_exclusive`,
/// `to` exclusive unless `to_inclusive`; an open end is unbounded.
#[derive(Debug, Clone, Default)]
pub struct Range {
    /// Lower bound; unbounded when none.
    pub from: Option<Scalar>,
    /// Leave out records inserted exactly at `from`.
    pub from_exclusive: bool,
    /// Upper bound; unbounded when none.
    pub to: Option<Scalar>,
    /// Count records inserted exactly at `to` too.
    pub to_inclusive: bool,
    /// Count only this many records of the range (any), a sample: what a tick looks at
    /// when its band held nothing pending, at a cost that does not grow with the band.
    pub sample: Option<usize>,
}

/// The earlier of two times either may lack: what `Survey::oldest_in` keeps as it
/// reads a status at a time.
pub fn earlier(a: Option<DateTime<Utc>>, b: Option<DateTime<Utc>>) -> Option<DateTime<Utc>> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

impl Range {
    /// The range's condition on the inserted-at column `ins` (`1 = 1` when unbounded),
    /// with `placeholder(n)` spelling the backend's n-th parameter from `first`, and
    /// its bounds in the order they are bound.
    pub fn condition(
        &self,
        ins: &str,
        first: usize,
        placeholder: impl Fn(usize) -> String,
    ) -> (String, Vec<&Scalar>) {
        let mut clauses = vec!["1 = 1".to_string()];
        let mut bounds = Vec::new();
        if let Some(from) = &self.from {
            let op = if self.from_exclusive { ">" } else { ">=" };
            clauses.push(format!("{ins} {op} {}", placeholder(first + bounds.len())));
            bounds.push(from);
        }
        if let Some(to) = &self.to {
            let op = if self.to_inclusive { "<=" } else { "<" };
            clauses.push(format!("{ins} {op} {}", placeholder(first + bounds.len())));
            bounds.push(to);
        }
        (clauses.join(" AND "), bounds)
    }
}

//! Reading the user's table: its records (`Reads`), and the table as a whole (`Survey`).
//! Each backend writes its own SQL for them; the tick and the commands read through
//! these two traits only.

use chrono::{DateTime, Utc};

use super::{BandQuery, Cursor, Range, StoreError, TableShape};
use crate::record::{Record, Scalar};

/// The records of the user's table: a band's pages, the oldest of some statuses, one
/// by its id.
pub trait Reads {
    /// Up to `limit` pending records of the band, newest first, after `after`.
    fn select(
        &mut self,
        band: &BandQuery,
        after: Option<&Cursor>,
        limit: usize,
    ) -> Result<Vec<Record>, StoreError>;

    /// Up to `limit` records of these statuses, oldest first, inserted before `before`
    /// if given (after `inspect`).
    fn oldest_of(
        &mut self,
        statuses: &[String],
        before: Option<DateTime<Utc>>,
        limit: usize,
    ) -> Result<Vec<Record>, StoreError>;

    /// The record with this id (given as text, as a user types it); none when the
    /// table has none, [`StoreError::NotAnId`] when no record could (`abc` for an
    /// integer column), so the person is told so rather than "no record".
    fn find(&mut self, id: &str) -> Result<Option<Record>, StoreError>;
}

/// What `status` and `doctor` read of the user's table as a whole: counts by status,
/// how the band query runs, the inserted-at column's values.
pub trait Survey {
    /// The number of records of each status whose inserted-at value is in `range`.
    fn count_by_status(&mut self, range: &Range) -> Result<Vec<(String, u64)>, StoreError>;

    /// The oldest inserted-at time of the records in `range` whose status is one of
    /// `statuses` (after `inspect`); none when there is none. One query per status, an
    /// index seek or range bounded by the range (`ORDER BY inserted-at LIMIT 1`): what
    /// `status --check` asks of each tier's band for how long new work waits.
    fn oldest_in(
        &mut self,
        statuses: &[String],
        range: &Range,
    ) -> Result<Option<DateTime<Utc>>, StoreError>;

    /// How the database runs the band query (after `inspect`).
    fn band_plan(&mut self) -> Result<QueryPlan, StoreError>;

    /// Up to `limit` distinct non-NULL inserted-at values above `after`, in the column's
    /// order (an index range when the column has an index).
    fn inserted_at_page(
        &mut self,
        after: Option<&Scalar>,
        limit: usize,
    ) -> Result<Vec<Scalar>, StoreError>;

    /// The table `table.name` names as its catalog describes it; needs only the name
    /// (no `inspect` first): what `init` proposes a schedule file from.
    fn table_shape(&mut self) -> Result<TableShape, StoreError>;

    /// The non-NULL values of `column` of the table `shape` found, with how many
    /// records hold each, the most common first: at most `limit` + 1 of them, so that a
    /// caller can tell a column of more values from one of `limit`. Counted over the
    /// first `sample` records read when given (a bounded read, to rule a column out),
    /// else over them all (no `inspect` first).
    fn values(
        &mut self,
        shape: &TableShape,
        column: &str,
        limit: usize,
        sample: Option<usize>,
    ) -> Result<Vec<(String, u64)>, StoreError>;
}

/// How the database runs a band query, for `backlog doctor`.
#[derive(Debug, Clone)]
pub struct QueryPlan {
    /// The plan reads an index range on the inserted-at column.
    pub uses_index: bool,
    /// The plan in one short line: the node that reads the table (`Index Scan using
    /// orders_by_created on orders`), and how many more do. What `doctor` says.
    pub summary: String,
    /// The whole plan as the database prints it, a line per node or condition: what
    /// `doctor -v` says.
    pub lines: Vec<String>,
    /// The statement that would give the band query an index, when it has none.
    pub create_index: Option<String>,
    /// On a partitioned table (PostgreSQL), how many of its partitions the band query
    /// reads, and how many it has: a table partitioned on the inserted-at column reads
    /// only those its band touches.
    pub partitions: Option<(usize, usize)>,
}

impl QueryPlan {
    /// A plan's one short line from the nodes that read the table, in plan order: the
    /// first, and how many more there are (one per pending status, or per partition);
    /// `otherwise` when none does.
    pub fn summary_of(scans: &[String], otherwise: &str) -> String {
        match scans {
            [] => otherwise.to_string(),
            [one] => one.clone(),
            [first, more @ ..] => format!(
                "{first} (and {} more {})",
                more.len(),
                if more.len() == 1 { "scan" } else { "scans" }
            ),
        }
    }
}

/// Distinct inserted-at values `scan_inserted_at` reads a page at a time.
pub const SCAN_PAGE: usize = 10_000;

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

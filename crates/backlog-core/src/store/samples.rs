//! Samples of a timestamp column, read at every tick to detect its format
//! (`timestamp::detect`), at a cost that does not follow the table's size.
//!
//! The oldest and newest values of the column are what detection wants (a column that
//! went from seconds to milliseconds, or from one text layout to another, shows it at
//! its ends). Through an index that starts with the column they are two short reads.
//! Without one, reading them sorts or scans the whole table: on a table indexed on
//! (status, inserted-at), the layout this workload asks for, an empty-band tick of a
//! 1,000,000-row SQLite table spent 0.17 s there, ten times that on ten million
//! (docs/benchmarks.md, issue 15); a `[retry]` since column, rarely indexed, paid it at
//! every tick too. There the samples are the oldest and newest values among the first
//! and last `ROWS` records by the id column, whose index reaches them in a few pages.
//! If all of those are NULL (a since column where only records in the middle of the id
//! order were tried), the column has no samples and a since column takes the
//! inserted-at column's format, as an empty one does: looking further would be a scan
//! of the table at every tick, until a record at an end is tried. Which of the two a
//! column gets, each backend says by the plans of the two `probes` (SQLite, MySQL) or
//! by its catalog's indexes (PostgreSQL, whose planner sorts a small table rather than
//! read an index).

use crate::store::{StoreError, quote};
use crate::timestamp::{self, FormatSetting, Sample, TimestampFormat};

/// What a column's type says of its timestamps, as a server names its types.
pub enum Typed {
    /// A time type of the database, read in this format.
    Native(TimestampFormat),
    /// Integers (unix seconds or milliseconds) or text: the format is read from the
    /// column's values.
    Values {
        /// Whether the values are integers.
        integer: bool,
    },
    /// Neither: no timestamps.
    Other,
}

/// Refuses `table.inserted_at_timezone` for an inserted-at column (`column` of type
/// `sql_type`) that is not of the one type it applies to, `zoned` (`note` says why).
pub fn zone_applies(
    table: &crate::config::TableConfig,
    (column, sql_type): (&str, &str),
    zoned: &str,
    note: &str,
) -> Result<(), StoreError> {
    if table.inserted_at_timezone.is_none() || sql_type.eq_ignore_ascii_case(zoned) {
        return Ok(());
    }
    Err(StoreError::Timestamps {
        table: table.name.clone(),
        column: column.to_string(),
        problem: format!(
            "is of type {sql_type}; table.inserted_at_timezone applies to a {zoned} column only{note}"
        ),
    })
}

/// The format of a timestamp column (`table`, `column`: as the file names them), of
/// type `sql_type`: a time type's own, unless the file asks for values; else detected
/// from the column's samples (`sample` reads them, as integers or as text), and where
/// it has none yet, `empty` if given. `readable` says which types a server's column
/// may have.
pub fn format_of(
    (table, column, sql_type): (&str, &str, &str),
    typed: Typed,
    readable: &str,
    (setting, empty): (FormatSetting, Option<TimestampFormat>),
    sample: &mut dyn FnMut(bool) -> Result<Vec<Sample>, StoreError>,
) -> Result<TimestampFormat, StoreError> {
    let problem = |problem: String| StoreError::Timestamps {
        table: table.to_string(),
        column: column.to_string(),
        problem,
    };
    let integer = match (typed, setting) {
        (Typed::Native(f), FormatSetting::Auto | FormatSetting::Native) => return Ok(f),
        (Typed::Native(_), other) => {
            return Err(problem(format!(
                "is of type {sql_type}, not {other:?} values; set table.inserted_at_format = \"native\" (or \"auto\")"
            )));
        }
        (Typed::Other, _) => {
            return Err(problem(format!(
                "is of type {sql_type}; backlog reads {readable}"
            )));
        }
        (Typed::Values { integer }, _) => integer,
    };
    let samples = sample(integer)?;
    match empty {
        Some(f) if samples.is_empty() => Ok(f),
        _ => timestamp::detect(setting, &samples).map_err(|e| problem(e.to_string())),
    }
}

/// Records read at each end of the id order where the column leads no index.
pub const ROWS: usize = 1_000;

/// How a column's samples are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// The column's own minimum and maximum: through an index that starts with it,
    /// or where the id has no index either (two scans, no sort).
    Whole,
    /// The minimum and maximum of the first and last `ROWS` records by id.
    Ends,
}

impl Reach {
    /// The reach, from whether reading the column in its order sorts the table and
    /// whether reading the records in id order does (the two `probes`).
    pub fn judged(column_sorts: bool, id_sorts: bool) -> Self {
        if column_sorts && !id_sorts {
            Reach::Ends
        } else {
            Reach::Whole
        }
    }
}

/// Two statements whose plans tell the reach: the column in its own order, the records
/// in id order. `table`, `column` and `id` are quoted.
pub fn probes(table: &str, column: &str, id: &str) -> [String; 2] {
    [
        format!(
            "SELECT {column} FROM {table} WHERE {column} IS NOT NULL ORDER BY {column} DESC LIMIT 1"
        ),
        // LIMIT 1: whether an index gives the order, which a small table's planner
        // would weigh against a sort for all of `ROWS`.
        format!("SELECT {column} FROM {table} ORDER BY {id} DESC LIMIT 1"),
    ]
}

/// The statements that read the samples; each gives one row of two values, the newest
/// and oldest it found, either NULL. `value` writes the selected expression of an
/// aggregate (a cast on PostgreSQL, applied after the aggregate so that an index on
/// the column still serves it; the aggregate itself elsewhere).
pub fn statements(
    table: &str,
    column: &str,
    id: &str,
    value: &dyn Fn(&str) -> String,
    reach: Reach,
) -> Vec<String> {
    let (max, min) = (
        value(&format!("max({column})")),
        value(&format!("min({column})")),
    );
    match reach {
        // One aggregate a subquery, which is how SQLite reads each through the index.
        Reach::Whole => vec![format!(
            "SELECT (SELECT {max} FROM {table}), (SELECT {min} FROM {table})"
        )],
        Reach::Ends => ["DESC", "ASC"]
            .map(|end| {
                format!(
                    "SELECT {max}, {min} FROM (SELECT {column} FROM {table} ORDER BY {id} {end} LIMIT {ROWS}) ends"
                )
            })
            .to_vec(),
    }
}

/// What a backend does for `read`: plan a statement, run one.
pub trait Sampler {
    /// Whether `sql`, one of the `probes`, sorts the rows it reads to have them in
    /// the order of `column` (its name as the table has it): by its plan, or by
    /// whether an index starts with the column where a planner weighs a small
    /// table's sort against its index.
    fn sorts(&mut self, sql: &str, column: &str) -> Result<bool, StoreError>;
    /// The non-NULL values of the one row `sql` returns.
    fn pair(&mut self, sql: &str) -> Result<Vec<Sample>, StoreError>;
}

/// A column to sample: its table's, its own and the id column's names, quoted, and
/// as the table has them (for the `-v` note and a catalog's lookup).
pub struct Target<'a> {
    table: &'a str,
    column: String,
    id: String,
    named: [&'a str; 3],
}

impl<'a> Target<'a> {
    /// `table` is quoted already (with its schema, on a server); `table_name` is the
    /// schedule file's.
    pub fn new(table: &'a str, column: &'a str, id: &'a str, table_name: &'a str) -> Self {
        Target {
            table,
            column: quote(column),
            id: quote(id),
            named: [table_name, column, id],
        }
    }
}

/// The samples of a column, newest first.
pub fn read(
    sampler: &mut dyn Sampler,
    target: &Target<'_>,
    value: &dyn Fn(&str) -> String,
) -> Result<Vec<Sample>, StoreError> {
    let (table, column, id, named) = (target.table, &*target.column, &*target.id, target.named);
    let [by_column, by_id] = probes(table, column, id);
    // The id's order is asked only where the column's own would sort.
    let column_sorts = sampler.sorts(&by_column, named[1])?;
    let reach = Reach::judged(
        column_sorts,
        column_sorts && sampler.sorts(&by_id, named[2])?,
    );
    if reach == Reach::Ends {
        let [table, column, id] = named;
        tracing::debug!(
            "reading {column} of {table} in order would sort the table: its format is read from the first and last {ROWS} records by {id}"
        );
    }
    let mut samples = Vec::new();
    for sql in statements(table, column, id, value, reach) {
        samples.extend(sampler.pair(&sql)?);
    }
    Ok(samples)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_an_index_the_ends_of_the_id_order_are_read() {
        let plain = |c: &str| c.to_string();
        let sql = statements("\"t\"", "\"at\"", "\"id\"", &plain, Reach::Ends);
        assert_eq!(
            sql,
            [
                "SELECT max(\"at\"), min(\"at\") FROM (SELECT \"at\" FROM \"t\" ORDER BY \"id\" DESC LIMIT 1000) ends",
                "SELECT max(\"at\"), min(\"at\") FROM (SELECT \"at\" FROM \"t\" ORDER BY \"id\" ASC LIMIT 1000) ends",
            ]
        );
    }

    #[test]
    fn a_cast_applies_to_the_aggregate() {
        let cast = |c: &str| format!("{c}::text");
        assert_eq!(
            statements("t", "at", "id", &cast, Reach::Whole),
            ["SELECT (SELECT max(at)::text FROM t), (SELECT min(at)::text FROM t)"]
        );
    }

    #[test]
    fn the_ends_only_where_the_column_sorts_and_the_ids_do_not() {
        assert_eq!(Reach::judged(true, false), Reach::Ends);
        assert_eq!(Reach::judged(false, false), Reach::Whole);
        assert_eq!(Reach::judged(true, true), Reach::Whole);
        assert_eq!(Reach::judged(false, true), Reach::Whole);
    }
}

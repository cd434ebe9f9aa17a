//! The records of a band by status, read through an index that starts with the status
//! where none starts with the inserted-at column: for the tick that found nothing
//! pending (a sample, `Range::sample`), and for `status` and the metrics (all of them).
//!
//! Such a tick looks at up to 1,000 records of its band for statuses that differ from a
//! pending value only in case. Through an index that starts with the inserted-at column
//! that is one short range read. Where the only index is on (status, inserted-at) (the
//! layout this workload asks for), `WHERE inserted-at in the band LIMIT 1000` has no
//! index to read and scans the table, the whole of it when the band is empty: 74 ms of
//! a 0.1 s tick on 1,000,000 PostgreSQL rows, at every empty tick (docs/benchmarks.md, issue
//! 15). There the statuses are read one at a time: the table's distinct statuses
//! through the index (`min(status) WHERE status > the last`, a seek each), and each
//! one's records in the band, a range of the same index, up to the sample's size. The
//! metrics (`--metrics-file`, at every tick) count every band of the table: a scan of
//! the table per band that way, 0.84 s a tick on those 1,000,000 rows; one range of
//! the index per status and band, each record read once.

use super::Range;
use super::sql::{Sql, Value, failed};
use crate::record::Scalar;
use crate::store::StoreError;

/// The user's table as the count names it, and the few things each backend writes its
/// own way. Names are quoted; in a template, `{}` stands for an expression.
pub struct Statuses<'a> {
    /// The user's table, quoted.
    pub table: &'a str,
    /// Its status column, quoted.
    pub status: &'a str,
    /// Its inserted-at column, quoted.
    pub inserted_at: &'a str,
    /// The status as the counts are grouped and read: by its text (PostgreSQL, whose
    /// column may be an enum), its bytes (MySQL, whose collation may fold case), or as
    /// it is (SQLite).
    pub grouped: &'static str,
    /// `min(status)` as read, to be bound again as `bound`.
    pub least: &'static str,
    /// A bound status as the column compares it (PostgreSQL: cast to its type).
    pub bound: &'a str,
    /// Whether no index starts with the inserted-at column and one starts with the
    /// status and then it: the statuses are counted one at a time through it.
    pub by_index: bool,
}

/// The records of `range` counted by status, through the shared statements.
pub fn count_by_status(
    sql: &mut dyn Sql,
    t: &Statuses<'_>,
    range: &Range,
    context: &str,
) -> Result<Vec<(String, u64)>, StoreError> {
    let ins = t.inserted_at;
    let mut clauses = vec!["1 = 1".to_string()];
    let mut bounds: Vec<Value> = Vec::new();
    if let Some(from) = &range.from {
        let op = if range.from_exclusive { ">" } else { ">=" };
        bounds.push(Value::Scalar(from.clone()));
        clauses.push(format!("{ins} {op} ?{}", bounds.len()));
    }
    if let Some(to) = &range.to {
        let op = if range.to_inclusive { "<=" } else { "<" };
        bounds.push(Value::Scalar(to.clone()));
        clauses.push(format!("{ins} {op} ?{}", bounds.len()));
    }
    let band = clauses.join(" AND ");
    if t.by_index {
        let least = t.least.replace("{}", &format!("min({})", t.status));
        let mut index = SqlStatuses {
            sql: &mut *sql,
            next: [
                format!("SELECT {least} FROM {}", t.table),
                format!(
                    "SELECT {least} FROM {} WHERE {} > {}",
                    t.table,
                    t.status,
                    t.bound.replace("{}", "?1")
                ),
            ],
            count: count_sql(
                t.table,
                t.status,
                &band,
                &t.bound.replace("{}", &format!("?{}", bounds.len() + 1)),
                range.sample,
            ),
            bounds: bounds.clone(),
            context,
        };
        if let Some(counts) = counts(&mut index, range.sample.is_none())? {
            return Ok(counts);
        }
    }
    let status = t.grouped.replace("{}", t.status);
    let statement = match range.sample {
        None => format!(
            "SELECT {status}, count(*) FROM {} WHERE {band} GROUP BY 1 ORDER BY 1",
            t.table
        ),
        Some(n) => format!(
            "SELECT s, count(*) FROM (SELECT {status} AS s FROM {} WHERE {band} LIMIT {n}) x GROUP BY 1 ORDER BY 1",
            t.table
        ),
    };
    Ok(sql
        .query_user(&statement, &bounds)
        .map_err(failed(context))?
        .into_iter()
        .map(|row| {
            let n = match row[1] {
                Some(Scalar::Int(n)) => n.max(0) as u64,
                _ => 0,
            };
            (
                row[0].as_ref().map(Scalar::to_string).unwrap_or_default(),
                n,
            )
        })
        .collect())
}

/// `StatusIndex` through the shared statements: statuses read and bound as the
/// backend gives them.
struct SqlStatuses<'a> {
    sql: &'a mut dyn Sql,
    /// The first status, the next one.
    next: [String; 2],
    count: String,
    /// The band's bounds, bound before the status.
    bounds: Vec<Value>,
    context: &'a str,
}

impl StatusIndex for SqlStatuses<'_> {
    fn next(&mut self, after: Option<&Scalar>) -> Result<Option<Scalar>, StoreError> {
        let rows = match after {
            None => self.sql.query_user(&self.next[0], &[]),
            Some(after) => self
                .sql
                .query_user(&self.next[1], &[Value::Scalar(after.clone())]),
        }
        .map_err(failed(self.context))?;
        Ok(rows
            .into_iter()
            .next()
            .and_then(|r| r.into_iter().next())
            .flatten())
    }

    fn count(&mut self, status: &Scalar) -> Result<u64, StoreError> {
        let mut params = self.bounds.clone();
        params.push(Value::Scalar(status.clone()));
        let rows = self
            .sql
            .query(&self.count, &params)
            .map_err(failed(self.context))?;
        Ok(rows.first().and_then(|r| r[0].int()).unwrap_or(0).max(0) as u64)
    }
}

/// Distinct statuses read at most: a status column holds few, and one holding free
/// text should not make a tick read it all.
pub const MOST: usize = 64;

/// What a backend does for `counts`.
pub trait StatusIndex {
    /// The smallest status above `after` (the smallest of all without), by the index.
    fn next(&mut self, after: Option<&Scalar>) -> Result<Option<Scalar>, StoreError>;
    /// How many records of the band hold `status`, up to the sample's size if any.
    fn count(&mut self, status: &Scalar) -> Result<u64, StoreError>;
}

/// The band's records by status, each status counted up to the sample's size, if
/// any. None where counting `exact`ly met more than `MOST` statuses: the caller counts
/// the band as a whole instead. A sample keeps what it read.
pub fn counts(
    index: &mut dyn StatusIndex,
    exact: bool,
) -> Result<Option<Vec<(String, u64)>>, StoreError> {
    let mut counts = Vec::new();
    let mut after = None;
    for _ in 0..MOST {
        let Some(status) = index.next(after.as_ref())? else {
            return Ok(Some(counts));
        };
        let n = index.count(&status)?;
        if n > 0 {
            counts.push((status.to_string(), n));
        }
        after = Some(status);
    }
    Ok((!exact).then_some(counts))
}

/// The statement of `StatusIndex::count`: `band` is the band's condition on the
/// inserted-at column, `placeholder` binds the status; a sample counts up to `limit`.
pub fn count_sql(
    table: &str,
    status: &str,
    band: &str,
    placeholder: &str,
    limit: Option<usize>,
) -> String {
    let rows = format!("{table} WHERE {status} = {placeholder} AND {band}");
    match limit {
        Some(n) => format!("SELECT count(*) FROM (SELECT 1 FROM {rows} LIMIT {n}) sample"),
        None => format!("SELECT count(*) FROM {rows}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A table's statuses in order, with their counts in the band.
    struct Fake(Vec<(&'static str, u64)>, usize);

    impl StatusIndex for Fake {
        fn next(&mut self, after: Option<&Scalar>) -> Result<Option<Scalar>, StoreError> {
            self.1 += 1;
            let after = after.map(|s| s.to_string());
            Ok(self
                .0
                .iter()
                .find(|(s, _)| after.as_deref().is_none_or(|a| *s > a))
                .map(|(s, _)| Scalar::Text(s.to_string())))
        }

        fn count(&mut self, status: &Scalar) -> Result<u64, StoreError> {
            let status = status.to_string();
            Ok(self.0.iter().find(|(s, _)| *s == status).map_or(0, |c| c.1))
        }
    }

    #[test]
    fn each_status_is_counted_and_the_empty_ones_left_out() {
        let mut index = Fake(
            vec![("ERROR", 0), ("NEW", 3), ("SUCCESS", 1000), ("new", 2)],
            0,
        );
        assert_eq!(
            counts(&mut index, true).unwrap().unwrap(),
            [
                ("NEW".to_string(), 3),
                ("SUCCESS".to_string(), 1000),
                ("new".to_string(), 2)
            ]
        );
        assert_eq!(index.1, 5, "four statuses and the look past the last");
        assert_eq!(counts(&mut index, false).unwrap().unwrap().len(), 3);
    }

    #[test]
    fn a_column_of_many_values_is_sampled_only_so_far_and_counted_whole() {
        let many: Vec<(&'static str, u64)> = (0..200)
            .map(|i| (&*Box::leak(format!("{i:03}").into_boxed_str()), 1))
            .collect();
        let mut index = Fake(many, 0);
        assert_eq!(counts(&mut index, false).unwrap().unwrap().len(), MOST);
        assert_eq!(
            counts(&mut index, true).unwrap(),
            None,
            "counted as a whole"
        );
    }
}

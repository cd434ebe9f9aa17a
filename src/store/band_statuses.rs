//! The records of a band by status, read through an index that starts with the status
//! where none starts with the inserted-at column: for the tick that found nothing
//! pending (a sample, `Range::sample`), and for `status` and the metrics (all of them).
//!
//! Such a tick looks at up to 1,000 records of its band for statuses that differ from a
//! pending value only in case. Through an index that starts with the inserted-at column
//! that is one short range read. Where the only index is on (status, inserted-at) (the
//! layout this workload asks for), `WHERE inserted-at in the band LIMIT 1000` has no
//! index to read and scans the table, the whole of it when the band is empty: 74 ms of
//! a 0.1 s tick on 1,000,000 PostgreSQL rows, at every empty tick (BENCHMARKS.md, issue
//! 15). There the statuses are read one at a time: the table's distinct statuses
//! through the index (`min(status) WHERE status > the last`, a seek each), and each
//! one's records in the band, a range of the same index, up to the sample's size. The
//! metrics (`--metrics-file`, at every tick) count every band of the table: a scan of
//! the table per band that way, 0.84 s a tick on those 1,000,000 rows; one range of
//! the index per status and band, each record read once.

use crate::record::Scalar;
use crate::store::StoreError;

/// Distinct statuses read at most: a status column holds few, and one holding free
/// text should not make a tick read it all.
pub(super) const MOST: usize = 64;

/// What a backend does for `counts`.
pub(super) trait StatusIndex {
    /// The smallest status above `after` (the smallest of all without), by the index.
    fn next(&mut self, after: Option<&Scalar>) -> Result<Option<Scalar>, StoreError>;
    /// How many records of the band hold `status`, up to the sample's size if any.
    fn count(&mut self, status: &Scalar) -> Result<u64, StoreError>;
}

/// The band's records by status, each status counted up to the sample's size, if
/// any. None where counting `exact`ly met more than `MOST` statuses: the caller counts
/// the band as a whole instead. A sample keeps what it read.
pub(super) fn counts(
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

/// The statements of `StatusIndex::next`: the first status, and the one after the
/// status `placeholder` binds. Names are quoted; `value` writes the selected expression
/// of the aggregate (a cast to text on PostgreSQL).
pub(super) fn next_sql(
    table: &str,
    status: &str,
    placeholder: &str,
    value: &dyn Fn(&str) -> String,
) -> [String; 2] {
    let min = value(&format!("min({status})"));
    [
        format!("SELECT {min} FROM {table}"),
        format!("SELECT {min} FROM {table} WHERE {status} > {placeholder}"),
    ]
}

/// The statement of `StatusIndex::count`: `band` is the band's condition on the
/// inserted-at column, `placeholder` binds the status; a sample counts up to `limit`.
pub(super) fn count_sql(
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

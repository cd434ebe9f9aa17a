//! After a tick that found nothing pending: pending statuses spelt in another case than
//! the table's. Statuses are compared exactly, case included, on every backend (MySQL
//! compares the bytes beside its collation, which may fold case), so `pending =
//! ["PENDING"]` over a table of `pending` selects nothing, silently, at every tick. The
//! tick says so, once, naming both spellings and the line of the file to change.
//!
//! It looks only when the tick took nothing, and never reads more than a bounded sample,
//! so the look costs what an empty band costs, not what the table does: see
//! `SAMPLE`.

use crate::config::TableConfig;
use crate::store::{BandQuery, Range, Store};

/// Records looked at, at most, in the band and then in the table. `count_by_status`
/// with a sample (the query `backlog doctor` counts the whole table with) reads them
/// as `SELECT … FROM (SELECT status … LIMIT 1000)`: in the band, a range of the
/// inserted-at index the selection just read; in the table, with no condition and no
/// order, the first 1,000 rows the server comes to, where a scan stops. Where the only
/// index is on (status, inserted-at), it reads the table's distinct statuses by seeks
/// instead, at most 64 of them and 1,000 index entries each (`band_statuses`). Either
/// way a bounded read, whatever the table's size: the table's sample took 0.23 ms on a
/// SQLite table of 1,000,000 rows as on one of 1,000, and 0.3 ms on PostgreSQL's
/// 1,000,000 (a sequential scan stopped at row 1,000), measured for issue 43.
const SAMPLE: usize = 1000;

/// Warns, once, when a sample of the band, or failing that of the table, holds
/// statuses that differ only in case from a pending value that it does not hold.
/// A store that cannot count says nothing: this is advice, not the tick's work.
pub(super) fn warn_of_near_statuses(table: &TableConfig, store: &mut dyn Store, band: &BandQuery) {
    let in_band = Range {
        from: Some(band.from.clone()),
        to: Some(band.to.clone()),
        to_inclusive: band.to_inclusive,
        sample: Some(SAMPLE),
        ..Default::default()
    };
    // The band may be empty, or hold only other statuses, while the records the file
    // misnames sit in other tiers' bands: the table is looked at next.
    let in_table = Range {
        sample: Some(SAMPLE),
        ..Default::default()
    };
    for (range, place) in [(in_band, "the band"), (in_table, "the table")] {
        let Ok(counts) = store.count_by_status(&range) else {
            return;
        };
        if let Some(why) = near(table, &counts) {
            tracing::warn!(
                "no record of this band is pending, yet a sample of {place} holds statuses that differ from a pending value only in case: {why}"
            );
            return;
        }
    }
}

/// What a sample's `counts` say of the file's statuses, if a pending value of the file
/// is missing from them while a spelling of it in another case is there: those
/// spellings, and the fix (`table.pending` as the table spells it, and `table.error`
/// and `table.success` where the sample holds them in another case too).
fn near(table: &TableConfig, counts: &[(String, u64)]) -> Option<String> {
    let held = |value: &str| counts.iter().any(|(s, _)| s == value);
    // The table's spellings of `value` in another case, when it has none as written.
    let others = |value: &str| -> Vec<&(String, u64)> {
        if held(value) {
            return Vec::new();
        }
        let folded = value.to_lowercase();
        counts
            .iter()
            .filter(|(s, _)| s.to_lowercase() == folded)
            .collect()
    };
    let mut found = Vec::new();
    let mut pending = Vec::new();
    for value in &table.pending {
        let spelt = others(value);
        if spelt.is_empty() {
            pending.push(format!("{value:?}"));
        }
        for (status, n) in spelt {
            found.push(format!("{n} {status:?} (the file says {value:?})"));
            pending.push(format!("{status:?}"));
        }
    }
    if found.is_empty() {
        return None;
    }
    let mut fix = vec![format!("table.pending = [{}]", pending.join(", "))];
    for (key, value) in [("error", &table.error), ("success", &table.success)] {
        if let Some((status, _)) = others(value).first() {
            fix.push(format!("table.{key} = {status:?}"));
        }
    }
    Some(format!(
        "{}; statuses are compared exactly, case included: set {} in the schedule file (backlog doctor lists the table's statuses)",
        found.join(", "),
        fix.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(list: &[(&str, u64)]) -> Vec<(String, u64)> {
        list.iter().map(|(s, n)| (s.to_string(), *n)).collect()
    }

    #[test]
    fn pending_values_in_another_case_are_named_with_the_fix() {
        let mut table = TableConfig::new("orders", "id", "state", "created_at");
        table.pending = vec!["PENDING".into(), "FAILED".into()];
        table.error = "FAILED".into();
        table.success = "DONE".into();
        let sample = counts(&[("done", 40), ("failed", 3), ("pending", 5)]);
        assert_eq!(
            near(&table, &sample).unwrap(),
            "5 \"pending\" (the file says \"PENDING\"), 3 \"failed\" (the file says \"FAILED\"); statuses are compared exactly, case included: set table.pending = [\"pending\", \"failed\"], table.error = \"failed\", table.success = \"done\" in the schedule file (backlog doctor lists the table's statuses)"
        );
    }

    #[test]
    fn a_value_the_sample_holds_as_written_is_no_misspelling() {
        let table = TableConfig::new("orders", "id", "state", "created_at");
        // NEW is there as written: `new` is some other status of the table's.
        assert_eq!(near(&table, &counts(&[("NEW", 2), ("new", 1)])), None);
        assert_eq!(near(&table, &counts(&[("SUCCESS", 9)])), None);
        assert_eq!(near(&table, &[]), None);
        // One value misspelt, the other absent: only the first is named.
        let line = near(&table, &counts(&[("Error", 2), ("SUCCESS", 9)])).unwrap();
        assert!(
            line.starts_with("2 \"Error\" (the file says \"ERROR\"); "),
            "{line}"
        );
        assert!(
            line.contains("set table.pending = [\"NEW\", \"Error\"], table.error = \"Error\" in"),
            "{line}"
        );
    }
}

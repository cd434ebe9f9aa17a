//! Checks of what a store reads of the user's table: a band's pages, single records,
//! counts by status, the inserted-at column's values.

use std::collections::BTreeMap;
use std::time::Duration;

use backlog_core::Scalar;
use backlog_core::chrono::{DateTime, Utc};
use backlog_core::store::{BandQuery, Cursor, Range, Store};

use crate::Harness;
use crate::fixture::{Backlog, Flavour, Row, id_of, ids};

/// Reads the whole band a page of `size` at a time, each page after the last's cursor,
/// and returns the records' ids in the order read.
fn read_band(store: &mut dyn Store, band: &BandQuery, size: usize) -> Vec<i64> {
    let mut read = Vec::new();
    let mut cursor: Option<Cursor> = None;
    for _ in 0..1000 {
        let page = store
            .select(band, cursor.as_ref(), size)
            .unwrap_or_else(|e| panic!("select: {e}"));
        assert!(
            page.len() <= size,
            "select returned {} records, asked for {size}",
            page.len()
        );
        read.extend(ids(&page));
        match page.last() {
            Some(last) if page.len() == size => cursor = Some(Cursor::after(last)),
            _ => return read,
        }
    }
    panic!("select never reached the band's end: {read:?}")
}

/// `select` reads a band's pending records (`NEW` and `ERROR`, not `SUCCESS`) newest
/// first, ties of inserted-at broken by id, descending, a page at a time after each
/// page's keyset cursor: every record once, none outside the band; each record with
/// its inserted-at instant. For every inserted-at format the database can hold.
///
/// Why: a tick streams its band by these pages (memory does not grow with the
/// backlog); a cursor that skips ties loses records, one that repeats them hands a
/// record out twice, and the newest-first order is the schedule's promise.
pub fn select_pages_a_band_newest_first_without_repeats(h: &dyn Harness) {
    for flavour in Flavour::all(h) {
        let backlog = Backlog::new(h, flavour);
        let mut rows: Vec<Row> = (1..=20)
            .map(|id| Row {
                id,
                status: "NEW",
                at: backlog.ago(id * 7),
            })
            .collect();
        for (id, status, minutes) in [
            // Ties with record 5, on either side of its id.
            (21, "NEW", 35),
            (4_000, "NEW", 35),
            (22, "ERROR", 100),
            (23, "ERROR", 200),
            (30, "SUCCESS", 14),
            (31, "SUCCESS", 50),
            // Older than the band.
            (40, "NEW", 2 * 24 * 60),
            (41, "ERROR", 10 * 24 * 60),
        ] {
            rows.push(Row {
                id,
                status,
                at: backlog.ago(minutes),
            });
        }
        backlog.insert(&rows);
        let mut expected: Vec<&Row> = rows
            .iter()
            .filter(|r| r.status != "SUCCESS" && r.at > backlog.ago(24 * 60))
            .collect();
        expected.sort_by_key(|r| std::cmp::Reverse((r.at, r.id)));
        let expected: Vec<i64> = expected.iter().map(|r| r.id).collect();

        let (mut store, format) = backlog.ready();
        let band = backlog.day_band(&format);
        for size in [4, 5, 1000] {
            assert_eq!(
                read_band(store.as_mut(), &band, size),
                expected,
                "{flavour:?}: the band read in pages of {size}, against the records newest first"
            );
        }
        let page = store.select(&band, None, 1000).unwrap();
        for record in &page {
            let row = rows.iter().find(|r| r.id == id_of(record)).unwrap();
            assert_eq!(
                record.inserted_time,
                Some(row.at),
                "{flavour:?}: record {}'s inserted_time",
                row.id
            );
            assert_eq!(&*record.status, row.status, "record {}'s status", row.id);
            assert_eq!(
                format.decode(&record.inserted_at()),
                Some(row.at),
                "{flavour:?}: record {}'s inserted_at value",
                row.id
            );
        }
    }
}

/// A band's lower bound is inclusive, its upper bound exclusive unless
/// `to_inclusive`, to the second, for every inserted-at format.
///
/// Why: neighbouring tiers' bands meet at a bound: a record exactly on it belongs to
/// one of them, never to both (tried twice as often) nor to neither (never tried).
pub fn select_keeps_to_the_band_bounds(h: &dyn Harness) {
    for flavour in Flavour::all(h) {
        let backlog = Backlog::new(h, flavour);
        // Ages in minutes: 60 is the lower bound, 10 the upper.
        backlog.insert_new([(1, 60), (2, 61), (3, 10), (4, 11), (5, 30), (6, 9)]);
        let (mut store, format) = backlog.ready();
        let mut band = BandQuery {
            from: format.encode(backlog.ago(60)),
            to: format.encode(backlog.ago(10)),
            to_inclusive: false,
            ..backlog.day_band(&format)
        };
        assert_eq!(
            read_band(store.as_mut(), &band, 100),
            [4, 5, 1],
            "{flavour:?}: [60 min, 10 min) ago"
        );
        band.to_inclusive = true;
        assert_eq!(
            read_band(store.as_mut(), &band, 100),
            [3, 4, 5, 1],
            "{flavour:?}: [60 min, 10 min] ago"
        );
    }
}

/// `oldest_of` reads records of the given statuses oldest first, up to a limit and
/// before a time; `oldest_pending` the oldest pending one; `find` a record by its id
/// as a person types it, with every column, or none.
///
/// Why: `status` shows the oldest pending record's age (the backlog's lag), and
/// `show ID` / `retry ID` start from `find`.
pub fn oldest_of_and_find_read_single_records(h: &dyn Harness) {
    let backlog = Backlog::new(h, Flavour::Rfc3339Text);
    let rows = [
        (1, "NEW", 50),
        (2, "ERROR", 40),
        (3, "SUCCESS", 60),
        (4, "NEW", 30),
        (5, "NEW", 3 * 24 * 60),
    ]
    .map(|(id, status, minutes)| Row {
        id,
        status,
        at: backlog.ago(minutes),
    });
    backlog.insert(&rows);
    let (mut store, _) = backlog.ready();
    let mut oldest = |statuses: &[&str], before: Option<DateTime<Utc>>, limit| {
        let statuses: Vec<String> = statuses.iter().map(|s| s.to_string()).collect();
        ids(&store
            .oldest_of(&statuses, before, limit)
            .unwrap_or_else(|e| panic!("oldest_of: {e}")))
    };
    assert_eq!(oldest(&["NEW"], None, 2), [5, 1]);
    assert_eq!(oldest(&["NEW", "ERROR"], None, 10), [5, 1, 2, 4]);
    assert_eq!(oldest(&["SUCCESS"], None, 10), [3]);
    assert_eq!(oldest(&["NEW", "ERROR"], Some(backlog.ago(45)), 10), [5, 1]);
    assert_eq!(oldest(&["GIVEN_UP"], None, 10), Vec::<i64>::new());
    let pending = store.oldest_pending().unwrap().map(|r| id_of(&r));
    assert_eq!(pending, Some(5), "oldest_pending");

    let record = store
        .find("4")
        .unwrap_or_else(|e| panic!("find: {e}"))
        .expect("find(\"4\") finds record 4");
    assert_eq!(record.id, Scalar::Int(4));
    assert_eq!(&*record.status, "NEW");
    assert_eq!(record.inserted_time, Some(backlog.ago(30)));
    assert_eq!(
        record.columns.get("payload").and_then(|v| v.as_str()),
        Some("payload of 4"),
        "record 4's columns: {:?}",
        record.columns
    );
    assert!(
        store.find("99").unwrap().is_none(),
        "find(\"99\") finds a record"
    );
    // Text no integer id can be is said so, not "no record" (`show abc`).
    match store.find("abc").map(|r| r.is_some()) {
        Err(e @ backlog_core::store::StoreError::NotAnId { .. }) => assert!(
            e.to_string().starts_with("\"abc\" is not an id of table ")
                && e.to_string().ends_with(" column holds integers"),
            "{e}"
        ),
        other => panic!("find(\"abc\") on BIGINT ids: {other:?}"),
    }
}

/// `count_by_status` counts the records of each status whose inserted-at value is in
/// a range, with each bound inclusive or exclusive as the range says, or unbounded.
///
/// Why: `status` and the metrics show these counts per band; a bound off by one
/// counts a record in two bands or none.
pub fn count_by_status_counts_a_range(h: &dyn Harness) {
    let backlog = Backlog::new(h, Flavour::Rfc3339Text);
    let rows = [
        (1, "NEW", 10),
        (2, "NEW", 20),
        (3, "NEW", 30),
        (4, "ERROR", 20),
        (5, "SUCCESS", 30),
        (6, "SUCCESS", 40),
    ]
    .map(|(id, status, minutes)| Row {
        id,
        status,
        at: backlog.ago(minutes),
    });
    backlog.insert(&rows);
    let (mut store, format) = backlog.ready();
    let mut count = |range: Range| -> BTreeMap<String, u64> {
        store
            .count_by_status(&range)
            .unwrap_or_else(|e| panic!("count_by_status: {e}"))
            .into_iter()
            .filter(|(_, n)| *n > 0)
            .collect()
    };
    let counts = |pairs: &[(&str, u64)]| -> BTreeMap<String, u64> {
        pairs.iter().map(|(s, n)| (s.to_string(), *n)).collect()
    };
    assert_eq!(
        count(Range::default()),
        counts(&[("NEW", 3), ("ERROR", 1), ("SUCCESS", 2)]),
        "the whole table"
    );
    let (from, to) = (
        format.encode(backlog.ago(30)),
        format.encode(backlog.ago(10)),
    );
    assert_eq!(
        count(Range {
            from: Some(from.clone()),
            to: Some(to.clone()),
            ..Range::default()
        }),
        counts(&[("NEW", 2), ("ERROR", 1), ("SUCCESS", 1)]),
        "[30 min, 10 min) ago"
    );
    assert_eq!(
        count(Range {
            from: Some(from),
            from_exclusive: true,
            to: Some(to),
            to_inclusive: true,
            ..Range::default()
        }),
        counts(&[("NEW", 2), ("ERROR", 1)]),
        "(30 min, 10 min] ago"
    );
    assert_eq!(
        count(Range {
            to: Some(format.encode(backlog.ago(30))),
            ..Range::default()
        }),
        counts(&[("SUCCESS", 1)]),
        "before 30 min ago"
    );
}

/// `inserted_at_page` reads the inserted-at column's distinct values in ascending
/// order a page at a time, and `scan_inserted_at` reads them all and finds none bad.
///
/// Why: `doctor` scans the column this way for values the format cannot read (which
/// would have no age), over tables of millions of rows, a page at a time.
pub fn inserted_at_page_reads_distinct_values_in_order(h: &dyn Harness) {
    let backlog = Backlog::new(h, Flavour::Rfc3339Text);
    backlog.insert_new([(1, 10), (2, 10), (3, 20), (4, 30), (5, 30), (6, 40)]);
    let (mut store, format) = backlog.ready();
    let times = |values: Vec<Scalar>| -> Vec<Option<DateTime<Utc>>> {
        values.iter().map(|v| format.decode(v)).collect()
    };
    let first = store
        .inserted_at_page(None, 3)
        .unwrap_or_else(|e| panic!("inserted_at_page: {e}"));
    let after = first.last().cloned().expect("a first page");
    assert_eq!(
        times(first),
        [40, 30, 20].map(|m| Some(backlog.ago(m))),
        "the first page of 3"
    );
    let second = store.inserted_at_page(Some(&after), 3).unwrap();
    assert_eq!(times(second), [Some(backlog.ago(10))], "the page after it");
    let scan = store
        .scan_inserted_at(Duration::from_secs(30))
        .unwrap_or_else(|e| panic!("scan_inserted_at: {e}"));
    assert_eq!((scan.read, scan.complete), (4, true), "{scan:?}");
    assert!(scan.bad.is_empty(), "{scan:?}");
}

/// `oldest_in` reads the oldest inserted-at time of the records of some statuses in a
/// range, its bounds inclusive or exclusive as the range says, or none; in the
/// column's own type as in text.
///
/// Why: `status --check` asks it of each tier's band for how long new work has waited
/// for its first try (`check.warn_waiting`); a bound off by one, or a status of
/// another tier read, pages a person for a record that is not waiting.
pub fn oldest_in_reads_the_oldest_of_some_statuses_in_a_range(h: &dyn Harness) {
    for flavour in Flavour::all(h) {
        let backlog = Backlog::new(h, flavour);
        let rows = [
            (1, "NEW", 10),
            (2, "NEW", 20),
            (3, "ERROR", 50),
            (4, "SUCCESS", 60),
            (5, "NEW", 30),
            (6, "NEW", 90),
        ]
        .map(|(id, status, minutes)| Row {
            id,
            status,
            at: backlog.ago(minutes),
        });
        backlog.insert(&rows);
        let (mut store, format) = backlog.ready();
        let mut oldest = |statuses: &[&str], range: Range| {
            let statuses: Vec<String> = statuses.iter().map(|s| s.to_string()).collect();
            store
                .oldest_in(&statuses, &range)
                .unwrap_or_else(|e| panic!("{flavour:?}: oldest_in: {e}"))
        };
        let at = |minutes| Some(format.encode(backlog.ago(minutes)));
        assert_eq!(
            oldest(&["NEW"], Range::default()),
            Some(backlog.ago(90)),
            "{flavour:?}: the whole table"
        );
        let band = |from, to| Range {
            from: at(from),
            to: at(to),
            ..Range::default()
        };
        assert_eq!(
            oldest(&["NEW"], band(60, 0)),
            Some(backlog.ago(30)),
            "{flavour:?}: [60 min, now) ago"
        );
        assert_eq!(
            oldest(&["NEW", "ERROR"], band(60, 0)),
            Some(backlog.ago(50)),
            "{flavour:?}: two statuses"
        );
        assert_eq!(
            oldest(
                &["NEW"],
                Range {
                    from_exclusive: true,
                    ..band(30, 0)
                }
            ),
            Some(backlog.ago(20)),
            "{flavour:?}: (30 min, now) ago"
        );
        assert_eq!(
            oldest(&["NEW"], band(30, 20)),
            Some(backlog.ago(30)),
            "{flavour:?}: [30 min, 20 min) ago"
        );
        assert_eq!(
            oldest(&["SUCCESS", "GIVEN_UP"], band(50, 0)),
            None,
            "{flavour:?}: none of those statuses in the range"
        );
    }
}

//! A handler that logs each record's run, and the runs read back: what the fault
//! tests check for a record handed to a second handler while the first still ran.

use std::collections::BTreeMap;

/// A per-record handler that logs `start ID ns PPID` and `end ID ns PPID` around its
/// work (PPID: its tick's process): 100 ms a record, 5 s (longer than the lease) for
/// records 7, 17 and 27, among the first a tick hands out.
pub const HANDLER: &str = r#"#!/bin/sh
cat >/dev/null
echo "start $BACKLOG_RECORD_ID $(date +%s%N) $PPID" >> handler.log
case "$BACKLOG_RECORD_ID" in
  7 | 17 | 27) sleep 5 ;;
  *) sleep 0.1 ;;
esac
echo "end $BACKLOG_RECORD_ID $(date +%s%N) $PPID" >> handler.log
"#;

/// Each record's handler runs, from the log: a start with no end ran until the end
/// of the test (its tick never ended it), which `runs` counts as still running.
pub fn runs(log: &str) -> BTreeMap<i64, Vec<(u128, u128, u32)>> {
    let mut open: BTreeMap<(i64, u32), u128> = BTreeMap::new();
    let mut runs: BTreeMap<i64, Vec<(u128, u128, u32)>> = BTreeMap::new();
    for line in log.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        let (id, at, tick): (i64, u128, u32) = (
            f[1].parse().unwrap(),
            f[2].parse().unwrap(),
            f[3].parse().unwrap(),
        );
        if f[0] == "start" {
            open.insert((id, tick), at);
        } else if let Some(start) = open.remove(&(id, tick)) {
            runs.entry(id).or_default().push((start, at, tick));
        }
    }
    for ((id, tick), start) in open {
        runs.entry(id).or_default().push((start, u128::MAX, tick));
    }
    runs
}

/// Checks that no record was in two handlers at once; returns how many runs were a
/// record's second or later (done again after a fault).
pub fn one_at_a_time(log: &str) -> usize {
    let mut again = 0;
    for (id, mut runs) in runs(log) {
        runs.sort();
        for pair in runs.windows(2) {
            assert!(
                pair[1].0 >= pair[0].1,
                "record {id} was handed to a second handler (tick {}) at {} while the first (tick {}) ran until {}",
                pair[1].2,
                pair[1].0,
                pair[0].2,
                pair[0].1
            );
        }
        again += runs.len() - 1;
    }
    again
}

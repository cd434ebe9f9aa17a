//! Ticks that overlap never hand a record to two handlers at once; checked through the
//! handler's own log, not the tool's counters.

use std::collections::BTreeMap;
use std::process::{Command, Stdio};

use crate::harness::{Backend, Env, NOW, Schedule};

const LOGGING_HANDLER: &str = r#"#!/bin/sh
cat > /dev/null
echo "start $BACKLOG_RECORD_ID $(date +%s%N)" >> handler.log
sleep 0.01
echo "end $BACKLOG_RECORD_ID $(date +%s%N)" >> handler.log
"#;

/// Runs `backlog run` for each window at the same time and returns their JSON summaries.
fn run_together(env: &Env, windows: &[&str]) -> Vec<serde_json::Value> {
    let bin = assert_cmd::cargo::cargo_bin("backlog");
    let children: Vec<_> = windows
        .iter()
        .map(|w| {
            Command::new(&bin)
                .current_dir(env.dir.path())
                .args(["run", "--window", w, "--now", NOW, "--json"])
                .stdout(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    children
        .into_iter()
        .map(|c| {
            let out = c.wait_with_output().unwrap();
            assert!(out.status.success(), "{out:?}");
            serde_json::from_slice(&out.stdout).unwrap()
        })
        .collect()
}

/// Checks the handler log: no record's handler started while another of its own ran.
/// Returns how many times each record was handled.
pub fn handled_without_overlap(env: &Env) -> BTreeMap<i64, u64> {
    let log = std::fs::read_to_string(env.path("handler.log")).unwrap();
    let mut events: Vec<(u128, &str, i64)> = log
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            (f[2].parse().unwrap(), f[0], f[1].parse().unwrap())
        })
        .collect();
    events.sort();
    let mut running: BTreeMap<i64, bool> = BTreeMap::new();
    let mut count: BTreeMap<i64, u64> = BTreeMap::new();
    for (t, kind, id) in events {
        let busy = running.entry(id).or_default();
        match kind {
            "start" => {
                assert!(
                    !*busy,
                    "record {id} handed over a second time while its handler ran (at {t})"
                );
                *busy = true;
                *count.entry(id).or_default() += 1;
            }
            _ => *busy = false,
        }
    }
    count
}

fn backlog_of(backend: Backend, records: i64, bands: &'static str) -> Env {
    let env = Env::on(backend);
    env.create_table("TEXT");
    let aged: Vec<(i64, i64)> = (1..=records).map(|id| (id, id * 60)).collect();
    env.insert_aged(&aged, |t| t.format("%Y-%m-%d %H:%M:%S").to_string().into());
    env.write_schedule(&Schedule {
        bands,
        ..Schedule::default()
    });
    env.write_handler("handler.sh", LOGGING_HANDLER);
    env
}

fn the_same_tier_twice_at_once_shares_the_band(backend: Backend) {
    let env = backlog_of(backend, 300, "disjoint");
    let summaries = run_together(&env, &["1d", "1d"]);
    let handled = handled_without_overlap(&env);
    assert_eq!(handled.len(), 300, "every record was handled");
    let selected: u64 = summaries
        .iter()
        .map(|s| s["selected"].as_u64().unwrap())
        .sum();
    assert_eq!(
        selected,
        handled.values().sum::<u64>(),
        "the run summaries count what the handler log shows"
    );
    let logged = env.count(&format!(
        "SELECT CAST(sum(selected) AS BIGINT) FROM {}",
        env.own("backlog_runs")
    ));
    assert_eq!(
        logged as u64, selected,
        "the run log counts what the handler log shows"
    );
    assert!(env.statuses().iter().all(|(_, s)| s == "SUCCESS"));
}

fn two_cumulative_tiers_at_once_never_share_a_record(backend: Backend) {
    // Ages up to 200 minutes: the 1d and 7d tiers both cover every record.
    let env = backlog_of(backend, 200, "cumulative");
    run_together(&env, &["1d", "7d"]);
    let handled = handled_without_overlap(&env);
    assert_eq!(handled.len(), 200);
    assert!(env.statuses().iter().all(|(_, s)| s == "SUCCESS"));
    let claims = env.claims_left();
    assert_eq!(claims, 0);
}

crate::on_both_backends!(
    the_same_tier_twice_at_once_shares_the_band,
    two_cumulative_tiers_at_once_never_share_a_record,
);

//! Ticks that overlap never hand a record to two handlers at once; checked through the
//! handler's own log, not the tool's counters.

use std::collections::BTreeMap;
use std::process::Stdio;

use crate::harness::{Backend, Env, NOW, Schedule};

const LOGGING_HANDLER: &str = r#"#!/bin/sh
cat > /dev/null
echo "start $BACKLOG_RECORD_ID $(date +%s%N)" >> handler.log
sleep 0.01
echo "end $BACKLOG_RECORD_ID $(date +%s%N)" >> handler.log
"#;

/// Runs `backlog run` for each window at the same time and returns their JSON summaries.
fn run_together(env: &Env, windows: &[&str]) -> Vec<serde_json::Value> {
    let children: Vec<_> = windows
        .iter()
        .map(|w| {
            env.command()
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

/// The most handlers the handler log shows running at once, over all records.
pub fn peak_overlap(env: &Env) -> usize {
    let log = std::fs::read_to_string(env.path("handler.log")).unwrap();
    let mut events: Vec<(u128, i32)> = log
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            // At one instant an end comes before a start.
            (f[2].parse().unwrap(), if f[0] == "start" { 1 } else { -1 })
        })
        .collect();
    events.sort();
    let (mut now, mut peak) = (0i32, 0i32);
    for (_, step) in events {
        now += step;
        peak = peak.max(now);
    }
    peak as usize
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
    let claims = env.holds_left();
    assert_eq!(claims, 0);
}

/// Two ticks of one tier over a band of many pages, started together through the
/// library with pages of 10: they take turns page by page (SQLite: each skips the span
/// the other holds; PostgreSQL: the records the other claimed), both do part of the
/// work, and no record is in two handlers at once or handled twice.
fn two_ticks_take_turns_page_by_page(backend: Backend) {
    use std::collections::HashSet;
    use std::sync::{Arc, Barrier, Mutex};

    let env = backlog_of(backend, 400, "disjoint");
    let config = crate::harness::load_config(&env.path("backlog.toml"));
    let now = chrono::DateTime::parse_from_rfc3339(NOW).unwrap().to_utc();
    let in_flight = Arc::new(Mutex::new(HashSet::new()));
    let start = Arc::new(Barrier::new(2));
    let ticks: Vec<_> = (0..2)
        .map(|_| {
            let (config, in_flight, start) =
                (config.clone(), Arc::clone(&in_flight), Arc::clone(&start));
            std::thread::spawn(move || {
                let mut store = backlog_core::store::open(&config.database, &config.table).unwrap();
                let handled = Mutex::new(Vec::new());
                let mut handler = backlog_core::FnHandler(|record: &backlog_core::Record| {
                    let id = record.id.to_string();
                    assert!(
                        in_flight.lock().unwrap().insert(id.clone()),
                        "record {id} handed to two handlers at once"
                    );
                    std::thread::sleep(std::time::Duration::from_millis(2));
                    in_flight.lock().unwrap().remove(&id);
                    handled.lock().unwrap().push(id);
                    backlog_core::Outcome::Success
                });
                let mut opts =
                    backlog_core::TickOptions::new(std::time::Duration::from_secs(86_400), now);
                opts.page_size = 10;
                opts.mark_group = Some(5);
                start.wait();
                let summary = backlog_core::process_backlog(
                    &config.schedule,
                    &config.table,
                    store.as_mut(),
                    &mut handler,
                    &opts,
                    &mut |_| {},
                )
                .unwrap();
                (summary.selected, handled.into_inner().unwrap())
            })
        })
        .collect();
    let results: Vec<(u64, Vec<String>)> = ticks.into_iter().map(|t| t.join().unwrap()).collect();
    let mut all: Vec<&String> = results.iter().flat_map(|(_, h)| h).collect();
    let handled = all.len();
    all.sort();
    all.dedup();
    assert_eq!((handled, all.len()), (400, 400), "each record handled once");
    let selected: Vec<u64> = results.iter().map(|(n, _)| *n).collect();
    assert!(
        selected.iter().all(|n| *n >= 20),
        "both ticks took pages: {selected:?}"
    );
    assert_eq!(env.with_status("SUCCESS"), 400);
    assert_eq!(env.holds_left(), 0);
}

crate::on_every_backend!(
    the_same_tier_twice_at_once_shares_the_band,
    two_cumulative_tiers_at_once_never_share_a_record,
    two_ticks_take_turns_page_by_page,
);

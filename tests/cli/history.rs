//! The backlog's history: a week of real ticks (`backlog run --now` at instants hours
//! apart), read back by `status --json` and checked against the run log's rows.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Utc};
use serde_json::Value;

use crate::harness::{Backend, Env, NOW, Schedule};

/// Fails the records whose id is a multiple of 4 (so they stay pending and come back),
/// and sleeps 0.3 s on record 42 (once: it succeeds).
const HANDLER: &str = "#!/bin/sh\ncat > /dev/null\ncase \"$BACKLOG_RECORD_ID\" in\n  42) sleep 0.3 ;;\nesac\n[ $((BACKLOG_RECORD_ID % 4)) -ne 0 ]\n";

/// A tick of the week: its clock, its window and its run-log row.
pub(crate) struct Tick {
    pub(crate) clock: DateTime<Utc>,
    pub(crate) window: &'static str,
    pub(crate) run_id: i64,
}

/// 64 records, one every 3 hours over the 8 days before `end`; then, in the order of
/// their clocks, a tick of tier 1 (1d) every 6 hours and one of tier 2 (7d) every day
/// over the 7 days up to `end` (`end` included): 37 ticks.
pub(crate) fn week_of_ticks(backend: Backend, end: DateTime<Utc>) -> (Env, Vec<Tick>) {
    let env = Env::on(backend);
    env.create_table("TEXT");
    let aged: Vec<(i64, i64)> = (1..=64)
        .map(|id| (id, (192 - (id - 1) * 3) * 3600))
        .collect();
    env.insert_aged_at(end, &aged, |t| {
        t.format("%Y-%m-%d %H:%M:%S").to_string().into()
    });
    env.write_schedule(&Schedule::default());
    env.write_handler("handler.sh", HANDLER);
    let start = end - Duration::days(7);
    let mut planned: Vec<(DateTime<Utc>, &'static str)> = (0..=28)
        .map(|k| (start + Duration::hours(6 * k), "1d"))
        .chain((0..=7).map(|j| (start + Duration::days(j), "7d")))
        .collect();
    planned.sort();
    let ticks = planned
        .into_iter()
        .map(|(clock, window)| {
            let now = clock.to_rfc3339();
            let out = env
                .backlog(&["run", "--window", window, "--now", &now, "--json"])
                .assert()
                .success();
            let summary: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
            Tick {
                clock,
                window,
                run_id: summary["run_id"].as_i64().expect("a run id"),
            }
        })
        .collect();
    (env, ticks)
}

/// What the run log holds of a tick: handled, failed, pending, read by SQL.
fn logged(env: &Env, run_id: i64) -> (u64, u64, Option<u64>) {
    let runs = env.own("backlog_runs");
    let n = |c: &str| env.count(&format!("SELECT {c} FROM {runs} WHERE id = {run_id}")) as u64;
    let recorded = env.count(&format!(
        "SELECT count(*) FROM {runs} WHERE id = {run_id} AND pending IS NOT NULL"
    )) > 0;
    (n("selected"), n("failed"), recorded.then(|| n("pending")))
}

/// The points of tier `n`'s series, by start.
fn tier(series: &Value, n: u64) -> BTreeMap<String, Value> {
    let tier = series["tiers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["tier"] == n)
        .unwrap_or_else(|| panic!("tier {n} in {series}"));
    by_start(&tier["points"])
}

fn by_start(points: &Value) -> BTreeMap<String, Value> {
    points
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["start"].as_str().unwrap().to_string(), p.clone()))
        .collect()
}

fn start_of(t: DateTime<Utc>, secs: i64) -> String {
    let s = t.timestamp() - t.timestamp().rem_euclid(secs);
    DateTime::from_timestamp(s, 0)
        .unwrap()
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

fn history_of_a_week_of_ticks_agrees_with_the_run_log(backend: Backend) {
    let end = DateTime::parse_from_rfc3339(NOW)
        .unwrap()
        .with_timezone(&Utc);
    let (env, ticks) = week_of_ticks(backend, end);
    let status = |env: &Env| -> Value {
        let out = env
            .backlog(&["status", "--json", "--now", NOW])
            .assert()
            .success();
        serde_json::from_slice::<Value>(&out.get_output().stdout).unwrap()["history"].clone()
    };
    let history = status(&env);
    assert_eq!(history["timezone"], "UTC");
    let (hourly, daily) = (&history["hourly"], &history["daily"]);
    assert_eq!(
        hourly["from"], "2026-11-14T13:00:00Z",
        "167 hours before NOW's"
    );
    assert_eq!(hourly["until"], "2026-11-21T13:00:00Z");
    assert_eq!(
        daily["from"], "2026-08-24T00:00:00Z",
        "89 days before NOW's"
    );

    // Each tick of the week, bucketed here from its clock, against the history.
    for (window, n, hours) in [("1d", 1, 28), ("7d", 2, 7)] {
        let points = tier(hourly, n);
        let mine: Vec<&Tick> = ticks
            .iter()
            .filter(|t| t.window == window && t.clock > end - Duration::hours(168))
            .collect();
        assert_eq!(points.len(), hours, "tier {n}'s hours: {points:?}");
        assert_eq!(mine.len(), hours);
        for t in mine {
            let (handled, failed, pending) = logged(&env, t.run_id);
            let p = &points[&start_of(t.clock, 3600)];
            assert_eq!(p["ticks"], 1);
            assert_eq!(
                (p["handled"].as_u64(), p["failed"].as_u64()),
                (Some(handled), Some(failed)),
                "{p}"
            );
            assert_eq!(p["pending"].as_u64(), pending, "{p}");
            assert!(
                pending.unwrap() >= handled,
                "pending counts what was handed out: {p}"
            );
            assert_eq!(
                p["timed"].as_u64(),
                Some(handled),
                "every handler call timed: {p}"
            );
        }
        // Per day: the run log's rows summed by their clock's UTC day.
        let mut days: BTreeMap<String, (u64, u64)> = BTreeMap::new();
        for t in ticks.iter().filter(|t| t.window == window) {
            let (handled, failed, _) = logged(&env, t.run_id);
            let day = days.entry(start_of(t.clock, 86_400)).or_default();
            day.0 += handled;
            day.1 += failed;
        }
        let points = tier(daily, n);
        let found: BTreeMap<String, (u64, u64)> = points
            .iter()
            .map(|(k, p)| {
                (
                    k.clone(),
                    (
                        p["handled"].as_u64().unwrap(),
                        p["failed"].as_u64().unwrap(),
                    ),
                )
            })
            .collect();
        assert_eq!(found, days, "tier {n} per day");
    }
    for n in 3..=6 {
        assert!(tier(hourly, n).is_empty(), "tier {n} never ticked");
    }
    let handled: u64 = tier(hourly, 1)
        .values()
        .map(|p| p["handled"].as_u64().unwrap())
        .sum();
    assert!(handled > 40, "the week handled records: {handled}");

    // Every tier at once: summed where both ticked; pending adds each tier's latest.
    let all = by_start(&hourly["all"]);
    let both = start_of(end, 3600);
    let (one, two) = (&tier(hourly, 1)[&both], &tier(hourly, 2)[&both]);
    let sum = |k: &str| one[k].as_u64().unwrap() + two[k].as_u64().unwrap();
    assert_eq!(all[&both]["handled"].as_u64(), Some(sum("handled")));
    assert_eq!(all[&both]["pending"].as_u64(), Some(sum("pending")));
    assert_eq!(all.len(), 28, "tier 2 ticks in hours tier 1 ticks in");

    // The slow handler's hour: its p95 is its 0.3 s (log-2 buckets: 256 to 512 ms),
    // while the median call of every hour is a quick shell.
    let p95: Vec<f64> = tier(hourly, 1)
        .values()
        .filter_map(|p| p["p95_ms"].as_f64())
        .collect();
    let slow: Vec<&f64> = p95.iter().filter(|ms| **ms >= 256.0).collect();
    assert_eq!(slow.len(), 1, "one hour had the slow call: {p95:?}");
    assert!(*slow[0] < 512.0, "{slow:?}");
    for p in tier(hourly, 1).values() {
        let p50 = p["p50_ms"].as_f64().unwrap();
        assert!(p50 < 256.0 && p50 <= p["p95_ms"].as_f64().unwrap(), "{p}");
    }

    // A row of a release before the history has neither count nor times.
    let first = &ticks
        .iter()
        .find(|t| t.window == "1d" && t.clock > end - Duration::hours(168))
        .unwrap();
    env.execute(&format!(
        "UPDATE {} SET pending = NULL WHERE id = {id}; DELETE FROM {} WHERE run_id = {id}",
        env.own("backlog_runs"),
        env.own("backlog_run_times"),
        id = first.run_id
    ));
    let history = status(&env);
    let p = &tier(&history["hourly"], 1)[&start_of(first.clock, 3600)];
    assert_eq!(
        (&p["pending"], &p["timed"], &p["p50_ms"]),
        (&Value::Null, &Value::from(0), &Value::Null)
    );

    // A tick 100 days on prunes the handler times of ticks past 91 days, oldest
    // first; the run log keeps every row (the metrics' totals read them all).
    let (runs, times) = (env.own("backlog_runs"), env.own("backlog_run_times"));
    let rows = env.count(&format!("SELECT count(*) FROM {runs}"));
    let kept = env.count(&format!("SELECT count(*) FROM {times}"));
    let oldest = ticks[0].run_id;
    let of_oldest = format!("SELECT count(*) FROM {times} WHERE run_id = {oldest}");
    assert!(env.count(&of_oldest) > 0, "the first tick handled records");
    let later = (end + Duration::days(100)).to_rfc3339();
    env.backlog(&["run", "--window", "1d", "--now", &later])
        .assert()
        .success();
    assert_eq!(env.count(&of_oldest), 0, "pruned");
    assert!(env.count(&format!("SELECT count(*) FROM {times}")) < kept);
    assert_eq!(env.count(&format!("SELECT count(*) FROM {runs}")), rows + 1);
}

crate::on_every_backend!(history_of_a_week_of_ticks_agrees_with_the_run_log);

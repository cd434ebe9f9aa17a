//! A tick is gentle with a counterpart: `rate` spaces handler starts evenly, for all
//! the runners of a tier (or of a `rate_group`) together, and `stop_after_failures` (the
//! breaker) stops a tick whose handler keeps failing, leaving the rest of the band as it
//! was.

use crate::harness::{Backend, Env, NOW, Running, Schedule};
use crate::tick::wait_for;

/// Logs the start time of each record, then fails it.
const FAILING_HANDLER: &str = r#"#!/bin/sh
cat > /dev/null
echo "$BACKLOG_RECORD_ID $(date +%s%N)" >> starts.log
exit 1
"#;

fn backlog(backend: Backend, records: i64, handler_extra: &'static str, script: &str) -> Env {
    let env = Env::on(backend);
    env.records_minutes_apart(records);
    env.write_schedule(&Schedule {
        handler_extra,
        ..Schedule::default()
    });
    env.write_handler("handler.sh", script);
    env
}

fn starts(env: &Env) -> Vec<(i64, u128)> {
    std::fs::read_to_string(env.path("starts.log"))
        .unwrap_or_default()
        .lines()
        .map(|l| {
            let (id, t) = l.split_once(' ').unwrap();
            (id.parse().unwrap(), t.parse().unwrap())
        })
        .collect()
}

/// Three failures in a row trip the breaker: the tick stops with exit code 7 and one
/// line saying why; the three are ERROR, the other seven untouched (still NEW), and
/// the run log says `tripped`. The next tick tries again.
fn the_breaker_stops_a_tick_after_failures_in_a_row(backend: Backend) {
    let env = backlog(
        backend,
        10,
        // Long enough that the next tick starts within it on a loaded machine (a CI
        // run on two cores took over a second between the two ticks).
        "stop_after_failures = 3\nbreaker_cooldown = \"4s\"",
        FAILING_HANDLER,
    );
    env.backlog(&["run", "--window", "1d", "--now", NOW])
        .assert()
        .code(7)
        .stdout(predicates::str::contains(
            "selected 3, succeeded 0, failed 3, skipped 0",
        ))
        .stdout(predicates::str::contains(
            "; stopped by the breaker (handler.stop_after_failures)\n",
        ))
        // Each failure at WARN, then why the tick stopped.
        .stderr(predicates::str::contains("WARN tick{tier=1 window=1d}: record 1: ERROR (exit 1)\n"))
        .stderr(predicates::str::ends_with(
            "\nbacklog: the tick stopped after 3 failures in a row (handler.stop_after_failures), each: exit 1; the rest of the band waits for the next tick\n",
        ));
    assert_eq!(starts(&env).len(), 3);
    assert_eq!((env.with_status("ERROR"), env.with_status("NEW")), (3, 7));
    let runs = env.lines(&format!(
        "SELECT outcome || ' ' || error FROM {}",
        env.own("backlog_runs")
    ));
    assert_eq!(runs.len(), 1);
    assert!(
        runs[0].starts_with("tripped 3 failures in a row"),
        "{runs:?}"
    );
    assert_eq!(env.holds_left(), 0);

    // The breaker stays open for its cool-down: the next tick hands nothing over.
    env.backlog(&["run", "--window", "1d", "--now", NOW])
        .assert()
        .code(7)
        .stderr(predicates::str::contains(
            "backlog: the tick stopped after finding the breaker of this tier open (handler.stop_after_failures: 3 failures in a row among its runners) for ",
        ));
    assert_eq!(starts(&env).len(), 3, "nothing handed over while open");

    // Past it, one record is tried (4, the newest left): its success closes the
    // breaker, and a success between failures starts the count again.
    std::thread::sleep(std::time::Duration::from_millis(4100));
    env.write_handler(
        "handler.sh",
        &FAILING_HANDLER.replace(
            "exit 1",
            "[ $((BACKLOG_RECORD_ID % 3)) = 1 ] && exit 0; exit 1",
        ),
    );
    env.backlog(&["run", "--window", "1d", "--now", NOW])
        .assert()
        .success();
    assert_eq!(env.with_status("NEW"), 0, "every record tried");
}

/// The breaker is the fleet's: four runners against a dead counterpart with
/// `stop_after_failures = 5` make at most 8 calls in all (the limit, and one more each
/// of the three others calling meanwhile), where each runner's own count would allow
/// 20; a runner started during the cool-down calls nothing.
fn four_runners_trip_one_breaker(backend: Backend) {
    let env = backlog(
        backend,
        100,
        "stop_after_failures = 5",
        &FAILING_HANDLER.replace("exit 1", "sleep 0.05; exit 1"),
    );
    runners_at_once(&env, &["1d"; 4], 7);
    let calls = starts(&env).len();
    assert!((5..=8).contains(&calls), "{calls} calls in all");
    env.backlog(&["run", "--window", "1d", "--now", NOW])
        .assert()
        .code(7);
    assert_eq!(starts(&env).len(), calls, "none while the breaker is open");
}

/// With `--json`, a tripped tick prints its summary as the one object on stdout, and
/// the summary carries the error and exit code as a failure's object does.
#[test]
fn with_json_a_tripped_tick_is_one_object_with_its_error() {
    let env = backlog(
        Backend::Sqlite,
        5,
        "stop_after_failures = 3",
        FAILING_HANDLER,
    );
    let out = env
        .backlog(&["run", "--window", "1d", "--now", NOW, "--json"])
        .assert()
        .code(7);
    let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert_eq!(text.lines().count(), 1, "one object: {text}");
    let value: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        (value["selected"].as_u64(), value["failed"].as_u64()),
        (Some(3), Some(3)),
        "{value}"
    );
    assert_eq!(value["exit_code"], 7);
    assert!(
        value["error"]
            .as_str()
            .unwrap()
            .starts_with("the tick stopped after 3 failures in a row"),
        "{value}"
    );
}

/// With four handlers at once, the records in flight when the breaker trips still
/// finish and are marked; nothing more is started.
fn the_breaker_lets_the_records_in_flight_finish(backend: Backend) {
    let env = backlog(
        backend,
        40,
        "stop_after_failures = 3\nconcurrency = 4",
        &FAILING_HANDLER.replace("exit 1", "sleep 0.2; exit 1"),
    );
    env.backlog(&["run", "--window", "1d", "--now", NOW])
        .assert()
        .code(7);
    let tried = starts(&env).len() as i64;
    assert!((3..=8).contains(&tried), "{tried} tried");
    assert_eq!(env.with_status("ERROR"), tried, "each one tried is marked");
    assert_eq!(env.with_status("NEW"), 40 - tried);
}

/// Under a rate, the answers that come back between two starts are heard before the
/// next: with `rate = "5/s"` and sixteen handlers at once, the breaker trips on the
/// third failure a few starts in, where a tick that read answers only once every
/// handler was busy made sixteen calls (three seconds) before it counted one.
#[test]
fn under_a_rate_the_breaker_hears_each_answer_before_the_next_start() {
    let env = backlog(
        Backend::Sqlite,
        40,
        "stop_after_failures = 3\nconcurrency = 16\nrate = \"5/s\"",
        FAILING_HANDLER,
    );
    env.backlog(&["run", "--window", "1d", "--now", NOW])
        .assert()
        .code(7);
    let tried = starts(&env).len() as i64;
    assert!((3..=6).contains(&tried), "{tried} tried");
    assert_eq!(env.with_status("ERROR"), tried, "each one tried is marked");
}

/// A tick that waits for its rate's next start stops at a SIGTERM, not at that start:
/// at `1/m` the first record goes at once and the next would wait a minute; the stop
/// ends the tick within seconds (exit 9), the record handled marked, the others left
/// as they were.
#[test]
fn a_stop_does_not_wait_for_the_rates_next_start() {
    let env = backlog(
        Backend::Sqlite,
        3,
        "rate = \"1/m\"\nconcurrency = 2",
        FAILING_HANDLER,
    );
    let started = std::time::Instant::now();
    let tick = Running::spawn(
        env.command()
            .args(["run", "--window", "1d", "--now", NOW])
            .stdout(std::process::Stdio::piped()),
    );
    wait_for(|| env.with_status("ERROR") == 1);
    let out = tick.terminate();
    assert_eq!(out.status.code(), Some(9), "{out:?}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(45),
        "the stop waited for the next start"
    );
    assert_eq!(starts(&env).len(), 1);
    assert_eq!(env.with_status("NEW"), 2);
}

/// `rate = "5/s"`: starts are spaced 200 ms apart, not bunched.
fn a_rate_spaces_the_starts(backend: Backend) {
    let env = backlog(
        backend,
        6,
        "rate = \"5/s\"\nconcurrency = 4",
        &FAILING_HANDLER.replace("exit 1", "exit 0"),
    );
    env.backlog(&["run", "--window", "1d", "--now", NOW])
        .assert()
        .success();
    let mut times: Vec<u128> = starts(&env).iter().map(|(_, t)| *t).collect();
    times.sort();
    assert_eq!(times.len(), 6);
    // Five intervals of 200 ms between the first start and the last; a handler's
    // own clock reading may lag its start a little, never lead it.
    let span_ms = (times[5] - times[0]) / 1_000_000;
    assert!(span_ms >= 900, "six starts within {span_ms} ms");
}

/// `backlog retry` keeps to the rate too: six records at `5/s` start over at least a
/// second.
fn a_retry_keeps_to_the_rate(backend: Backend) {
    let env = backlog(
        backend,
        6,
        "rate = \"5/s\"",
        &FAILING_HANDLER.replace("exit 1", "exit 0"),
    );
    env.backlog(&["retry", "1", "2", "3", "4", "5", "6"])
        .assert()
        .success();
    let span = span_of_starts_ms(&env, 6);
    assert!(span >= 900, "six starts at 5/s within {span} ms");
}

/// Runs `windows` at once, one runner each, and waits for them all to exit with
/// `code`.
fn runners_at_once(env: &Env, windows: &[&str], code: i32) {
    let runners: Vec<_> = windows
        .iter()
        .map(|window| {
            env.command()
                .args(["run", "--window", window, "--now", NOW])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut r in runners {
        assert_eq!(r.wait().unwrap().code(), Some(code));
    }
}

/// The first start to the last, in milliseconds, after checking each record started
/// once.
fn span_of_starts_ms(env: &Env, records: i64) -> u128 {
    let mut starts = starts(env);
    starts.sort_by_key(|(id, _)| *id);
    let ids: Vec<i64> = starts.iter().map(|(id, _)| *id).collect();
    assert_eq!(ids, (1..=records).collect::<Vec<_>>(), "each record once");
    let times = starts.iter().map(|(_, t)| *t);
    (times.clone().max().unwrap() - times.min().unwrap()) / 1_000_000
}

/// `rate = "20/s"` is the fleet's: four runners of one tier over 100 records start 20 a
/// second in all (99 intervals of 50 ms: at least 4.5 s), not 80.
fn four_runners_keep_to_one_rate(backend: Backend) {
    let env = backlog(
        backend,
        100,
        "rate = \"20/s\"\nconcurrency = 4",
        &FAILING_HANDLER.replace("exit 1", "exit 0"),
    );
    runners_at_once(&env, &["1d"; 4], 0);
    let span = span_of_starts_ms(&env, 100);
    assert!(span >= 4_500, "100 starts at 20/s within {span} ms");
    assert_eq!(env.with_status("SUCCESS"), 100);
}

/// `rate_group` shares one rate between tiers that call the same counterpart: two tiers'
/// runners over 20 records each start 10 a second in all (at least 3.5 s for 40), where
/// each tier's own rate would have them done in about 2.
fn a_rate_group_is_shared_by_tiers(backend: Backend) {
    let env = backlog(
        backend,
        0,
        "rate = \"10/s\"\nrate_group = \"api\"\nconcurrency = 4",
        &FAILING_HANDLER.replace("exit 1", "exit 0"),
    );
    // 20 records in the first day, 20 in the first week after it.
    let aged: Vec<(i64, i64)> = (1..=40)
        .map(|id| {
            (
                id,
                if id <= 20 {
                    id * 60
                } else {
                    2 * 86_400 + id * 60
                },
            )
        })
        .collect();
    env.insert_aged(&aged, |t| t.format("%Y-%m-%d %H:%M:%S").to_string().into());
    runners_at_once(&env, &["1d", "7d"], 0);
    let span = span_of_starts_ms(&env, 40);
    assert!(span >= 3_500, "40 starts at 10/s within {span} ms");
}

/// `rate_key` gives each counterpart a rate of its own: 12 records for a slow
/// counterpart and 4 for another at `4/s` each. The other's records do not wait behind
/// the slow one's (all four start before the slow one's eighth, 1.75 s in, where one
/// rate for both would start them after the slow one's twelfth; the fifth, a second
/// in, left too little room on a loaded machine, where a start can be late by tens of
/// milliseconds), while each
/// counterpart keeps to its rate (the slow one's 12 over at least 2.6 s: eleven intervals are 2.75).
fn a_rate_key_gives_each_counterpart_its_rate(backend: Backend) {
    let env = backlog(
        backend,
        16,
        "rate = \"4/s\"\nrate_key = \"PAYLOAD\"\nconcurrency = 4",
        &FAILING_HANDLER.replace("exit 1", "exit 0"),
    );
    // The slow counterpart's records are the band's newest, read first.
    env.execute("UPDATE \"BACKLOG\" SET \"PAYLOAD\" = 'slow' WHERE \"ID\" <= 12");
    env.execute("UPDATE \"BACKLOG\" SET \"PAYLOAD\" = 'other' WHERE \"ID\" > 12");
    env.backlog(&["run", "--window", "1d", "--now", NOW])
        .assert()
        .success()
        .stdout(predicates::str::contains("succeeded 16"));
    let mut starts = starts(&env);
    starts.sort_by_key(|(_, t)| *t);
    let slow: Vec<u128> = starts
        .iter()
        .filter(|(id, _)| *id <= 12)
        .map(|s| s.1)
        .collect();
    let other: Vec<u128> = starts
        .iter()
        .filter(|(id, _)| *id > 12)
        .map(|s| s.1)
        .collect();
    assert_eq!((slow.len(), other.len()), (12, 4), "{starts:?}");
    assert!(
        other[3] < slow[7],
        "the other counterpart waited behind the slow one: {starts:?}"
    );
    let span_ms = |t: &[u128]| (t[t.len() - 1] - t[0]) / 1_000_000;
    assert!(
        span_ms(&slow) >= 2_600,
        "12 starts at 4/s within {} ms",
        span_ms(&slow)
    );
    assert!(
        span_ms(&other) >= 700,
        "4 starts at 4/s within {} ms",
        span_ms(&other)
    );
}

/// A counterpart's rate is the fleet's: three runners over 12 records of one
/// counterpart at `4/s` start them over at least 2.6 s in all (eleven intervals: 2.75 s), not three times as fast.
fn runners_share_a_counterparts_rate(backend: Backend) {
    let env = backlog(
        backend,
        12,
        "rate = \"4/s\"\nrate_key = \"PAYLOAD\"\nconcurrency = 2",
        &FAILING_HANDLER.replace("exit 1", "exit 0"),
    );
    env.execute("UPDATE \"BACKLOG\" SET \"PAYLOAD\" = 'acme'");
    runners_at_once(&env, &["1d"; 3], 0);
    let span = span_of_starts_ms(&env, 12);
    assert!(span >= 2_600, "12 starts at 4/s within {span} ms");
    assert_eq!(env.with_status("SUCCESS"), 12);
}

/// `backlog retry` keeps each record to its counterpart's rate: six records, three for a
/// counterpart and three with none (NULL, a counterpart of its own), alternating, at
/// `1/s`: each counterpart's three start at least two seconds apart in all, while a record
/// whose counterpart differs from the last one's starts without waiting out the other's
/// second (one rate for all would space every start a second apart).
fn a_retry_keeps_each_counterpart_to_its_rate(backend: Backend) {
    let env = backlog(
        backend,
        6,
        "rate = \"1/s\"\nrate_key = \"PAYLOAD\"",
        &FAILING_HANDLER.replace("exit 1", "exit 0"),
    );
    env.execute("UPDATE \"BACKLOG\" SET \"PAYLOAD\" = 'a' WHERE \"ID\" IN (1, 3, 5)");
    env.execute("UPDATE \"BACKLOG\" SET \"PAYLOAD\" = NULL WHERE \"ID\" IN (2, 4, 6)");
    env.backlog(&["retry", "1", "2", "3", "4", "5", "6"])
        .assert()
        .success();
    let mut starts = starts(&env);
    starts.sort_by_key(|s| s.1);
    for ids in [[1, 3, 5], [2, 4, 6]] {
        let t: Vec<u128> = starts
            .iter()
            .filter(|(id, _)| ids.contains(id))
            .map(|s| s.1)
            .collect();
        assert_eq!(t.len(), 3, "{starts:?}");
        // Two intervals of a second apart; the times are the handlers' own, each taken
        // once its process runs, and a loaded machine starts one late now and then
        // (measured: 135 ms), which shortens the span by as much. Unpaced, the three
        // would start within milliseconds.
        assert!(
            (t[2] - t[0]) / 1_000_000 >= 1_500,
            "{ids:?} at 1/s: {starts:?}"
        );
    }
    let shortest_gap = starts.windows(2).map(|w| w[1].1 - w[0].1).min().unwrap();
    assert!(
        shortest_gap / 1_000_000 < 700,
        "every start waited out one rate: {starts:?}"
    );
}

/// Runners started one after another in one slot over a band that fails: each
/// record is tried once in the slot, not once per runner (a failure is kept from
/// every tick until the schedule's next try of it), and `--retry-failed` overrides.
fn a_failing_record_is_tried_once_a_slot_whatever_the_runners(backend: Backend) {
    let env = backlog(
        backend,
        30,
        "concurrency = 2",
        &FAILING_HANDLER.replace("exit 1", "sleep 0.02; exit 1"),
    );
    let runners: Vec<_> = (0..3)
        .map(|i| {
            std::thread::sleep(std::time::Duration::from_millis(100 * i));
            env.command()
                .args(["run", "--window", "1d", "--now", NOW])
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut r in runners {
        assert!(r.wait().unwrap().success());
    }
    let mut tried: Vec<i64> = starts(&env).iter().map(|(id, _)| *id).collect();
    tried.sort();
    assert_eq!(tried, (1..=30).collect::<Vec<_>>(), "each once in the slot");
    env.backlog(&["run", "--window", "1d", "--now", NOW])
        .assert()
        .success()
        .stdout(predicates::str::contains(
            "selected 0, succeeded 0, failed 0, skipped 30",
        ));
    env.backlog(&["run", "--window", "1d", "--now", NOW, "--retry-failed"])
        .assert()
        .success()
        .stdout(predicates::str::contains("selected 30"));
    assert_eq!(env.with_status("ERROR"), 30);
}

/// A breaker at one failure trips at the first, and says so in the singular.
#[test]
fn a_breaker_at_one_failure_says_one_failure() {
    let env = backlog(
        Backend::Sqlite,
        3,
        "stop_after_failures = 1",
        FAILING_HANDLER,
    );
    env.backlog(&["run", "--window", "1d", "--now", NOW])
        .assert()
        .code(7)
        .stderr(predicates::str::ends_with(
            "\nbacklog: the tick stopped after 1 failure in a row (handler.stop_after_failures), it: exit 1; the rest of the band waits for the next tick\n",
        ));
    assert_eq!(starts(&env).len(), 1);
}

crate::on_every_backend!(
    a_failing_record_is_tried_once_a_slot_whatever_the_runners,
    the_breaker_stops_a_tick_after_failures_in_a_row,
    the_breaker_lets_the_records_in_flight_finish,
    a_rate_spaces_the_starts,
    four_runners_keep_to_one_rate,
    a_rate_group_is_shared_by_tiers,
    a_rate_key_gives_each_counterpart_its_rate,
    runners_share_a_counterparts_rate,
    a_retry_keeps_each_counterpart_to_its_rate,
    four_runners_trip_one_breaker,
    a_retry_keeps_to_the_rate,
);

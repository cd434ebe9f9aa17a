//! `backlog daemon` as a real process: it fires tiers on their cadence, stops cleanly on
//! SIGTERM and reloads its schedule file, keeping the old one when the new is broken.

use std::process::Stdio;

use crate::concurrency::handled_without_overlap;
use crate::harness::{Backend, Env, Running, Schedule};
use crate::hooks::{Hooks, add_webhook, posted};
use crate::tick::wait_for;

const FAST_TIERS: &str = r#"
[[tier]]
window = "1d"
every = "1s"

[[tier]]
window = "7d"
every = "2s"
"#;

/// Fails every record (so each tick finds them again) and logs start and end.
const SLOW_FAILING_HANDLER: &str = r#"#!/bin/sh
cat > /dev/null
echo "start $BACKLOG_RECORD_ID $(date +%s%N)" >> handler.log
sleep 0.05
echo "end $BACKLOG_RECORD_ID $(date +%s%N)" >> handler.log
exit 1
"#;

fn start(env: &Env) -> Running {
    let log = std::fs::File::create(env.path("daemon.log")).unwrap();
    Running::spawn(
        env.command()
            .args(["daemon", "--seed", "7"])
            .stdout(Stdio::null())
            .stderr(log),
    )
}

fn runs_of(env: &Env, window_secs: i64) -> i64 {
    if !env.has_own_tables() {
        return 0;
    }
    env.count(&format!(
        "SELECT count(*) FROM {} WHERE window_secs = {window_secs} AND finished_at IS NOT NULL",
        env.own("backlog_runs")
    ))
}

fn daemon_log(env: &Env) -> String {
    std::fs::read_to_string(env.path("daemon.log")).unwrap_or_default()
}

fn stop(env: &Env, daemon: Running) {
    let out = daemon.terminate();
    assert!(
        out.status.success(),
        "the daemon exits 0 on SIGTERM: {out:?}\n{}",
        daemon_log(env)
    );
}

fn backlog_env(backend: Backend, tiers: &'static str) -> Env {
    let env = Env::on(backend);
    env.create_table("TEXT");
    let now = chrono::Utc::now();
    let inserts: Vec<String> = (1..=20_i64)
        .map(|id| {
            // Half an hour off the 6-hour marks, so no record sits on a band edge.
            let at = now - chrono::Duration::hours(id * 6) + chrono::Duration::minutes(30);
            format!(
                r#"INSERT INTO "BACKLOG" VALUES ({id}, 'NEW', '{}', NULL)"#,
                at.format("%Y-%m-%d %H:%M:%S")
            )
        })
        .collect();
    env.execute(&inserts.join(";\n"));
    env.write_schedule(&Schedule {
        tiers,
        ..Schedule::default()
    });
    env.write_handler("handler.sh", SLOW_FAILING_HANDLER);
    env
}

fn the_daemon_fires_tiers_and_stops_cleanly_on_sigterm(backend: Backend) {
    let env = backlog_env(backend, FAST_TIERS);
    let child = start(&env);
    wait_for(|| runs_of(&env, 86_400) >= 3 && runs_of(&env, 7 * 86_400) >= 2);
    stop(&env, child);

    let log = daemon_log(&env);
    assert!(log.contains("daemon started: 2 tiers"), "{log}");
    assert!(
        log.contains("tier 1 (1d every 1s), ages 0 to 1d: selected 4,"),
        "one line per tick: {log}"
    );
    assert!(log.contains("stopped"), "{log}");
    // Every handler that started finished: the SIGTERM cut no record off mid-way.
    let handler_log = std::fs::read_to_string(env.path("handler.log")).unwrap();
    assert_eq!(
        handler_log.matches("start ").count(),
        handler_log.matches("end ").count(),
        "{handler_log}"
    );
    handled_without_overlap(&env);
    let unfinished = env.count(&format!(
        "SELECT count(*) FROM {} WHERE finished_at IS NULL",
        env.own("backlog_runs")
    ));
    let claims = env.holds_left();
    assert_eq!(
        (unfinished, claims),
        (0, 0),
        "every run logged as ended, no claim left"
    );
    assert!(
        env.statuses()
            .iter()
            .all(|(_, s)| s == "NEW" || s == "ERROR")
    );
}

fn a_changed_file_is_reloaded_and_a_broken_one_rejected(backend: Backend) {
    let one_tier = "\n[[tier]]\nwindow = \"1d\"\nevery = \"1s\"\n";
    let env = backlog_env(backend, one_tier);
    let child = start(&env);
    wait_for(|| runs_of(&env, 86_400) >= 1);
    assert_eq!(runs_of(&env, 7 * 86_400), 0);

    env.write_schedule(&Schedule {
        tiers: FAST_TIERS,
        ..Schedule::default()
    });
    wait_for(|| daemon_log(&env).contains("reloaded"));
    wait_for(|| runs_of(&env, 7 * 86_400) >= 1);

    std::fs::write(env.path("backlog.toml"), "this is = not [a schedule").unwrap();
    wait_for(|| daemon_log(&env).contains("not reloaded, the schedule in force keeps running"));
    let before = runs_of(&env, 7 * 86_400);
    wait_for(|| runs_of(&env, 7 * 86_400) > before);
    stop(&env, child);
    let log = daemon_log(&env);
    assert!(
        log.contains("backlog.toml:1:"),
        "the rejection names the file and where: {log}"
    );
}

/// A tier that missed its slot while no daemon ran ticks once at start; one that did
/// not waits for its next slot.
fn a_missed_slot_is_made_up_once_at_start(backend: Backend) {
    let hourly = "\n[[tier]]\nwindow = \"1d\"\nevery = \"1h\"\n\n[[tier]]\nwindow = \"7d\"\nevery = \"1h\"\n";
    let env = backlog_env(backend, hourly);
    let two_hours_ago = (chrono::Utc::now() - chrono::Duration::hours(2))
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    env.backlog(&["run", "--window", "1d", "--now", &two_hours_ago])
        .assert()
        .success();
    env.backlog(&["run", "--window", "7d"]).assert().success();
    assert_eq!((runs_of(&env, 86_400), runs_of(&env, 7 * 86_400)), (1, 1));
    // A tier late while the daemon was down is ticked, not reported overdue.
    let hooks = Hooks::start();
    add_webhook(&env.path("backlog.toml"), &hooks.url);

    let started_hour = chrono::Utc::now().format("%H").to_string();
    let child = start(&env);
    wait_for(|| runs_of(&env, 86_400) == 2);
    wait_for(|| daemon_log(&env).contains("tier 1 (1d every 1h)"));
    stop(&env, child);
    // Across the top of an hour the 7d tier's own slot comes, and it rightly ticks.
    if chrono::Utc::now().format("%H").to_string() == started_hour {
        assert_eq!(
            runs_of(&env, 7 * 86_400),
            1,
            "the 7d tier ticked this hour: no make-up"
        );
    }
    let log = daemon_log(&env);
    assert!(
        log.contains("tier 1d: missed its last slot, ticking now"),
        "{log}"
    );
    assert!(!log.contains("tier 7d: missed"), "{log}");
    let kinds: Vec<_> = posted(&hooks.take())
        .iter()
        .map(|e| e["kind"].clone())
        .collect();
    assert!(kinds.is_empty(), "{kinds:?}\n{log}");
}

/// With `--log-format json` each tick's line carries its counts as numbers, for a log
/// collector to sum, and is plain words in text.
#[test]
fn the_daemons_tick_lines_carry_their_counts_as_fields() {
    let env = backlog_env(Backend::Sqlite, FAST_TIERS);
    let log = std::fs::File::create(env.path("daemon.log")).unwrap();
    let child = Running::spawn(
        env.command()
            .args(["daemon", "--seed", "7", "--log-format", "json"])
            .stdout(Stdio::null())
            .stderr(log),
    );
    wait_for(|| runs_of(&env, 86_400) >= 1);
    stop(&env, child);
    let log = daemon_log(&env);
    let tick: serde_json::Value = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .find(|l: &serde_json::Value| {
            l["fields"]["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("tier 1 (1d every 1s)"))
        })
        .unwrap_or_else(|| panic!("a tick's line: {log}"));
    let fields = &tick["fields"];
    for (name, value) in [
        ("selected", 4),
        ("succeeded", 0),
        ("failed", 4),
        ("tier", 1),
    ] {
        assert_eq!(fields[name], value, "{name}: {tick}");
    }
    for name in ["skipped", "deferred", "given_up", "run_id", "seconds"] {
        assert!(fields[name].is_number(), "{name}: {tick}");
    }
    assert_eq!(fields["window"], "1d", "{tick}");
    // Every line of a tick is in its span: the tier's number and window.
    let lines: Vec<serde_json::Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let in_ticks: Vec<&serde_json::Value> = lines
        .iter()
        .filter(|l| l["span"]["name"] == "tick")
        .collect();
    assert!(in_ticks.len() > 2, "{log}");
    for line in in_ticks {
        let tier = &line["span"]["tier"];
        let window = if *tier == 1 { "1d" } else { "7d" };
        assert_eq!(line["span"]["window"], window, "{line}");
        for name in ["tier", "window"] {
            if !line["fields"][name].is_null() {
                assert_eq!(line["fields"][name], line["span"][name], "{line}");
            }
        }
    }
}

/// Tiers that tick at once log lines that interleave; each names its tick's tier
/// (`tick{tier=2 window=7d}: …`), the failures, the count past the cap and the
/// summary alike, and the count past the cap is its tier's.
#[test]
fn each_line_of_ticks_at_once_names_its_tier() {
    let env = backlog_env(Backend::Sqlite, FAST_TIERS);
    let child = start(&env);
    wait_for(|| runs_of(&env, 86_400) >= 1 && runs_of(&env, 7 * 86_400) >= 1);
    stop(&env, child);
    let log = daemon_log(&env);
    // Records 1 to 4 are under a day old (tier 1), 5 to 20 under a week (tier 2).
    let mut failures = 0;
    for line in log.lines().filter(|l| l.contains(": record ")) {
        let id: i64 = line
            .split(": record ")
            .nth(1)
            .unwrap()
            .split(':')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let prefix = if id <= 4 {
            "tick{tier=1 window=1d}: "
        } else {
            "tick{tier=2 window=7d}: "
        };
        assert!(
            line.contains(&format!(" WARN {prefix}record {id}: ERROR")),
            "{line}"
        );
        failures += 1;
    }
    assert!(failures >= 14, "{log}");
    // Tier 2's 16 failures: 10 shown, and the rest counted on its line.
    assert!(
        log.contains(" WARN tick{tier=2 window=7d}: 6 more records failed in this tick"),
        "{log}"
    );
    assert!(
        log.contains(
            " INFO tick{tier=1 window=1d}: tier 1 (1d every 1s), ages 0 to 1d: selected 4,"
        ),
        "{log}"
    );
    // The summary's window is in the span, not said twice.
    assert!(!log.contains("window=1d run_id"), "{log}");
}

crate::on_every_backend!(
    the_daemon_fires_tiers_and_stops_cleanly_on_sigterm,
    a_changed_file_is_reloaded_and_a_broken_one_rejected,
    a_missed_slot_is_made_up_once_at_start,
);

//! Metrics: `run --metrics-file` and `daemon --metrics` in the Prometheus text
//! format, read back with the reference parser (Python's prometheus_client), their
//! counters checked against the run log. The daemon obeys a pause made by another
//! process.

use std::collections::BTreeMap;
use std::io::{Read as _, Write as _};
use std::process::{Command, Stdio};

use crate::harness::{Backend, Env, NOW, Running, Schedule, recording_handler};
use crate::on_every_backend;
use crate::tick::wait_for;

/// One sample: its name, labels and value.
type Sample = (String, BTreeMap<String, String>, f64);

/// Parses the text format with prometheus_client, as a scraper would.
fn parse(text: &str) -> Vec<Sample> {
    const PARSER: &str = r#"
import json, sys
from prometheus_client.parser import text_string_to_metric_families
out = []
for family in text_string_to_metric_families(sys.stdin.read()):
    for s in family.samples:
        out.append([s.name, s.labels, s.value])
print(json.dumps(out))
"#;
    let mut child = Command::new("python3")
        .args(["-c", PARSER])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "the reference parser refused the metrics: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    samples
        .iter()
        .find(|(n, l, _)| {
            n == name
                && labels
                    .iter()
                    .all(|(k, v)| l.get(*k).map(String::as_str) == Some(*v))
        })
        .map(|s| s.2)
}

/// After two ticks with failures, the file parses; the counters are the run log's
/// sums; the histogram counts the attempts kept; the bands' pending counts and the
/// last ticks are there.
fn the_metrics_file_parses_and_matches_the_run_log(backend: Backend) {
    let env = Env::on(backend);
    env.classic();
    env.write_schedule(&Schedule::default());
    env.write_handler("handler.sh", &recording_handler(&[2, 3]));
    for window in ["1d", "7d"] {
        env.backlog(&[
            "run",
            "--window",
            window,
            "--now",
            NOW,
            "--metrics-file",
            "metrics.prom",
        ])
        .assert()
        .success();
    }
    let text = std::fs::read_to_string(env.path("metrics.prom")).unwrap();
    let samples = parse(&text);
    let sum = |column: &str, window: i64| {
        env.count(&format!(
            "SELECT CAST(coalesce(sum({column}), 0) AS BIGINT) FROM {} WHERE window_secs = {window}",
            env.own("backlog_runs")
        )) as f64
    };
    for (tier, secs) in [("1d", 86_400), ("7d", 7 * 86_400)] {
        for (outcome, column) in [
            ("succeeded", "succeeded"),
            ("failed", "failed"),
            ("lost", "lost"),
        ] {
            assert_eq!(
                value(
                    &samples,
                    "backlog_records_handled_total",
                    &[("tier", tier), ("outcome", outcome)]
                ),
                Some(sum(column, secs)),
                "{tier} {outcome}:\n{text}"
            );
        }
        assert_eq!(
            value(
                &samples,
                "backlog_ticks_total",
                &[("tier", tier), ("result", "done")]
            ),
            Some(1.0)
        );
        assert_eq!(
            value(&samples, "backlog_last_tick_success", &[("tier", tier)]),
            Some(1.0)
        );
    }
    // Record 1 (8 minutes) succeeded, 2 (5 hours) and 3 (3 days) failed.
    assert_eq!(
        value(
            &samples,
            "backlog_records_handled_total",
            &[("tier", "1d"), ("outcome", "failed")]
        ),
        Some(1.0)
    );
    let attempts = env.count(&format!(
        "SELECT count(*) FROM {}",
        env.own("backlog_attempts")
    ));
    assert_eq!(attempts, 2);
    let counted: f64 = samples
        .iter()
        .filter(|(n, _, _)| n == "backlog_attempt_duration_seconds_count")
        .map(|s| s.2)
        .sum();
    assert_eq!(
        counted, attempts as f64,
        "the histogram counts the attempts kept"
    );
    assert_eq!(
        value(
            &samples,
            "backlog_attempt_duration_seconds_bucket",
            &[("tier", "1d"), ("le", "+Inf")]
        ),
        Some(1.0)
    );
    assert_eq!(
        value(
            &samples,
            "backlog_pending_records",
            &[("band", "over 30d up to 180d")]
        ),
        Some(1.0),
        "record 4, two months old, is pending"
    );
    // Record 4 has waited its two months for a first try: the ticks ran 1d and 7d.
    let waited = value(&samples, "backlog_oldest_untried_seconds", &[]).expect(&text);
    assert!(
        (30.0 * 86_400.0..180.0 * 86_400.0).contains(&waited),
        "{waited}\n{text}"
    );
    assert!(value(&samples, "backlog_records_held", &[]).is_some());
    // Records 2 and 3 failed and are kept until their next slot, while still pending.
    assert_eq!(
        value(&samples, "backlog_records_kept_after_failure", &[]),
        Some(2.0)
    );
    assert!(
        text.contains("# TYPE backlog_records_handled_total counter\n"),
        "{text}"
    );
}

on_every_backend!(the_metrics_file_parses_and_matches_the_run_log);

/// A metrics file that cannot be written fails a tick that went well, with a line
/// naming the file.
#[test]
fn an_unwritable_metrics_file_is_an_error() {
    let env = Env::new();
    env.classic();
    env.write_schedule(&Schedule::default());
    env.write_handler("handler.sh", &recording_handler(&[]));
    env.backlog(&[
        "run",
        "--window",
        "1d",
        "--now",
        NOW,
        "--metrics-file",
        "no/such/dir/m.prom",
    ])
    .assert()
    .code(1)
    .stderr(predicates::str::starts_with(
        "backlog: --metrics-file no/such/dir/m.prom: cannot write it: ",
    ));
}

fn get(port: u16, path: &str) -> (String, String) {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(stream, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    (head.to_string(), body.to_string())
}

/// The daemon serves `/metrics` (and, with `--http`, the dashboard); a pause made by
/// another process stops its ticks (each says so in one line) and shows in the
/// metrics; a resume starts them again.
#[test]
fn the_daemon_serves_metrics_and_obeys_a_pause() {
    let env = Env::new();
    env.classic_at(chrono::Utc::now());
    let tiers = "\n[[tier]]\nwindow = \"1d\"\nevery = \"1s\"\n";
    env.write_schedule(&Schedule {
        tiers,
        ..Schedule::default()
    });
    env.write_handler("handler.sh", &recording_handler(&[2]));
    env.backlog(&["pause", "--reason", "partner down"])
        .assert()
        .success();
    // Ports the system gives, as the daemon's log says (one picked free beforehand
    // may be given to another test meanwhile).
    let log = std::fs::File::create(env.path("daemon.log")).unwrap();
    let daemon = Running::spawn(
        env.command()
            .args([
                "daemon",
                "--metrics",
                "127.0.0.1:0",
                "--http",
                "127.0.0.1:0",
            ])
            .stdout(Stdio::null())
            .stderr(log),
    );
    let daemon_log = || std::fs::read_to_string(env.path("daemon.log")).unwrap_or_default();
    wait_for(|| daemon_log().contains("not ticking, every tier is paused since"));
    let port_of = |what: &str| -> u16 {
        let log = daemon_log();
        let at = log
            .find(what)
            .unwrap_or_else(|| panic!("the daemon's log says no {what:?}: {log}"));
        log[at + what.len()..]
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("no port after {what:?}: {log}"))
    };
    let port = port_of("serving metrics at http://127.0.0.1:");
    let http = port_of("serving the dashboard at http://127.0.0.1:");
    assert!(daemon_log().contains(": partner down;"), "{}", daemon_log());
    assert!(!env.path("calls.log").exists(), "nothing handed over");
    let (head, body) = get(port, "/metrics");
    assert!(
        head.starts_with("HTTP/1.0 200") || head.starts_with("HTTP/1.1 200"),
        "{head}"
    );
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: text/plain; version=0.0.4"),
        "{head}"
    );
    let samples = parse(&body);
    assert_eq!(
        value(&samples, "backlog_tier_paused", &[("tier", "1d")]),
        Some(1.0)
    );

    env.backlog(&["resume"]).assert().success();
    wait_for(|| env.path("calls.log").exists());
    wait_for(|| {
        let samples = parse(&get(port, "/metrics").1);
        value(
            &samples,
            "backlog_ticks_total",
            &[("tier", "1d"), ("result", "done")],
        )
        .unwrap_or(0.0)
            >= 1.0
            && value(&samples, "backlog_tier_paused", &[("tier", "1d")]) == Some(0.0)
    });
    let (head, _) = get(port, "/nothing");
    assert!(head.contains(" 404 "), "{head}");
    // Probes on both of the daemon's ports: alive, and ready (the database answers, no
    // tier's last tick failed).
    for p in [port, http] {
        for probe in ["/healthz", "/readyz"] {
            let (head, _) = get(p, probe);
            assert!(head.contains(" 200 "), "{probe} on {p}: {head}");
        }
    }
    // The dashboard, served beside the ticks.
    let (head, body) = get(http, "/");
    assert!(head.contains(" 200 "), "{head}");
    assert!(body.contains("<h2>Tiers</h2>"), "{body}");
    let out = daemon.terminate();
    assert!(out.status.success(), "{}", daemon_log());
}

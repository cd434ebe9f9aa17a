//! What `run` writes on stderr: JSON lines with `--log-format json`.

use crate::harness::{Env, NOW};

/// The demo `backlog init` writes, in the test's folder, its clock at `NOW`.
fn demo() -> Env {
    let env = Env::new();
    env.backlog(&["init", "demo", "--now", NOW])
        .assert()
        .success();
    env
}

/// `backlog run -v` over the demo's 7d tier (13 of its 60 records fail) and its
/// stderr.
fn run_verbose(env: &Env, extra: &[&str]) -> String {
    let mut args = vec![
        "run",
        "-v",
        "--window",
        "7d",
        "--schedule",
        "demo/backlog.toml",
        "--now",
        NOW,
    ];
    args.extend(extra);
    let out = env.backlog(&args).assert().success();
    String::from_utf8(out.get_output().stderr.clone()).unwrap()
}

/// Whether `text` is an RFC 3339 time in UTC (`2026-11-21T12:00:00.123456Z`).
fn is_utc_time(text: &str) -> bool {
    text.ends_with('Z') && chrono::DateTime::parse_from_rfc3339(text).is_ok()
}

#[test]
fn run_logs_one_json_object_per_line() {
    let env = demo();
    let stderr = run_verbose(&env, &["--log-format", "json"]);
    let lines: Vec<serde_json::Value> = stderr
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}")))
        .collect();
    assert_eq!(
        lines.len(),
        61,
        "the tick's line and one per record:\n{stderr}"
    );
    for line in &lines {
        assert!(is_utc_time(line["timestamp"].as_str().unwrap()), "{line}");
        assert_eq!(line["level"], "DEBUG", "{line}");
        assert!(line["fields"]["message"].is_string(), "{line}");
    }
    let failed = lines
        .iter()
        .filter(|l| {
            l["fields"]["message"]
                .as_str()
                .unwrap()
                .contains(": ERROR (exit 1)")
        })
        .count();
    assert_eq!(failed, 13, "{stderr}");
}

/// With JSON logs, the line saying why the command failed is a JSON log line too,
/// carrying the exit code.
#[test]
fn a_failure_is_a_json_log_line_with_json_logs() {
    let env = Env::new();
    let out = env
        .backlog(&[
            "run",
            "--window",
            "7d",
            "--schedule",
            "nope.toml",
            "--log-format",
            "json",
        ])
        .assert()
        .code(3)
        .stdout("");
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    let line: serde_json::Value = serde_json::from_str(&stderr).unwrap();
    assert_eq!(line["level"], "ERROR");
    assert_eq!(line["fields"]["exit_code"], 3);
    assert_eq!(
        line["fields"]["message"],
        "nope.toml: no such schedule file; pass --schedule FILE, or run `backlog init` to write one"
    );
    assert!(is_utc_time(line["timestamp"].as_str().unwrap()), "{line}");
}

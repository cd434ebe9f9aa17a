//! What `run` writes on stderr: log lines that start with their time (UTC), JSON lines
//! with `--log-format json`, colours only on a terminal and never with `NO_COLOR`, and
//! an error line a log file can date.

use std::process::{Command, Stdio};

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
        62,
        "the tick's line, one per record, one for the failures past the cap:\n{stderr}"
    );
    for line in &lines {
        assert!(is_utc_time(line["timestamp"].as_str().unwrap()), "{line}");
        // Every line of the tick is in its span, which names the tier.
        assert_eq!(
            line["span"],
            serde_json::json!({"name": "tick", "tier": 2, "window": "7d"}),
            "{line}"
        );
        assert!(
            ["DEBUG", "WARN"].contains(&line["level"].as_str().unwrap()),
            "{line}"
        );
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
    // Each record's line carries its id, tier, outcome (the attempt's) and status (the
    // one written) as fields, for a collector to filter on without parsing the message.
    let records: Vec<&serde_json::Value> = lines
        .iter()
        .filter(|l| !l["fields"]["record"].is_null())
        .collect();
    assert_eq!(records.len(), 60, "{stderr}");
    for line in &records {
        let fields = &line["fields"];
        assert_eq!(fields["tier"], 2, "{line}");
        let message = fields["message"].as_str().unwrap();
        assert!(
            message.starts_with(&format!(
                "record {}: {}",
                fields["record"].as_str().unwrap(),
                fields["status"].as_str().unwrap()
            )),
            "{line}"
        );
    }
    assert_eq!(
        records
            .iter()
            .filter(|l| l["fields"]["outcome"] == "error" && l["fields"]["status"] == "ERROR")
            .count(),
        13
    );
    assert_eq!(
        records
            .iter()
            .filter(|l| l["fields"]["outcome"] == "success")
            .count(),
        47
    );
}

/// Eleven failures: ten lines, then the one more in words that agree.
#[test]
fn one_failure_past_the_cap_is_one_more_record() {
    let env = Env::new();
    env.records_minutes_apart(11);
    env.write_schedule(&crate::harness::Schedule::default());
    let ids: Vec<i64> = (1..=11).collect();
    env.write_handler("handler.sh", &crate::harness::recording_handler(&ids));
    let out = env
        .backlog(&["run", "--window", "1d", "--now", NOW])
        .assert()
        .success();
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert_eq!(stderr.matches(": ERROR (exit 1)").count(), 10, "{stderr}");
    assert!(
        stderr.lines().last().unwrap().ends_with(
            " WARN tick{tier=1 window=1d}: 1 more record failed in this tick (not shown; `backlog show ID` lists a record's attempts)"
        ),
        "{stderr}"
    );
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

/// On a pipe, each text log line starts with its time and level, uncoloured.
#[test]
fn text_log_lines_on_a_pipe_start_with_their_time() {
    let env = demo();
    let stderr = run_verbose(&env, &[]);
    assert_eq!(stderr.lines().count(), 62, "{stderr}");
    for line in stderr.lines() {
        let (time, rest) = line.split_once(' ').unwrap();
        assert!(is_utc_time(time), "{line}");
        assert!(
            rest.starts_with("DEBUG tick{tier=2 window=7d}: ")
                || rest.starts_with(" WARN tick{tier=2 window=7d}: "),
            "each line names its tick's tier, once: {line}"
        );
    }
    assert!(!stderr.contains('\x1b'), "no colours on a pipe: {stderr:?}");
}

/// A crontab line appends stderr to a log file: there the error line carries its
/// time as the log lines do. On a pipe it stays `backlog: …`.
#[test]
fn the_error_line_in_a_log_file_starts_with_its_time() {
    let env = Env::new();
    let log = env.path("backlog.log");
    let status = env
        .command()
        .args(["run", "--window", "7d", "--schedule", "nope.toml"])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(3));
    let text = std::fs::read_to_string(&log).unwrap();
    let (time, rest) = text.split_once(' ').unwrap();
    assert!(is_utc_time(time), "{text}");
    assert_eq!(
        rest,
        "ERROR backlog: nope.toml: no such schedule file; pass --schedule FILE, or run `backlog init` to write one\n"
    );
    env.backlog(&["run", "--window", "7d", "--schedule", "nope.toml"])
        .assert()
        .code(3)
        .stderr("backlog: nope.toml: no such schedule file; pass --schedule FILE, or run `backlog init` to write one\n");
}

/// As a crontab line runs a tick (`>> backlog.log 2>&1`): every line the file gets
/// starts with its time, the summary on stdout and an `--if-due` "not due" line too.
#[test]
fn every_line_of_a_crontab_log_file_starts_with_its_time() {
    let env = demo();
    let log = env.path("backlog.log");
    for args in [
        &["run", "-w", "7d", "-s", "demo/backlog.toml", "--now", NOW][..],
        &[
            "run",
            "-w",
            "7d",
            "-s",
            "demo/backlog.toml",
            "--now",
            NOW,
            "--if-due",
        ],
    ] {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .unwrap();
        let status = env
            .command()
            .args(args)
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .status()
            .unwrap();
        assert!(status.success(), "{args:?}");
    }
    // A command line the binary refuses (a flag of an older release, say) too.
    let file = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    let status = env
        .command()
        .args(["run", "-w", "7d", "--bogus"])
        .stdout(file.try_clone().unwrap())
        .stderr(file)
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(2));
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains(" ERROR backlog: unexpected argument '--bogus' found"),
        "{text}"
    );
    assert!(text.contains("  INFO tier 2 (7d every 1h), ages over 1d up to 7d: selected 60, succeeded 47, failed 13"), "{text}");
    assert!(
        text.contains("  INFO tier 2 (7d every 1h): not due, last tick at "),
        "{text}"
    );
    for line in text.lines() {
        let time = line.split(' ').next().unwrap();
        assert!(is_utc_time(time), "every line starts with its time: {line}");
    }
}

/// In a file: a JSON log's summary is a JSON log line too, and a dry run's list is
/// data (its ids cut out for `backlog retry -`), every line a record's: its summary
/// goes to stderr.
#[test]
fn a_file_gets_lines_of_the_log_format_and_a_dry_runs_list_as_it_is() {
    let env = demo();
    let to_file = |name: &str, args: &[&str]| {
        let file = std::fs::File::create(env.path(name)).unwrap();
        let status = env.command().args(args).stdout(file).status().unwrap();
        assert!(status.success(), "{args:?}");
        std::fs::read_to_string(env.path(name)).unwrap()
    };
    let common = ["run", "-w", "7d", "-s", "demo/backlog.toml", "--now", NOW];
    let json = to_file(
        "json.log",
        &[&common[..], &["--log-format", "json"]].concat(),
    );
    let line: serde_json::Value = serde_json::from_str(json.trim()).expect(&json);
    assert_eq!(line["level"], "INFO");
    assert!(is_utc_time(line["timestamp"].as_str().unwrap()), "{line}");
    assert!(
        line["fields"]["message"]
            .as_str()
            .unwrap()
            .starts_with("tier 2 (7d every 1h)"),
        "{line}"
    );
    // Its counts as numbers, for a collector to sum.
    let fields = &line["fields"];
    for (name, value) in [
        ("selected", 60),
        ("succeeded", 47),
        ("failed", 13),
        ("skipped", 0),
        ("deferred", 0),
        ("given_up", 0),
        ("tier", 2),
    ] {
        assert_eq!(fields[name], value, "{name}: {line}");
    }
    assert_eq!(fields["window"], "7d", "{line}");
    assert!(fields["seconds"].as_f64().is_some(), "{line}");
    let dry = to_file(
        "dry.txt",
        &[&common[..], &["--dry-run", "--retry-failed"]].concat(),
    );
    assert!(!dry.is_empty(), "{dry}");
    for listed in dry.lines() {
        let id = listed.split('\t').next().unwrap();
        assert!(id.parse::<u64>().is_ok(), "a record's line: {listed}");
    }
}

/// On a terminal (a pseudo-terminal `script` opens) log lines are coloured, unless
/// `NO_COLOR` is set to something (an empty one does not count, per no-color.org).
#[test]
fn colours_only_on_a_terminal_and_never_with_no_color() {
    let env = demo();
    let backlog = assert_cmd::cargo::cargo_bin("backlog");
    let on_a_terminal = |no_color: Option<&str>| {
        let mut cmd = Command::new("script");
        cmd.current_dir(env.dir.path())
            .args(["-qec"])
            .arg(format!(
                "{} run -v --window 7d --schedule demo/backlog.toml --now {NOW} --dry-run",
                backlog.display()
            ))
            .arg("/dev/null")
            .stdin(Stdio::null())
            .env("XDG_RUNTIME_DIR", env.runtime_dir())
            .env("TERM", "xterm")
            .env_remove("NO_COLOR");
        if let Some(value) = no_color {
            cmd.env("NO_COLOR", value);
        }
        let out = cmd.output().expect("script (util-linux) runs");
        assert!(out.status.success(), "{out:?}");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(text.contains("DEBUG"), "{text}");
        text
    };
    assert!(
        on_a_terminal(None).contains("\x1b["),
        "coloured on a terminal"
    );
    assert!(
        on_a_terminal(Some("")).contains("\x1b["),
        "an empty NO_COLOR is unset"
    );
    let plain = on_a_terminal(Some("1"));
    assert!(!plain.contains('\x1b'), "{plain:?}");
    let first = plain.lines().next().unwrap();
    assert!(is_utc_time(first.split(' ').next().unwrap()), "{first}");
}

/// What a terminal shows of `raw`, line by line: a carriage return goes back to the
/// line's start, `ESC[2K` erases the line, other escape sequences (colours) draw
/// nothing, and a character overwrites the one under the cursor.
fn as_a_terminal_shows(raw: &str) -> Vec<String> {
    let mut lines = Vec::new();
    for raw_line in raw.split('\n') {
        let mut line: Vec<char> = Vec::new();
        let mut col = 0;
        let mut chars = raw_line.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\r' => col = 0,
                '\x1b' => {
                    let mut sequence = String::new();
                    for s in chars.by_ref() {
                        sequence.push(s);
                        if s.is_ascii_alphabetic() {
                            break;
                        }
                    }
                    if sequence == "[2K" {
                        line.clear();
                    }
                }
                c => {
                    if col < line.len() {
                        line[col] = c;
                    } else {
                        line.push(c);
                    }
                    col += 1;
                }
            }
        }
        lines.push(line.into_iter().collect::<String>().trim_end().to_string());
    }
    lines
}

/// On a terminal the spinner steps aside for each log line (cleared before it, drawn
/// again after), and the tick's summary is the last line the person sees.
#[test]
fn no_log_line_shares_a_line_with_the_spinner_and_the_summary_is_last() {
    let env = demo();
    let backlog = assert_cmd::cargo::cargo_bin("backlog");
    let out = Command::new("script")
        .current_dir(env.dir.path())
        .args(["-qec"])
        .arg(format!(
            "{} run --window 7d --schedule demo/backlog.toml --now {NOW}",
            backlog.display()
        ))
        .arg("/dev/null")
        .stdin(Stdio::null())
        .env("XDG_RUNTIME_DIR", env.runtime_dir())
        // A person's terminal: the spinner is drawn only where TERM names one, and
        // CI's environment may name none.
        .env("TERM", "xterm")
        .env("NO_COLOR", "1")
        .output()
        .expect("script (util-linux) runs");
    assert!(out.status.success(), "{out:?}");
    let raw = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        raw.contains("records handled"),
        "the spinner was drawn: {raw:?}"
    );
    let shown = as_a_terminal_shows(&raw);
    let warns: Vec<&String> = shown.iter().filter(|l| l.contains(" WARN ")).collect();
    assert!(
        warns.len() >= 10,
        "the demo's failures are WARN lines: {shown:#?}"
    );
    for line in &shown {
        assert!(
            !(line.contains(" WARN ") && line.contains("records handled")),
            "a WARN line on the spinner's line: {line:?}"
        );
        assert!(
            is_utc_time(line.split(' ').next().unwrap()) || !line.contains(" WARN "),
            "a WARN line starts with its time: {line:?}"
        );
    }
    let last = shown.iter().rev().find(|l| !l.is_empty()).unwrap();
    assert!(
        last.starts_with("tier 2 (7d every 1h), ages over 1d up to 7d: selected 60"),
        "the summary is the last line: {shown:#?}"
    );
}

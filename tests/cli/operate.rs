//! Operating it: a failing handler leaves attempts (`backlog_attempts`) that `show`
//! prints, `retry` tries a record now, `pause` stops a tier on every runner, and a tick
//! whose handler cannot run is an error of the tick, in the run log.

use crate::harness::{Backend, Env, NOW, PROGRESSIVE_TIERS, Schedule};
use crate::on_every_backend;

/// Fails record 2, saying why on stderr, after a line on stdout.
const FLAKY_HANDLER: &str = r#"#!/bin/sh
cat > /dev/null
echo "$BACKLOG_RECORD_ID" >> calls.log
if [ "$BACKLOG_RECORD_ID" = 2 ]; then
  echo "calling the partner"
  echo "partner said 503 Service Unavailable" >&2
  exit 1
fi
exit 0
"#;

/// The three-record table with `FLAKY_HANDLER`, on `tiers`.
pub(crate) fn flaky(backend: Backend, tiers: &'static str) -> Env {
    let env = Env::on(backend);
    env.create_table("TEXT");
    env.insert_aged(&[(1, 60), (2, 120), (3, 180)], |t| {
        t.format("%Y-%m-%d %H:%M:%S").to_string().into()
    });
    env.write_schedule(&Schedule {
        tiers,
        ..Schedule::default()
    });
    env.write_handler("handler.sh", FLAKY_HANDLER);
    env
}

fn calls(env: &Env) -> usize {
    std::fs::read_to_string(env.path("calls.log"))
        .unwrap_or_default()
        .lines()
        .count()
}

/// A command's stdout, as text.
pub(crate) fn stdout(assert: assert_cmd::assert::Assert) -> String {
    String::from_utf8_lossy(&assert.get_output().stdout).into_owned()
}

/// A failure is logged at WARN without `-v` and kept with its exit code and output;
/// `show` prints it; once the partner is back, `retry` marks the record SUCCESS and
/// keeps that attempt too.
fn a_failure_is_kept_shown_and_retried(backend: Backend) {
    let env = flaky(backend, PROGRESSIVE_TIERS);
    env.backlog(&["run", "--window", "1d", "--now", NOW])
        .assert()
        .success()
        .stderr(predicates::str::contains(
            "WARN tick{tier=1 window=1d}: record 2: ERROR (exit 1): [stderr] partner said 503 Service Unavailable\n",
        ));
    let kept = env.lines(&format!(
        "SELECT record_id || ' ' || outcome || ' ' || code || ' ' || status || ' ' || window_secs FROM {}",
        env.own("backlog_attempts")
    ));
    assert_eq!(kept, ["2 error 1 ERROR 86400"], "failures only, by default");

    let text = stdout(env.backlog(&["show", "2", "--now", NOW]).assert().success());
    for part in [
        "record 2 of BACKLOG: ERROR",
        "in tier 1's band; tried next at 2026-11-21T12:05:00Z",
        "kept from the ticks until 2026-11-21T12:04:30Z (`backlog retry 2` tries it now)",
        "attempts, newest first (1):",
        "1d      error    ERROR (exit 1)",
        "| [stdout] calling the partner",
        "| [stderr] partner said 503 Service Unavailable",
    ] {
        assert!(text.contains(part), "{part:?} in:\n{text}");
    }
    let json: serde_json::Value = serde_json::from_slice(
        &env.backlog(&["show", "2", "--json"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    assert_eq!(json["status"], "ERROR");
    assert_eq!(json["attempts"][0]["code"], 1);
    assert_eq!(json["attempts"][0]["outcome"], "error");
    assert_eq!(json["held"]["until"], "2026-11-21T12:04:30Z", "{json}");

    // The partner is back.
    env.write_handler("handler.sh", &FLAKY_HANDLER.replace("= 2 ]", "= 99 ]"));
    let text = stdout(env.backlog(&["retry", "2"]).assert().success());
    assert!(
        text.starts_with("retried 1 record: succeeded 1, failed 0; run "),
        "{text}"
    );
    assert_eq!(env.with_status("SUCCESS"), 3);
    let json: serde_json::Value = serde_json::from_slice(
        &env.backlog(&["show", "2", "--json"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let outcomes: Vec<&str> = json["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(outcomes, ["success", "error"], "newest first");
    assert_eq!(json["attempts"][0]["window_secs"], 0, "a retry's");
    // A retry is in the run log, apart from the tiers' ticks.
    assert_eq!(
        env.lines(&format!(
            "SELECT bands || ' ' || outcome || ' ' || succeeded FROM {} ORDER BY id",
            env.own("backlog_runs")
        )),
        ["disjoint done 2", "retry done 1"]
    );
    let status = stdout(env.backlog(&["status", "--now", NOW]).assert().success());
    assert!(!status.contains("retry"), "{status}");

    // A record that is not pending is not retried; nothing to retry is an error.
    env.backlog(&["retry", "2"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains(
            "not retried: \"2\": SUCCESS is not pending (a retry takes records of NEW, ERROR)",
        ))
        .stderr(predicates::str::ends_with(
            "backlog: nothing to retry: \"2\": SUCCESS is not pending (a retry takes records of NEW, ERROR)\n",
        ));
    env.backlog(&["show", "42"])
        .assert()
        .code(2)
        .stderr("backlog: table BACKLOG has no record with ID = \"42\"\n");
    // An id the id column cannot hold is named as such, by `show` and by `retry`.
    let not_an_id = "\"abc\" is not an id of table BACKLOG: its ID column holds integers";
    env.backlog(&["show", "abc"])
        .assert()
        .code(2)
        .stderr(format!("backlog: {not_an_id}\n"));
    env.backlog(&["retry", "abc"])
        .assert()
        .code(2)
        .stderr(predicates::str::ends_with(format!(
            "backlog: nothing to retry: {not_an_id}\n"
        )));
}

/// `retry --status` takes the pending records of a status, oldest first, up to a
/// limit; `--dry-run` lists them and changes nothing.
fn retry_a_set_by_status(backend: Backend) {
    let env = flaky(backend, PROGRESSIVE_TIERS);
    env.execute(r#"UPDATE "BACKLOG" SET "STATUS" = 'ERROR'"#);
    let out = env
        .backlog(&[
            "retry",
            "--status",
            "ERROR",
            "--limit",
            "2",
            "--dry-run",
            "--now",
            NOW,
        ])
        .assert()
        .success()
        .stderr(predicates::str::ends_with(
            "dry run: would hand over 2 records\n",
        ));
    let text = stdout(out);
    assert!(text.starts_with("3\t"), "oldest first: {text}");
    assert_eq!(text.lines().count(), 2, "a record a line, no more: {text}");
    assert_eq!(calls(&env), 0);
    // Ids from standard input, a line or blanks apart (`-`), as a script pipes them.
    let text = stdout(
        env.backlog(&["retry", "-", "--dry-run", "--now", NOW])
            .write_stdin("3\n1, 2\n\n")
            .assert()
            .success()
            .stderr(predicates::str::ends_with(
                "dry run: would hand over 3 records\n",
            )),
    );
    assert!(text.starts_with("3\t"), "{text}");
    assert_eq!(text.lines().count(), 3, "{text}");
    env.backlog(&["retry", "-", "--dry-run"])
        .write_stdin("\n")
        .assert()
        .code(2)
        .stderr(predicates::str::contains("no ids on standard input"));
    env.backlog(&[
        "retry",
        "--status",
        "ERROR",
        "--older-than",
        "150s",
        "--now",
        NOW,
    ])
    .assert()
    .success()
    .stdout(predicates::str::starts_with(
        "retried 1 record: succeeded 1, failed 0",
    ));
    assert_eq!(env.with_status("SUCCESS"), 1, "only record 3 is that old");
    env.backlog(&["retry", "--status", "DONE"])
        .assert()
        .code(2)
        .stderr("backlog: --status \"DONE\" is not one of table.pending (NEW, ERROR): a retry takes pending records only\n");
}

/// A pause is in the database: `run` of that tier exits 0 with one line naming it
/// and who paused it, and hands nothing over; other tiers run; a pause of every tier
/// stops them all; `status` shows pauses; `resume` lifts them.
fn a_pause_stops_the_tier_on_every_runner(backend: Backend) {
    let env = flaky(backend, PROGRESSIVE_TIERS);
    let text = stdout(
        env.backlog(&["pause", "--window", "1d", "--reason", "partner maintenance"])
            .assert()
            .success(),
    );
    assert!(
        text.starts_with("tier 1 (1d) of BACKLOG: paused since "),
        "{text}"
    );
    env.backlog(&["run", "--window", "1d", "--now", NOW])
        .assert()
        .success()
        .stdout(predicates::str::contains(
            "tier 1 (1d every 5m): not ticking, paused since ",
        ))
        .stdout(predicates::str::contains(
            ": partner maintenance; `backlog resume --window 1d` lifts it\n",
        ));
    assert_eq!(calls(&env), 0);
    // A dry run lists what the tier takes once resumed, and says it is paused.
    let out = env
        .backlog(&["run", "--window", "1d", "--now", NOW, "--dry-run"])
        .assert()
        .success()
        .stderr(predicates::str::contains(
            "dry run, would hand over 3 records once resumed; not ticking, paused since ",
        ));
    assert_eq!(stdout(out).lines().count(), 3);
    let status = stdout(env.backlog(&["status", "--now", NOW]).assert().success());
    assert!(
        status.contains("paused: tier 1 (1d) paused since"),
        "{status}"
    );
    env.backlog(&["run", "--window", "7d", "--now", NOW])
        .assert()
        .success()
        .stdout(predicates::str::contains("selected 0"));

    env.backlog(&["pause", "--until", "2000-01-01T00:00:00Z"])
        .assert()
        .success();
    env.backlog(&["run", "--window", "7d", "--now", NOW])
        .assert()
        .success()
        .stdout(predicates::str::contains(
            "not ticking, every tier is paused since",
        ));
    // Past the end its author gave, the pause holds, and the check warns.
    env.backlog(&["status", "--check", "--now", NOW])
        .assert()
        .code(1)
        .stdout(predicates::str::contains(
            "is still paused, past the end its pause gave (2000-01-01T00:00:00Z); `backlog resume` lifts it",
        ));
    env.backlog(&["resume"])
        .assert()
        .success()
        .stdout("BACKLOG: lifted 2 pauses\n");
    env.backlog(&["run", "--window", "1d", "--now", NOW])
        .assert()
        .success()
        .stdout(predicates::str::contains(
            "selected 3, succeeded 2, failed 1",
        ));
    env.backlog(&["resume"])
        .assert()
        .success()
        .stdout("BACKLOG: nothing was paused\n");
    env.backlog(&["pause", "--window", "2d"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains(
            "--window 2d is no tier's window in backlog.toml (its windows: 1d, 7d, 14d, 30d, 180d, 360d)",
        ));
}

/// A handler's output may hold any byte: a NUL (which PostgreSQL refuses in text) is
/// kept as U+FFFD, and the tick's marks land. A record named twice is retried once.
fn odd_output_and_a_record_named_twice(backend: Backend) {
    let env = flaky(backend, PROGRESSIVE_TIERS);
    env.write_handler(
        "handler.sh",
        &FLAKY_HANDLER.replace(
            "echo \"partner said 503 Service Unavailable\" >&2",
            "printf 'bad\\000byte' >&2",
        ),
    );
    env.backlog(&["run", "--window", "1d", "--now", NOW])
        .assert()
        .success()
        .stdout(predicates::str::contains("succeeded 2, failed 1"));
    let output = env.text(&format!(
        "SELECT output FROM {} WHERE record_id = '2'",
        env.own("backlog_attempts")
    ));
    assert!(output.contains("bad\u{FFFD}byte"), "{output:?}");
    std::fs::remove_file(env.path("calls.log")).unwrap();
    env.backlog(&["retry", "2", "2"])
        .assert()
        .success()
        .stderr(predicates::str::contains(
            "not retried: \"2\": record 2 is named twice",
        ));
    assert_eq!(calls(&env), 1, "handed over once");
}

/// A failure kept from the ticks until its next slot, which the real clock has not
/// reached (the tick's clock is an hour ahead, at the start of a slot), is still
/// taken by `retry` at once: a person asked for it.
fn a_kept_failure_is_retried_before_its_slot_ends(backend: Backend) {
    use chrono::DurationRound;
    let at = (chrono::Utc::now() + chrono::Duration::hours(1))
        .duration_trunc(chrono::Duration::minutes(5))
        .unwrap();
    let env = Env::on(backend);
    env.create_table("TEXT");
    env.insert_aged_at(at, &[(1, 60), (2, 120)], |t| {
        t.format("%Y-%m-%d %H:%M:%S").to_string().into()
    });
    env.write_schedule(&Schedule {
        tiers: PROGRESSIVE_TIERS,
        ..Schedule::default()
    });
    env.write_handler("handler.sh", FLAKY_HANDLER);
    let at = at.to_rfc3339();
    env.backlog(&["run", "--window", "1d", "--now", &at])
        .assert()
        .success();
    let text = stdout(env.backlog(&["show", "2", "--now", &at]).assert().success());
    assert!(text.contains("kept from the ticks until"), "{text}");
    env.write_handler("handler.sh", &FLAKY_HANDLER.replace("= 2 ]", "= 99 ]"));
    let text = stdout(env.backlog(&["retry", "2"]).assert().success());
    assert!(
        text.starts_with("retried 1 record: succeeded 1, failed 0; run "),
        "{text}"
    );
    assert_eq!(env.with_status("SUCCESS"), 2);
}

on_every_backend!(
    odd_output_and_a_record_named_twice,
    a_failure_is_kept_shown_and_retried,
    a_kept_failure_is_retried_before_its_slot_ends,
    retry_a_set_by_status,
    a_pause_stops_the_tier_on_every_runner,
);

/// A handler whose command is missing fails every record with exit 127: the tick is
/// an error (exit 5, one line naming the cause, the run log's error), not a day of
/// ordinary refusals.
#[test]
fn a_handler_that_cannot_run_fails_the_tick() {
    let env = flaky(Backend::Sqlite, PROGRESSIVE_TIERS);
    env.write_handler("handler.sh", "#!/bin/sh\nexec no-such-command-here\n");
    env.backlog(&["run", "--window", "1d", "--now", NOW])
        .assert()
        .code(5)
        .stdout(predicates::str::contains(
            "selected 3, succeeded 0, failed 3",
        ))
        .stderr(predicates::str::contains(
            "backlog: backlog.toml: the handler could not run for any of the 3 records (record ",
        ))
        .stderr(predicates::str::contains(": exit 127: [stderr] "));
    assert_eq!(
        env.text("SELECT outcome FROM backlog_runs"),
        "failed",
        "the run log says so"
    );
    env.backlog(&["status", "--check", "--now", NOW])
        .assert()
        .code(2)
        .stdout(predicates::str::contains(
            "tier 1 (1d)'s last tick failed: the handler could not run for any of the 3 records",
        ));
}

/// A tick that cannot start leaves a row in the run log saying why, when the
/// database can be reached: a handler that is not executable, a bad edit of the file.
#[test]
fn a_tick_that_cannot_start_is_in_the_run_log() {
    let env = flaky(Backend::Sqlite, PROGRESSIVE_TIERS);
    let handler = env.path("handler.sh");
    std::fs::set_permissions(
        &handler,
        std::os::unix::fs::PermissionsExt::from_mode(0o644),
    )
    .unwrap();
    env.backlog(&["run", "--window", "1d", "--now", NOW])
        .assert()
        .code(5);
    let error =
        env.text("SELECT outcome || ': ' || error FROM backlog_runs ORDER BY id DESC LIMIT 1");
    assert!(
        error.starts_with("failed: the tick could not start: backlog.toml: handler.command: "),
        "{error}"
    );
    let schedule = std::fs::read_to_string(env.path("backlog.toml")).unwrap();
    std::fs::write(
        env.path("backlog.toml"),
        schedule.replace("every = \"5m\"", "every = \"5 fortnights\""),
    )
    .unwrap();
    env.backlog(&["run", "--window", "1d", "--now", NOW])
        .assert()
        .code(3);
    let error = env.text("SELECT error FROM backlog_runs ORDER BY id DESC LIMIT 1");
    assert!(
        error.contains("could not start") && error.contains("5 fortnights"),
        "{error}"
    );
    // A window no tier has is a typo, not a tier that failed: nothing is recorded.
    env.backlog(&["run", "--window", "2d", "--now", NOW])
        .assert()
        .code(3);
    assert_eq!(
        env.count("SELECT count(*) FROM backlog_runs WHERE window_secs = 172800"),
        0
    );
}

/// `[history]` bounds the attempts: the newest `max_per_record` of a record, and
/// `keep = "0"` keeps none.
#[test]
fn the_history_is_bounded() {
    let tiers: &'static str =
        Box::leak(format!("\n[history]\nmax_per_record = 2\n{PROGRESSIVE_TIERS}").into_boxed_str());
    let env = flaky(Backend::Sqlite, tiers);
    for _ in 0..4 {
        env.backlog(&["run", "--window", "1d", "--now", NOW, "--retry-failed"])
            .assert()
            .success();
    }
    assert_eq!(
        env.count("SELECT count(*) FROM backlog_attempts WHERE record_id = '2'"),
        2
    );
    let tiers: &'static str =
        Box::leak(format!("\n[history]\nkeep = \"0\"\n{PROGRESSIVE_TIERS}").into_boxed_str());
    env.write_schedule(&Schedule {
        tiers,
        ..Schedule::default()
    });
    env.backlog(&["run", "--window", "1d", "--now", NOW, "--retry-failed"])
        .assert()
        .success();
    assert_eq!(
        env.count("SELECT count(*) FROM backlog_attempts"),
        0,
        "turned off, the history empties"
    );
}

/// `init --json` says what it wrote as one object, like every command that prints.
#[test]
fn init_prints_json_when_asked() {
    let env = Env::new();
    let out = env.backlog(&["init", "demo", "--json"]).assert().success();
    let json: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(json["written"].as_array().unwrap().len(), 3, "{json}");
    // The binary is not on PATH here: `next` names its path, which runs as it is.
    let binary = std::fs::canonicalize(assert_cmd::cargo::cargo_bin("backlog")).unwrap();
    assert_eq!(
        json["next"],
        format!(
            "{} run --window 7d --schedule demo/backlog.toml",
            binary.display()
        )
    );
    let path = std::env::join_paths([binary.parent().unwrap()]).unwrap();
    let on_path = env
        .backlog(&["init", "again", "--json"])
        .env("PATH", path)
        .assert()
        .success();
    let json: serde_json::Value = serde_json::from_slice(&on_path.get_output().stdout).unwrap();
    assert_eq!(
        json["next"], "backlog run --window 7d --schedule again/backlog.toml",
        "on PATH, its name"
    );
    env.backlog(&["init", "demo", "--json"])
        .assert()
        .code(2)
        .stdout(predicates::str::contains("\"exit_code\":2"));
}

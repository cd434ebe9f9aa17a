//! A person's actions on records picked by a filter: `--tier`, `--status`,
//! `--outcome`, `--error-contains`, `--older-than`, `--limit`; only pending records,
//! whatever the filter says.

use crate::harness::{Backend, Env, NOW, Schedule};

/// Records 1 to 4 (the classic ages), failed by a handler that says why: 1 a 429,
/// 2 a 500 (in French), 3 a timeout (a handler of 1s that sleeps), 4 succeeds.
fn env_after_failures(backend: Backend) -> Env {
    let env = Env::on(backend);
    env.classic();
    env.write_schedule(&Schedule {
        timeout: "1s",
        ..Schedule::default()
    });
    env.write_handler(
        "handler.sh",
        "#!/bin/sh\ncat > /dev/null\necho \"$BACKLOG_RECORD_ID\" >> calls.log\ncase \"$BACKLOG_RECORD_ID\" in\n  1) echo 'HTTP 429 Too Many Requests'; exit 1 ;;\n  2) echo 'HTTP 500 Échec interne' >&2; exit 1 ;;\n  3) sleep 5 ;;\nesac\nexit 0\n",
    );
    for window in ["1d", "7d", "180d"] {
        env.backlog(&["run", "--window", window, "--now", NOW])
            .assert()
            .success();
    }
    assert_eq!(env.take_calls(), [1, 2, 3, 4]);
    env
}

fn snoozed(out: &assert_cmd::assert::Assert) -> String {
    String::from_utf8_lossy(&out.get_output().stdout).into_owned()
}

/// A dry run lists `ids` (on stdout, a line each) and says `summary` (on stderr).
fn assert_dry_run(out: &assert_cmd::assert::Assert, ids: &[&str], summary: &str) {
    let text = snoozed(out);
    let listed: Vec<&str> = text
        .lines()
        .map(|l| l.split('\t').next().unwrap())
        .collect();
    assert_eq!(listed, ids, "{text}");
    assert_eq!(String::from_utf8_lossy(&out.get_output().stderr), summary);
}

fn a_filter_picks_records_by_the_outcome_and_text_of_their_failures_and_by_tier(backend: Backend) {
    let env = env_after_failures(backend);
    // The text, in any case, in the output or the detail.
    let out = env
        .backlog(&[
            "snooze",
            "--error-contains",
            "too many",
            "--for",
            "1h",
            "--dry-run",
        ])
        .assert()
        .success();
    assert_dry_run(&out, &["1"], "dry run: would snooze 1 record\n");
    let out = env
        .backlog(&[
            "snooze",
            "--error-contains",
            "HTTP",
            "--for",
            "1h",
            "--dry-run",
        ])
        .assert()
        .success();
    assert_dry_run(&out, &["2", "1"], "dry run: would snooze 2 records\n");
    // Any case, beyond ASCII too, on every database.
    let out = env
        .backlog(&[
            "snooze",
            "--error-contains",
            "échec",
            "--for",
            "1h",
            "--dry-run",
        ])
        .assert()
        .success();
    assert_dry_run(&out, &["2"], "dry run: would snooze 1 record\n");
    // A wildcard of SQL's LIKE is the text's own character.
    let out = env
        .backlog(&[
            "snooze",
            "--error-contains",
            "5_0",
            "--for",
            "1h",
            "--dry-run",
        ])
        .assert()
        .success();
    assert_dry_run(&out, &[], "dry run: would snooze no record\n");
    let out = env
        .backlog(&["retry", "--outcome", "timeout", "--dry-run", "--now", NOW])
        .assert()
        .success();
    assert!(snoozed(&out).starts_with("3\t"), "{}", snoozed(&out));
    // A tier's band: 1 and 2 are in the 1d tier's; with a status and a limit.
    let out = env
        .backlog(&["give-up", "--tier", "1d", "--dry-run", "--now", NOW])
        .assert()
        .code(2);
    assert!(
        String::from_utf8_lossy(&out.get_output().stderr).contains("sets no table.given_up"),
        "give-up needs its status"
    );
    let out = env
        .backlog(&[
            "snooze", "--tier", "1d", "--status", "ERROR", "--limit", "1", "--for", "2h", "--now",
            NOW,
        ])
        .assert()
        .success();
    assert!(
        snoozed(&out).starts_with("snoozed 1 record of BACKLOG until 2026-11-21T14:00:00Z"),
        "{}",
        snoozed(&out)
    );
    // Only pending records: 4 succeeded, and no filter takes it.
    let out = env
        .backlog(&[
            "snooze",
            "--tier",
            "180d",
            "--for",
            "1h",
            "--dry-run",
            "--now",
            NOW,
        ])
        .assert()
        .success();
    assert_dry_run(&out, &[], "dry run: would snooze no record\n");
    env.backlog(&["retry", "--tier", "2d", "--now", NOW])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("--window 2d is no tier's window"));
}

crate::on_every_backend!(
    a_filter_picks_records_by_the_outcome_and_text_of_their_failures_and_by_tier,
);

/// Ids and a filter do not mix; a filter's limit is bounded; `--older-than` needs a
/// filter.
#[test]
fn ids_and_filters_are_one_or_the_other() {
    let env = env_after_failures(Backend::Sqlite);
    env.backlog(&["retry", "1", "--outcome", "error"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("cannot be used with"));
    env.backlog(&["retry", "--outcome", "error", "--limit", "0"])
        .assert()
        .code(2)
        .stderr("backlog: --limit 0 is out of range; give 1 to 10000 records\n");
    env.backlog(&["retry", "1", "--older-than", "2d"])
        .assert()
        .code(2);
    // As many ids as an action takes, whether given or read from standard input.
    let ids: Vec<String> = (1..=10_001).map(|i| i.to_string()).collect();
    for action in [&["retry"][..], &["snooze", "--for", "1h"]] {
        let mut args: Vec<&str> = action.to_vec();
        args.extend(ids.iter().map(String::as_str));
        env.backlog(&args)
            .assert()
            .code(2)
            .stderr(predicates::str::contains(
                "10001 ids given, more than the 10000 one action takes",
            ));
    }
    // A filter that takes fewer than match says so.
    env.backlog(&["retry", "--outcome", "error", "--limit", "1", "--dry-run"])
        .assert()
        .success()
        .stderr(predicates::str::contains(
            "more records match than --limit 1: this retry takes the first 1; raise --limit (at most 10000) to take more at once",
        ));
}

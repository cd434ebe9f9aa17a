//! The status values a tick reads and writes: an answer counts as the status it names,
//! and pending statuses spelt in another case than the table's are said.

use crate::harness::{Backend, Env, NOW, Schedule, recording_handler};
use crate::tick::statuses;

/// `handler.exit_codes` that name the success and the error status: exit 3 is a
/// success and exit 4 an error, in the summary, the run log and the attempts, as
/// exit 0 and exit 1 are.
fn exit_codes_naming_success_and_error_count_as_them(backend: Backend) {
    let env = Env::on(backend);
    env.create_table("TEXT");
    let aged: Vec<(i64, i64)> = (1..=4).map(|id| (id, id * 60)).collect();
    env.insert_aged(&aged, |t| t.format("%Y-%m-%d %H:%M:%S").to_string().into());
    env.write_schedule(&Schedule {
        handler_extra: "exit_codes = { 3 = \"SUCCESS\", 4 = \"ERROR\" }\n[history]\nrecord = \"all\"",
        ..Schedule::default()
    });
    env.write_handler(
        "handler.sh",
        "#!/bin/sh\ncat > /dev/null\nexit $((3 + (BACKLOG_RECORD_ID % 2 == 0)))\n",
    );
    let out = env
        .backlog(&["run", "--window", "1d", "--now", NOW, "-v"])
        .assert()
        .success();
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(
        stdout.contains("selected 4, succeeded 2, failed 2, skipped 0"),
        "{stdout}"
    );
    assert!(stderr.contains("record 2: ERROR (exit 4)"), "{stderr}");
    assert_eq!(
        env.statuses(),
        statuses(&[(1, "SUCCESS"), (2, "ERROR"), (3, "SUCCESS"), (4, "ERROR")])
    );
    let attempts = env.lines(&format!(
        "SELECT outcome FROM {} ORDER BY record_id",
        env.own("backlog_attempts")
    ));
    assert_eq!(attempts, ["success", "error", "success", "error"]);
    let run = env.lines(&format!(
        "SELECT {} FROM {} ORDER BY id DESC",
        match backend {
            Backend::Mysql => "CONCAT(succeeded, ' ', failed)",
            _ => "succeeded || ' ' || failed",
        },
        env.own("backlog_runs")
    ));
    assert_eq!(run[0], "2 2");
}

/// The classic backlog (ages 8 minutes, 5 hours, 3 days, 2 months) in lower case,
/// `pending`, `failed`, `pending`, `failed`, and a schedule file whose `[table]` adds
/// `keys`.
fn lower_case_env(backend: Backend, keys: &str) -> Env {
    let env = Env::on(backend);
    env.classic();
    env.execute(r#"UPDATE "BACKLOG" SET "STATUS" = 'pending' WHERE "ID" IN (1, 3)"#);
    env.execute(r#"UPDATE "BACKLOG" SET "STATUS" = 'failed' WHERE "ID" IN (2, 4)"#);
    let file = Schedule::default().render_for(&env.url()).replace(
        "inserted_at_format = \"auto\"\n",
        &format!("inserted_at_format = \"auto\"\n{keys}\n"),
    );
    std::fs::write(env.path("backlog.toml"), file).unwrap();
    env.write_handler("handler.sh", &recording_handler(&[]));
    env
}

/// `pending = ["PENDING", "FAILED"]` over a table of `pending` and `failed` selects
/// nothing (statuses are compared exactly, on MariaDB too, whose collation folds case):
/// the tick says so once, naming both spellings and the line to write, whether its
/// band holds such records or is empty while other bands do.
fn pending_statuses_in_another_case_are_warned_of_once(backend: Backend) {
    let env = lower_case_env(
        backend,
        "pending = [\"PENDING\", \"FAILED\"]\nerror = \"FAILED\"",
    );
    let fix = "statuses are compared exactly, case included: set table.pending = [\"pending\", \"failed\"], table.error = \"failed\" in the schedule file";
    // Tier 1's band holds records 1 (pending) and 2 (failed); tier 4's (14d to 30d)
    // holds none.
    for (window, place, found) in [
        (
            "1d",
            "the band",
            "1 \"pending\" (the file says \"PENDING\"), 1 \"failed\" (the file says \"FAILED\")",
        ),
        (
            "30d",
            "the table",
            "2 \"pending\" (the file says \"PENDING\"), 2 \"failed\" (the file says \"FAILED\")",
        ),
    ] {
        let out = env
            .backlog(&["run", "--window", window, "--now", NOW])
            .assert()
            .success();
        let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
        assert!(
            stdout.contains("selected 0, succeeded 0"),
            "{window}: {stdout}"
        );
        let warned: Vec<&str> = stderr.lines().filter(|l| l.contains("WARN")).collect();
        assert_eq!(warned.len(), 1, "{window}: once: {stderr}");
        let tier = if window == "1d" { 1 } else { 4 };
        assert!(
            warned[0].contains(&format!(
                "WARN tick{{tier={tier} window={window}}}: no record of this band is pending, yet a sample of {place} holds statuses that differ from a pending value only in case: {found}; {fix}"
            )),
            "{window}: {stderr}"
        );
    }
    assert!(env.take_calls().is_empty(), "nothing handled");
    assert_eq!(
        env.statuses(),
        statuses(&[(1, "pending"), (2, "failed"), (3, "pending"), (4, "failed")])
    );
}

/// The file as the table spells it: the empty band's tick says nothing, and the
/// band that holds records hands them over.
fn pending_statuses_as_the_table_spells_them_are_not_warned_of(backend: Backend) {
    let env = lower_case_env(
        backend,
        "pending = [\"pending\", \"failed\"]\nerror = \"failed\"\nsuccess = \"done\"",
    );
    let out = env
        .backlog(&["run", "--window", "30d", "--now", NOW])
        .assert()
        .success();
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(!stderr.contains("WARN"), "{stderr}");
    let out = env.run_window("1d");
    assert!(out.contains("selected 2, succeeded 2"), "{out}");
    assert_eq!(env.take_calls(), [1, 2]);
}

crate::on_every_backend!(
    exit_codes_naming_success_and_error_count_as_them,
    pending_statuses_in_another_case_are_warned_of_once,
    pending_statuses_as_the_table_spells_them_are_not_warned_of,
);

//! The status values a tick reads and writes: an answer counts as the status it names,
//! and pending statuses spelt in another case than the table's are said.

use crate::harness::{Backend, Env, NOW, Schedule};
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

crate::on_every_backend!(exit_codes_naming_success_and_error_count_as_them);

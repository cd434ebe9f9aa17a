//! What a runner of a fleet steps over: what another live runner has read, but not
//! where a runner that ended early let go of records it took.

use crate::harness::{Backend, Env, NOW, Running};
use crate::tick::wait_for;

use super::{all_success, batch_schedule, output_within_a_minute, pending_records, spawn_run};

/// The id of the newest tick in the run log.
fn last_run(env: &Env) -> i64 {
    env.count(&format!("SELECT max(id) FROM {}", env.own("backlog_runs")))
}

/// The summary of a tick of the 1d tier at the tests' clock (`spawn_run`), which must
/// succeed within a minute.
fn tick(env: &Env) -> serde_json::Value {
    let out = output_within_a_minute(spawn_run(env, "0"));
    assert!(out.status.success(), "{out:?}");
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Runner A takes records and is stopped before it hands them all out; runner B then
/// reads the band whole. Were B still running, its reach would cover the records A let
/// go (so it was when B read them while A held them): a runner C beside B must not step
/// over them as read, and takes them. Without the withdrawal's stretches C stepped
/// over B's and took nothing, and A's records waited for the tier's next slot. (MySQL's
/// runners step over nothing, each reading its band whole: there C takes them anyway.)
fn a_runner_does_not_step_over_what_a_stopped_runner_let_go(backend: Backend) {
    let env = Env::on(backend);
    pending_records(&env, 20);
    batch_schedule(&env, "", "mode = \"batch\"\nbatch_size = 1");
    let a = Running::spawn(
        env.command()
            .args(["run", "--window", "1d", "--now", NOW, "--json"])
            .env("BACKLOG_TEST_SLEEP", "1")
            .stdout(std::process::Stdio::piped()),
    );
    wait_for(|| {
        std::fs::read_to_string(env.path("handler.log")).is_ok_and(|l| l.contains("start"))
    });
    let out = a.terminate();
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["stopped"], true, "{out:?}");
    let left = env.count(r#"SELECT count(*) FROM "BACKLOG" WHERE "STATUS" = 'NEW'"#);
    assert!(left > 0, "A stopped with records still pending");
    let a = last_run(&env);

    tick(&env);
    assert!(all_success(&env));
    // B as it was while it ran, its band pending again; A ended long ago (what it
    // withdrew is kept while B runs, not only for a lease).
    let b = last_run(&env);
    let (now, hour_ago) = match backend {
        Backend::Mysql => ("UTC_TIMESTAMP(6)", "finished_at - INTERVAL 1 HOUR"),
        _ => ("now()", "finished_at - INTERVAL '1 hour'"),
    };
    let runs = env.own("backlog_runs");
    env.execute(&format!(
        "UPDATE {runs} SET outcome = 'running', finished_at = NULL, heartbeat_at = {now} WHERE id = {b}"
    ));
    env.execute(&format!(
        "UPDATE {runs} SET finished_at = {hour_ago}, heartbeat_at = {hour_ago} WHERE id = {a}"
    ));
    env.execute(r#"UPDATE "BACKLOG" SET "STATUS" = 'NEW'"#);

    let summary = tick(&env);
    assert_eq!(summary["selected"], 20, "{summary}");
    assert!(all_success(&env));
}

crate::on_servers!(a_runner_does_not_step_over_what_a_stopped_runner_let_go);

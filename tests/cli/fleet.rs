//! The fleet visible: the ticks running now, on any host, with what each holds, in
//! `status`, `status --json`, the metrics and the dashboard's in-flight page.

use std::process::Stdio;

use crate::dashboard::get;
use crate::harness::{Backend, Env, NOW, Running, Schedule};
use crate::tick::wait_for;

/// A handler that takes a second a record, so that a tick runs for a while.
const SLOW_HANDLER: &str = "#!/bin/sh\ncat > /dev/null\nsleep 1\n";

/// The runners `status --json` lists.
fn runners(env: &Env) -> Vec<serde_json::Value> {
    let out = env.backlog(&["status", "--json"]).assert().success();
    let status: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    status["runners"].as_array().cloned().unwrap_or_default()
}

/// A tick running shows, host, pid, tier, since, what it holds and its last renewal,
/// wherever the fleet is looked at; once it ends, it shows nowhere.
fn a_running_tick_shows_in_status_the_metrics_and_the_dashboard(backend: Backend) {
    let env = Env::on(backend);
    env.create_table("TEXT");
    let aged: Vec<(i64, i64)> = (1..=30).map(|id| (id, id * 60)).collect();
    env.insert_aged(&aged, |t| t.format("%Y-%m-%d %H:%M:%S").to_string().into());
    env.write_schedule(&Schedule::default());
    env.write_handler("handler.sh", SLOW_HANDLER);
    assert!(runners(&env).is_empty(), "nothing runs yet");
    let tick = Running::spawn(
        env.command()
            .args(["run", "--window", "1d", "--now", NOW])
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
    );
    let mut seen = Vec::new();
    wait_for(|| {
        seen = runners(&env);
        seen.first().is_some_and(|r| !r["holds"].is_null())
    });
    let host = hostname();
    let runner = &seen[0];
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(runner["host"], host.as_str(), "{runner}");
    assert_eq!(runner["pid"], tick.id(), "{runner}");
    assert_eq!(runner["window_secs"], 86_400, "{runner}");
    assert!(
        runner["owner"]
            .as_str()
            .unwrap()
            .starts_with(&format!("{host}/{}/", tick.id()))
    );
    for time in ["since", "renewed"] {
        assert!(runner[time].as_str().unwrap().ends_with('Z'), "{runner}");
    }
    // A server's tick claims records one by one; SQLite's holds a span of ages.
    match backend {
        Backend::Sqlite => assert!(runner["holds"]["span"]["low"].is_string(), "{runner}"),
        _ => assert!(runner["holds"]["records"].as_u64() > Some(0), "{runner}"),
    }
    let text = env.backlog(&["status"]).assert().success();
    let text = String::from_utf8_lossy(&text.get_output().stdout).into_owned();
    assert!(text.contains("\nrunning now: 1\n"), "{text}");
    assert!(
        text.contains(&format!("  {host} pid {}, tier 1 (1d), since ", tick.id())),
        "{text}"
    );
    // Another tier's tick writes the metrics while this one runs.
    env.backlog(&[
        "run",
        "--window",
        "7d",
        "--now",
        NOW,
        "--metrics-file",
        "m.prom",
    ])
    .assert()
    .success();
    let metrics = std::fs::read_to_string(env.path("m.prom")).unwrap();
    assert!(
        metrics.contains("backlog_runners{table=\"BACKLOG\",tier=\"1d\"} 1\n"),
        "{metrics}"
    );
    if backend != Backend::Sqlite {
        assert!(
            metrics.contains(&format!(
                "backlog_runner_records_held{{table=\"BACKLOG\",tier=\"1d\",host=\"{host}\",pid=\"{}\",owner=\"{host}/{}/",
                tick.id(),
                tick.id()
            )),
            "{metrics}"
        );
    }
    let (serve, port) = crate::dashboard::serve(
        env.command()
            .arg("serve")
            .env_remove("BACKLOG_TOKEN")
            .stderr(Stdio::null()),
    );
    let page = get(port, "/in-flight");
    assert_eq!(page.code, 200);
    assert!(page.body.contains("<h2>Running now</h2>"), "{}", page.body);
    assert!(
        page.body
            .contains(&format!("<td>{host}</td><td>{}</td><td>1d</td>", tick.id())),
        "{}",
        page.body
    );
    tick.kill();
    serve.kill();
    // Killed, it is silent, and not running once its lease has run out; or, as here,
    // ended.
    env.execute(&format!(
        "UPDATE {} SET finished_at = started_at",
        env.own("backlog_runs")
    ));
    assert!(runners(&env).is_empty(), "an ended tick is not running");
}

fn hostname() -> String {
    let out = std::process::Command::new("hostname").output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

crate::on_every_backend!(a_running_tick_shows_in_status_the_metrics_and_the_dashboard);

//! The fleet visible: the ticks running now, on any host, with what each holds, in
//! `status`, `status --json`, the metrics and the dashboard's in-flight page; and a
//! slot's figures over all the runners that shared it.

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

/// A handler that fails the records whose id is a multiple of 5, after a tenth of a
/// second, so that two runners started together share the band.
const SHARING_HANDLER: &str = "#!/bin/sh\ncat > /dev/null\nsleep 0.1\ncase \"$BACKLOG_RECORD_ID\" in\n  *0|*5) exit 1 ;;\nesac\n";

/// `(selected, succeeded, failed, skipped, lost)` summed over the run log's rows of
/// tier 1 (window 1d), by SQL.
fn run_log_sums(env: &Env) -> [u64; 5] {
    ["selected", "succeeded", "failed", "skipped", "lost"].map(|column| {
        // PostgreSQL's sum of a bigint is a numeric.
        let cast = if env.backend == Backend::Postgres {
            "::bigint"
        } else {
            ""
        };
        env.count(&format!(
            "SELECT coalesce(sum({column}), 0){cast} FROM {} WHERE window_secs = 86400",
            env.own("backlog_runs")
        )) as u64
    })
}

/// Two runners share tier 1's slot (started together over one band), a third ticks
/// later in the same slot: `status` (text and JSON), the metrics and the dashboard
/// give the slot's sums over the three, which the run log's rows add up to and the
/// records' statuses agree with; a tick of the next slot starts a slot of its own.
fn a_slots_figures_are_summed_over_its_runners(backend: Backend) {
    let env = Env::on(backend);
    env.records_minutes_apart(30);
    env.write_schedule(&Schedule::default());
    env.write_handler("handler.sh", SHARING_HANDLER);
    let spawn = |now: &str| {
        Running::spawn(
            env.command()
                .args(["run", "--window", "1d", "--now", now])
                .stdout(Stdio::null())
                .stderr(Stdio::null()),
        )
    };
    let (a, b) = (spawn(NOW), spawn(NOW));
    let ran = [a.wait(), b.wait()];
    assert!(ran.iter().all(|o| o.status.success()), "{ran:?}");
    // A third runner in the same 5-minute slot finds the failures kept till the next.
    assert!(spawn("2026-11-21T12:02:00Z").wait().status.success());
    assert_eq!(
        (env.with_status("SUCCESS"), env.with_status("ERROR")),
        (24, 6),
        "every record handled once"
    );
    // Tier 1's rows are this slot's three.
    let [selected, succeeded, failed, skipped, lost] = run_log_sums(&env);
    assert_eq!((selected, succeeded, failed, lost), (30, 24, 6, 0));

    let out = env
        .backlog(&["status", "--json", "--now", "2026-11-21T12:03:00Z"])
        .assert()
        .success();
    let status: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let slot = &status["tiers"][0]["last_slot"];
    assert_eq!(slot["at"], NOW, "{slot}");
    assert_eq!(
        (slot["runners"].as_u64(), slot["ticks"].as_u64()),
        (Some(3), Some(3)),
        "{slot}"
    );
    for (name, value) in [
        ("selected", selected),
        ("succeeded", succeeded),
        ("failed", failed),
        ("skipped", skipped),
        ("lost", lost),
    ] {
        assert_eq!(slot[name].as_u64(), Some(value), "{name}: {slot}");
    }
    assert_eq!(slot["outcome"], "done", "{slot}");
    assert_eq!(slot["outcomes"]["done"], 3, "{slot}");
    let ids: Vec<i64> = env
        .lines(&format!(
            "SELECT CAST(id AS CHAR(20)) FROM {} WHERE window_secs = 86400 ORDER BY id",
            env.own("backlog_runs")
        ))
        .iter()
        .map(|id| id.trim().parse().unwrap())
        .collect();
    assert_eq!(slot["run_ids"], serde_json::json!(ids), "{slot}");
    // The last tick alone is the third runner's, which found nothing left.
    let last = &status["tiers"][0]["last_tick"];
    assert_eq!(last["selected"], 0, "{last}");

    let out = env
        .backlog(&["status", "--now", "2026-11-21T12:03:00Z"])
        .assert()
        .success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(
        text.contains("tier  window  cadence                  last slot             outcome  runners selected succeeded  failed skipped   took\n"),
        "{text}"
    );
    let row: Vec<&str> = text
        .lines()
        .find(|l| l.starts_with("   1  1d"))
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(
        row[..10],
        ["1", "1d", "every", "5m", NOW, "done", "3", "30", "24", "6"],
        "{text}"
    );
    assert_eq!(row[10], skipped.to_string(), "{text}");

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
    for line in [
        "backlog_last_slot_runners{table=\"BACKLOG\",tier=\"1d\"} 3\n".to_string(),
        "backlog_last_slot_records{table=\"BACKLOG\",tier=\"1d\",outcome=\"selected\"} 30\n"
            .to_string(),
        "backlog_last_slot_records{table=\"BACKLOG\",tier=\"1d\",outcome=\"succeeded\"} 24\n"
            .to_string(),
        "backlog_last_slot_records{table=\"BACKLOG\",tier=\"1d\",outcome=\"failed\"} 6\n"
            .to_string(),
        format!(
            "backlog_last_slot_records{{table=\"BACKLOG\",tier=\"1d\",outcome=\"skipped\"}} {skipped}\n"
        ),
        "backlog_last_slot_timestamp_seconds{table=\"BACKLOG\",tier=\"1d\"} 1795262400\n"
            .to_string(),
        "backlog_last_tick_success{table=\"BACKLOG\",tier=\"1d\"} 1\n".to_string(),
    ] {
        assert!(metrics.contains(&line), "{line}{metrics}");
    }

    let (serve, port) = crate::dashboard::serve(
        env.command()
            .arg("serve")
            .env_remove("BACKLOG_TOKEN")
            .stderr(Stdio::null()),
    );
    let page = get(port, "/");
    serve.kill();
    assert_eq!(page.code, 200);
    assert!(
        page.body.contains("<th class=\"num\">runners</th>"),
        "{}",
        page.body
    );
    assert!(
        page.body
            .contains("<td class=\"num\">3</td><td class=\"num\">30</td><td class=\"num\">6</td>"),
        "{}",
        page.body
    );

    // The next slot's tick is a slot of its own.
    assert!(spawn("2026-11-21T12:05:00Z").wait().status.success());
    let out = env
        .backlog(&["status", "--json", "--now", "2026-11-21T12:06:00Z"])
        .assert()
        .success();
    let status: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let slot = &status["tiers"][0]["last_slot"];
    assert_eq!(slot["at"], "2026-11-21T12:05:00Z", "{slot}");
    assert_eq!(
        (slot["runners"].as_u64(), slot["selected"].as_u64()),
        (Some(1), Some(6)),
        "{slot}"
    );
}

crate::on_every_backend!(
    a_running_tick_shows_in_status_the_metrics_and_the_dashboard,
    a_slots_figures_are_summed_over_its_runners,
);

//! `[alert]` after the trouble: a tier that alerted and ticks clean again sends one
//! `resolved` (each tick a process of its own, so it is kept across restarts), and
//! pings name their tier (`{window}`, `{tier}`, a `ping` per `[[tier]]`).

use crate::harness::{Backend, Env, NOW, Schedule, recording_handler};
use crate::hooks::{Hooks, Request, posted};

/// `backlog run --window W --now NOW+minutes`, which must end with `code`.
fn tick(env: &Env, window: &str, minutes: i64, code: i32) {
    let now =
        chrono::DateTime::parse_from_rfc3339(NOW).unwrap() + chrono::Duration::minutes(minutes);
    env.backlog(&["run", "--window", window, "--now", &now.to_rfc3339()])
        .assert()
        .code(code);
}

/// The paths of the pings (GETs) among `got`.
fn pings(got: &[Request]) -> Vec<&str> {
    got.iter()
        .filter(|r| r.method == "GET")
        .map(|r| r.path.as_str())
        .collect()
}

/// The schedule file of `env`, `alert` appended as its `[alert]` section.
fn with_alert(env: &Env, alert: &str) {
    let path = env.path("backlog.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(path, format!("{text}\n[alert]\n{alert}\n")).unwrap();
}

/// A failing tick alerts (its handler ran for no record: `tick_failed`); the tier's
/// next clean tick sends `resolved` naming it, once: the clean tick after says
/// nothing. Each tick is a process of its own: what alerted is kept in the database.
/// The ping of the clean tick is the success ping, as every clean tick's.
fn a_tier_that_alerted_sends_resolved_once_when_it_ticks_clean(backend: Backend) {
    let hooks = Hooks::start();
    let env = Env::on(backend);
    env.classic();
    env.write_schedule(&Schedule::default());
    env.write_handler("handler.sh", "#!/bin/sh\ncat > /dev/null\nexit 127\n");
    with_alert(
        &env,
        &format!("webhook = \"{0}/hook\"\nping = \"{0}/ping\"", hooks.url),
    );
    tick(&env, "1d", 0, 5);
    let events = posted(&hooks.take());
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["kind"], "tick_failed");

    env.write_handler("handler.sh", &recording_handler(&[]));
    tick(&env, "1d", 20, 0);
    let got = hooks.take();
    assert_eq!(pings(&got), ["/ping/start", "/ping"]);
    let events = posted(&got);
    assert_eq!(events.len(), 1, "{got:?}");
    let resolved = &events[0];
    assert_eq!(resolved["kind"], "resolved");
    assert_eq!(resolved["tier"], 1);
    assert_eq!(resolved["window"], "1d");
    assert_eq!(resolved["resolves"], serde_json::json!(["tick_failed"]));
    assert_eq!(resolved["since"], NOW);
    assert_eq!(
        resolved["message"],
        "tier 1 (1d) ticks clean again, 20m after tick_failed"
    );

    tick(&env, "1d", 25, 0);
    let got = hooks.take();
    assert_eq!(pings(&got), ["/ping/start", "/ping"]);
    assert_eq!(posted(&got), [] as [serde_json::Value; 0], "resolved once");
}

crate::on_every_backend!(a_tier_that_alerted_sends_resolved_once_when_it_ticks_clean);

/// The breaker trips (two failures in a row, a second's cool-down) and alerts; once the
/// counterpart is back and the cool-down over, the tier's next tick closes it and ticks
/// clean, and `resolved` names `breaker_tripped`, once.
#[test]
fn a_tripped_breaker_is_resolved_by_the_clean_tick_after_it() {
    let hooks = Hooks::start();
    let env = Env::new();
    env.classic();
    env.write_schedule(&Schedule {
        handler_extra: "stop_after_failures = 2\nbreaker_cooldown = \"1s\"",
        ..Schedule::default()
    });
    env.write_handler("handler.sh", "#!/bin/sh\ncat > /dev/null\nexit 1\n");
    with_alert(&env, &format!("webhook = \"{}/hook\"", hooks.url));
    tick(&env, "1d", 0, 7);
    let events = posted(&hooks.take());
    let kinds: Vec<&str> = events.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["breaker_tripped"], "{events:?}");

    env.write_handler("handler.sh", &recording_handler(&[]));
    // The cool-down runs on the database's own clock, not `--now`.
    std::thread::sleep(std::time::Duration::from_millis(1_500));
    tick(&env, "1d", 20, 0);
    let events = posted(&hooks.take());
    let kinds: Vec<&str> = events.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["resolved"], "{events:?}");
    assert_eq!(
        events[0]["resolves"],
        serde_json::json!(["breaker_tripped"])
    );
    tick(&env, "1d", 25, 0);
    assert_eq!(posted(&hooks.take()), [] as [serde_json::Value; 0], "once");
}

/// A tick that could not start alerts the command; once its handler is there, the
/// command gets `resolved` on its stdin as it got the alert, and only once.
#[test]
fn an_alert_command_gets_resolved_once() {
    let env = Env::new();
    env.classic();
    env.write_schedule(&Schedule {
        command: r#"["./later.sh"]"#,
        ..Schedule::default()
    });
    with_alert(&env, "command = [\"./alert.sh\", \"ops\"]");
    env.write_handler(
        "alert.sh",
        "#!/bin/sh\necho \"$1\" >> alert.args\ncat >> alerts.jsonl\n",
    );
    tick(&env, "1d", 0, 5);
    env.write_handler("later.sh", &recording_handler(&[]));
    tick(&env, "1d", 5, 0);
    tick(&env, "1d", 10, 0);
    let lines = std::fs::read_to_string(env.path("alerts.jsonl")).unwrap();
    let events: Vec<serde_json::Value> = lines
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let kinds: Vec<&str> = events.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["tick_not_started", "resolved"], "{lines}");
    assert_eq!(
        events[1]["resolves"],
        serde_json::json!(["tick_not_started"])
    );
    assert_eq!(
        std::fs::read_to_string(env.path("alert.args")).unwrap(),
        "ops\nops\n"
    );
}

/// `{window}` and `{tier}` in `ping` make a check per tier; a `[[tier]]`'s own `ping`
/// overrides `[alert]`'s for its ticks.
#[test]
fn pings_name_their_tier() {
    let hooks = Hooks::start();
    let env = Env::new();
    env.classic();
    env.write_schedule(&Schedule::default());
    env.write_handler("handler.sh", &recording_handler(&[]));
    let path = env.path("backlog.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let text = text.replacen(
        "window = \"7d\"\nevery = \"1h\"\n",
        &format!(
            "window = \"7d\"\nevery = \"1h\"\nping = \"{}/own/{{tier}}\"\n",
            hooks.url
        ),
        1,
    );
    std::fs::write(&path, text).unwrap();
    with_alert(&env, &format!("ping = \"{}/ping/{{window}}\"", hooks.url));
    tick(&env, "1d", 0, 0);
    assert_eq!(pings(&hooks.take()), ["/ping/1d/start", "/ping/1d"]);
    tick(&env, "7d", 0, 0);
    assert_eq!(pings(&hooks.take()), ["/own/2/start", "/own/2"]);
    tick(&env, "14d", 0, 0);
    assert_eq!(pings(&hooks.take()), ["/ping/14d/start", "/ping/14d"]);
}

/// A placeholder a ping URL does not know is refused as the file loads, naming the
/// key and the known ones.
#[test]
fn an_unknown_placeholder_in_a_ping_is_refused() {
    let env = Env::new();
    env.classic();
    env.write_schedule(&Schedule::default());
    with_alert(&env, "ping = \"https://hc.example/{foo}\"");
    env.backlog(&["run", "--window", "1d", "--now", NOW])
        .assert()
        .code(3)
        .stderr(
            "backlog: backlog.toml:44:8: alert.ping: {foo} is no placeholder of a ping URL; use {window} (the tier's window, like 1d) or {tier} (its number, like 1)\n",
        );
}

/// An alert sent while the database could not be reached is kept open on this host
/// (`backlog_alerts` was out of reach too): once the database is back, the tier's
/// clean tick sends `resolved`, once.
#[test]
fn an_alert_sent_without_the_database_is_resolved_once_it_is_back() {
    let hooks = Hooks::start();
    let env = Env::new();
    env.classic();
    // The database in a folder of its own, which goes away for the outage.
    std::fs::create_dir(env.path("data")).unwrap();
    std::fs::rename(env.path("backlog.db"), env.path("data/backlog.db")).unwrap();
    env.write_schedule(&Schedule::default());
    env.write_handler("handler.sh", &recording_handler(&[]));
    let path = env.path("backlog.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(
        &path,
        text.replacen("url = \"backlog.db\"", "url = \"data/backlog.db\"", 1),
    )
    .unwrap();
    with_alert(&env, &format!("webhook = \"{}/hook\"", hooks.url));
    std::fs::rename(env.path("data"), env.path("away")).unwrap();
    tick(&env, "1d", 0, 4);
    let events = posted(&hooks.take());
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["kind"], "tick_not_started");

    std::fs::rename(env.path("away"), env.path("data")).unwrap();
    tick(&env, "1d", 20, 0);
    let events = posted(&hooks.take());
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["kind"], "resolved");
    assert_eq!(
        events[0]["resolves"],
        serde_json::json!(["tick_not_started"])
    );
    tick(&env, "1d", 25, 0);
    assert_eq!(posted(&hooks.take()), [] as [serde_json::Value; 0]);
}

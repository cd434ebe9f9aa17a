//! `[alert]`: a failing tick pushes one alert per tier, kind and `alert_every` (a
//! webhook, a command) across separate runs, pings healthchecks.io-style, and a
//! delivery that fails never changes the tick's outcome.

use std::time::{Duration, Instant};

use crate::harness::{Backend, Env, NOW, Schedule, recording_handler};
use crate::hooks::{Hooks, Request, add_webhook, posted, refused};

/// The classic backlog, a handler that cannot be started (the tick fails, exit code
/// 5), and `alert` appended as the file's `[alert]` section.
fn failing_env(backend: Backend, alert: &str) -> Env {
    let env = Env::on(backend);
    env.classic();
    env.write_schedule(&Schedule {
        command: r#"["./missing.sh"]"#,
        ..Schedule::default()
    });
    let path = env.path("backlog.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(path, format!("{text}\n[alert]\n{alert}\n")).unwrap();
    env
}

/// `backlog run --window 1d --now NOW+minutes`, which must end with `code`; its stderr.
fn tick(env: &Env, minutes: i64, code: i32) -> String {
    let now =
        chrono::DateTime::parse_from_rfc3339(NOW).unwrap() + chrono::Duration::minutes(minutes);
    let out = env
        .backlog(&["run", "--window", "1d", "--now", &now.to_rfc3339()])
        .assert()
        .code(code);
    String::from_utf8_lossy(&out.get_output().stderr).into_owned()
}

/// The paths of the pings (GETs) among `got`.
fn pings(got: &[Request]) -> Vec<&str> {
    got.iter()
        .filter(|r| r.method == "GET")
        .map(|r| r.path.as_str())
        .collect()
}

fn a_failing_tick_sends_one_webhook_and_pings_then_holds_back_within_alert_every(backend: Backend) {
    let hooks = Hooks::start();
    let env = failing_env(
        backend,
        &format!(
            "webhook = \"{0}/hook?token=s3cret\"\nping = \"{0}/ping\"\nalert_every = \"15m\"",
            hooks.url
        ),
    );
    let stderr = tick(&env, 0, 5);
    assert!(!stderr.contains("s3cret"), "{stderr}");
    let got = hooks.take();
    assert_eq!(pings(&got), ["/ping/start", "/ping/5"]);
    let events = posted(&got);
    assert_eq!(events.len(), 1, "{got:?}");
    let posts: Vec<&str> = got
        .iter()
        .filter(|r| r.method == "POST")
        .map(|r| r.path.as_str())
        .collect();
    assert_eq!(posts, ["/hook?token=s3cret"]);
    let event = &events[0];
    assert_eq!(event["kind"], "tick_not_started");
    assert_eq!(event["table"], "BACKLOG");
    assert_eq!(event["tier"], 1);
    assert_eq!(event["window"], "1d");
    assert_eq!(event["time"], NOW);
    assert_eq!(event["exit_code"], 5);
    assert_eq!(event["held_back"], 0);
    assert!(
        event["host"].as_str().is_some_and(|h| !h.is_empty()),
        "{event}"
    );
    let message = event["message"].as_str().unwrap();
    assert!(
        message.contains("missing.sh") && !message.contains('\n'),
        "{message}"
    );

    // A second failure within alert_every pings, and is held back.
    tick(&env, 5, 5);
    let got = hooks.take();
    assert_eq!(pings(&got), ["/ping/start", "/ping/5"]);
    assert!(posted(&got).is_empty(), "{got:?}");

    // Past alert_every, the next one goes out and says one was held back.
    tick(&env, 20, 5);
    let events = posted(&hooks.take());
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["kind"], "tick_not_started");
    assert_eq!(events[0]["held_back"], 1);
    let sent = format!(
        "SELECT count(*) FROM {} WHERE kind = 'tick_not_started' AND window_secs = 86400 AND held_back = 0",
        env.own("backlog_alerts")
    );
    assert_eq!(env.count(&sent), 1, "the count starts again");
}

fn a_tick_that_goes_well_pings_success_and_alerts_nothing(backend: Backend) {
    let hooks = Hooks::start();
    let env = Env::on(backend);
    env.classic();
    env.write_schedule(&Schedule::default());
    env.write_handler("handler.sh", &recording_handler(&[1]));
    let path = env.path("backlog.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let alert = format!(
        "[alert]\nwebhook = \"{0}/hook\"\nping = \"{0}/ping\"\n",
        hooks.url
    );
    std::fs::write(&path, format!("{text}\n{alert}")).unwrap();
    // A record failing is the backlog's business, not an alert.
    tick(&env, 0, 0);
    assert_eq!(pings(&hooks.take()), ["/ping/start", "/ping"]);
    // A dry run sends nothing at all.
    env.backlog(&["run", "--window", "1d", "--now", NOW, "--dry-run"])
        .assert()
        .success();
    assert_eq!(hooks.take(), []);
}

fn a_failed_delivery_is_a_warning_naming_the_url_without_its_token(backend: Backend) {
    let refused = refused();
    let url = &refused.url;
    let env = failing_env(
        backend,
        &format!(
            "webhook = \"{url}/hook?token=s3cret\"\nping = \"http://ops:pa55@{}/ping\"",
            &url[7..]
        ),
    );
    // The tick's own exit code, whatever the deliveries did.
    let stderr = tick(&env, 0, 5);
    assert!(
        stderr.contains(&format!(
            "WARN tick{{tier=1 window=1d}}: alert webhook {url}/hook: "
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "WARN tick{{tier=1 window=1d}}: ping {url}/ping/start: "
        )),
        "{stderr}"
    );
    assert!(
        !stderr.contains("s3cret") && !stderr.contains("pa55"),
        "{stderr}"
    );
}

/// A bad edit elsewhere in the file: the tick cannot start (exit code 3), and the
/// `[alert]` the file still holds says so.
fn a_file_that_does_not_load_still_alerts(backend: Backend) {
    let hooks = Hooks::start();
    let env = failing_env(
        backend,
        &format!("webhook = \"{0}/hook\"\nping = \"{0}/ping\"", hooks.url),
    );
    let path = env.path("backlog.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replacen("every = \"1h\"", "evry = \"1h\"", 1)).unwrap();
    tick(&env, 0, 3);
    let got = hooks.take();
    assert_eq!(pings(&got), ["/ping/3"]);
    let events = posted(&got);
    assert_eq!(events.len(), 1, "{got:?}");
    assert_eq!(events[0]["kind"], "tick_not_started");
    assert_eq!(events[0]["tier"], 1);
    assert_eq!(events[0]["exit_code"], 3);
    let message = events[0]["message"].as_str().unwrap();
    assert!(
        message.contains("evry: unknown key; did you mean `every`?"),
        "{message}"
    );
}

/// A database that cannot be reached: the tick cannot start, and says so to a person
/// (its exit code pinged, `tick_not_started` sent), held back on this host alone for
/// `alert_every`, since `backlog_alerts` is out of reach too.
fn a_tick_whose_database_cannot_be_reached_alerts_once_per_alert_every(backend: Backend) {
    let hooks = Hooks::start();
    let env = failing_env(
        backend,
        &format!("webhook = \"{0}/hook\"\nping = \"{0}/ping\"", hooks.url),
    );
    let refused = refused();
    let unreachable = match backend {
        Backend::Sqlite => "no-such-folder/backlog.db".to_string(),
        Backend::Postgres => format!("postgres://postgres@{}/postgres", &refused.url[7..]),
        Backend::Mysql => format!("mysql://backlog@{}/mysql", &refused.url[7..]),
    };
    let path = env.path("backlog.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let url = text.lines().find(|l| l.starts_with("url = ")).unwrap();
    std::fs::write(
        &path,
        text.replacen(url, &format!("url = \"{unreachable}\""), 1),
    )
    .unwrap();
    let stderr = tick(&env, 0, 4);
    let got = hooks.take();
    assert_eq!(pings(&got), ["/ping/4"], "{stderr}");
    let events = posted(&got);
    assert_eq!(events.len(), 1, "{got:?}");
    assert_eq!(events[0]["kind"], "tick_not_started");
    assert_eq!(events[0]["tier"], 1);
    assert_eq!(events[0]["exit_code"], 4);
    assert_eq!(events[0]["held_back"], 0);
    // Within alert_every: pinged, held back; past it, sent with the count.
    tick(&env, 5, 4);
    let got = hooks.take();
    assert_eq!(pings(&got), ["/ping/4"]);
    assert!(posted(&got).is_empty(), "{got:?}");
    tick(&env, 20, 4);
    let events = posted(&hooks.take());
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["held_back"], 1);
}

/// The schedule file of `env` with its webhook sent to `url` instead.
fn set_webhook(env: &Env, url: &str) {
    let path = env.path("backlog.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let line = text.lines().find(|l| l.starts_with("webhook = ")).unwrap();
    let text = text.replacen(line, &format!("webhook = \"{url}/hook\""), 1);
    std::fs::write(path, text).unwrap();
}

/// The findings of `status --check` at NOW+minutes.
fn findings(env: &Env, minutes: i64) -> String {
    let now =
        chrono::DateTime::parse_from_rfc3339(NOW).unwrap() + chrono::Duration::minutes(minutes);
    let out = env
        .backlog(&["status", "--check", "--json", "--now", &now.to_rfc3339()])
        .output()
        .unwrap();
    let value: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    value["findings"].to_string()
}

/// A receiver that refuses the first delivery gets the alert on the retry, within the
/// tick. One down for a whole tick: a warning naming it, `status --check` says so, and
/// the alert is not counted as sent, so the next tick's alert goes out within
/// `alert_every` and counts the lost one held back.
fn a_failed_delivery_is_tried_again_and_never_counted_as_sent(backend: Backend) {
    let hooks = Hooks::refusing(1);
    let env = failing_env(
        backend,
        &format!("webhook = \"{}/hook\"\nalert_every = \"15m\"", hooks.url),
    );
    let stderr = tick(&env, 0, 5);
    let events = posted(&hooks.take());
    assert_eq!(hooks.refused(), 1);
    assert_eq!(events.len(), 1, "the retry delivers it: {stderr}");
    assert_eq!(events[0]["held_back"], 0);
    assert!(!stderr.contains("alert webhook"), "{stderr}");

    let down = refused();
    set_webhook(&env, &down.url);
    let stderr = tick(&env, 20, 5);
    assert!(
        stderr.contains(&format!(
            "WARN tick{{tier=1 window=1d}}: alert webhook {}/hook: ",
            down.url
        )) && stderr.contains("(3 tries)"),
        "{stderr}"
    );
    let found = findings(&env, 21);
    assert!(
        found.contains("the alert webhook could not deliver its last alert, the last 1m ago"),
        "{found}"
    );

    set_webhook(&env, &hooks.url);
    tick(&env, 25, 5);
    let events = posted(&hooks.take());
    assert_eq!(
        events.len(),
        1,
        "not held back by the one lost 5 minutes before"
    );
    assert_eq!(events[0]["held_back"], 1, "the lost one is counted");
    assert!(!findings(&env, 26).contains("could not deliver"));
}

crate::on_every_backend!(
    a_failed_delivery_is_tried_again_and_never_counted_as_sent,
    a_tick_whose_database_cannot_be_reached_alerts_once_per_alert_every,
    a_file_that_does_not_load_still_alerts,
    a_failing_tick_sends_one_webhook_and_pings_then_holds_back_within_alert_every,
    a_tick_that_goes_well_pings_success_and_alerts_nothing,
    a_failed_delivery_is_a_warning_naming_the_url_without_its_token,
);

/// An alert command gets the event on its stdin, run in the schedule file's folder.
#[test]
fn an_alert_command_gets_the_event_on_its_stdin() {
    let env = failing_env(Backend::Sqlite, "command = [\"./alert.sh\", \"ops\"]");
    env.write_handler(
        "alert.sh",
        "#!/bin/sh\necho \"$1\" > alert.arg\ncat > alert.json\n",
    );
    tick(&env, 0, 5);
    let event: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(env.path("alert.json")).unwrap()).unwrap();
    assert_eq!(event["kind"], "tick_not_started");
    assert_eq!(event["held_back"], 0);
    assert_eq!(
        std::fs::read_to_string(env.path("alert.arg")).unwrap(),
        "ops\n"
    );
    // A command that fails is tried again, then a warning with the last line it
    // wrote; the tick keeps its own exit code.
    env.write_handler("alert.sh", "#!/bin/sh\necho pager down >&2\nexit 3\n");
    let stderr = tick(&env, 20, 5);
    assert!(
        stderr.contains("WARN tick{tier=1 window=1d}: alert command ./alert.sh: it ended with exit status: 3: [stderr] pager down (3 tries)"),
        "{stderr}"
    );
}

/// Whether the process `pid` (its id in the file `name` of `env`) is dead: gone, or a
/// zombie nobody has reaped yet. A process SIGKILLed a moment ago may still show.
fn gone(env: &Env, name: &str) -> bool {
    let pid = std::fs::read_to_string(env.path(name)).unwrap();
    let stat = format!("/proc/{}/stat", pid.trim());
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        match std::fs::read_to_string(&stat) {
            Err(_) => return true,
            Ok(s) if s.rsplit(')').next().unwrap().trim_start().starts_with('Z') => return true,
            Ok(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
    false
}

/// An alert command runs in a process group of its own, ended when it exits and at its
/// timeout (SIGTERM, then SIGKILL): a `sleep 60` it started neither keeps the tick's
/// output open (the test reads it to its end) nor outlives it.
#[test]
fn an_alert_commands_process_group_ends_with_it_and_at_its_timeout() {
    let env = failing_env(
        Backend::Sqlite,
        "command = [\"./alert.sh\"]\ncommand_timeout = \"1s\"",
    );
    env.write_handler(
        "alert.sh",
        "#!/bin/sh\ncat > /dev/null\nsleep 60 &\necho $! > sleep.pid\n",
    );
    let started = Instant::now();
    let stderr = tick(&env, 0, 5);
    assert!(started.elapsed() < Duration::from_secs(30), "{stderr}");
    assert!(!stderr.contains("alert command"), "{stderr}");
    assert!(gone(&env, "sleep.pid"), "the sleep outlived its command");

    // Past its timeout, SIGTERM ignored by it and its sleep alike.
    env.write_handler(
        "alert.sh",
        "#!/bin/sh\ntrap '' TERM\ncat > /dev/null\nsleep 60 &\necho $! > sleep.pid\nwait\n",
    );
    let started = Instant::now();
    let stderr = tick(&env, 20, 5);
    assert!(started.elapsed() < Duration::from_secs(30), "{stderr}");
    assert!(
        stderr.contains("WARN tick{tier=1 window=1d}: alert command ./alert.sh: its process group was ended after 1s (alert.command_timeout)"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("tries)"),
        "a command that timed out is not tried again within the tick: {stderr}"
    );
    assert!(gone(&env, "sleep.pid"), "the sleep outlived its command");
}

/// A tick whose handler could run for no record (exit 127 for each: a command not
/// found) failed: `tick_failed`, with what it did and exit code 5.
#[test]
fn a_tick_whose_handler_runs_for_no_record_alerts_tick_failed() {
    let hooks = Hooks::start();
    let env = Env::new();
    env.classic();
    env.write_schedule(&Schedule::default());
    env.write_handler("handler.sh", "#!/bin/sh\ncat > /dev/null\nexit 127\n");
    add_webhook(&env.path("backlog.toml"), &hooks.url);
    let stderr = tick(&env, 0, 5);
    let events = posted(&hooks.take());
    assert_eq!(events.len(), 1, "{stderr}");
    assert_eq!(events[0]["kind"], "tick_failed");
    assert_eq!(events[0]["exit_code"], 5);
    let counts = &events[0]["counts"];
    assert!(counts["selected"].as_u64() > Some(0), "{counts}");
    assert_eq!(counts["failed"], counts["selected"]);
    assert!(
        events[0]["message"]
            .as_str()
            .unwrap()
            .contains("the handler could not run for any of the"),
        "{}",
        events[0]
    );
}

/// A tick the breaker stopped ran: its alert carries what it did, and exit code 7.
#[test]
fn a_tripped_breaker_alerts_with_the_ticks_counts() {
    let hooks = Hooks::start();
    let env = Env::new();
    env.classic();
    env.write_schedule(&Schedule {
        handler_extra: "stop_after_failures = 1",
        ..Schedule::default()
    });
    env.write_handler("handler.sh", &recording_handler(&[1, 2, 3, 4]));
    add_webhook(&env.path("backlog.toml"), &hooks.url);
    tick(&env, 0, 7);
    let events = posted(&hooks.take());
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["kind"], "breaker_tripped");
    assert_eq!(events[0]["exit_code"], 7);
    assert_eq!(events[0]["counts"]["selected"], 1);
    assert_eq!(events[0]["counts"]["failed"], 1);
    assert_eq!(events[0]["counts"]["succeeded"], 0);
}

/// Each bad `[alert]` gets one line naming the key and the fix, and exit code 3.
#[test]
fn bad_alert_sections_get_messages_that_name_the_key() {
    let cases: &[(&str, &str)] = &[
        (
            "webhook = \"hooks.example/x\"",
            "backlog: backlog.toml:{line}:11: alert.webhook: \"hooks.example/x\" is not a URL (relative URL without a base); write a full http:// or https:// address, like \"https://hooks.example/backlog\"\n",
        ),
        (
            "ping = \"ftp://ops:pa55@hc.example/x?k=1\"",
            "backlog: backlog.toml:{line}:8: alert.ping: ftp://hc.example/x is not an http:// or https:// address; write a full http:// or https:// address, like \"https://hooks.example/backlog\"\n",
        ),
        (
            "command = []",
            "backlog: backlog.toml:{line}:11: alert.command: the command is empty; name a program and its arguments, like command = [\"./notify.sh\", \"ops\"]\n",
        ),
        (
            "webhok = \"https://hooks.example/x\"",
            "backlog: backlog.toml:{line}:1: alert.webhok: unknown key; did you mean `webhook`? The keys here are `command`, `command_timeout`, `webhook`, `ping`, `alert_every`.\n",
        ),
        (
            "alert_every = \"90d\"",
            "backlog: backlog.toml:{line}:15: alert.alert_every: \"90d\" is out of range; use 1s to 30d\n",
        ),
        (
            "alert_every = 15",
            "backlog: backlog.toml:{line}:15: alert.alert_every: found the number 15 where a duration in quotes is expected; write it like alert_every = \"15m\"\n",
        ),
    ];
    for (alert, message) in cases {
        let env = failing_env(Backend::Sqlite, alert);
        let line = std::fs::read_to_string(env.path("backlog.toml"))
            .unwrap()
            .lines()
            .position(|l| l == *alert)
            .unwrap()
            + 1;
        let stderr = tick(&env, 0, 3);
        assert_eq!(
            stderr,
            message.replace("{line}", &line.to_string()),
            "{alert}"
        );
    }
}

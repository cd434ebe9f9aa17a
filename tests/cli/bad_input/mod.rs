//! Each bad input gets one line naming the input and the fix, a distinct exit code, and
//! leaves the table as it was.

use crate::harness::{Backend, Env, NOW, Schedule, recording_handler};

struct Case {
    name: &'static str,
    /// Changes the classic setup; gets the temp folder's path.
    setup: fn(&Env),
    args: &'static [&'static str],
    code: i32,
    /// The exact stderr, with `{dir}` for the temp folder, `{db}` for the database as
    /// messages name it, `{line}` for the first line of the schedule file the case
    /// changed.
    stderr: &'static str,
    /// The case is about a SQLite file.
    sqlite_only: bool,
}

fn rewrite_schedule(env: &Env, from: &str, to: &str) {
    let path = env.path("backlog.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains(from), "{from}");
    std::fs::write(path, text.replacen(from, to, 1)).unwrap();
}

/// Points `database.url` at `url`, on either backend.
fn set_url(env: &Env, url: &str) {
    let path = env.path("backlog.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let text: Vec<String> = text
        .lines()
        .map(|l| {
            if l.starts_with("url = ") {
                format!("url = \"{url}\"")
            } else {
                l.to_string()
            }
        })
        .collect();
    std::fs::write(path, text.join("\n")).unwrap();
}

/// A case that sets one key of the schedule file out of its range.
macro_rules! out_of_range {
    ($name:expr, $from:expr, $to:expr, $stderr:expr) => {
        Case {
            name: $name,
            setup: |env| rewrite_schedule(env, $from, $to),
            args: &[],
            code: 3,
            stderr: $stderr,
            sqlite_only: false,
        }
    };
}

/// A case that gives one key of the schedule file a value of the wrong type.
macro_rules! type_error {
    ($name:expr, $from:expr, $to:expr, $stderr:expr) => {
        out_of_range!($name, $from, $to, $stderr)
    };
}

mod file_cases;
mod world_cases;

fn each_bad_input_gets_its_message_and_exit_code_and_changes_nothing(backend: Backend) {
    for case in file_cases::CASES.iter().chain(world_cases::CASES) {
        if case.sqlite_only && backend != Backend::Sqlite {
            continue;
        }
        let env = Env::on(backend);
        env.classic();
        env.write_schedule(&Schedule::default());
        env.write_handler("handler.sh", &recording_handler(&[]));
        let written = std::fs::read_to_string(env.path("backlog.toml")).unwrap();
        (case.setup)(&env);
        let before = env.dump();
        let mut args = vec!["run", "--now", NOW];
        if !case.args.contains(&"--window") {
            args.extend(["--window", "1d"]);
        }
        args.extend(case.args);
        let out = env.backlog(&args).assert().code(case.code);
        let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
        let dir = env.dir.path().display().to_string();
        let my_fix = format!(
            "rename that table, or give the tool a database of its own with database.schema (now {:?})",
            env.my.as_ref().map(|m| m.name.as_str()).unwrap_or_default()
        );
        let db = match backend {
            Backend::Sqlite => format!("sqlite:{dir}/backlog.db"),
            Backend::Postgres | Backend::Mysql => env.url(),
        };
        let changed = std::fs::read_to_string(env.path("backlog.toml")).unwrap_or_default();
        let line = written
            .lines()
            .zip(changed.lines())
            .position(|(was, is)| was != is)
            .map_or(0, |i| i + 1);
        assert_eq!(
            stderr,
            case.stderr
                .replace("{dir}", &dir)
                .replace("{db}", &db)
                .replace("{line}", &line.to_string())
                .replace("{own_fix}", match backend {
                    Backend::Sqlite => "rename that table, or keep the backlog in another database file",
                    Backend::Postgres => "rename that table, or give the tool a schema of its own with database.schema (now \"backlog\")",
                    Backend::Mysql => &my_fix,
                }),
            "case {:?}",
            case.name
        );
        assert!(out.get_output().stdout.is_empty(), "case {:?}", case.name);
        assert_eq!(env.dump(), before, "case {:?} changed the table", case.name);
        assert!(
            env.take_calls().is_empty(),
            "case {:?} ran the handler",
            case.name
        );

        // With --json, the same failure is also one JSON object on stdout.
        args.push("--json");
        let out = env.backlog(&args).assert().code(case.code);
        // Ours is `backlog: …`; clap's own refusals start `error: …` and go on.
        let first = stderr.lines().next().unwrap_or_default();
        let message = first
            .strip_prefix("backlog: ")
            .or_else(|| first.strip_prefix("error: "))
            .unwrap_or_else(|| panic!("case {:?}: {stderr}", case.name));
        assert_eq!(
            json_of(&out.get_output().stdout),
            serde_json::json!({"error": message, "exit_code": case.code}),
            "case {:?} with --json",
            case.name
        );
        assert_eq!(env.dump(), before, "case {:?} changed the table", case.name);
    }
}

/// Stdout as the one JSON value it must hold.
fn json_of(stdout: &[u8]) -> serde_json::Value {
    let text = String::from_utf8_lossy(stdout);
    assert_eq!(text.lines().count(), 1, "one line of JSON: {text}");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// Every command that takes `--json` answers a failure with one JSON object on stdout
/// (`error`, `exit_code`) besides its line on stderr, a bad command line included.
#[test]
fn with_json_a_failure_is_a_json_object_on_stdout_too() {
    let env = Env::new();
    env.classic();
    env.write_schedule(&Schedule::default());
    env.write_handler("handler.sh", &recording_handler(&[]));
    rewrite_schedule(&env, "name = \"BACKLOG\"", "name = \"BACKLGO\"");
    let db = format!("sqlite:{}/backlog.db", env.dir.path().display());
    let no_table = format!(
        "{db}: no table \"BACKLGO\" (set table.name in the schedule file); did you mean \"BACKLOG\"?; tables: BACKLOG"
    );
    let no_file = "nope.toml: no such schedule file; pass --schedule FILE, or run `backlog init` to write one";
    for (args, code, message) in [
        (
            &["run", "--window", "1d", "--json"][..],
            4,
            no_table.as_str(),
        ),
        (&["status", "--json"], 4, &no_table),
        (&["explain", "--json", "-s", "nope.toml"], 3, no_file),
        (
            &["backoff", "delays", "nosuch", "--json"],
            2,
            "no strategy \"nosuch\"; the strategies are constant, exponential, httpx, fibonacci, arctan, sidekiq, buckets, lild, limd, mild, mimd (and progressive, with --schedule)",
        ),
    ] {
        let out = env.backlog(args).assert().code(code);
        let output = out.get_output();
        assert_eq!(
            json_of(&output.stdout),
            serde_json::json!({"error": message, "exit_code": code}),
            "{args:?}"
        );
        assert_eq!(
            String::from_utf8_lossy(&output.stderr),
            format!("backlog: {message}\n"),
            "{args:?}: the line on stderr stays"
        );
    }
    // A command line clap refuses: its message, and its exit code 2.
    let out = env
        .backlog(&["run", "--json", "--window", "7x"])
        .assert()
        .code(2);
    let value = json_of(&out.get_output().stdout);
    assert_eq!(value["exit_code"], 2);
    assert!(
        value["error"]
            .as_str()
            .unwrap()
            .starts_with("invalid value '7x' for '--window <WINDOW>': \"7x\" is not a duration"),
        "{value}"
    );
    // A message clap writes over several lines is kept whole: what is missing too.
    let out = env.backlog(&["run", "--json"]).assert().code(2);
    assert_eq!(
        json_of(&out.get_output().stdout),
        serde_json::json!({
            "error": "the following required arguments were not provided: --window <WINDOW>",
            "exit_code": 2,
        })
    );
    // And clap's tip, without the usage and the pointer to --help.
    let out = env
        .backlog(&["run", "--json", "--windw", "1d"])
        .assert()
        .code(2);
    assert_eq!(
        json_of(&out.get_output().stdout),
        serde_json::json!({
            "error": "unexpected argument '--windw' found; tip: a similar argument exists: '--window'",
            "exit_code": 2,
        })
    );
}

#[test]
fn a_bad_window_on_the_command_line_is_a_usage_error() {
    let env = Env::new();
    env.backlog(&["run", "--window", "7x"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains(
            "invalid value '7x' for '--window <WINDOW>': \"7x\" is not a duration",
        ));
    env.backlog(&["run", "--window", "1d", "--now", "yesterday"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains(
            "\"yesterday\" is not an RFC 3339 time",
        ));
}

crate::on_every_backend!(each_bad_input_gets_its_message_and_exit_code_and_changes_nothing);

/// A file with a span out of range is refused by every command that reads it, with
/// the same line, and none panics.
#[test]
fn every_command_refuses_a_span_out_of_range() {
    let env = Env::new();
    env.classic();
    env.write_schedule(&Schedule::default());
    env.write_handler("handler.sh", &recording_handler(&[]));
    rewrite_schedule(&env, "window = \"360d\"", "window = \"99999999d\"");
    let line = "backlog: backlog.toml:40:10: tier 6: window: \"99999999d\" is out of range; use at most 36500d\n";
    for args in [
        &["status", "--now", NOW][..],
        &["explain", "--now", NOW, "--age", "3d"],
        &["crontab"],
        &["run", "--window", "360d", "--if-due", "--now", NOW],
    ] {
        env.backlog(args).assert().code(3).stderr(line);
    }
    env.backlog(&["doctor"])
        .assert()
        .code(1)
        .stdout(predicates::str::contains(
            "tier 6: window: \"99999999d\" is out of range",
        ));
    env.backlog(&["explain", "--age", "99999999d"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains(
            "\"99999999d\" is out of range; use at most 36500d",
        ));
}

//! `--help`: each command offers the options that do something there, and an option
//! with a default says it (`[default: …]`) instead of looking required.

use crate::harness::Env;

const COMMANDS: &[&[&str]] = &[
    &["init"],
    &["run"],
    &["crontab"],
    &["daemon"],
    &["explain"],
    &["status"],
    &["doctor"],
    &["backoff", "delays"],
    &["backoff", "budget"],
    &["backoff", "simulate"],
    &["backoff", "plot"],
    &["show"],
    &["retry"],
    &["pause"],
    &["resume"],
    &["serve"],
    &["completions"],
    &["man"],
];

fn help(env: &Env, command: &[&str]) -> String {
    let mut args = command.to_vec();
    args.push("--help");
    let out = env.backlog(&args).assert().success();
    String::from_utf8_lossy(&out.get_output().stdout).into_owned()
}

/// `-v` logs more where a command logs what it does: `run` and `daemon`. Elsewhere it
/// would be accepted and do nothing, so it is not offered.
#[test]
fn verbose_is_offered_only_where_it_logs_more() {
    let env = Env::new();
    for command in COMMANDS {
        let logs = matches!(command, ["run"] | ["daemon"] | ["retry"]);
        assert_eq!(
            help(&env, command).contains("-v, --verbose..."),
            logs,
            "{command:?}"
        );
    }
    assert!(
        !help(&env, &[]).contains("--verbose"),
        "not on backlog itself"
    );
    env.backlog(&["status", "-v"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("unexpected argument '-v'"));
}

/// The usage line names as required only what has no default (`run --window`); every
/// option with a default shows it.
#[test]
fn usage_lines_require_only_what_has_no_default() {
    let env = Env::new();
    for command in COMMANDS {
        let text = help(&env, command);
        let usage = text.lines().find(|l| l.starts_with("Usage: ")).unwrap();
        let required: Vec<&str> = usage.split(' ').filter(|w| w.starts_with("--")).collect();
        let expected: &[&str] = if command == &["run"] {
            &["--window"]
        } else {
            &[]
        };
        assert_eq!(required, expected, "{command:?}: {usage}");
        for line in text.lines().filter(|l| l.contains("The schedule file")) {
            assert!(
                line.contains("[default: the first of ./backlog.toml, $XDG_CONFIG_HOME/backlog/backlog.toml, /etc/backlog/backlog.toml]"),
                "{command:?}: {line}"
            );
        }
        for line in text.lines().filter(|l| l.contains("--now <NOW>")) {
            assert!(line.ends_with("[default: now]"), "{command:?}: {line}");
        }
    }
}

/// A misspelt command or flag is answered with the one meant, on a terminal's stderr
/// and in a log file's one line alike.
#[test]
fn a_misspelt_command_or_flag_says_which_was_meant() {
    let env = Env::new();
    let out = env.backlog(&["statsu"]).assert().code(2);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(
        stderr.contains("tip: a similar subcommand exists: 'status'"),
        "{stderr}"
    );
    let out = env.backlog(&["run", "--windw", "7d"]).assert().code(2);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(
        stderr.contains("tip: a similar argument exists: '--window'"),
        "{stderr}"
    );
    let log = std::fs::File::create(env.path("cron.log")).unwrap();
    let status = env.command().arg("statsu").stderr(log).status().unwrap();
    assert_eq!(status.code(), Some(2));
    let line = std::fs::read_to_string(env.path("cron.log")).unwrap();
    assert!(
        line.ends_with(
            " ERROR backlog: unrecognized subcommand 'statsu'; tip: a similar subcommand exists: 'status'\n"
        ),
        "{line}"
    );
}

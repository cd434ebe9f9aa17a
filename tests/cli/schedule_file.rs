//! Where the schedule file comes from and what fills it in: `${VAR}` in its strings,
//! `BACKLOG_DATABASE_URL` in place of its URL, `--schedule -` for standard input, and
//! the places it is looked for when no `--schedule` names it.

use std::io::Write as _;

use crate::harness::{Backend, Env, NOW, Schedule, recording_handler};

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A backlog of three records a day old or younger, its handler, and no schedule file
/// yet: the test writes its own.
fn backlog(backend: Backend) -> Env {
    let env = Env::on(backend);
    env.classic();
    env.write_handler("handler.sh", &recording_handler(&[]));
    env
}

/// The schedule file's text with its URL written as `url`.
fn schedule_with_url(env: &Env, url: &str) -> String {
    Schedule::default().render_for(&env.url()).replacen(
        &format!("url = \"{}\"", env.url()),
        &format!("url = \"{url}\""),
        1,
    )
}

/// `url = "${DB_URL}"`: the variable set, a tick runs on the database it names; unset,
/// one line names the variable, the key and its place in the file, and exits 3.
fn a_variable_fills_in_the_database_url(backend: Backend) {
    let env = backlog(backend);
    std::fs::write(
        env.path("backlog.toml"),
        schedule_with_url(&env, "${DB_URL}"),
    )
    .unwrap();
    let out = env
        .backlog(&["run", "--window", "1d", "--now", NOW])
        .env("DB_URL", env.url())
        .assert()
        .success();
    assert!(
        text(&out.get_output().stdout).contains("succeeded "),
        "{out:?}"
    );
    assert!(!env.take_calls().is_empty(), "the tick handed records out");
    let out = env
        .backlog(&["run", "--window", "1d", "--now", NOW])
        .env_remove("DB_URL")
        .assert()
        .code(3);
    let stderr = text(&out.get_output().stderr);
    assert!(
        stderr.starts_with("backlog: backlog.toml:4:7: database.url: ${DB_URL} names an environment variable that is not set; set DB_URL, or write $${DB_URL} for the text itself"),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(env.take_calls().is_empty(), "nothing ran");
    // BACKLOG_DATABASE_URL replaces the URL: the variable the file names need not be set.
    env.backlog(&["run", "--window", "1d", "--now", NOW])
        .env_remove("DB_URL")
        .env("BACKLOG_DATABASE_URL", env.url())
        .assert()
        .success();
}

/// A variable `[alert]` names that is not set (the token of a webhook, set for the
/// crontab's lines, not in a person's shell): the commands that send no alert read the
/// file without its `[alert]`; a tick, `doctor` and the daemon say which variable, and
/// the tick starts no handler.
#[test]
fn an_alert_variable_unset_stops_only_what_sends_alerts() {
    let env = backlog(Backend::Sqlite);
    let text = schedule_with_url(&env, &env.url());
    let alert = "[alert]\nwebhook = \"https://hooks.example/${ALERT_TOKEN}\"\n";
    std::fs::write(env.path("backlog.toml"), format!("{text}\n{alert}")).unwrap();
    for args in [
        &["status"][..],
        &["pause", "--window", "1d"],
        &["resume"],
        &["explain"],
    ] {
        env.backlog(args)
            .env_remove("ALERT_TOKEN")
            .assert()
            .success();
    }
    let unset = "backlog.toml:44:11: alert.webhook: ${ALERT_TOKEN} names an environment variable that is not set; set ALERT_TOKEN";
    for args in [&["run", "--window", "1d", "--now", NOW][..], &["doctor"]] {
        let out = env
            .backlog(args)
            .env_remove("ALERT_TOKEN")
            .assert()
            .failure();
        let stderr = text_of(&out);
        assert!(stderr.contains(unset), "{args:?}: {stderr}");
        assert!(stderr.contains("(its [alert] cannot be sent)"), "{stderr}");
        let line = stderr.lines().find(|l| l.contains(unset)).unwrap();
        assert_eq!(line.matches("backlog.toml").count(), 1, "{line}");
    }
    // A dry run sends no alert: it runs.
    env.backlog(&["run", "--window", "1d", "--now", NOW, "--dry-run"])
        .env_remove("ALERT_TOKEN")
        .assert()
        .success();
    let out = env
        .backlog(&["daemon"])
        .env_remove("ALERT_TOKEN")
        .timeout(std::time::Duration::from_secs(30))
        .assert()
        .code(3);
    assert!(text_of(&out).contains(unset), "{out:?}");
    assert!(env.take_calls().is_empty(), "no tick ran");
}

fn text_of(out: &assert_cmd::assert::Assert) -> String {
    let out = out.get_output();
    text(&out.stderr) + &text(&out.stdout)
}

/// `BACKLOG_DATABASE_URL` replaces the file's URL (`explain` says so); a bad one is
/// named as the variable, not as the file's key.
fn the_environment_replaces_the_files_database(backend: Backend) {
    let env = backlog(backend);
    std::fs::write(
        env.path("backlog.toml"),
        schedule_with_url(&env, "elsewhere.db"),
    )
    .unwrap();
    env.backlog(&["run", "--window", "1d", "--now", NOW])
        .env("BACKLOG_DATABASE_URL", env.url())
        .assert()
        .success();
    assert!(
        !env.take_calls().is_empty(),
        "the tick ran on the variable's database"
    );
    assert!(
        !env.path("elsewhere.db").exists(),
        "the file's URL was not used"
    );
    let out = env
        .backlog(&["explain"])
        .env("BACKLOG_DATABASE_URL", env.url())
        .assert()
        .success();
    assert!(
        text(&out.get_output().stdout)
            .contains("(from BACKLOG_DATABASE_URL, in place of the file's database.url)"),
        "{out:?}"
    );
    let out = env
        .backlog(&["explain"])
        .env("BACKLOG_DATABASE_URL", "ftp://db.example/orders")
        .assert()
        .code(3);
    let stderr = text(&out.get_output().stderr);
    assert!(
        stderr.contains("BACKLOG_DATABASE_URL (set in the environment, it replaces database.url): \"ftp\" is not a scheme backlog knows"),
        "{stderr}"
    );
}

crate::on_every_backend!(
    a_variable_fills_in_the_database_url,
    the_environment_replaces_the_files_database,
);

/// `--schedule -` reads the file from standard input, once: a tick and `explain` run
/// on it (relative paths from the working folder); the daemon, which reads its file
/// again, refuses it with exit 2.
#[test]
fn standard_input_is_a_schedule_file() {
    let env = backlog(Backend::Sqlite);
    let file = Schedule::default().render_for(&env.url());
    let mut child = env
        .command()
        .args(["run", "--window", "1d", "--now", NOW, "--schedule", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(file.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(!env.take_calls().is_empty(), "the tick ran");
    let out = env
        .backlog(&["explain", "-s", "-"])
        .write_stdin(file.replace("window = \"1d\"", "window = \"1x\""))
        .assert()
        .code(3);
    assert!(
        text(&out.get_output().stderr).starts_with("backlog: <stdin>:"),
        "{out:?}"
    );
    env.backlog(&["daemon", "-s", "-"])
        .write_stdin(file)
        .assert()
        .code(2)
        .stderr("backlog: --schedule -: the daemon reads it again on a change and on SIGHUP, and standard input can be read only once; give the schedule's file\n");
}

/// Without `--schedule`: `./backlog.toml` first, then `$XDG_CONFIG_HOME/backlog/`;
/// `explain` says which it read; none anywhere lists the places looked in.
#[test]
fn the_file_is_looked_for_where_configuration_lives() {
    let env = backlog(Backend::Sqlite);
    let config = env.path("config-home").join("backlog");
    std::fs::create_dir_all(&config).unwrap();
    // Absolute, since the file is no longer beside the database.
    let db = env.path("backlog.db");
    std::fs::write(
        config.join("backlog.toml"),
        schedule_with_url(&env, db.to_str().unwrap()),
    )
    .unwrap();
    let out = env.backlog(&["explain"]).assert().success();
    let stdout = text(&out.get_output().stdout);
    assert!(
        stdout.starts_with(&format!(
            "{} (found; no --schedule given): 6 tiers, disjoint bands",
            config.join("backlog.toml").display()
        )),
        "{stdout}"
    );
    // One in the working folder comes first.
    env.write_schedule(&Schedule {
        tiers: "[[tier]]\nwindow = \"1d\"\nevery = \"5m\"\n",
        ..Schedule::default()
    });
    let out = env.backlog(&["explain"]).assert().success();
    assert!(
        text(&out.get_output().stdout)
            .starts_with("backlog.toml (found; no --schedule given): 1 tier"),
        "{out:?}"
    );
    std::fs::remove_file(env.path("backlog.toml")).unwrap();
    std::fs::remove_file(config.join("backlog.toml")).unwrap();
    if std::path::Path::new("/etc/backlog/backlog.toml").exists() {
        return; // this machine has one of its own: it would be found
    }
    let out = env.backlog(&["status"]).assert().code(3);
    let stderr = text(&out.get_output().stderr);
    assert_eq!(
        stderr,
        format!(
            "backlog: backlog.toml: no schedule file found (looked for backlog.toml, {}, /etc/backlog/backlog.toml); pass --schedule FILE, or run `backlog init` to write one\n",
            config.join("backlog.toml").display()
        )
    );
}

//! Where the schedule file comes from and what fills it in: `${VAR}` in its strings,
//! `BACKLOG_DATABASE_URL` in place of its URL, `--schedule -` for standard input, and
//! the places it is looked for when no `--schedule` names it.

use std::io::Write as _;

use crate::harness::{Backend, Env, NOW, Running, Schedule, recording_handler};
use crate::hooks::Hooks;
use crate::tick::wait_for;

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

/// A variable `[alert]` names that is not set (healthchecks.io's id, set for the
/// crontab's lines, not in a person's shell): the key is left out and the work runs.
/// A tick handles its records and says which variable, once; `status --check` warns of
/// what the last tick found (not of its own shell's environment); `doctor` fails on it;
/// and the daemon runs.
#[test]
fn an_alert_variable_unset_leaves_its_key_out_and_the_work_runs() {
    let hooks = Hooks::start();
    let env = backlog(Backend::Sqlite);
    let file = schedule_with_url(&env, &env.url());
    let alert = format!("[alert]\nping = \"{}/ping/${{HC_UUID}}\"\n", hooks.url);
    std::fs::write(env.path("backlog.toml"), format!("{file}\n{alert}")).unwrap();
    let line = file.lines().count() + 3;
    for args in [
        &["status"][..],
        &["pause", "--window", "1d"],
        &["resume"],
        &["explain"],
    ] {
        env.backlog(args).env_remove("HC_UUID").assert().success();
    }
    let unset = format!(
        "backlog.toml:{line}:8: alert.ping: ${{HC_UUID}} names an environment variable that is not set; set HC_UUID, or write $${{HC_UUID}} for the text itself; alert.ping is left out until it is set where the ticks run"
    );
    let out = env
        .backlog(&["run", "--window", "1d", "--now", NOW])
        .env_remove("HC_UUID")
        .assert()
        .success();
    let stderr = text_of(&out);
    assert!(
        stderr.contains(&format!("WARN tick{{tier=1 window=1d}}: {unset}")),
        "{stderr}"
    );
    assert_eq!(stderr.matches("${HC_UUID} names").count(), 1, "{stderr}");
    assert!(!env.take_calls().is_empty(), "the tick handled its records");
    assert_eq!(hooks.take(), [], "nothing pinged");

    // What the tick found, whatever the checking shell has.
    let check = |hc_uuid: Option<&str>, code: i32| {
        let mut cmd = env.backlog(&["status", "--check", "--now", NOW]);
        match hc_uuid {
            Some(id) => cmd.env("HC_UUID", id),
            None => cmd.env_remove("HC_UUID"),
        };
        let out = cmd.assert().code(code);
        text(&out.get_output().stdout)
    };
    let line = check(Some("set-here"), 1);
    assert!(
        line.starts_with("BACKLOG WARNING: ")
            && line
                .contains("alert.ping names ${HC_UUID}, which was not set where the last tick ran"),
        "{line}"
    );
    let out = env
        .backlog(&["doctor"])
        .env_remove("HC_UUID")
        .assert()
        .failure();
    assert!(text_of(&out).contains(&unset), "{out:?}");

    // A tick that has it pings, and the warning is gone.
    env.backlog(&["run", "--window", "1d", "--now", NOW])
        .env("HC_UUID", "abc")
        .assert()
        .success();
    let pinged: Vec<String> = hooks.take().into_iter().map(|r| r.path).collect();
    assert_eq!(pinged, ["/ping/abc/start", "/ping/abc"]);
    check(None, 0);

    // The daemon starts, and each of its ticks says it.
    let fast = "\n[[tier]]\nwindow = \"1d\"\nevery = \"1s\"\n";
    std::fs::write(
        env.path("backlog.toml"),
        format!(
            "{}\n{alert}",
            Schedule {
                tiers: fast,
                ..Schedule::default()
            }
            .render_for(&env.url())
        ),
    )
    .unwrap();
    let log = std::fs::File::create(env.path("daemon.log")).unwrap();
    let daemon = Running::spawn(
        env.command()
            .args(["daemon"])
            .env_remove("HC_UUID")
            .stdout(std::process::Stdio::null())
            .stderr(log),
    );
    let logged = || std::fs::read_to_string(env.path("daemon.log")).unwrap_or_default();
    wait_for(|| logged().matches("${HC_UUID} names").count() >= 2);
    let out = daemon.terminate();
    assert!(out.status.success(), "{out:?}\n{}", logged());
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

//! `backlog crontab` and the environment its lines need: cron gives them its own, not
//! the installing shell's, so `--install` refuses lines that would miss a variable,
//! unless `--env` writes it into the block. On the backlog-ci user's crontab, in turn
//! with the other crontab tests.

use std::process::{Command, Stdio};

use crate::crontab::{USER, crontab_l, env_of_the_user, one_at_a_time, set_crontab};

/// A schedule file that names `${DB_URL}` and, in `[alert]`, `${HC_UUID}`: cron would
/// run its lines without them, so `--install` refuses (exit 2), naming each and the
/// fixes, unless the crontab sets them above the block or `--env` writes them into it.
#[test]
fn install_refuses_variables_cron_would_not_have_unless_given() {
    let _turn = one_at_a_time();
    let env = env_of_the_user();
    let binary = env.path("backlog").display().to_string();
    let text = std::fs::read_to_string(env.path("backlog.toml")).unwrap();
    let url = format!("url = \"{}\"", env.url());
    assert!(text.contains(&url));
    let alert = "[alert]\nping = \"https://hc-ping.example/${HC_UUID}\"\n";
    std::fs::write(
        env.path("backlog.toml"),
        text.replacen(&url, "url = \"${DB_URL}\"", 1) + "\n" + alert,
    )
    .unwrap();
    let install = |mine: &str, more: &[&str], hc_uuid: Option<&str>| {
        set_crontab(mine);
        let mut cmd = env.backlog(&["crontab", "--install", "--user", USER, "--binary", &binary]);
        cmd.args(more).env("DB_URL", env.url());
        match hc_uuid {
            Some(id) => cmd.env("HC_UUID", id),
            None => cmd.env_remove("HC_UUID"),
        };
        cmd.output().unwrap()
    };
    let stderr = |out: &std::process::Output| String::from_utf8_lossy(&out.stderr).into_owned();

    let out = install("", &[], None);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(
        stderr(&out),
        "backlog: cron would run the lines without DB_URL (the schedule file names ${DB_URL}), HC_UUID (the schedule file names ${HC_UUID}; not set in this shell either): cron gives them the crontab's NAME=value lines and /etc/environment, not this shell's variables. Install with --env DB_URL --env HC_UUID to write this shell's values into the block (the crontab is readable by its user and root alone), or put NAME=value lines above the block (crontab -e) or in /etc/environment\n"
    );
    assert_eq!(crontab_l(), "", "nothing written");
    let out = install("", &["--env", "DB_URL", "--env", "HC_UUID"], None);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).starts_with("backlog: --env HC_UUID: HC_UUID is not set in this shell; set it (export HC_UUID=…) and install again"),
        "{}",
        stderr(&out)
    );

    // Given: written into the block, which uninstall takes away with them.
    let out = install(
        "",
        &["--env", "DB_URL", "--env", "HC_UUID"],
        Some("0b5e rv"),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let installed = crontab_l();
    let lines: Vec<&str> = installed.lines().collect();
    let db_url = format!("DB_URL={}", env.url());
    assert_eq!(
        lines[2..5],
        [
            "# The environment the lines need (--env), from the shell that installed them.",
            db_url.as_str(),
            "HC_UUID=0b5e rv",
        ],
        "{installed}"
    );
    // Installing again without them: the old block's lines are no longer there to count.
    let out = install(&installed, &[], Some("0b5e rv"));
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(crontab_l(), installed);

    // Set by the crontab above the block: installs as it is.
    let mine = "DB_URL=backlog.db\nHC_UUID=0b5e\n";
    let out = install(mine, &[], None);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(crontab_l().starts_with(mine));

    // BACKLOG_DATABASE_URL in this shell replaces the file's URL: cron needs it, or the
    // file's URL's variable; given, the file's URL is not read.
    set_crontab("HC_UUID=0b5e\n");
    let out = env
        .backlog(&["crontab", "--install", "--user", USER, "--binary", &binary])
        .env_remove("DB_URL")
        .env("BACKLOG_DATABASE_URL", env.url())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).starts_with("backlog: cron would run the lines without DB_URL (the schedule file names ${DB_URL}; not set in this shell either), BACKLOG_DATABASE_URL (set in this shell, it replaces database.url): "),
        "{}",
        stderr(&out)
    );
    env.backlog(&[
        "crontab",
        "--install",
        "--user",
        USER,
        "--binary",
        &binary,
        "--env",
        "BACKLOG_DATABASE_URL",
    ])
    .env_remove("DB_URL")
    .env("BACKLOG_DATABASE_URL", env.url())
    .assert()
    .success();
    env.backlog(&["crontab", "--uninstall", "--user", USER])
        .assert()
        .success();
    assert_eq!(crontab_l(), "HC_UUID=0b5e\n");

    // Printed lines, to be pasted: a warning, or the lines with --env.
    let out = env
        .backlog(&["crontab", "--binary", &binary])
        .env("DB_URL", env.url())
        .env_remove("HC_UUID")
        .assert()
        .success();
    let warned = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(
        warned.contains("WARN the lines need DB_URL (the schedule file names ${DB_URL}), which cron does not take from this shell: put a DB_URL=… line above them, or print them with --env DB_URL"),
        "{warned}"
    );
    let _ = Command::new("crontab")
        .args(["-u", USER, "-r"])
        .stderr(Stdio::null())
        .status();
}

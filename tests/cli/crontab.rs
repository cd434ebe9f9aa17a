//! `backlog crontab`: rendering (a reviewed snapshot) and install/uninstall on the real
//! `crontab` command, on the crontab of the backlog-ci user that `.ci/run` creates.

use std::os::unix::fs::PermissionsExt as _;
use std::process::{Command, Stdio};
use std::sync::{Mutex, MutexGuard};

use crate::harness::{Env, NOW, Schedule, recording_handler};

/// The user whose crontab the tests write (never the invoking user's own).
pub const USER: &str = "backlog-ci";

/// The tests that write the test user's one crontab take turns.
pub fn one_at_a_time() -> MutexGuard<'static, ()> {
    static CRONTAB: Mutex<()> = Mutex::new(());
    CRONTAB
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

pub fn crontab_l() -> String {
    let out = Command::new("crontab")
        .args(["-u", USER, "-l"])
        .output()
        .expect("crontab is installed (.ci/run installs Debian's cron)");
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("no crontab for"),
            "crontab -l failed: {stderr} (.ci/run creates the user {USER})"
        );
        return String::new();
    }
    String::from_utf8(out.stdout).unwrap()
}

pub fn set_crontab(text: &str) {
    let mut child = Command::new("crontab")
        .args(["-u", USER, "-"])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), text.as_bytes()).unwrap();
    assert!(child.wait().unwrap().success());
}

/// The test user's uid (`-u`) or primary gid (`-g`), as `id` prints it.
fn id_of_user(which: &str) -> u32 {
    let out = Command::new("id").args([which, USER]).output().unwrap();
    assert!(out.status.success(), ".ci/run creates the user {USER}");
    String::from_utf8(out.stdout)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// A schedule and its table: `crontab` checks the file against it.
fn env_with_schedule() -> Env {
    let env = Env::new();
    env.create_table("TEXT");
    env.write_schedule(&Schedule::default());
    env
}

/// A schedule in a folder of the test user's, as a real install has it: the user
/// reads the file, writes the log and the database beside it, and runs a `backlog` there (a stand-in:
/// the build's own may sit where the user cannot reach, and the tests never run it).
pub fn env_of_the_user() -> Env {
    let env = env_with_schedule();
    for path in [env.dir.path(), &env.path("backlog.db")] {
        std::os::unix::fs::chown(path, Some(id_of_user("-u")), Some(id_of_user("-g"))).unwrap();
    }
    env.write_handler("backlog", "#!/bin/sh\n");
    env
}

#[test]
fn the_default_schedule_renders_as_reviewed() {
    let env = env_with_schedule();
    let out = env
        .backlog(&[
            "crontab",
            "--binary",
            "/usr/local/bin/backlog",
            "--log",
            "/var/log/backlog.log",
        ])
        .assert()
        .success();
    let text = String::from_utf8_lossy(&out.get_output().stdout)
        .replace(&env.dir.path().display().to_string(), "/srv/app");
    insta::assert_snapshot!(text);
}

/// One test for every crontab case: they share the one crontab of the test user.
#[test]
fn install_and_uninstall_round_trip_on_the_real_crontab() {
    let _turn = one_at_a_time();
    let env = env_of_the_user();
    let schedule = env.path("backlog.toml").display().to_string();
    let binary = env.path("backlog").display().to_string();
    let mine = "MAILTO=ops@example.com\n# my own jobs\n17 3 * * * /usr/bin/true   # keep me, spacing and all\n";
    set_crontab(mine);

    let install = || {
        env.backlog(&["crontab", "--install", "--user", USER, "--binary", &binary])
            .assert()
            .success()
    };
    install().stdout(format!(
        "installed 6 tiers of {schedule} in the crontab of {USER}\n"
    ));
    let once = crontab_l();
    assert!(
        once.starts_with(mine),
        "the user's lines come first, unchanged:\n{once}"
    );
    assert_eq!(
        once.matches(&format!("# BEGIN backlog {schedule}")).count(),
        1
    );
    assert_eq!(
        once.lines()
            .filter(|l| l.contains(" run --window "))
            .count(),
        6
    );

    install();
    assert_eq!(crontab_l(), once, "installing twice leaves one block");
    // The same file through a symlink is the same block.
    let elsewhere = tempfile::tempdir().unwrap();
    let link = elsewhere.path().join("linked.toml");
    std::os::unix::fs::symlink(env.path("backlog.toml"), &link).unwrap();
    env.backlog(&[
        "crontab",
        "--install",
        "--user",
        USER,
        "--binary",
        &binary,
        "--schedule",
        link.to_str().unwrap(),
    ])
    .assert()
    .success();
    assert_eq!(
        crontab_l(),
        once,
        "a symlink to the file installs the same block"
    );

    env.backlog(&["crontab", "--uninstall", "--user", USER])
        .assert()
        .success()
        .stdout(format!(
            "removed the block of {schedule} from the crontab of {USER}\n"
        ));
    assert_eq!(
        crontab_l(),
        mine,
        "uninstall gives back the crontab byte for byte"
    );
    env.backlog(&["crontab", "--uninstall", "--user", USER])
        .assert()
        .success()
        .stdout(format!(
            "the crontab of {USER} has no block for {schedule}; nothing to remove\n"
        ));

    // A begin marker without its end: an error, and the crontab is left as it was.
    let broken = format!("{mine}# BEGIN backlog {schedule}\n*/5 * * * * something\n");
    set_crontab(&broken);
    env.backlog(&["crontab", "--install", "--user", USER, "--binary", &binary])
        .assert()
        .code(6)
        .stderr(format!("backlog: the crontab has `# BEGIN backlog {schedule}` but no `# END backlog {schedule}`; fix it with `crontab -e`\n"));
    assert_eq!(crontab_l(), broken);

    // From no crontab at all, and back.
    let _ = Command::new("crontab")
        .args(["-u", USER, "-r"])
        .stderr(Stdio::null())
        .status();
    install();
    assert!(crontab_l().starts_with(&format!("# BEGIN backlog {schedule}\n")));
    env.backlog(&["crontab", "--uninstall", "--user", USER])
        .assert()
        .success();
    let listed = Command::new("crontab")
        .args(["-u", USER, "-l"])
        .output()
        .unwrap();
    assert!(
        !listed.status.success()
            && String::from_utf8_lossy(&listed.stderr).contains("no crontab for"),
        "a user who had no crontab is left with none, not an empty one: {listed:?}"
    );
}

/// Each thing cron would trip over, as the crontab's user, is refused with a line that
/// names it and the fix, before anything is written.
#[test]
fn install_refuses_a_block_its_user_could_not_run_and_leaves_the_crontab() {
    let _turn = one_at_a_time();
    let env = env_of_the_user();
    let schedule = env.path("backlog.toml");
    let binary = env.path("backlog").display().to_string();
    let mine = "MAILTO=ops@example.com\n17 3 * * * /usr/bin/true\n";
    set_crontab(mine);
    // The refusal's lines, and the WARN lines beside them (a database not reached).
    let refused_warning = |args: &[&str], lines: &[String]| -> Vec<String> {
        let mut all = vec!["crontab", "--install"];
        all.extend(args);
        let expected: String = lines.iter().map(|l| format!("backlog: {l}\n")).collect();
        let out = env.backlog(&all).assert().code(6).stdout("");
        let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
        let (warnings, rest): (Vec<&str>, Vec<&str>) =
            stderr.lines().partition(|l| l.contains(" WARN "));
        let rest: String = rest.iter().map(|l| format!("{l}\n")).collect();
        assert_eq!(rest, expected);
        assert_eq!(crontab_l(), mine, "a refused install leaves the crontab");
        warnings.into_iter().map(str::to_string).collect()
    };
    let refused = |args: &[&str], lines: &[String]| {
        let warnings = refused_warning(args, lines);
        assert!(warnings.is_empty(), "{warnings:?}");
    };
    let no_binary = format!(
        "the binary /nonexistent does not exist; give --binary the path of a backlog binary {USER} can run"
    );
    refused(
        &["--user", USER, "--binary", "/nonexistent"],
        std::slice::from_ref(&no_binary),
    );
    let no_log_folder = "the log file's folder /nonexistent does not exist; create it (mkdir -p /nonexistent), or give --log a file in a folder that exists".to_string();
    refused(
        &[
            "--user",
            USER,
            "--binary",
            &binary,
            "--log",
            "/nonexistent/x.log",
        ],
        std::slice::from_ref(&no_log_folder),
    );
    // Every problem at once, one line each.
    refused(
        &[
            "--user",
            USER,
            "--binary",
            "/nonexistent",
            "--log",
            "/nonexistent/x.log",
        ],
        &[no_binary, no_log_folder],
    );

    // Root reads the file; the crontab's user would not.
    std::fs::set_permissions(&schedule, std::fs::Permissions::from_mode(0o600)).unwrap();
    let path = schedule.display();
    refused(
        &["--user", USER, "--binary", &binary],
        &[format!(
            "the schedule file {path} is not readable by {USER} (it is -rw------- root:root); chmod o+r {path}, or keep the schedule file where {USER} can read it"
        )],
    );
    std::fs::set_permissions(&schedule, std::fs::Permissions::from_mode(0o644)).unwrap();

    // What the schedule file points at: the SQLite file the ticks write, the handler
    // they start.
    std::os::unix::fs::chown(env.path("backlog.db"), Some(0), Some(0)).unwrap();
    env.write_handler("handler.sh", "#!/bin/sh\nexit 0\n");
    std::fs::set_permissions(
        env.path("handler.sh"),
        std::fs::Permissions::from_mode(0o700),
    )
    .unwrap();
    std::fs::set_permissions(
        env.path("backlog.db"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    let (db, handler) = (env.path("backlog.db"), env.path("handler.sh"));
    let (db, handler) = (db.display(), handler.display());
    refused(
        &["--user", USER, "--binary", &binary],
        &[
            format!(
                "the database {db} is not writable by {USER} (it is -rw-r--r-- root:root); chown {USER} {db}, or chmod o+w {db}"
            ),
            format!(
                "the handler {handler} is not executable by {USER} (it is -rwx------ root:root); chown {USER} {handler}, or chmod o+rx {handler}"
            ),
        ],
    );
    std::fs::remove_file(env.path("handler.sh")).unwrap();
    std::os::unix::fs::chown(
        env.path("backlog.db"),
        Some(id_of_user("-u")),
        Some(id_of_user("-g")),
    )
    .unwrap();

    // PostgreSQL's password file, read on every tick: handed to the user, not opened
    // to everyone.
    let written = std::fs::read_to_string(&schedule).unwrap();
    std::fs::write(
        &schedule,
        Schedule::default().render_for("postgres://app@127.0.0.1:1/shop"),
    )
    .unwrap();
    let pgpass = env.path("pgpass");
    std::fs::write(&pgpass, "secret\n").unwrap();
    std::fs::set_permissions(&pgpass, std::fs::Permissions::from_mode(0o600)).unwrap();
    let pgpass = pgpass.display();
    // A database it cannot reach leaves the table unchecked, said once.
    let warnings = refused_warning(
        &["--user", USER, "--binary", &binary],
        &[format!(
            "the password file (database.password_file) {pgpass} is not readable by {USER} (it is -rw------- root:root); chown {USER} {pgpass} and keep it unreadable to others (it holds a password)"
        )],
    );
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].ends_with(" WARN the table was not checked against the schedule file: postgres://app@127.0.0.1:1/shop: cannot connect: connection refused (is the server running, and listening on that host and port?)"),
        "{warnings:?}"
    );
    std::fs::write(&schedule, written).unwrap();

    let unknown = "there is no user \"no-such-user-here\" on this machine; give --user an existing user (getent passwd lists them)";
    refused(
        &["--user", "no-such-user-here", "--binary", &binary],
        &[unknown.to_string()],
    );
    env.backlog(&["crontab", "--uninstall", "--user", "no-such-user-here"])
        .assert()
        .code(6)
        .stderr(format!("backlog: {unknown}\n"));
    assert_eq!(crontab_l(), mine);
    let _ = Command::new("crontab")
        .args(["-u", USER, "-r"])
        .stderr(Stdio::null())
        .status();
}

#[test]
fn if_due_runs_a_tier_once_per_interval_by_the_run_log() {
    let env = Env::new();
    env.classic();
    env.write_schedule(&Schedule::default());
    env.write_handler("handler.sh", &recording_handler(&[4]));
    let run_at = |now: &str| {
        let out = env
            .backlog(&["run", "--window", "180d", "--if-due", "--now", now])
            .assert()
            .success();
        String::from_utf8_lossy(&out.get_output().stdout).into_owned()
    };
    assert!(
        run_at(NOW).starts_with("tier 5 (180d every 4d), ages over 30d up to 180d: selected 1"),
        "never ran: due"
    );
    assert_eq!(env.take_calls(), [4]);
    // A tick that lapsed (paused past its lease) did not do the tier's work: it does
    // not count as the tier's last tick.
    env.execute("UPDATE backlog_runs SET outcome = 'lapsed'");
    let out = run_at("2026-11-21T12:30:00Z");
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines.len() == 2
            && lines[0]
                == "tier 5 (180d every 4d): its tick of 2026-11-21T12:00:00Z ended early (lapsed); taking the rest of its band now"
            && lines[1].starts_with("tier 5 (180d every 4d), ages over 30d up to 180d: selected 0"),
        "a lapsed tick leaves the tier due, and it says why: {out}"
    );
    assert!(
        env.take_calls().is_empty(),
        "record 4 failed at 12:00: kept until the schedule's next try"
    );
    env.execute("UPDATE backlog_runs SET clock = '2026-11-21T12:00:00Z' WHERE outcome = 'done'");
    // Its slots are 96-hour steps from the Unix epoch, as `explain` and the daemon
    // count them: the tick at 12:00 on the 21st belongs to the slot of the 19th.
    assert_eq!(
        run_at("2026-11-21T13:00:00Z"),
        "tier 5 (180d every 4d): not due, last tick at 2026-11-21T12:00:00Z, next due at 2026-11-23T00:00:00Z\n"
    );
    assert!(env.take_calls().is_empty());
    assert!(
        run_at("2026-11-22T23:59:40Z").starts_with("tier 5 (180d every 4d)"),
        "due within cron's start-up slack"
    );
    assert_eq!(env.take_calls(), [4]);
    env.backlog(&["run", "--window", "10d", "--if-due"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("--if-due needs the window of a tier; 10d is none of backlog.toml's (1d, 7d, 14d, 30d, 180d, 360d)"));
}

/// `--json`: the block, what was installed or removed, or the error, as one object.
#[test]
fn crontab_json_says_what_it_printed_installed_or_removed() {
    let json = |out: &assert_cmd::assert::Assert| {
        let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
        assert_eq!(stdout.lines().count(), 1, "{stdout}");
        serde_json::from_str::<serde_json::Value>(&stdout).unwrap()
    };
    let env = env_with_schedule();
    let schedule = std::fs::canonicalize(env.path("backlog.toml"))
        .unwrap()
        .display()
        .to_string();
    let printed = json(&env.backlog(&["crontab", "--json"]).assert().success());
    assert_eq!(printed["schedule"], schedule.as_str());
    assert_eq!(printed["user"], serde_json::Value::Null);
    let block = printed["block"].as_str().unwrap();
    assert!(
        block.starts_with(&format!("# BEGIN backlog {schedule}\n")),
        "{block}"
    );
    assert_eq!(
        block
            .lines()
            .filter(|l| l.contains(" run --window "))
            .count(),
        6
    );

    let missing = json(
        &env.backlog(&["crontab", "--json", "--schedule", "nope.toml"])
            .assert()
            .code(3),
    );
    assert_eq!(missing["exit_code"], 3);
    assert!(
        missing["error"]
            .as_str()
            .unwrap()
            .starts_with("nope.toml: no such schedule file")
    );

    let _turn = one_at_a_time();
    let env = env_of_the_user();
    let binary = env.path("backlog").display().to_string();
    let schedule = env.path("backlog.toml").display().to_string();
    let _ = Command::new("crontab")
        .args(["-u", USER, "-r"])
        .stderr(Stdio::null())
        .status();
    let install = |more: &[&str]| {
        let mut args = vec!["crontab", "--json", "--install", "--user", USER];
        args.extend(more);
        env.backlog(&args).assert()
    };
    let installed = json(&install(&["--binary", &binary]).success());
    assert_eq!(installed["installed"], true);
    assert_eq!(installed["tiers"], 6);
    assert_eq!(installed["user"], USER);
    assert_eq!(installed["block"].as_str().unwrap(), crontab_l());

    // A refused install: every problem in the one error, exit 6, nothing written.
    let refused =
        json(&install(&["--binary", "/nonexistent", "--log", "/nonexistent/x.log"]).code(6));
    assert_eq!(refused["exit_code"], 6);
    assert_eq!(
        refused["error"].as_str().unwrap().lines().count(),
        2,
        "{refused}"
    );

    let uninstall = || {
        json(
            &env.backlog(&["crontab", "--json", "--uninstall", "--user", USER])
                .assert()
                .success(),
        )
    };
    let removed = uninstall();
    assert_eq!(removed["removed"], true);
    assert_eq!(removed["schedule"], schedule.as_str());
    assert_eq!(crontab_l(), "");
    assert_eq!(uninstall()["removed"], false);
}

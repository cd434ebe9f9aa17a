//! Schedule files whose URLs name a server: read by the core with the servers'
//! drivers installed, as the command runs (the core's own tests have none).

use std::path::Path;
use std::time::Duration;

use backlog_core::Config;

const GOOD: &str = r#"
[database]
url = "backlog.db"

[table]
name = "BACKLOG"
id = "ID"
status = "STATUS"
inserted_at = "DATE_INSERTED"

[handler]
command = ["./handler.sh"]

[[tier]]
window = "1d"
every = "5m"

[[tier]]
window = "7d"
cron = "0 * * * *"
"#;

fn error_of(text: &str) -> String {
    crate::harness::install_drivers();
    Config::parse(text, Path::new("/etc/backlog.toml"))
        .unwrap_err()
        .to_string()
}

fn assert_messages(cases: &[(&str, &str, &str)]) {
    for (from, to, expected) in cases {
        assert!(GOOD.contains(from), "{from}");
        let text = GOOD.replacen(from, to, 1);
        assert_eq!(error_of(&text), *expected, "replacing {from:?} with {to:?}");
    }
}

/// The same of the table's and the database's keys, and of the file's structure.
#[test]
fn bad_tables_get_messages_that_name_key_and_fix() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "status = \"STATUS\"",
            "status = \"STATUS\"\nsuccess = \"NEW\"",
            "/etc/backlog.toml:9:11: table.success \"NEW\" is also in table.pending; a record marked successful would be tried forever",
        ),
        (
            "status = \"STATUS\"",
            "status = \"STATUS\"\ngiven_up = \"ERROR\"",
            "/etc/backlog.toml:9:12: table.given_up \"ERROR\" is also in table.pending; a record given up on would be tried again: give it a status of its own, like \"DEAD\"",
        ),
        (
            "status = \"STATUS\"",
            "status = \"STATUS\"\ngiven_up = \"SUCCESS\"",
            "/etc/backlog.toml:9:12: table.given_up \"SUCCESS\" is table.success; a record given up on would read as done: give it a status of its own, like \"DEAD\"",
        ),
        (
            "status = \"STATUS\"",
            "status = \"STATUS\"\ngiven_up = \" \"",
            "/etc/backlog.toml:9:12: table.given_up is empty; name the status of a record the tool gave up on, like \"DEAD\", or leave it out",
        ),
        (
            "status = \"STATUS\"",
            "status = \"STATUS\"\ngive_up_after = 5",
            "/etc/backlog.toml:9:17: table.give_up_after needs table.given_up, the status a record gets once given up on, like given_up = \"DEAD\"",
        ),
        (
            "status = \"STATUS\"",
            "status = \"STATUS\"\ngiven_up = \"DEAD\"\ngive_up_after = 0",
            "/etc/backlog.toml:10:17: table.give_up_after = 0 is out of range; give 1 to 1000 failures",
        ),
        (
            "status = \"STATUS\"",
            "status = \"STATUS\"\ngiven_up = 7",
            "/etc/backlog.toml:9:12: table.given_up: found the number 7 where a status in quotes is expected; write it like given_up = \"DEAD\"",
        ),
        (
            "url = \"backlog.db\"",
            "url = \"postgres://u:secret@db/x\"\npassword_file = \"pw\"",
            "/etc/backlog.toml:3:7: database.url holds a password and database.password_file is set too; keep one (the file is the safer)",
        ),
        (
            "url = \"backlog.db\"",
            "url = \"postgres://u:secret@db/x?sslmode=sometimes\"",
            "/etc/backlog.toml:3:7: database.url is not a valid PostgreSQL URL (invalid connection string: invalid value for option `sslmode`); write it like \"postgres://user@host:5432/dbname?sslmode=require\"",
        ),
        (
            "url = \"backlog.db\"",
            "url = \"backlog.db\"\nschema = \"jobs\"",
            "/etc/backlog.toml:4:10: database.schema applies to PostgreSQL and MySQL only; remove it, or give a postgres:// or mysql:// url",
        ),
        (
            "inserted_at = \"DATE_INSERTED\"",
            "inserted_at = \"DATE_INSERTED\"\ninserted_at_format = \"iso\"",
            "/etc/backlog.toml:10:22: table.inserted_at_format: found the string \"iso\" where \"auto\", \"sqlite\", \"rfc3339\", \"unix\", \"unix_ms\" or \"native\" is expected; write it like inserted_at_format = \"auto\"",
        ),
        (
            "inserted_at = \"DATE_INSERTED\"",
            "inserted_at = \"DATE_INSERTED\"\ninserted_at_format = \"rfc339\"",
            "/etc/backlog.toml:10:22: table.inserted_at_format: found the string \"rfc339\" (did you mean \"rfc3339\"?) where \"auto\", \"sqlite\", \"rfc3339\", \"unix\", \"unix_ms\" or \"native\" is expected; write it like inserted_at_format = \"auto\"",
        ),
        (
            "inserted_at = \"DATE_INSERTED\"",
            "",
            "/etc/backlog.toml:5:1: table.inserted_at is missing; write it like inserted_at = \"DATE_INSERTED\"",
        ),
        (
            "window = \"7d\"",
            "",
            "/etc/backlog.toml:18:1: tier 2: window is missing; write it like window = \"1d\"",
        ),
        (
            "[handler]\ncommand = [\"./handler.sh\"]",
            "",
            "/etc/backlog.toml:1:1: the file has no [handler] section; write it like [handler] on a line of its own, with command = [\"./handler.sh\"] below",
        ),
        (
            "[database]",
            "[database\n",
            "/etc/backlog.toml:2:10: unclosed table, expected `]`",
        ),
    ];
    assert_messages(cases);
}

/// On SQLite a lease shorter than two lock waits is refused; a short lease alone
/// shortens the lock wait it would otherwise default to, and PostgreSQL, which has
/// no such wait, takes any pair.
#[test]
fn a_sqlite_lease_outlives_two_lock_waits() {
    let with = |url: &str, extra: &str| {
        GOOD.replace("url = \"backlog.db\"", &format!("url = \"{url}\"\n{extra}"))
    };
    assert_eq!(
        error_of(&with("backlog.db", "busy_timeout = \"45s\"")),
        "/etc/backlog.toml:2:1: database.claim_lease 1m is shorter than twice database.busy_timeout 45s: a tick waiting that long for a lock would lose its hold on its records; make claim_lease at least 90s, or busy_timeout at most 30s"
    );
    assert_eq!(
        error_of(&with(
            "backlog.db",
            "busy_timeout = \"2s\"\nclaim_lease = \"3s\""
        )),
        "/etc/backlog.toml:5:15: database.claim_lease 3s is shorter than twice database.busy_timeout 2s: a tick waiting that long for a lock would lose its hold on its records; make claim_lease at least 4s, or busy_timeout at most 1500ms"
    );
    crate::harness::install_drivers();
    let short = Config::parse(
        &with("backlog.db", "claim_lease = \"2s\""),
        Path::new("/etc/backlog.toml"),
    )
    .unwrap();
    assert_eq!(short.database.busy_timeout, Duration::from_secs(1));
    let pg = Config::parse(
        &with("postgres://app@db/shop", "busy_timeout = \"45s\""),
        Path::new("/etc/backlog.toml"),
    );
    assert!(pg.is_ok(), "{pg:?}");
}

/// Every schedule the repository ships is valid, with the variables it names set (a
/// webhook secret, a token) as a user sets them: in the environment of the binary
/// that reads it.
#[test]
fn the_shipped_schedules_load() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("schedules");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        let mut explain = std::process::Command::new(assert_cmd::cargo::cargo_bin("backlog"));
        explain.args(["explain", "--schedule"]).arg(&path);
        for name in backlog_core::config::variables_used_in(&text, &|_| false) {
            // A value every key takes: a Standard Webhooks secret is a token too.
            explain.env(name, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw");
        }
        let out = explain.output().unwrap();
        assert!(
            out.status.success(),
            "{}: {}",
            path.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        seen += 1;
    }
    assert!(seen >= 4, "{seen} schedules");
}

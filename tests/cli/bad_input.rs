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

const CASES: &[Case] = &[
    out_of_range!(
        "claim_lease too long",
        "[database]",
        "[database]\nclaim_lease = \"99999999d\"",
        "backlog: backlog.toml: database.claim_lease: \"99999999d\" is out of range; use 1s to 1d\n"
    ),
    out_of_range!(
        "claim_lease too short for its heartbeats",
        "[database]",
        "[database]\nclaim_lease = \"100ms\"",
        "backlog: backlog.toml: database.claim_lease: \"100ms\" is out of range; use 1s to 1d\n"
    ),
    out_of_range!(
        "busy_timeout too long",
        "[database]",
        "[database]\nbusy_timeout = \"99999999d\"",
        "backlog: backlog.toml: database.busy_timeout: \"99999999d\" is out of range; use at most 1h\n"
    ),
    Case {
        name: "claim_lease shorter than twice busy_timeout",
        setup: |env| rewrite_schedule(env, "[database]", "[database]\nbusy_timeout = \"45s\""),
        args: &[],
        code: 3,
        stderr: "backlog: backlog.toml: database.claim_lease 1m is shorter than twice database.busy_timeout 45s: a tick waiting that long for a lock would lose its hold on its records; make claim_lease at least 90s, or busy_timeout at most 30s\n",
        sqlite_only: true,
    },
    out_of_range!(
        "a retry parameter out of its range",
        "[handler]",
        "[retry]\nstrategy = \"exponential\"\nparams = { initial = \"1h\", factor = 0.5 }\ncount = \"FAILURES\"\nsince = \"LAST_TRY\"\n\n[handler]",
        "backlog: backlog.toml: retry: exponential: factor: 0.5 is out of range; use 1 to 1000\n"
    ),
    out_of_range!(
        "handler timeout too long",
        "timeout = \"10s\"",
        "timeout = \"99999999d\"",
        "backlog: backlog.toml: handler.timeout: \"99999999d\" is out of range; use at most 1d\n"
    ),
    out_of_range!(
        "window too long",
        "window = \"360d\"",
        "window = \"99999999d\"",
        "backlog: backlog.toml: tier 6: window: \"99999999d\" is out of range; use at most 36500d\n"
    ),
    out_of_range!(
        "cadence too long",
        "every = \"96h\"",
        "every = \"99999999d\"",
        "backlog: backlog.toml: tier 5: every: \"99999999d\" is out of range; use at most 36500d\n"
    ),
    out_of_range!(
        "jitter too long",
        "every = \"96h\"",
        "every = \"96h\"\njitter = \"99999999d\"",
        "backlog: backlog.toml: tier 5: jitter: \"99999999d\" is out of range; use at most 36500d\n"
    ),
    out_of_range!(
        "limit of the file zero",
        "bands = \"disjoint\"",
        "bands = \"disjoint\"\nlimit = 0",
        "backlog: backlog.toml: limit: 0 is out of range; use 1 to 1000000000 records a tick\n"
    ),
    out_of_range!(
        "limit of a tier too large",
        "every = \"96h\"",
        "every = \"96h\"\nlimit = 99999999999",
        "backlog: backlog.toml: tier 5: limit: 99999999999 is out of range; use 1 to 1000000000 records a tick\n"
    ),
    out_of_range!(
        "batch_size too large",
        "timeout = \"10s\"",
        "timeout = \"10s\"\nmode = \"batch\"\nbatch_size = 99999999",
        "backlog: backlog.toml: handler.batch_size: 99999999 is out of range; use 1 to 10000 records a batch\n"
    ),
    out_of_range!(
        "batch_size zero",
        "timeout = \"10s\"",
        "timeout = \"10s\"\nbatch_size = 0",
        "backlog: backlog.toml: handler.batch_size: 0 is out of range; use 1 to 10000 records a batch\n"
    ),
    out_of_range!(
        "spread too large",
        "every = \"5m\"",
        "every = \"5m\"\nspread = 99999",
        "backlog: backlog.toml: tier 1: spread: 99999 is out of range; use 1 (the whole band every tick) to 1000\n"
    ),
    Case {
        name: "--limit zero",
        setup: |_| {},
        args: &["--limit", "0"],
        code: 2,
        stderr: "error: invalid value '0' for '--limit <LIMIT>': use a number of records from 1 to 1000000000\n\nFor more information, try '--help'.\n",
        sqlite_only: false,
    },
    Case {
        name: "--limit too large",
        setup: |_| {},
        args: &["--limit", "99999999999"],
        code: 2,
        stderr: "error: invalid value '99999999999' for '--limit <LIMIT>': use a number of records from 1 to 1000000000\n\nFor more information, try '--help'.\n",
        sqlite_only: false,
    },
    Case {
        name: "--window too long",
        setup: |_| {},
        args: &["--window", "99999999d", "--ad-hoc"],
        code: 2,
        stderr: "error: invalid value '99999999d' for '--window <WINDOW>': \"99999999d\" is out of range; use at most 36500d\n\nFor more information, try '--help'.\n",
        sqlite_only: false,
    },
    Case {
        name: "--window no tier has",
        setup: |_| {},
        args: &["--window", "10d"],
        code: 2,
        stderr: "backlog: --window 10d is no tier's window in backlog.toml (its windows: 1d, 7d, 14d, 30d, 180d, 360d); give one of them, or add --ad-hoc to run ages 0 to 10d once\n",
        sqlite_only: false,
    },
    Case {
        name: "SQL Server URL",
        setup: |env| set_url(env, "mssql://app:secret@db/shop"),
        args: &[],
        code: 3,
        stderr: "backlog: backlog.toml: database.url: \"mssql\" is not a scheme backlog knows; give a path or sqlite:… for SQLite, postgres:// or postgresql:// for PostgreSQL, mysql:// or mariadb:// for MySQL and MariaDB\n",
        sqlite_only: false,
    },
    Case {
        name: "SQLAlchemy URL",
        setup: |env| set_url(env, "postgresql+psycopg://app:secret@db/shop"),
        args: &[],
        code: 3,
        stderr: "backlog: backlog.toml: database.url: \"postgresql+psycopg\" is not a scheme backlog knows; give a path or sqlite:… for SQLite, postgres:// or postgresql:// for PostgreSQL, mysql:// or mariadb:// for MySQL and MariaDB\n",
        sqlite_only: false,
    },
    Case {
        name: "HTTP URL",
        setup: |env| set_url(env, "http://db.internal/backlog"),
        args: &[],
        code: 3,
        stderr: "backlog: backlog.toml: database.url: \"http\" is not a scheme backlog knows; give a path or sqlite:… for SQLite, postgres:// or postgresql:// for PostgreSQL, mysql:// or mariadb:// for MySQL and MariaDB\n",
        sqlite_only: false,
    },
    Case {
        name: "no schedule file",
        setup: |_| {},
        args: &["--schedule", "nope.toml"],
        code: 3,
        stderr: "backlog: nope.toml: no such schedule file; pass --schedule FILE, or run `backlog init` to write one\n",
        sqlite_only: false,
    },
    Case {
        name: "unknown key",
        setup: |env| rewrite_schedule(env, "every = \"1h\"", "evry = \"1h\""),
        args: &[],
        code: 3,
        stderr: "backlog: backlog.toml:{line}:1: unknown field `evry`, expected one of `window`, `every`, `cron`, `limit`, `jitter`, `spread`\n",
        sqlite_only: false,
    },
    type_error!(
        "a string where a list of arguments is expected",
        "command = [\"./handler.sh\"]",
        "command = \"./handler.sh\"",
        "backlog: backlog.toml:{line}:11: handler.command: found the string \"./handler.sh\" where a list of strings (the program and its arguments) is expected; write it like command = [\"./handler.sh\"]\n"
    ),
    type_error!(
        "a string where a list of statuses is expected",
        "inserted_at_format = \"auto\"",
        "inserted_at_format = \"auto\"\npending = \"NEW\"",
        "backlog: backlog.toml:{line}:11: table.pending: found the string \"NEW\" where a list of statuses is expected; write it like pending = [\"NEW\"]\n"
    ),
    type_error!(
        "a number where a duration is expected",
        "timeout = \"10s\"",
        "timeout = 10",
        "backlog: backlog.toml:{line}:11: handler.timeout: found the number 10 where a duration in quotes is expected; write it like timeout = \"30s\"\n"
    ),
    type_error!(
        "a string where a number is expected",
        "timeout = \"10s\"",
        "timeout = \"10s\"\nconcurrency = \"8\"",
        "backlog: backlog.toml:{line}:15: handler.concurrency: found the string \"8\" where a number of records at once from 1 to 1024 is expected; write it like concurrency = 8\n"
    ),
    type_error!(
        "a string where a number is expected in a tier",
        "every = \"1h\"",
        "every = \"1h\"\nspread = \"2\"",
        "backlog: backlog.toml:{line}:10: tier 2: spread: found the string \"2\" where a number of ticks from 1 to 1000 is expected; write it like spread = 2\n"
    ),
    type_error!(
        "a number where one of a few words is expected",
        "inserted_at_format = \"auto\"",
        "inserted_at_format = 1",
        "backlog: backlog.toml:{line}:22: table.inserted_at_format: found the number 1 where one of \"auto\", \"sqlite\", \"rfc3339\", \"unix\", \"unix_ms\" or \"native\" is expected; write it like inserted_at_format = \"auto\"\n"
    ),
    type_error!(
        "a list where a table is expected",
        "timeout = \"10s\"",
        "timeout = \"10s\"\nenv = [\"API_URL=https://erp.example\"]",
        "backlog: backlog.toml:{line}:7: handler.env: found the list [\"API_URL=https://erp.example\"] where a table of variable names and values is expected; write it like env = { API_URL = \"https://erp.example\" }\n"
    ),
    type_error!(
        "a number where a string is expected in a table",
        "timeout = \"10s\"",
        "timeout = \"10s\"\nenv = { RETRIES = 3 }",
        "backlog: backlog.toml:{line}:19: handler.env.RETRIES: found the number 3 where a string is expected; write it like RETRIES = \"3\"\n"
    ),
    type_error!(
        "a string where a section is expected",
        "bands = \"disjoint\"",
        "bands = \"disjoint\"\nretry = \"exponential\"",
        "backlog: backlog.toml:{line}:9: retry: found the string \"exponential\" where a section is expected; write it like [retry] on a line of its own, with strategy = \"exponential\" below\n"
    ),
    type_error!(
        "a list of sections where a section is expected",
        "[handler]",
        "[[handler]]",
        "backlog: backlog.toml:{line}:1: handler: found a list of sections ([[handler]]) where a section is expected; write it like [handler] on a line of its own, with command = [\"./handler.sh\"] below\n"
    ),
    Case {
        name: "[tier] for [[tier]]",
        setup: |env| {
            let path = env.path("backlog.toml");
            let text = std::fs::read_to_string(&path).unwrap();
            let head = &text[..text.find("[[tier]]").unwrap()];
            std::fs::write(
                &path,
                format!("{head}[tier]\nwindow = \"1d\"\nevery = \"5m\"\n"),
            )
            .unwrap();
        },
        args: &[],
        code: 3,
        stderr: "backlog: backlog.toml:{line}:1: tier: found a section ([tier]) in single brackets; use [[tier]] (double brackets), one per tier: write it like [[tier]] on a line of its own, with window = \"1d\" and every = \"5m\" below\n",
        sqlite_only: false,
    },
    type_error!(
        "a key set twice",
        "timeout = \"10s\"",
        "timeout = \"10s\"\ntimeout = \"20s\"",
        "backlog: backlog.toml:{line}:1: timeout is set twice; keep one\n"
    ),
    Case {
        name: "unsorted tiers",
        setup: |env| rewrite_schedule(env, "window = \"30d\"", "window = \"10d\""),
        args: &[],
        code: 3,
        stderr: "backlog: backlog.toml: tier 4: window 10d is not larger than tier 3's window 14d (tiers must be sorted by window)\n",
        sqlite_only: false,
    },
    Case {
        name: "bad duration",
        setup: |env| rewrite_schedule(env, "timeout = \"10s\"", "timeout = \"ten seconds\""),
        args: &[],
        code: 3,
        stderr: "backlog: backlog.toml: handler.timeout: \"ten seconds\" is not a duration; write a number and a unit (s, m, h, d), like 30s, 5m, 1h, 7d or 96h\n",
        sqlite_only: false,
    },
    Case {
        name: "no database file",
        setup: |env| rewrite_schedule(env, "url = \"backlog.db\"", "url = \"backlgo.db\""),
        args: &[],
        code: 4,
        stderr: "backlog: sqlite:{dir}/backlgo.db: no such database file (set database.url in the schedule file; `backlog init` writes a demo)\n",
        sqlite_only: true,
    },
    Case {
        name: "no table",
        setup: |env| rewrite_schedule(env, "name = \"BACKLOG\"", "name = \"BACKLGO\""),
        args: &[],
        code: 4,
        stderr: "backlog: {db}: no table \"BACKLGO\" (set table.name in the schedule file); tables: BACKLOG\n",
        sqlite_only: false,
    },
    Case {
        name: "no column",
        setup: |env| {
            rewrite_schedule(
                env,
                "inserted_at = \"DATE_INSERTED\"",
                "inserted_at = \"CREATED\"",
            )
        },
        args: &[],
        code: 4,
        stderr: "backlog: {db}: table \"BACKLOG\" has no column \"CREATED\" (set table.inserted_at in the schedule file); columns: ID, STATUS, DATE_INSERTED, PAYLOAD\n",
        sqlite_only: false,
    },
    Case {
        name: "unreadable timestamps",
        setup: |env| {
            env.execute(r#"INSERT INTO "BACKLOG" VALUES (9, 'NEW', 'yesterday', NULL)"#);
        },
        args: &[],
        code: 4,
        stderr: "backlog: {db}: column \"DATE_INSERTED\" of table \"BACKLOG\" holds \"yesterday\", which is not a timestamp (backlog reads SQLite \"YYYY-MM-DD HH:MM:SS\" text, RFC 3339 text, or integer unix seconds or milliseconds)\n",
        sqlite_only: false,
    },
    Case {
        name: "declared format does not match",
        setup: |env| {
            rewrite_schedule(
                env,
                "inserted_at_format = \"auto\"",
                "inserted_at_format = \"unix\"",
            )
        },
        args: &[],
        code: 4,
        stderr: "backlog: {db}: column \"DATE_INSERTED\" of table \"BACKLOG\" is declared unix but holds sqlite values (set table.inserted_at_format = \"sqlite\", or \"auto\")\n",
        sqlite_only: false,
    },
    Case {
        name: "handler not found",
        setup: |env| rewrite_schedule(env, "./handler.sh", "./handlr.sh"),
        args: &[],
        code: 5,
        stderr: "backlog: backlog.toml: handler.command: \"./handlr.sh\" not found (looked for {dir}/./handlr.sh)\n",
        sqlite_only: false,
    },
    Case {
        name: "handler not executable",
        setup: |env| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(
                env.path("handler.sh"),
                std::fs::Permissions::from_mode(0o644),
            )
            .unwrap();
        },
        args: &[],
        code: 5,
        stderr: "backlog: backlog.toml: handler.command: {dir}/./handler.sh is not an executable file (chmod +x it, or run it through an interpreter: [\"sh\", \"./handler.sh\"])\n",
        sqlite_only: false,
    },
    Case {
        name: "handler not in PATH",
        setup: |env| rewrite_schedule(env, "[\"./handler.sh\"]", "[\"deliver-order\", \"--fast\"]"),
        args: &[],
        code: 5,
        stderr: "backlog: backlog.toml: handler.command: \"deliver-order\" not found in PATH (cron's PATH is /usr/bin:/bin; give an absolute path, or ./deliver-order for a file beside the schedule file)\n",
        sqlite_only: false,
    },
    Case {
        name: "concurrency out of range",
        setup: |env| {
            rewrite_schedule(
                env,
                "timeout = \"10s\"",
                "timeout = \"10s\"\nconcurrency = 0",
            )
        },
        args: &[],
        code: 3,
        stderr: "backlog: backlog.toml: handler.concurrency: 0 is out of range; use 1 (one record at a time, the default) to 1024\n",
        sqlite_only: false,
    },
    Case {
        name: "bad rate",
        setup: |env| {
            rewrite_schedule(
                env,
                "timeout = \"10s\"",
                "timeout = \"10s\"\nrate = \"20 per second\"",
            )
        },
        args: &[],
        code: 3,
        stderr: "backlog: backlog.toml: handler.rate: \"20 per second\" is not a rate; write starts per second, minute or hour, like \"20/s\", \"100/m\" or \"3/h\"\n",
        sqlite_only: false,
    },
    Case {
        name: "breaker that never lets a record through",
        setup: |env| {
            rewrite_schedule(
                env,
                "timeout = \"10s\"",
                "timeout = \"10s\"\nstop_after_failures = 0",
            )
        },
        args: &[],
        code: 3,
        stderr: "backlog: backlog.toml: handler.stop_after_failures: 0 is out of range; use a number of failures in a row from 1 to 4294967295, or leave it out to never stop\n",
        sqlite_only: false,
    },
    Case {
        name: "breaker cool-down without a breaker",
        setup: |env| {
            rewrite_schedule(
                env,
                "timeout = \"10s\"",
                "timeout = \"10s\"\nbreaker_cooldown = \"5m\"",
            )
        },
        args: &[],
        code: 3,
        stderr: "backlog: backlog.toml: handler.breaker_cooldown = \"5m\" needs handler.stop_after_failures, the failures in a row that trip the breaker; give it too, like stop_after_failures = 5\n",
        sqlite_only: false,
    },
    Case {
        name: "shared rate without a rate",
        setup: |env| {
            rewrite_schedule(
                env,
                "timeout = \"10s\"",
                "timeout = \"10s\"\nrate_group = \"api\"",
            )
        },
        args: &[],
        code: 3,
        stderr: "backlog: backlog.toml: handler.rate_group = \"api\" names a shared rate, but handler.rate is not set; give the rate too, like rate = \"20/s\"\n",
        sqlite_only: false,
    },
    Case {
        name: "rate per counterpart without a rate",
        setup: |env| {
            rewrite_schedule(
                env,
                "timeout = \"10s\"",
                "timeout = \"10s\"\nrate_key = \"PAYLOAD\"",
            )
        },
        args: &[],
        code: 3,
        stderr: "backlog: backlog.toml: handler.rate_key = \"PAYLOAD\" gives each value of that column a rate, but handler.rate is not set; give the rate too, like rate = \"20/s\"\n",
        sqlite_only: false,
    },
    Case {
        name: "rate per counterpart naming no column",
        setup: |env| {
            rewrite_schedule(
                env,
                "timeout = \"10s\"",
                "timeout = \"10s\"\nrate = \"5/s\"\nrate_key = \"MERCHANT\"",
            )
        },
        args: &[],
        code: 4,
        stderr: "backlog: {db}: table \"BACKLOG\" has no column \"MERCHANT\" (set handler.rate_key in the schedule file); columns: ID, STATUS, DATE_INSERTED, PAYLOAD\n",
        sqlite_only: false,
    },
    Case {
        name: "handler script without a #! line",
        setup: |env| env.write_handler("handler.sh", "echo no shebang\n"),
        args: &[],
        code: 5,
        stderr: "backlog: backlog.toml: handler.command: {dir}/./handler.sh has no #! line and is not a program, so it cannot be started: add one, like #!/bin/sh, as its first line\n",
        sqlite_only: false,
    },
    Case {
        name: "handler script naming a missing interpreter",
        setup: |env| env.write_handler("handler.sh", "#!/usr/bin/pyhton3\nprint()\n"),
        args: &[],
        code: 5,
        stderr: "backlog: backlog.toml: handler.command: {dir}/./handler.sh starts with \"#!/usr/bin/pyhton3\", and /usr/bin/pyhton3 is not there: fix its #! line, or install the interpreter\n",
        sqlite_only: false,
    },
    Case {
        name: "handler script whose env interpreter is not in PATH",
        setup: |env| env.write_handler("handler.sh", "#!/usr/bin/env pyhton3\nprint()\n"),
        args: &[],
        code: 5,
        stderr: "backlog: backlog.toml: handler.command: {dir}/./handler.sh starts with \"#!/usr/bin/env pyhton3\", and pyhton3 (looked up in PATH) is not there: fix its #! line, or install the interpreter\n",
        sqlite_only: false,
    },
    Case {
        name: "a view as the table",
        setup: |env| {
            env.execute(r#"CREATE VIEW "PENDING_BACKLOG" AS SELECT * FROM "BACKLOG""#);
            rewrite_schedule(env, "name = \"BACKLOG\"", "name = \"PENDING_BACKLOG\"");
        },
        args: &[],
        code: 4,
        stderr: "backlog: {db}: \"PENDING_BACKLOG\" is a view, not a table: a status written to it would not stick, and every tick would hand out the same rows again; set table.name to the table it reads\n",
        sqlite_only: false,
    },
    Case {
        name: "a table of the user's named like one of the tool's",
        setup: |env| {
            if env.backend == Backend::Postgres {
                env.execute("CREATE SCHEMA backlog");
            }
            env.execute(&format!(
                "CREATE TABLE {} (id integer, note text)",
                env.own("backlog_runs")
            ))
        },
        args: &[],
        code: 4,
        stderr: "backlog: {db}: a table backlog_runs is there but it is not backlog's (it has no column window_secs; its columns: id, note): {own_fix}\n",
        sqlite_only: false,
    },
];

fn each_bad_input_gets_its_message_and_exit_code_and_changes_nothing(backend: Backend) {
    for case in CASES {
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
        "{db}: no table \"BACKLGO\" (set table.name in the schedule file); tables: BACKLOG"
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
    let line = "backlog: backlog.toml: tier 6: window: \"99999999d\" is out of range; use at most 36500d\n";
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

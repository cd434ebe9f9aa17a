//! Bad input on the command line and in the schedule file.

use super::{Case, rewrite_schedule, set_url};

pub(super) const CASES: &[Case] = &[
    out_of_range!(
        "claim_lease too long",
        "[database]",
        "[database]\nclaim_lease = \"99999999d\"",
        "backlog: backlog.toml:{line}:15: database.claim_lease: \"99999999d\" is out of range; use 1s to 1d\n"
    ),
    out_of_range!(
        "claim_lease too short for its heartbeats",
        "[database]",
        "[database]\nclaim_lease = \"100ms\"",
        "backlog: backlog.toml:{line}:15: database.claim_lease: \"100ms\" is out of range; use 1s to 1d\n"
    ),
    out_of_range!(
        "busy_timeout too long",
        "[database]",
        "[database]\nbusy_timeout = \"99999999d\"",
        "backlog: backlog.toml:{line}:16: database.busy_timeout: \"99999999d\" is out of range; use at most 1h\n"
    ),
    Case {
        name: "claim_lease shorter than twice busy_timeout",
        setup: |env| rewrite_schedule(env, "[database]", "[database]\nbusy_timeout = \"45s\""),
        args: &[],
        code: 3,
        stderr: "backlog: backlog.toml:3:1: database.claim_lease 1m is shorter than twice database.busy_timeout 45s: a tick waiting that long for a lock would lose its hold on its records; make claim_lease at least 90s, or busy_timeout at most 30s\n",
        sqlite_only: true,
    },
    out_of_range!(
        "a retry parameter out of its range",
        "[handler]",
        "[retry]\nstrategy = \"exponential\"\nparams = { initial = \"1h\", factor = 0.5 }\ncount = \"FAILURES\"\nsince = \"LAST_TRY\"\n\n[handler]",
        "backlog: backlog.toml:{line}:1: retry: exponential: factor: 0.5 is out of range; use 1 to 1000\n"
    ),
    out_of_range!(
        "handler timeout too long",
        "timeout = \"10s\"",
        "timeout = \"99999999d\"",
        "backlog: backlog.toml:{line}:11: handler.timeout: \"99999999d\" is out of range; use at most 1d\n"
    ),
    out_of_range!(
        "window too long",
        "window = \"360d\"",
        "window = \"99999999d\"",
        "backlog: backlog.toml:{line}:10: tier 6: window: \"99999999d\" is out of range; use at most 36500d\n"
    ),
    out_of_range!(
        "cadence too long",
        "every = \"96h\"",
        "every = \"99999999d\"",
        "backlog: backlog.toml:{line}:9: tier 5: every: \"99999999d\" is out of range; use at most 36500d\n"
    ),
    out_of_range!(
        "jitter too long",
        "every = \"96h\"",
        "every = \"96h\"\njitter = \"99999999d\"",
        "backlog: backlog.toml:{line}:10: tier 5: jitter: \"99999999d\" is out of range; use at most 36500d\n"
    ),
    out_of_range!(
        "limit of the file zero",
        "bands = \"disjoint\"",
        "bands = \"disjoint\"\nlimit = 0",
        "backlog: backlog.toml:{line}:9: limit: 0 is out of range; use 1 to 1000000000 records a tick\n"
    ),
    out_of_range!(
        "limit of a tier too large",
        "every = \"96h\"",
        "every = \"96h\"\nlimit = 99999999999",
        "backlog: backlog.toml:{line}:9: tier 5: limit: 99999999999 is out of range; use 1 to 1000000000 records a tick\n"
    ),
    out_of_range!(
        "batch_size too large",
        "timeout = \"10s\"",
        "timeout = \"10s\"\nbatch_size = 99999999\nmode = \"batch\"",
        "backlog: backlog.toml:{line}:14: handler.batch_size: 99999999 is out of range; use 1 to 10000 records a batch\n"
    ),
    out_of_range!(
        "batch_size zero",
        "timeout = \"10s\"",
        "timeout = \"10s\"\nbatch_size = 0",
        "backlog: backlog.toml:{line}:14: handler.batch_size: 0 is out of range; use 1 to 10000 records a batch\n"
    ),
    out_of_range!(
        "spread too large",
        "every = \"5m\"",
        "every = \"5m\"\nspread = 99999",
        "backlog: backlog.toml:{line}:10: tier 1: spread: 99999 is out of range; use 1 (the whole band every tick) to 1000\n"
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
        stderr: "backlog: --window 10d is no tier's window in backlog.toml (its windows: 1d, 7d, 14d, 30d, 180d, 360d; did you mean 14d?); give one of them, or add --ad-hoc to run ages 0 to 10d once\n",
        sqlite_only: false,
    },
    Case {
        name: "SQL Server URL",
        setup: |env| set_url(env, "mssql://app:secret@db/shop"),
        args: &[],
        code: 3,
        stderr: "backlog: backlog.toml:{line}:7: database.url: \"mssql\" is not a scheme backlog knows; give a path or sqlite:… for SQLite, postgres:// or postgresql:// for PostgreSQL, mysql:// or mariadb:// for MySQL and MariaDB\n",
        sqlite_only: false,
    },
    Case {
        name: "SQLAlchemy URL",
        setup: |env| set_url(env, "postgresql+psycopg://app:secret@db/shop"),
        args: &[],
        code: 3,
        stderr: "backlog: backlog.toml:{line}:7: database.url: \"postgresql+psycopg\" is not a scheme backlog knows; give a path or sqlite:… for SQLite, postgres:// or postgresql:// for PostgreSQL, mysql:// or mariadb:// for MySQL and MariaDB\n",
        sqlite_only: false,
    },
    Case {
        name: "HTTP URL",
        setup: |env| set_url(env, "http://db.internal/backlog"),
        args: &[],
        code: 3,
        stderr: "backlog: backlog.toml:{line}:7: database.url: \"http\" is not a scheme backlog knows; give a path or sqlite:… for SQLite, postgres:// or postgresql:// for PostgreSQL, mysql:// or mariadb:// for MySQL and MariaDB\n",
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
        stderr: "backlog: backlog.toml:{line}:1: tier 2: evry: unknown key; did you mean `every`? The keys here are `window`, `every`, `cron`, `limit`, `jitter`, `spread`, `ping`.\n",
        sqlite_only: false,
    },
    Case {
        name: "a misspelt key of [table]",
        setup: |env| rewrite_schedule(env, "inserted_at = ", "inserted_att = "),
        args: &[],
        code: 3,
        stderr: "backlog: backlog.toml:{line}:1: table.inserted_att: unknown key; did you mean `inserted_at`? The keys here are `name`, `id`, `status`, `inserted_at`, `inserted_at_format`, `inserted_at_timezone`, `pending`, `success`, `error`, `given_up`, `give_up_after`, `labels`.\n",
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
        "backlog: backlog.toml:{line}:15: handler.concurrency: found the string \"8\" where a number from 1 to 1024 is expected; write it like concurrency = 8\n"
    ),
    type_error!(
        "a string where a number is expected in a tier",
        "every = \"1h\"",
        "every = \"1h\"\nspread = \"2\"",
        "backlog: backlog.toml:{line}:10: tier 2: spread: found the string \"2\" where a number from 1 to 1000 is expected; write it like spread = 2\n"
    ),
    type_error!(
        "a number where one of a few words is expected",
        "inserted_at_format = \"auto\"",
        "inserted_at_format = 1",
        "backlog: backlog.toml:{line}:22: table.inserted_at_format: found the number 1 where \"auto\", \"sqlite\", \"rfc3339\", \"unix\", \"unix_ms\" or \"native\" is expected; write it like inserted_at_format = \"auto\"\n"
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
        stderr: "backlog: backlog.toml:{line}:10: tier 4: window 10d is not larger than tier 3's window 14d (tiers must be sorted by window)\n",
        sqlite_only: false,
    },
    Case {
        name: "bad duration",
        setup: |env| rewrite_schedule(env, "timeout = \"10s\"", "timeout = \"ten seconds\""),
        args: &[],
        code: 3,
        stderr: "backlog: backlog.toml:{line}:11: handler.timeout: \"ten seconds\" is not a duration; write a number and a unit (s, m, h, d), like 30s, 5m, 1h, 7d or 96h\n",
        sqlite_only: false,
    },
];

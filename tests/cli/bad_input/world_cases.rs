//! Bad input in what the schedule file points at: the database, the table, the
//! handler.

use super::{Case, rewrite_schedule};
use crate::harness::Backend;

pub(super) const CASES: &[Case] = &[
    Case {
        name: "no database file",
        setup: |env| rewrite_schedule(env, "url = \"backlog.db\"", "url = \"backlgo.db\""),
        args: &[],
        code: 4,
        stderr: "backlog: sqlite:{dir}/backlgo.db: no such database file (set database.url in the schedule file; `backlog init` writes a demo)\n",
        sqlite_only: true,
    },
    Case {
        name: "no database file, named from the file's folder",
        setup: |env| {
            rewrite_schedule(
                env,
                "url = \"backlog.db\"",
                "url = \"./data/../backlgo.db\"",
            )
        },
        args: &[],
        code: 4,
        stderr: "backlog: sqlite:{dir}/data/../backlgo.db: no such database file (set database.url in the schedule file; `backlog init` writes a demo)\n",
        sqlite_only: true,
    },
    Case {
        name: "no table",
        setup: |env| rewrite_schedule(env, "name = \"BACKLOG\"", "name = \"BACKLGO\""),
        args: &[],
        code: 4,
        stderr: "backlog: {db}: no table \"BACKLGO\" (set table.name in the schedule file); did you mean \"BACKLOG\"?; tables: BACKLOG\n",
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
        stderr: "backlog: backlog.toml: handler.command: \"./handlr.sh\" not found (looked for {dir}/handlr.sh)\n",
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
        stderr: "backlog: backlog.toml: handler.command: {dir}/handler.sh is not an executable file (chmod +x it, or run it through an interpreter: [\"sh\", \"./handler.sh\"])\n",
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
        stderr: "backlog: backlog.toml:{line}:15: handler.concurrency: 0 is out of range; use 1 (one record at a time, the default) to 1024\n",
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
        stderr: "backlog: backlog.toml:{line}:8: handler.rate: \"20 per second\" is not a rate; write starts per second, minute or hour, like \"20/s\", \"100/m\" or \"3/h\"\n",
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
        stderr: "backlog: backlog.toml:{line}:23: handler.stop_after_failures: 0 is out of range; use a number of failures in a row from 1 to 4294967295, or leave it out to never stop\n",
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
        stderr: "backlog: backlog.toml:{line}:20: handler.breaker_cooldown = \"5m\" needs handler.stop_after_failures, the failures in a row that trip the breaker; give it too, like stop_after_failures = 5\n",
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
        stderr: "backlog: backlog.toml:{line}:14: handler.rate_group = \"api\" names a shared rate, but handler.rate is not set; give the rate too, like rate = \"20/s\"\n",
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
        stderr: "backlog: backlog.toml:{line}:12: handler.rate_key = \"PAYLOAD\" gives each value of that column a rate and a breaker, but neither handler.rate nor handler.stop_after_failures is set; give one, like rate = \"20/s\" or stop_after_failures = 5\n",
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
        stderr: "backlog: backlog.toml: handler.command: {dir}/handler.sh has no #! line and is not a program, so it cannot be started: add one, like #!/bin/sh, as its first line\n",
        sqlite_only: false,
    },
    Case {
        name: "handler script naming a missing interpreter",
        setup: |env| env.write_handler("handler.sh", "#!/usr/bin/pyhton3\nprint()\n"),
        args: &[],
        code: 5,
        stderr: "backlog: backlog.toml: handler.command: {dir}/handler.sh starts with \"#!/usr/bin/pyhton3\", and /usr/bin/pyhton3 is not there: fix its #! line, or install the interpreter\n",
        sqlite_only: false,
    },
    Case {
        name: "handler script whose env interpreter is not in PATH",
        setup: |env| env.write_handler("handler.sh", "#!/usr/bin/env pyhton3\nprint()\n"),
        args: &[],
        code: 5,
        stderr: "backlog: backlog.toml: handler.command: {dir}/handler.sh starts with \"#!/usr/bin/env pyhton3\", and pyhton3 (looked up in PATH) is not there: fix its #! line, or install the interpreter\n",
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

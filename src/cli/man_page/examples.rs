//! EXAMPLES of each command's page: the lines a person types most, each with what it
//! does. backlog(1)'s own, which walk the demo, are in `command_page.rs`. A unit test
//! parses every line here with the command line's own parser, so none names a flag
//! that is gone.

/// The examples of the command `path` (`run`, `backoff simulate`): a command line
/// and what it does, each.
pub(super) fn of(path: &str) -> &'static [(&'static str, &'static str)] {
    match path {
        "init" => &[
            (
                "backlog init demo",
                "A schedule file, a SQLite backlog of 400 demo records and a handler, in demo/.",
            ),
            (
                "backlog init --database postgres://app@db/shop --table orders --dry-run",
                "The schedule file proposed for your table (read, never written), printed; what was guessed on stderr.",
            ),
        ],
        "run" => &[
            (
                "backlog run --window 1d --schedule /srv/app/backlog.toml",
                "One tick of the tier of window 1d: what a crontab line runs.",
            ),
            (
                "backlog run --window 180d --if-due",
                "The tick of a slow tier only when its cadence says it is due (cron checks hourly).",
            ),
            (
                "backlog run --window 7d --dry-run --retry-failed",
                "The records the tier would hand over now, failed ones kept from the ticks included; nothing changes.",
            ),
            (
                "backlog run --window 1d --metrics-file /var/lib/node_exporter/textfile/backlog.prom",
                "A tick, then the metrics for node_exporter's textfile collector.",
            ),
        ],
        "crontab" => &[
            (
                "backlog crontab --schedule /srv/app/backlog.toml",
                "The crontab lines of the schedule, one per tier.",
            ),
            (
                "backlog crontab --schedule /srv/app/backlog.toml --install",
                "Puts them in your crontab, in a marked block, after checking cron could run them.",
            ),
            (
                "backlog crontab --schedule /srv/app/backlog.toml --uninstall",
                "Takes the block out again.",
            ),
        ],
        "daemon" => &[
            (
                "backlog daemon --schedule backlog.toml",
                "Every tier on its cadence until SIGTERM; SIGHUP or a change of the file reloads it.",
            ),
            (
                "backlog daemon --metrics 127.0.0.1:9464 --http 127.0.0.1:8080 --log-format json",
                "The same, with /metrics, the dashboard, and JSON log lines for a collector.",
            ),
        ],
        "explain" => &[
            (
                "backlog explain",
                "Each tier's band and cadence, and a record's tries over its life.",
            ),
            (
                "backlog explain --age 3d",
                "When a record three days old is tried next.",
            ),
        ],
        "status" => &[
            (
                "backlog status",
                "Records by status and age band, and each tier's last slot over all its runners.",
            ),
            (
                "backlog status --check --critical-waiting 30m --warn-pending 10000",
                "One line and an exit code for monitoring: CRITICAL once new records wait half an hour for a first try, WARNING past 10,000 pending.",
            ),
        ],
        "doctor" => &[(
            "backlog doctor --schedule backlog.toml",
            "The file against its database before the first tick: handler, table, columns, values, index.",
        )],
        "show" => &[(
            "backlog show 197",
            "Record 197: its columns, band, next try, hold, and attempts.",
        )],
        "retry" => &[
            ("backlog retry 197", "Hands record 197 to the handler now."),
            (
                "backlog retry --status ERROR --older-than 2d --limit 100 --dry-run",
                "The 100 oldest records in ERROR for over two days that a retry would take; nothing changes.",
            ),
        ],
        "snooze" => &[(
            "backlog snooze --error-contains 429 --for 2h --reason \"partner quota\"",
            "Keeps from the ticks for two hours the pending records whose last failure says 429.",
        )],
        "give-up" => &[(
            "backlog give-up 197 --reason \"order cancelled\"",
            "Marks record 197 with table.given_up: no tick takes it again.",
        )],
        "pause" => &[(
            "backlog pause --window 7d --until 2h --reason \"partner API down\"",
            "Pauses the tier on every runner; its ticks exit 0 without running until backlog resume.",
        )],
        "resume" => &[("backlog resume --window 7d", "Lifts the tier's pause.")],
        "serve" => &[
            ("backlog serve", "The dashboard at http://127.0.0.1:8080/."),
            (
                "backlog serve --listen 0.0.0.0:8080 --token-file /etc/backlog/token --user-header X-Forwarded-User",
                "Behind a reverse proxy: every request carries the token, and actions are recorded as the person the proxy names.",
            ),
        ],
        "backoff delays" => &[(
            "backlog backoff delays exponential -p initial=1 -p factor=2",
            "The delays of an exponential backoff over ten failures.",
        )],
        "backoff simulate" => &[
            (
                "backlog backoff simulate --outage 30m..4h",
                "A few common strategies against an outage of half an hour to four hours.",
            ),
            (
                "backlog backoff simulate --capacity 40/s --capacity 80/s@30s --records 4000",
                "Paces of handler starts against a counterpart taking 40 calls a second, then 80.",
            ),
        ],
        "completions" => &[(
            "source <(backlog completions bash)",
            "Completions in this bash session.",
        )],
        "man" => &[(
            "backlog man run | man -l -",
            "This page for backlog run, read without installing it.",
        )],
        _ => &[],
    }
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory as _, Parser as _};

    use super::of;
    use crate::cli::Cli;

    /// Every command with subcommands of its own, walked: `backoff simulate`.
    fn paths(command: &clap::Command, prefix: &str, out: &mut Vec<String>) {
        for sub in command.get_subcommands() {
            let path = format!("{prefix}{}", sub.get_name()).trim().to_string();
            out.push(path.clone());
            paths(sub, &format!("{path} "), out);
        }
    }

    #[test]
    fn every_example_parses_and_most_commands_have_one() {
        let mut all = Vec::new();
        paths(&Cli::command(), "", &mut all);
        let mut with = 0;
        for path in &all {
            for (line, _) in of(path) {
                with += 1;
                // A shell around it (`source <(…)`, `| man -l -`): the command inside.
                let inner = line
                    .split_once("<(")
                    .map_or(*line, |(_, rest)| rest.trim_end_matches(')'));
                let inner = inner.split(" | ").next().unwrap();
                let words = shlex::split(inner).expect("quoted as a shell would");
                assert!(words[0] == "backlog", "{line}");
                let parsed = Cli::try_parse_from(&words);
                assert!(parsed.is_ok(), "{line}: {}", parsed.unwrap_err());
                assert!(
                    inner.starts_with(&format!("backlog {path}")),
                    "{line} under {path}"
                );
            }
        }
        assert!(with >= 25, "{with} examples");
        for path in ["run", "crontab", "daemon", "status", "retry", "serve"] {
            assert!(!of(path).is_empty(), "{path} has examples");
        }
    }
}

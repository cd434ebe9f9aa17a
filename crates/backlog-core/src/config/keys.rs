//! What each key of the schedule file holds and a line that sets it, for the messages
//! about a value of the wrong type or a missing key.
//!
//! The serde types in `config.rs` say what the file may hold; this table says it to a
//! person. A key missing here still gets a message naming it, only without an example,
//! so a test walks the shipped schedules and checks that every key they use is here.

use super::{MAX_BATCH_SIZE, MAX_CONCURRENCY, MAX_LIMIT, MAX_SPREAD};

/// The kind of value a key takes, as far as a message can build a fix from what was
/// written (`"8"` for a number becomes `8`, `"NEW"` for a list becomes `["NEW"]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Shape {
    /// Text in quotes: a name, a duration, a rate, one of a few words.
    Text,
    /// A whole number, without quotes.
    Number,
    /// A list in brackets.
    List,
    /// A section (`[handler]`) or an inline table (`{ … }`).
    Table,
    /// The `[[tier]]` sections.
    Tiers,
}

/// One key of the file.
#[derive(Debug, Clone)]
pub(super) struct Key {
    pub shape: Shape,
    /// What it takes, as a message says it: "a duration in quotes".
    pub takes: String,
    /// How to write it: a line that sets it, or how a section starts.
    pub example: String,
}

/// The key at `path`, its parts joined by dots, with `[]` for an item of a list and
/// `*` for a name the user chooses: `handler.timeout`, `tier[].window`,
/// `handler.env.*`.
pub(super) fn key(path: &str) -> Option<Key> {
    database_key(path)
        .or_else(|| handler_key(path))
        .or_else(|| other_key(path))
}

/// A section's example: its header with its first key below.
fn section(name: &str, first: &str) -> String {
    format!("[{name}] on a line of its own, with {first} below")
}

/// The top-level keys, `[database]` and `[table]`.
fn database_key(path: &str) -> Option<Key> {
    use Shape::*;
    let (shape, takes, example): (Shape, &str, String) = match path {
        "bands" => (
            Text,
            "\"disjoint\" or \"cumulative\"",
            "bands = \"disjoint\"".into(),
        ),
        "limit" => return Some(number("limit", "records", MAX_LIMIT, 10_000)),
        "timezone" => (
            Text,
            "a time zone name in quotes",
            "timezone = \"Europe/Paris\"".into(),
        ),
        "database" => (
            Table,
            "a section",
            section("database", "url = \"backlog.db\""),
        ),
        "database.url" => (
            Text,
            "a SQLite file or a postgres:// URL in quotes",
            "url = \"backlog.db\"".into(),
        ),
        "database.busy_timeout" => duration("busy_timeout", "30s"),
        "database.claim_lease" => duration("claim_lease", "60s"),
        "database.password_file" => (
            Text,
            "a file name in quotes",
            "password_file = \"pgpass\"".into(),
        ),
        "database.schema" => (
            Text,
            "a schema name in quotes",
            "schema = \"backlog\"".into(),
        ),
        "table" => (Table, "a section", section("table", "name = \"BACKLOG\"")),
        "table.name" => column("name", "BACKLOG"),
        "table.id" => column("id", "ID"),
        "table.status" => column("status", "STATUS"),
        "table.inserted_at" => column("inserted_at", "DATE_INSERTED"),
        "table.inserted_at_format" => (
            Text,
            "one of \"auto\", \"sqlite\", \"rfc3339\", \"unix\", \"unix_ms\" or \"native\"",
            "inserted_at_format = \"auto\"".into(),
        ),
        "table.inserted_at_timezone" => (
            Text,
            "a time zone name in quotes",
            "inserted_at_timezone = \"Europe/Paris\"".into(),
        ),
        "table.pending" => (
            List,
            "a list of statuses",
            "pending = [\"NEW\", \"ERROR\"]".into(),
        ),
        "table.success" => (Text, "a status in quotes", "success = \"SUCCESS\"".into()),
        "table.error" => (Text, "a status in quotes", "error = \"ERROR\"".into()),
        "table.given_up" => (Text, "a status in quotes", "given_up = \"DEAD\"".into()),
        "table.give_up_after" => {
            return Some(number(
                "give_up_after",
                "failures",
                crate::config::table::GIVE_UP_AFTER_MAX as u64,
                25,
            ));
        }
        _ => return None,
    };
    Some(Key {
        shape,
        takes: takes.into(),
        example,
    })
}

/// `[handler]`.
fn handler_key(path: &str) -> Option<Key> {
    use Shape::*;
    let (shape, takes, example): (Shape, &str, String) = match path {
        "handler" => (
            Table,
            "a section",
            section("handler", "command = [\"./handler.sh\"]"),
        ),
        "handler.command" => (
            List,
            "a list of strings (the program and its arguments)",
            "command = [\"./handler.sh\"]".into(),
        ),
        "handler.mode" => (
            Text,
            "\"per_record\" or \"batch\"",
            "mode = \"batch\"".into(),
        ),
        "handler.batch_size" => {
            return Some(number("batch_size", "records", MAX_BATCH_SIZE as u64, 100));
        }
        "handler.timeout" => duration("timeout", "30s"),
        "handler.concurrency" => {
            return Some(number(
                "concurrency",
                "records at once",
                MAX_CONCURRENCY as u64,
                8,
            ));
        }
        "handler.concurrency_per_key" => {
            return Some(number(
                "concurrency_per_key",
                "records of one counterpart at once",
                MAX_CONCURRENCY as u64,
                2,
            ));
        }
        "handler.rate" => (
            Text,
            "starts per second, minute or hour in quotes",
            "rate = \"20/s\"".into(),
        ),
        "handler.rate_min" | "handler.rate_max" => (
            Text,
            "starts per second, minute or hour in quotes",
            format!(
                "{} = \"{}\"",
                &path[8..],
                if path.ends_with("min") {
                    "1/m"
                } else {
                    "500/s"
                }
            ),
        ),
        "handler.rate_group" => (
            Text,
            "the name of a rate shared by tiers and tables, in quotes",
            "rate_group = \"payments-api\"".into(),
        ),
        "handler.rate_key" => (
            Text,
            "the name of a column of the table, in quotes",
            "rate_key = \"merchant_id\"".into(),
        ),
        "handler.stop_after_failures" => {
            return Some(number(
                "stop_after_failures",
                "failures in a row",
                u64::from(u32::MAX),
                5,
            ));
        }
        "handler.breaker_cooldown" => duration("breaker_cooldown", "1m"),
        "handler.env" => (
            Table,
            "a table of variable names and values",
            "env = { API_URL = \"https://erp.example\" }".into(),
        ),
        "handler.env.*" => (Text, "a string", "API_URL = \"https://erp.example\"".into()),
        "handler.exit_codes" => (
            Table,
            "a table of exit codes and statuses",
            "exit_codes = { 75 = \"RETRY\" }".into(),
        ),
        "handler.exit_codes.*" => (Text, "a status in quotes", "75 = \"RETRY\"".into()),
        "handler.url" => (
            Text,
            "an http:// or https:// URL in quotes, with {column} placeholders",
            "url = \"https://hooks.example.com/orders/{id}\"".into(),
        ),
        "handler.method" => (
            Text,
            "POST, PUT, PATCH, GET or DELETE in quotes",
            "method = \"PUT\"".into(),
        ),
        "handler.headers" => (
            Table,
            "a table of header names and values",
            "headers = { Authorization = \"Bearer ${API_TOKEN}\" }".into(),
        ),
        "handler.headers.*" => (Text, "a string", "X-Api-Key = \"${API_KEY}\"".into()),
        "handler.body" => (
            Text,
            "\"record\", \"none\" or a template in quotes",
            "body = \"none\"".into(),
        ),
        "handler.connect_timeout" => duration("connect_timeout", "10s"),
        "handler.statuses" => (
            Table,
            "a table of HTTP status codes and statuses",
            "statuses = { 410 = \"GONE\" }".into(),
        ),
        "handler.statuses.*" => (Text, "a status in quotes", "410 = \"GONE\"".into()),
        "handler.ca_file" => (
            Text,
            "a path in quotes",
            "ca_file = \"/etc/ssl/partner-ca.pem\"".into(),
        ),
        "handler.allow_private" => (Text, "true or false", "allow_private = true".into()),
        "handler.done_when" => (
            Table,
            "a table with pointer and in",
            "done_when = { pointer = \"/state\", in = [\"shipped\"] }".into(),
        ),
        "handler.done_when.pointer" => (
            Text,
            "a JSON pointer in quotes",
            "pointer = \"/state\"".into(),
        ),
        "handler.done_when.in" => (
            List,
            "a list of values",
            "in = [\"shipped\", \"delivered\"]".into(),
        ),
        "handler.sign" => (
            Text,
            "\"standard-webhooks\"",
            "sign = \"standard-webhooks\"".into(),
        ),
        "handler.secret" => (
            Text,
            "whsec_ and a key in base64, in quotes",
            "secret = \"${WEBHOOK_SECRET}\"".into(),
        ),
        "handler.follow_redirects" => {
            return Some(number(
                "follow_redirects",
                "redirects",
                u64::from(super::http::MAX_REDIRECTS),
                3,
            ));
        }
        _ => return None,
    };
    Some(Key {
        shape,
        takes: takes.into(),
        example,
    })
}

/// `[alert]`, `[check]`, `[history]`, `[retry]` and `[[tier]]`.
fn other_key(path: &str) -> Option<Key> {
    use Shape::*;
    let (shape, takes, example): (Shape, &str, String) = match path {
        "alert" => (
            Table,
            "a section",
            section("alert", "webhook = \"https://hooks.example/backlog\""),
        ),
        "alert.command" => (
            List,
            "a list of a program and its arguments",
            "command = [\"./notify.sh\", \"ops\"]".into(),
        ),
        "alert.command_timeout" => duration("command_timeout", "30s"),
        "alert.webhook" => (
            Text,
            "an http:// or https:// address in quotes",
            "webhook = \"https://hooks.example/backlog\"".into(),
        ),
        "alert.ping" => (
            Text,
            "an http:// or https:// address in quotes",
            "ping = \"https://hc-ping.com/UUID\" or \"https://hc-ping.com/KEY/backlog-{window}\""
                .into(),
        ),
        "alert.alert_every" => duration("alert_every", "15m"),
        "check" => (
            Table,
            "a section",
            section("check", "critical_waiting = \"1h\""),
        ),
        "check.warn_waiting" => duration("warn_waiting", "30m"),
        "check.critical_waiting" => duration("critical_waiting", "2h"),
        "check.warn_pending" => return Some(count("warn_pending", "records", 10_000)),
        "check.critical_pending" => return Some(count("critical_pending", "records", 100_000)),
        "check.warn_failures" => return Some(count("warn_failures", "failures", 10)),
        "check.critical_failures" => return Some(count("critical_failures", "failures", 100)),
        "history" => (Table, "a section", section("history", "keep = \"30d\"")),
        "history.keep" => duration("keep", "30d"),
        "history.max_per_record" => {
            return Some(number(
                "max_per_record",
                "attempts",
                super::history::MAX_PER_RECORD.into(),
                20,
            ));
        }
        "history.record" => (
            Text,
            "\"failures\" or \"all\"",
            "record = \"failures\"".into(),
        ),
        "retry" => (
            Table,
            "a section",
            section("retry", "strategy = \"exponential\""),
        ),
        "retry.strategy" => (
            Text,
            "a strategy name in quotes",
            "strategy = \"exponential\"".into(),
        ),
        "retry.params" => (
            Table,
            "a table of parameters",
            "params = { initial = \"1h\", factor = 2 }".into(),
        ),
        "retry.count" => column("count", "FAILURES"),
        "retry.since" => column("since", "LAST_TRY"),
        "tier" => (
            Tiers,
            "a list of [[tier]] sections",
            section("[tier]", "window = \"1d\" and every = \"5m\""),
        ),
        "tier[]" => (
            Table,
            "a [[tier]] section",
            section("[tier]", "window = \"1d\" and every = \"5m\""),
        ),
        "tier[].window" => duration("window", "1d"),
        "tier[].every" => duration("every", "5m"),
        "tier[].cron" => (
            Text,
            "a crontab(5) expression in quotes",
            "cron = \"0 * * * *\"".into(),
        ),
        "tier[].limit" => return Some(number("limit", "records", MAX_LIMIT, 1_000)),
        "tier[].jitter" => duration("jitter", "30s"),
        "tier[].spread" => return Some(number("spread", "ticks", u64::from(MAX_SPREAD), 4)),
        "tier[].ping" => (
            Text,
            "an http:// or https:// address in quotes",
            "ping = \"https://hc-ping.com/KEY/backlog-{window}\"".into(),
        ),
        _ => return None,
    };
    Some(Key {
        shape,
        takes: takes.into(),
        example,
    })
}

fn duration(name: &str, example: &str) -> (Shape, &'static str, String) {
    (
        Shape::Text,
        "a duration in quotes",
        format!("{name} = \"{example}\""),
    )
}

fn column(name: &str, example: &str) -> (Shape, &'static str, String) {
    (
        Shape::Text,
        "a column name in quotes",
        format!("{name} = \"{example}\""),
    )
}

fn number(name: &str, unit: &str, max: u64, example: u64) -> Key {
    Key {
        shape: Shape::Number,
        takes: format!("a number of {unit} from 1 to {max}"),
        example: format!("{name} = {example}"),
    }
}

/// A threshold of `[check]`: a count from 0.
fn count(name: &str, unit: &str, example: u64) -> Key {
    Key {
        shape: Shape::Number,
        takes: format!("a number of {unit} from 0 to {}", super::check::MAX_COUNT),
        example: format!("{name} = {example}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every key the shipped schedules set has a line in the table, so that a type
    /// error in a copy of one of them gets an example.
    #[test]
    fn every_key_of_the_shipped_schedules_has_an_example() {
        fn walk(prefix: &str, value: &toml::Value, missing: &mut Vec<String>) {
            match value {
                toml::Value::Table(t) => {
                    for (k, v) in t {
                        let path = if prefix.is_empty() {
                            k.clone()
                        } else if [".env", ".exit_codes", ".headers", ".statuses"]
                            .iter()
                            .any(|named| prefix.ends_with(named))
                        {
                            format!("{prefix}.*")
                        } else {
                            format!("{prefix}.{k}")
                        };
                        if !path.starts_with("retry.params.") {
                            if key(&path).is_none() {
                                missing.push(path.clone());
                            }
                            walk(&path, v, missing);
                        }
                    }
                }
                toml::Value::Array(items) if prefix == "tier" => {
                    for item in items {
                        walk("tier[]", item, missing);
                    }
                }
                _ => {}
            }
        }
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../schedules");
        let mut missing = Vec::new();
        for entry in std::fs::read_dir(dir).unwrap() {
            let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
            let table: toml::Table = toml::from_str(&text).unwrap();
            walk("", &toml::Value::Table(table), &mut missing);
        }
        assert!(missing.is_empty(), "{missing:?}");
    }
}

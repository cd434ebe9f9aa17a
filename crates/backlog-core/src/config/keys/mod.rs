//! Every key of the schedule file, in one table: what it takes, its default, its range,
//! what it does, and a line that sets it. backlog.toml(5) prints it; the file's reader
//! says from it what a key takes when a value has the wrong type or is missing;
//! docs/ranges.md is checked against it. Defaults and ranges come from the core's own
//! constants and defaults, those the file's checks use, so the table says what the
//! checks hold. A test (tests/cli/man.rs) asks the file's reader for the keys it
//! accepts and finds each on the page.

use std::time::Duration;

use crate::config::{self, ranges};
use crate::duration::{self, Range, compact};
use crate::schedule::DEFAULT_LIMIT;

mod handling;
mod storage;

/// A section of the file, or its top level.
#[derive(Debug, Clone)]
pub struct Section {
    /// How it is written: `[handler]`; empty for the top level.
    pub header: &'static str,
    /// What it is for, and whether the file needs it.
    pub about: &'static str,
    /// Its keys, in the order the page lists them.
    pub keys: Vec<Key>,
}

/// The kind of value a key takes, as far as a message can build a fix from what was
/// written (`"8"` for a number becomes `8`, `"NEW"` for a list becomes `["NEW"]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
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

/// One key.
#[derive(Debug, Clone)]
pub struct Key {
    /// Its name in its section.
    pub name: &'static str,
    /// The kind of value, as a person writes it.
    pub takes: String,
    /// The default, or `required`.
    pub default: String,
    /// The values it takes beyond its kind; empty where the kind says it all.
    pub range: String,
    /// What it does.
    pub says: &'static str,
    /// A line that sets it, or how a section starts.
    pub example: String,
    pub(crate) shape: Shape,
    /// What its value holds, where it is a table: a field by its name, `*` any entry
    /// of a table of names (`env`). The page says them in `says`.
    pub(crate) parts: Vec<Key>,
}

pub(super) fn key(
    name: &'static str,
    takes: &str,
    default: &str,
    range: &str,
    says: &'static str,
) -> Key {
    let shape = match takes {
        "a section" => Shape::Table,
        "a number" => Shape::Number,
        t if t.contains("[[tier]]") => Shape::Tiers,
        t if t.starts_with("a list") => Shape::List,
        t if ["a table of", "a table:", "a table with"]
            .iter()
            .any(|p| t.starts_with(p)) =>
        {
            Shape::Table
        }
        _ => Shape::Text,
    };
    let example = match shape {
        Shape::Table => format!("[{name}] on a line of its own"),
        _ if default.starts_with('"')
            || default.parse::<f64>().is_ok()
            || default == "true"
            || default == "false" =>
        {
            format!("{name} = {default}")
        }
        _ if takes == DURATION && duration::parse(default).is_ok() => {
            format!("{name} = \"{default}\"")
        }
        _ => String::new(),
    };
    Key {
        name,
        takes: takes.into(),
        default: default.into(),
        range: range.into(),
        says,
        example,
        shape,
        parts: Vec::new(),
    }
}

impl Key {
    /// What it takes, as a message on a wrong value says it: a number with its range.
    pub(crate) fn takes_in_words(&self) -> String {
        match self.shape {
            Shape::Number if !self.range.is_empty() => {
                let range = self.range.split(';').next().unwrap_or_default();
                match range.starts_with(|c: char| c.is_ascii_digit()) {
                    true => format!("{} from {range}", self.takes),
                    false => format!("{} ({range})", self.takes),
                }
            }
            _ => self.takes.clone(),
        }
    }

    /// With `example` as the line that sets it.
    pub(super) fn like(mut self, example: impl Into<String>) -> Key {
        self.example = example.into();
        self
    }

    /// With `part` in its value (see `parts`).
    pub(super) fn part(mut self, part: Key) -> Key {
        self.parts.push(part);
        self
    }
}

/// A part of a key's value (`Key::parts`): what it takes and a line that sets it.
pub(super) fn part(name: &'static str, shape: Shape, takes: &str, example: &str) -> Key {
    Key {
        name,
        takes: takes.into(),
        default: String::new(),
        range: String::new(),
        says: "",
        example: example.into(),
        shape,
        parts: Vec::new(),
    }
}

/// The key at `path`, its parts joined by dots, with `[]` for an item of a list and
/// `*` for a name the user chooses: `handler.timeout`, `tier[].window`,
/// `handler.env.*`.
pub(crate) fn lookup(path: &str) -> Option<Key> {
    let (header, rest) = match path.split_once('.') {
        Some(("tier[]", rest)) => ("[[tier]]", rest),
        Some((section, rest)) => (section, rest),
        None if path == "tier[]" => {
            let tiers = lookup("tier")?;
            return Some(Key {
                shape: Shape::Table,
                takes: "a [[tier]] section".into(),
                ..tiers
            });
        }
        None => ("", path),
    };
    let sections = sections();
    let section = sections.iter().find(|s| {
        s.header == header || s.header.trim_matches(|c| c == '[' || c == ']') == header
    })?;
    let mut names = rest.split('.');
    let first = names.next()?;
    let mut found = section.keys.iter().find(|k| k.name == first)?.clone();
    for name in names {
        found = found.parts.iter().find(|k| k.name == name)?.clone();
    }
    Some(found)
}

/// A duration range as the checks hold it: `1s to 1d`, `0s to 36500d`.
pub(super) fn span(range: Range) -> String {
    if range.min == Duration::from_millis(1) {
        format!("longer than 0s, up to {}", compact(range.max))
    } else {
        format!("{} to {}", compact(range.min), compact(range.max))
    }
}

/// A count range: `1 to 1000`.
pub(super) fn count(max: impl std::fmt::Display) -> String {
    format!("1 to {max}")
}

pub(super) const REQUIRED: &str = "required";
pub(super) const NONE: &str = "none";
pub(super) const DURATION: &str = "a duration in quotes";
pub(super) const COLUMN: &str = "a column name in quotes";

/// The file's sections, in the order a file usually has them.
pub fn sections() -> Vec<Section> {
    vec![
        top(),
        storage::database(),
        storage::table(),
        handling::handler(),
        storage::retry(),
        storage::history(),
        handling::alert(),
        handling::check(),
        tier(),
    ]
}

fn top() -> Section {
    Section {
        header: "",
        about: "Keys before the first section.",
        keys: vec![
            key(
                "bands",
                "\"disjoint\" or \"cumulative\"",
                "\"disjoint\"",
                "",
                "With disjoint bands a tier takes the ages between the window of the tier before it and its own (the first tier from age 0), so a record is tried by one tier at a time; with cumulative bands every tier takes every age up to its window, the literal reading of a schedule.",
            ),
            key(
                "limit",
                "a number",
                &DEFAULT_LIMIT.to_string(),
                &count(config::MAX_LIMIT),
                "The most records a tick hands over, for the tiers that set no limit of their own.",
            ),
            key(
                "timezone",
                "a time zone name in quotes",
                "\"UTC\"",
                "an IANA name, like \"Europe/Paris\"",
                "The zone the tiers' cron expressions are read in.",
            )
            .like("timezone = \"Europe/Paris\""),
            key(
                "database",
                "a section",
                REQUIRED,
                "",
                "Where the backlog lives: [database] below.",
            )
            .like("[database] on a line of its own, with url = \"backlog.db\" below"),
            key(
                "table",
                "a section",
                REQUIRED,
                "",
                "The table and its columns: [table] below.",
            )
            .like("[table] on a line of its own, with name = \"BACKLOG\" below"),
            key(
                "handler",
                "a section",
                REQUIRED,
                "",
                "What runs for each record: [handler] below.",
            )
            .like("[handler] on a line of its own, with command = [\"./handler.sh\"] below"),
            key(
                "retry",
                "a section",
                NONE,
                "",
                "A retry strategy per record: [retry] below.",
            )
            .like("[retry] on a line of its own, with strategy = \"exponential\" below"),
            key(
                "history",
                "a section",
                "as [history] below says",
                "",
                "Which attempts are kept: [history] below.",
            )
            .like("[history] on a line of its own, with keep = \"30d\" below"),
            key(
                "alert",
                "a section",
                NONE,
                "",
                "Where failures are pushed to a person: [alert] below.",
            )
            .like("[alert] on a line of its own, with webhook = \"https://hooks.example/backlog\" below"),
            key(
                "check",
                "a section",
                NONE,
                "",
                "Thresholds status --check and /readyz judge the backlog by: [check] below.",
            )
            .like("[check] on a line of its own, with critical_waiting = \"1h\" below"),
            key(
                "tier",
                "a list of [[tier]] sections",
                REQUIRED,
                "one or more, sorted by window",
                "The tiers: [[tier]] below.",
            )
            .like("[[tier]] on a line of its own, with window = \"1d\" and every = \"5m\" below"),
        ],
    }
}

fn tier() -> Section {
    Section {
        header: "[[tier]]",
        about: "One or more, in order of window, each longer than the one before. A tick of a tier hands over the pending records whose age lies in its band, newest first, up to its limit.",
        keys: vec![
            key(
                "window",
                DURATION,
                REQUIRED,
                &span(config::SPAN),
                "How far back the tier reaches: its band ends at this age.",
            )
            .like("window = \"1d\""),
            key(
                "every",
                DURATION,
                "required, unless cron is set",
                &format!("{}; not with cron", span(config::SPAN)),
                "The tier's cadence: a tick this long after the last.",
            )
            .like("every = \"5m\""),
            key(
                "cron",
                "a crontab(5) expression in quotes",
                "required, unless every is set",
                "not with every",
                "The tier's cadence as cron states it, in timezone: cron = \"0 * * * *\".",
            )
            .like("cron = \"0 * * * *\""),
            key(
                "limit",
                "a number",
                "the top-level limit",
                &count(config::MAX_LIMIT),
                "The most records a tick of the tier hands over.",
            )
            .like("limit = 1000"),
            key(
                "jitter",
                DURATION,
                "0s",
                &span(ranges::JITTER),
                "The daemon waits a random delay up to this before each tick of the tier, so that hosts sharing a schedule do not all fire in the same second.",
            )
            .like("jitter = \"30s\""),
            key(
                "spread",
                "a number",
                "1",
                &count(config::MAX_SPREAD),
                "Each tick takes one in this many records of the band, by a stable hash of the id (the same records on the same ticks), so that records that failed together are retried apart; 1 takes the whole band every tick.",
            )
            .like("spread = 4"),
            key(
                "ping",
                "an http:// or https:// address in quotes",
                "[alert]'s ping",
                "{window} and {tier} the only placeholders",
                "The tier's own healthchecks.io check, in place of [alert]'s ping.",
            )
            .like("ping = \"https://hc-ping.com/KEY/backlog-{window}\""),
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/ranges.md says each key's range as the table does: for every key it names
    /// (`section.key`, `[[tier]] key`) whose range the table gives, the page's range
    /// holds the table's first clause, its numbers and units, backquotes aside.
    #[test]
    fn docs_ranges_say_the_ranges_of_the_table() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/ranges.md");
        let page = std::fs::read_to_string(dir).unwrap();
        let (mut checked, mut wrong) = (0, Vec::new());
        for row in page.lines().filter(|l| l.starts_with("| `")) {
            let cells: Vec<&str> = row.split(" | ").collect();
            let (names, range) = (cells[0].trim_start_matches("| "), cells[1].replace('`', ""));
            for name in names.split(", ") {
                let name = name.trim_matches('`');
                let path = match name.strip_prefix("[[tier]] ") {
                    Some(key) => format!("tier[].{key}"),
                    None => name.to_string(),
                };
                let Some(key) = lookup(&path).filter(|k| !k.range.is_empty()) else {
                    continue;
                };
                let first = key.range.split(';').next().unwrap().trim();
                checked += 1;
                if !range.contains(first) {
                    wrong.push(format!(
                        "{path}: the table says {first:?}, the page {range:?}"
                    ));
                }
            }
        }
        assert!(checked > 20, "only {checked} keys checked");
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }

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
                            if lookup(&path).is_none_or(|k| k.example.is_empty()) {
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

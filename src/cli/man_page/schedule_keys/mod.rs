//! Every key of the schedule file, for backlog.toml(5): what it takes, its default,
//! its range and what it does. Defaults and ranges come from the core's own constants
//! and defaults, those the file's checks use, so the page says what the checks hold;
//! a test (tests/cli/man.rs) asks the file's reader for the keys it accepts and finds
//! each on the page.

use std::time::Duration;

use backlog_core::config::{self, ranges};
use backlog_core::duration::{self, Range, compact};
use backlog_core::schedule::DEFAULT_LIMIT;

mod handling;
mod storage;

/// A section of the file, or its top level.
pub(super) struct Section {
    /// How it is written: `[handler]`; empty for the top level.
    pub header: &'static str,
    /// What it is for, and whether the file needs it.
    pub about: &'static str,
    pub keys: Vec<Key>,
}

/// One key.
pub(super) struct Key {
    pub name: &'static str,
    /// The kind of value, as a person writes it.
    pub takes: String,
    /// The default, or `required`.
    pub default: String,
    /// The values it takes beyond its kind; empty where the kind says it all.
    pub range: String,
    /// What it does.
    pub says: &'static str,
}

pub(super) fn key(
    name: &'static str,
    takes: &str,
    default: &str,
    range: &str,
    says: &'static str,
) -> Key {
    Key {
        name,
        takes: takes.into(),
        default: default.into(),
        range: range.into(),
        says,
    }
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
pub(super) fn sections() -> Vec<Section> {
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
            ),
            key(
                "database",
                "a section",
                REQUIRED,
                "",
                "Where the backlog lives: [database] below.",
            ),
            key(
                "table",
                "a section",
                REQUIRED,
                "",
                "The table and its columns: [table] below.",
            ),
            key(
                "handler",
                "a section",
                REQUIRED,
                "",
                "What runs for each record: [handler] below.",
            ),
            key(
                "retry",
                "a section",
                NONE,
                "",
                "A retry strategy per record: [retry] below.",
            ),
            key(
                "history",
                "a section",
                "as [history] below says",
                "",
                "Which attempts are kept: [history] below.",
            ),
            key(
                "alert",
                "a section",
                NONE,
                "",
                "Where failures are pushed to a person: [alert] below.",
            ),
            key(
                "check",
                "a section",
                NONE,
                "",
                "Thresholds status --check and /readyz judge the backlog by: [check] below.",
            ),
            key(
                "tier",
                "[[tier]] sections",
                REQUIRED,
                "one or more, sorted by window",
                "The tiers: [[tier]] below.",
            ),
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
            ),
            key(
                "every",
                DURATION,
                "required, unless cron is set",
                &format!("{}; not with cron", span(config::SPAN)),
                "The tier's cadence: a tick this long after the last.",
            ),
            key(
                "cron",
                "a crontab(5) expression in quotes",
                "required, unless every is set",
                "not with every",
                "The tier's cadence as cron states it, in timezone: cron = \"0 * * * *\".",
            ),
            key(
                "limit",
                "a number",
                "the top-level limit",
                &count(config::MAX_LIMIT),
                "The most records a tick of the tier hands over.",
            ),
            key(
                "jitter",
                DURATION,
                "0s",
                &span(ranges::JITTER),
                "The daemon waits a random delay up to this before each tick of the tier, so that hosts sharing a schedule do not all fire in the same second.",
            ),
            key(
                "spread",
                "a number",
                "1",
                &count(config::MAX_SPREAD),
                "Each tick takes one in this many records of the band, by a stable hash of the id (the same records on the same ticks), so that records that failed together are retried apart; 1 takes the whole band every tick.",
            ),
            key(
                "ping",
                "an http:// or https:// address in quotes",
                "[alert]'s ping",
                "{window} and {tier} the only placeholders",
                "The tier's own healthchecks.io check, in place of [alert]'s ping.",
            ),
        ],
    }
}

/// The longest duration a span takes, for the page's paragraph on durations.
pub(super) fn longest() -> String {
    compact(duration::LONGEST)
}

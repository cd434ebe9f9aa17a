//! The schedule file: the serde types that mirror the TOML, and the validated `Config`
//! the rest of the program trusts.
//!
//! Everything a user can get wrong in the file is caught here, at load time, with a
//! message that names the file, the key and the fix. Paths in the file are relative to
//! the file, not to the working directory, because cron starts jobs in `$HOME`. This
//! file reads the whole file and points its errors at a line; each section is resolved
//! in a file of its own under `config/`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::schedule::{BandMode, Schedule};

mod alert;
mod check;
mod database;
mod handler;
mod history;
mod http;
mod key_error;
pub mod keys;
mod location;
mod ping;
pub mod ranges;
mod retry;
pub mod server;
pub mod server_url;
mod table;
mod template;
mod tiers;
mod toml_error;
mod variables;

pub use alert::{AlertConfig, AlertUrl};
pub use check::CheckConfig;
pub use check::{MAX_COUNT as CHECK_MAX_COUNT, WAITING as CHECK_WAITING};
pub use database::{DEFAULT_BUSY_TIMEOUT, DEFAULT_CLAIM_LEASE};
pub use database::{DEFAULT_SCHEMA, lease_outlives_lock_waits};
pub use database::{DatabaseConfig, DatabaseUrl, url_from_environment};
use database::{RawDatabase, resolve_database};
pub use handler::DEFAULT_STOP_GRACE;
pub use handler::MAX_CONCURRENCY;
pub use handler::{AutoRate, HandlerConfig, HandlerMode};
pub use history::{HistoryConfig, HistoryRecord};
pub use history::{KEEP as HISTORY_KEEP, MAX_PER_RECORD};
pub use http::{Body as HttpBody, DoneWhen, HttpConfig, MAX_REDIRECTS, OVERLOAD_STATUSES, Secret};
pub use key_error::KeyError;
pub use location::find as find_schedule;
pub use location::is_stdin;
pub use ping::PingUrl;
pub use ranges::SPAN;
pub use ranges::{MAX_BATCH_SIZE, MAX_LIMIT, MAX_SPREAD};
use retry::RawRetry;
pub use retry::RetryConfig;
pub use table::GIVE_UP_AFTER_MAX;
pub use table::{Labels, TableConfig};
use table::{RawTable, resolve_table};
pub use template::Template;
use tiers::{RawTier, resolve_schedule};
pub use variables::used_in as variables_used_in;

/// The schedule file could not be read or is not valid.
#[derive(Debug, thiserror::Error)]
#[error("{}: {message}", file.display())]
#[non_exhaustive]
pub struct ConfigError {
    /// The file, with `:line:column` when the error points into it.
    pub file: PathBuf,
    /// What is wrong, with the key and the fix where there is one.
    pub message: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    bands: BandMode,
    limit: Option<u64>,
    timezone: Option<String>,
    database: RawDatabase,
    table: RawTable,
    handler: Option<handler::RawHandler>,
    retry: Option<RawRetry>,
    history: Option<history::RawHistory>,
    alert: Option<alert::RawAlert>,
    check: Option<check::RawCheck>,
    #[serde(default, rename = "tier")]
    tiers: Vec<RawTier>,
}

/// A validated schedule file.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Config {
    /// The file it was read from.
    pub path: PathBuf,
    /// The folder relative paths in the file are resolved against.
    pub dir: PathBuf,
    /// The `[database]` section.
    pub database: DatabaseConfig,
    /// The `[table]` section.
    pub table: TableConfig,
    /// The `[handler]` section.
    pub handler: HandlerConfig,
    /// The tiers, bands, limits and time zone.
    pub schedule: Schedule,
    /// The `[history]` section: which attempts `backlog_attempts` keeps.
    pub history: HistoryConfig,
    /// The `[alert]` section: where failures are pushed, how often at most.
    pub alert: AlertConfig,
    /// The `[check]` section: the thresholds of `status --check` and `/readyz`.
    pub check: CheckConfig,
    /// The keys of `[alert]` left out because a variable they name is not set.
    alert_unset: Vec<UnsetVariable>,
}

/// A key of `[alert]` left out of the file's `Config` because its value names an
/// environment variable that is not set: a missing token silences that channel (loudly,
/// on every tick and in `status --check`), never the work.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct UnsetVariable {
    /// Where its value is: `backlog.toml:44:11`.
    pub at: PathBuf,
    /// The key left out: `alert.ping`.
    pub key: String,
    /// The variable: `HC_UUID`.
    pub name: String,
    /// What is wrong and the fix: `alert.ping: ${HC_UUID} names an environment variable
    /// that is not set; set HC_UUID, or write $${HC_UUID} for the text itself`.
    pub message: String,
}

impl UnsetVariable {
    /// The message, and what becomes of the key meanwhile.
    fn said(&self) -> String {
        format!(
            "{}; {} is left out until it is set where the ticks run",
            self.message, self.key
        )
    }
}

/// `backlog.toml:44:11: alert.ping: ${HC_UUID} names …; alert.ping is left out …`.
impl std::fmt::Display for UnsetVariable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.at.display(), self.said())
    }
}

impl Config {
    /// Reads and validates a schedule file (`-`: standard input, read once).
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = location::read(path)?;
        Config::parse(&text, path)
    }

    /// As [`Config::load`], for a program that brings its own handler (a closure, a
    /// [`Handler`](crate::Handler) of its own): the file's `[handler]` may be left out,
    /// or name no `command` or `url`; its other keys (concurrency, rate, timeout, the
    /// breaker) apply to the program's handler.
    pub fn load_for_program(path: &Path) -> Result<Config, ConfigError> {
        let text = location::read(path)?;
        Config::parse_as(&text, path, true)
    }

    /// Validates the text of a schedule file read from `path`.
    pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
        Config::parse_as(text, path, false)
    }

    /// `parse`; `program`: as `load_for_program`.
    fn parse_as(text: &str, path: &Path, program: bool) -> Result<Config, ConfigError> {
        let shown = if is_stdin(path) {
            Path::new("<stdin>")
        } else {
            path
        };
        let at = |span: Option<std::ops::Range<usize>>, message: String| {
            let (line, col) = span.map(|s| line_col(text, s.start)).unwrap_or((1, 1));
            let mut file = shown.as_os_str().to_owned();
            file.push(format!(":{line}:{col}"));
            ConfigError {
                file: file.into(),
                message,
            }
        };
        let mut document = toml::de::DeTable::parse(text).map_err(|e| {
            let (span, message) = toml_error::describe_syntax(&e, text);
            at(span, message)
        })?;
        let alert_unset = expand_file(document.get_mut())
            .map_err(|(span, message)| at(Some(span), message))?
            .into_iter()
            .map(|unset| UnsetVariable {
                at: at(Some(unset.span), String::new()).file,
                key: unset.key,
                name: unset.name,
                message: unset.message,
            })
            .collect();
        let document = toml::Deserializer::from(document);
        let raw: RawFile = serde_path_to_error::deserialize(document).map_err(|e| {
            let (span, message) = toml_error::describe(e, text);
            at(span, message)
        })?;
        let dir = dir_of(path);
        // A value that cannot be taken points at its key's line, or names the file.
        let fail = |e: KeyError| match e.span_in(text) {
            Some(span) => at(Some(span), e.message),
            None => ConfigError {
                file: shown.to_path_buf(),
                message: e.message,
            },
        };
        // In the file's order, so that the first mistake is the one said.
        let database = resolve_database(raw.database, &dir).map_err(fail)?;
        let mut table = resolve_table(raw.table, raw.retry).map_err(fail)?;
        let raw_handler = match raw.handler {
            Some(raw) => raw,
            None if program => handler::RawHandler::default(),
            None => return Err(at(None, toml_error::missing_section("handler"))),
        };
        let handler = handler::resolve(raw_handler, &dir, program).map_err(fail)?;
        if let Some(key) = &handler.rate_key {
            table.other_columns.push(("handler.rate_key", key.clone()));
        }
        if let Some(http) = &handler.http {
            for column in http.url.columns() {
                table
                    .other_columns
                    .push(("handler.url", column.to_string()));
            }
            if let HttpBody::Template(body) = &http.body {
                for column in body.columns() {
                    table
                        .other_columns
                        .push(("handler.body", column.to_string()));
                }
            }
        }
        let history = history::resolve(raw.history).map_err(fail)?;
        let mut alert = alert::resolve(raw.alert).map_err(fail)?;
        let check = check::resolve(raw.check).map_err(fail)?;
        let (schedule, tier_pings) =
            resolve_schedule(raw.bands, raw.limit, raw.timezone, raw.tiers).map_err(fail)?;
        alert.tier_pings = tier_pings;
        let config = Config {
            path: path.to_path_buf(),
            database,
            table,
            handler,
            history,
            alert,
            check,
            schedule,
            dir,
            alert_unset,
        };
        if config.check.watches_waiting() {
            let key = match config.check.warn_waiting {
                Some(_) => "check.warn_waiting",
                None => "check.critical_waiting",
            };
            config.untried_or_why(key)?;
        }
        Ok(config)
    }

    /// The pending statuses a record has before its first try: those no try writes
    /// (neither `table.error` nor a status of `handler.exit_codes`). A tried record
    /// is marked `table.success`, `table.error` or a mapped status, so a record still
    /// in one of these was never tried to its end: the user's table keeps no other
    /// trace, and the attempts may be off (`[history]`) or pruned.
    pub fn untried_statuses(&self) -> Vec<String> {
        let written: Vec<&String> = std::iter::once(&self.table.error)
            .chain(self.handler.exit_codes.values())
            .collect();
        self.table
            .pending
            .iter()
            .filter(|s| !written.contains(s))
            .cloned()
            .collect()
    }

    /// [`untried_statuses`](Self::untried_statuses), or why a waiting threshold
    /// (`what`: the key or flag that set it) cannot be judged with none: an error of
    /// the file, whose `table.pending` is what to change.
    pub fn untried_or_why(&self, what: &str) -> Result<Vec<String>, ConfigError> {
        let untried = self.untried_statuses();
        if untried.is_empty() {
            let shown = if is_stdin(&self.path) {
                Path::new("<stdin>")
            } else {
                &self.path
            };
            return Err(ConfigError {
                file: shown.to_path_buf(),
                message: format!(
                    "{what}: no status of table.pending ({}) is one a record has before its first try: each is table.error or a status of handler.exit_codes; list the status new records get in table.pending, like pending = [\"NEW\", \"ERROR\"]",
                    self.table.pending.join(", ")
                ),
            });
        }
        Ok(untried)
    }

    /// Whether every key of the file's `[alert]` could be read: the first one left out
    /// because a variable it names is not set, as an error (`doctor` fails on it; a
    /// tick warns and runs).
    pub fn check_alert(&self) -> Result<(), ConfigError> {
        match self.alert_unset.first() {
            None => Ok(()),
            Some(unset) => Err(ConfigError {
                file: unset.at.clone(),
                message: unset.said(),
            }),
        }
    }

    /// The keys of `[alert]` left out because a variable they name is not set, in the
    /// file's order.
    pub fn alert_unset(&self) -> &[UnsetVariable] {
        &self.alert_unset
    }

    /// The database, the table and the tiers' windows of a schedule file that does
    /// not load as a whole (a bad edit elsewhere in it), if those parts do: where a tick
    /// that cannot start records why, so `status` shows the cause rather than a tier
    /// gone quiet.
    pub fn database_of(path: &Path) -> Option<(DatabaseConfig, TableConfig, Vec<Duration>)> {
        let mut document = sections_of(path)?;
        let database: RawDatabase = document.remove("database")?.try_into().ok()?;
        let table: RawTable = document.remove("table")?.try_into().ok()?;
        let windows = match document.remove("tier") {
            Some(toml::Value::Array(tiers)) => tiers
                .iter()
                .filter_map(|t| SPAN.parse(t.get("window")?.as_str()?).ok())
                .collect(),
            _ => Vec::new(),
        };
        let dir = dir_of(path);
        Some((
            resolve_database(database, &dir).ok()?,
            resolve_table(table, None).ok()?,
            windows,
        ))
    }

    /// The `[alert]` section of a schedule file that does not load as a whole, if it
    /// does: a bad edit elsewhere still reaches a person.
    pub fn alert_of(path: &Path) -> Option<AlertConfig> {
        let raw: alert::RawAlert = sections_of(path)?.remove("alert")?.try_into().ok()?;
        alert::resolve(Some(raw)).ok()
    }
}

/// The sections of a schedule file as TOML, `${VAR}` expanded, whatever they hold.
fn sections_of(path: &Path) -> Option<toml::Table> {
    if is_stdin(path) {
        return None; // read once, by the load that failed
    }
    let text = std::fs::read_to_string(path).ok()?;
    let mut document = toml::de::DeTable::parse(&text).ok()?;
    expand_file(document.get_mut()).ok()?;
    toml::Table::deserialize(toml::Deserializer::from(document)).ok()
}

/// Expands the file's `${VAR}`: every string's but `[alert]`'s, where one not set is an
/// error, then each key of `[alert]` on its own, where one not set takes that key out
/// and is returned: a missing alert token never keeps the work from running.
/// `database.url` is left as written when `BACKLOG_DATABASE_URL` replaces it: the
/// variable a file names for the URL need not be set then.
fn expand_file(
    document: &mut toml::de::DeTable<'_>,
) -> Result<Vec<variables::UnsetEntry>, variables::Unexpanded> {
    let replaced = database::url_from_environment().is_some();
    let in_alert = |path: &str| path == "alert" || path.starts_with("alert.");
    variables::expand(document, &environment, &|path| {
        in_alert(path) || (replaced && path == "database.url")
    })?;
    variables::expand_each(document, "alert", &environment)
}

/// A variable of the environment, for `${VAR}` in the file (one that is not UTF-8 is
/// as good as unset: it could not go into the file's text either).
fn environment(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// The folder relative paths of the file at `path` resolve against: absolute, and
/// through any symlink to the real file, so the database and handler resolve the same
/// wherever the tool runs and however the file is named.
pub fn dir_of(path: &Path) -> PathBuf {
    std::fs::canonicalize(path)
        .or_else(|_| std::path::absolute(path))
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf))
        .unwrap_or_else(|| PathBuf::from("."))
}

/// `path` as a file in `dir` names it (absolute paths stay as they are): joined, with
/// no `.` left in it and a `..` taken off `dir`'s end, as a person writes the path.
/// Lexical only, so a symlink in `path` is kept, not resolved: `./deliver.sh` in
/// `/srv/shop` is `/srv/shop/deliver.sh`, what messages show and what is run.
pub fn beside(dir: &Path, path: impl AsRef<Path>) -> PathBuf {
    use std::path::Component;
    let mut joined = PathBuf::new();
    // `dir`'s own components may be taken off by a `..`, `path`'s may not: a `..`
    // after a link of the user's goes where the link goes.
    let mut removable = 0;
    for (i, part) in dir.components().enumerate() {
        if !matches!(part, Component::CurDir) || i == 0 {
            joined.push(part);
            removable += usize::from(matches!(part, Component::Normal(_)));
        }
    }
    let path = path.as_ref();
    if path.is_absolute() {
        (joined, removable) = (PathBuf::new(), 0);
    }
    let mut from_path = false;
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir if removable > 0 && !from_path => {
                joined.pop();
                removable -= 1;
            }
            // `/..` is `/`.
            Component::ParentDir if !from_path && joined == Path::new("/") => {}
            other => {
                from_path |= matches!(other, Component::Normal(_) | Component::ParentDir);
                joined.push(other);
            }
        }
    }
    joined
}

fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
    (line, col)
}

#[cfg(test)]
mod tests;

//! The schedule file: the serde types that mirror the TOML, and the validated `Config`
//! the rest of the program trusts.
//!
//! Everything a user can get wrong in the file is caught here, at load time, with a
//! message that names the file, the key and the fix. Paths in the file are relative to
//! the file, not to the working directory, because cron starts jobs in `$HOME`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::duration::{self, Range};
use crate::schedule::{BandMode, Cadence, Schedule, Tier, parse_cron};
use crate::timestamp::FormatSetting;

mod database;
mod handler;
mod history;
mod keys;
mod mysql_url;
mod postgres_url;
mod toml_error;

use database::resolve_database;
pub use database::{DEFAULT_SCHEMA, DatabaseConfig, DatabaseUrl};
pub use handler::{HandlerConfig, HandlerMode, MAX_CONCURRENCY};
pub use history::{HistoryConfig, HistoryRecord};
pub use mysql_url::{MysqlTls, MysqlUrl};
pub use postgres_url::{PostgresUrl, Verify};

/// The schedule file could not be read or is not valid.
#[derive(Debug, thiserror::Error)]
#[error("{}: {message}", file.display())]
pub struct ConfigError {
    /// The file, with `:line:column` when the error points into it.
    pub file: PathBuf,
    /// What is wrong, with the key and the fix where there is one.
    pub message: String,
}

/// The per-tick limit when neither the tier nor the file sets one.
pub const DEFAULT_LIMIT: u64 = 10_000;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    bands: BandMode,
    limit: Option<u64>,
    timezone: Option<String>,
    database: RawDatabase,
    table: RawTable,
    handler: handler::RawHandler,
    retry: Option<RawRetry>,
    history: Option<history::RawHistory>,
    #[serde(default, rename = "tier")]
    tiers: Vec<RawTier>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDatabase {
    url: String,
    busy_timeout: Option<String>,
    claim_lease: Option<String>,
    password_file: Option<String>,
    schema: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTable {
    name: String,
    id: String,
    status: String,
    inserted_at: String,
    #[serde(default)]
    inserted_at_format: FormatSetting,
    inserted_at_timezone: Option<String>,
    pending: Option<Vec<String>>,
    success: Option<String>,
    error: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRetry {
    strategy: String,
    #[serde(default)]
    params: BTreeMap<String, toml::Value>,
    count: String,
    since: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTier {
    window: String,
    every: Option<String>,
    cron: Option<String>,
    limit: Option<u64>,
    jitter: Option<String>,
    spread: Option<u32>,
}

/// The `[table]` section: names and status values of the user's table.
#[derive(Debug, Clone)]
pub struct TableConfig {
    /// The user's table, as `table.name` writes it (PostgreSQL: optionally `schema.table`).
    pub name: String,
    /// The column that identifies a record (`table.id`): pages and marks find records
    /// by it.
    pub id: String,
    /// The column holding each record's status (`table.status`): the only column of the
    /// user's table the tool writes, unless `[retry]` names two more.
    pub status: String,
    /// The column holding when the record was inserted (`table.inserted_at`): a
    /// record's age, and so its band, is measured from it.
    pub inserted_at: String,
    /// How the inserted-at values are written; `auto` detects it from the column.
    pub inserted_at_format: FormatSetting,
    /// The zone a `timestamp` (without time zone) column is written in; UTC if unset.
    pub inserted_at_timezone: Option<chrono_tz::Tz>,
    /// The statuses a tick takes records in (`table.pending`): by default `NEW` and
    /// `ERROR`, so a failed record is tried again as the schedule comes round.
    pub pending: Vec<String>,
    /// The status a record gets when its handler succeeds (`table.success`).
    pub success: String,
    /// The status a record gets when its handler fails, times out or crashes
    /// (`table.error`), unless `handler.exit_codes` maps its exit code to another.
    pub error: String,
    /// The `[retry]` section, if the file has one.
    pub retry: Option<RetryConfig>,
}

impl TableConfig {
    /// A table with the given names and the default statuses (`NEW`/`ERROR` pending,
    /// `SUCCESS`, `ERROR`) and detected timestamp format.
    pub fn new(name: &str, id: &str, status: &str, inserted_at: &str) -> Self {
        TableConfig {
            name: name.into(),
            id: id.into(),
            status: status.into(),
            inserted_at: inserted_at.into(),
            inserted_at_format: FormatSetting::Auto,
            inserted_at_timezone: None,
            pending: vec!["NEW".into(), "ERROR".into()],
            success: "SUCCESS".into(),
            error: "ERROR".into(),
            retry: None,
        }
    }

    /// Whether a record with this status is one a tick takes (it is in `pending`).
    pub fn is_pending(&self, status: &str) -> bool {
        self.pending.iter().any(|p| p == status)
    }
}

/// The optional `[retry]` section: a per-record strategy for tables that can have two
/// more columns, a count of attempts and the time of the last one. Without it the
/// schedule needs no column beyond id, status and inserted-at.
#[derive(Debug, Clone)]
pub struct RetryConfig {
    /// A strategy name of `backlog backoff`.
    pub strategy: String,
    /// Its parameters as `name=value`.
    pub params: Vec<String>,
    /// The column counting the attempts (NULL counts as 0).
    pub count: String,
    /// The column holding the time of the last attempt.
    pub since: String,
}

/// A validated schedule file.
#[derive(Debug, Clone)]
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
}

impl Config {
    /// Reads and validates a schedule file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            file: path.to_path_buf(),
            message: if e.kind() == std::io::ErrorKind::NotFound {
                "no such schedule file; pass --schedule FILE, or run `backlog init` to write one"
                    .to_string()
            } else {
                format!("cannot read the schedule file: {e}")
            },
        })?;
        Config::parse(&text, path)
    }

    /// Validates the text of a schedule file read from `path`.
    pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
        let at = |span: Option<std::ops::Range<usize>>, message: String| {
            let (line, col) = span.map(|s| line_col(text, s.start)).unwrap_or((1, 1));
            let mut file = path.as_os_str().to_owned();
            file.push(format!(":{line}:{col}"));
            ConfigError {
                file: file.into(),
                message,
            }
        };
        let document = toml::Deserializer::parse(text).map_err(|e| {
            let (span, message) = toml_error::describe_syntax(&e, text);
            at(span, message)
        })?;
        let raw: RawFile = serde_path_to_error::deserialize(document).map_err(|e| {
            let (span, message) = toml_error::describe(e, text);
            at(span, message)
        })?;
        let dir = dir_of(path);
        let fail = |message: String| ConfigError {
            file: path.to_path_buf(),
            message,
        };
        Ok(Config {
            path: path.to_path_buf(),
            database: resolve_database(raw.database, &dir).map_err(fail)?,
            table: resolve_table(raw.table, raw.retry).map_err(fail)?,
            handler: handler::resolve(raw.handler).map_err(fail)?,
            history: history::resolve(raw.history).map_err(fail)?,
            schedule: resolve_schedule(raw.bands, raw.limit, raw.timezone, raw.tiers)
                .map_err(fail)?,
            dir,
        })
    }

    /// The database, the table and the tiers' windows of a schedule file that does
    /// not load as a whole (a bad edit elsewhere in it), if those parts do: where a tick
    /// that cannot start records why, so `status` shows the cause rather than a tier
    /// gone quiet.
    pub fn database_of(path: &Path) -> Option<(DatabaseConfig, TableConfig, Vec<Duration>)> {
        let text = std::fs::read_to_string(path).ok()?;
        let mut document: toml::Table = toml::from_str(&text).ok()?;
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
}

/// The folder relative paths of the file at `path` resolve against: absolute, and
/// through any symlink to the real file, so the database and handler resolve the same
/// wherever the tool runs and however the file is named.
fn dir_of(path: &Path) -> PathBuf {
    std::fs::canonicalize(path)
        .or_else(|_| std::path::absolute(path))
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf))
        .unwrap_or_else(|| PathBuf::from("."))
}

fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
    (line, col)
}

/// Windows and cadences: longer than zero, up to 100 years.
pub const SPAN: Range = Range::positive(duration::LONGEST);
/// `database.busy_timeout`: a write that waits an hour for a lock waits for nothing.
const BUSY_TIMEOUT: Range = Range::positive(Duration::from_secs(3_600));
/// `database.claim_lease`: heartbeats come every quarter lease, so a second is the
/// least that leaves them time; past a day, a killed tick's records wait too long.
const CLAIM_LEASE: Range = Range {
    min: Duration::from_secs(1),
    max: Duration::from_secs(86_400),
};
/// `handler.timeout`: one record's handler, up to a day.
const HANDLER_TIMEOUT: Range = Range::positive(Duration::from_secs(86_400));
/// `jitter`: none, up to 100 years (a tier's ticks are delayed by up to that).
const JITTER: Range = Range::up_to(duration::LONGEST);

/// The most records one tick selects (`limit`, a tier's `limit`, `--limit`).
pub const MAX_LIMIT: u64 = 1_000_000_000;
/// The most records a batch handler gets at once: they are held in memory.
pub const MAX_BATCH_SIZE: usize = 10_000;
/// The most ticks a spread tier divides its band over.
pub const MAX_SPREAD: u32 = 1_000;

fn span(key: &str, text: &str, range: Range) -> Result<Duration, String> {
    range.parse(text).map_err(|e| format!("{key}: {e}"))
}

/// A record count of the file: `limit` or a tier's `limit`.
fn check_limit(key: &str, n: Option<u64>) -> Result<Option<u64>, String> {
    match n {
        Some(n) if !(1..=MAX_LIMIT).contains(&n) => Err(format!(
            "{key}: {n} is out of range; use 1 to {MAX_LIMIT} records a tick"
        )),
        n => Ok(n),
    }
}

fn resolve_retry(raw: RawRetry) -> Result<RetryConfig, String> {
    let params: Vec<String> = raw
        .params
        .iter()
        .map(|(k, v)| match v {
            toml::Value::String(s) => format!("{k}={s}"),
            other => format!("{k}={other}"),
        })
        .collect();
    crate::backoff::catalog::build(&raw.strategy, &params, 1.0)
        .map_err(|e| format!("retry: {e}"))?;
    for (key, value) in [("count", &raw.count), ("since", &raw.since)] {
        if value.trim().is_empty() {
            return Err(format!("retry.{key} is empty; give the column's name"));
        }
    }
    Ok(RetryConfig {
        strategy: raw.strategy,
        params,
        count: raw.count,
        since: raw.since,
    })
}

fn resolve_table(raw: RawTable, retry: Option<RawRetry>) -> Result<TableConfig, String> {
    for (key, value) in [
        ("name", &raw.name),
        ("id", &raw.id),
        ("status", &raw.status),
        ("inserted_at", &raw.inserted_at),
    ] {
        if value.trim().is_empty() {
            return Err(format!(
                "table.{key} is empty; give the name as it is in the database"
            ));
        }
    }
    let mut table = TableConfig::new(&raw.name, &raw.id, &raw.status, &raw.inserted_at);
    table.inserted_at_format = raw.inserted_at_format;
    table.inserted_at_timezone = raw
        .inserted_at_timezone
        .map(|name| {
            name.parse().map_err(|_| {
                format!("table.inserted_at_timezone: {name:?} is not a time zone name; use an IANA name like \"Europe/Paris\" or \"UTC\"")
            })
        })
        .transpose()?;
    if let Some(pending) = raw.pending {
        if pending.is_empty() {
            return Err(
                "table.pending is empty; list the statuses to retry, like [\"NEW\", \"ERROR\"]"
                    .into(),
            );
        }
        table.pending = pending;
    }
    table.retry = retry.map(resolve_retry).transpose()?;
    table.success = raw.success.unwrap_or(table.success);
    table.error = raw.error.unwrap_or(table.error);
    if table.is_pending(&table.success) {
        return Err(format!(
            "table.success {:?} is also in table.pending; a record marked successful would be tried forever",
            table.success
        ));
    }
    Ok(table)
}

fn resolve_schedule(
    bands: BandMode,
    limit: Option<u64>,
    timezone: Option<String>,
    raw: Vec<RawTier>,
) -> Result<Schedule, String> {
    let timezone: chrono_tz::Tz = match timezone {
        None => chrono_tz::Tz::UTC,
        Some(name) => name.parse().map_err(|_| {
            format!("timezone: {name:?} is not a time zone name; use an IANA name like \"Europe/Paris\" or \"UTC\"")
        })?,
    };
    if raw.is_empty() {
        return Err("no [[tier]] sections; a schedule needs at least one tier, like schedules/progressive.toml".into());
    }
    let limit = check_limit("limit", limit)?;
    let mut tiers: Vec<Tier> = Vec::with_capacity(raw.len());
    for (i, t) in raw.into_iter().enumerate() {
        let n = i + 1;
        let window = span(&format!("tier {n}: window"), &t.window, SPAN)?;
        if let Some(prev) = tiers.last() {
            if window == prev.window {
                return Err(format!(
                    "tier {n}: window {} repeats tier {}'s window (each tier needs a window of its own)",
                    duration::compact(window),
                    n - 1
                ));
            }
            if window < prev.window {
                return Err(format!(
                    "tier {n}: window {} is not larger than tier {}'s window {} (tiers must be sorted by window)",
                    duration::compact(window),
                    n - 1,
                    duration::compact(prev.window)
                ));
            }
        }
        let cadence = match (t.every, t.cron) {
            (Some(every), None) => Cadence::Every(span(&format!("tier {n}: every"), &every, SPAN)?),
            (None, Some(cron)) => Cadence::Cron(
                Box::new(parse_cron(&cron).map_err(|e| format!("tier {n}: cron: {e}"))?),
                cron,
                timezone,
            ),
            (Some(_), Some(_)) => {
                return Err(format!("tier {n}: both every and cron are set; keep one"));
            }
            (None, None) => {
                return Err(format!(
                    "tier {n}: no cadence; set every = \"1h\" or cron = \"0 * * * *\""
                ));
            }
        };
        let tier_limit = check_limit(&format!("tier {n}: limit"), t.limit)?;
        let jitter = match t.jitter {
            Some(j) => span(&format!("tier {n}: jitter"), &j, JITTER)?,
            None => Duration::ZERO,
        };
        if let Some(k) = t.spread.filter(|k| !(1..=MAX_SPREAD).contains(k)) {
            return Err(format!(
                "tier {n}: spread: {k} is out of range; use 1 (the whole band every tick) to {MAX_SPREAD}"
            ));
        }
        tiers.push(Tier {
            window,
            cadence,
            limit: tier_limit,
            jitter,
            spread: t.spread.unwrap_or(1),
        });
    }
    Ok(Schedule {
        tiers,
        bands,
        limit: limit.unwrap_or(DEFAULT_LIMIT),
        timezone,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
        Config::parse(text, Path::new("/etc/backlog.toml"))
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn a_good_file_resolves_paths_against_its_folder() {
        let c = Config::parse(GOOD, Path::new("/srv/app/backlog.toml")).unwrap();
        assert_eq!(
            c.database.url,
            DatabaseUrl::Sqlite("/srv/app/backlog.db".into())
        );
        assert_eq!(c.schedule.tiers.len(), 2);
        assert_eq!(c.table.pending, ["NEW", "ERROR"]);
        assert_eq!(c.handler.timeout, Duration::from_secs(30));
    }

    /// Each bad file, and the exact message it gets.
    #[test]
    fn bad_files_get_messages_that_name_key_and_fix() {
        let cases: &[(&str, &str, &str)] = &[
            (
                "window = \"7d\"\ncron",
                "window = \"7d\"\nwindw",
                "/etc/backlog.toml:20:1: unknown field `windw`, expected one of `window`, `every`, `cron`, `limit`, `jitter`, `spread`",
            ),
            (
                "window = \"7d\"",
                "window = \"7 dayz\"",
                "/etc/backlog.toml: tier 2: window: \"7 dayz\" is not a duration; write a number and a unit (s, m, h, d), like 30s, 5m, 1h, 7d or 96h",
            ),
            (
                "window = \"7d\"",
                "window = \"12h\"",
                "/etc/backlog.toml: tier 2: window 12h is not larger than tier 1's window 1d (tiers must be sorted by window)",
            ),
            (
                "window = \"7d\"",
                "window = \"24h\"",
                "/etc/backlog.toml: tier 2: window 1d repeats tier 1's window (each tier needs a window of its own)",
            ),
            (
                "cron = \"0 * * * *\"",
                "cron = \"*/5 * *\"",
                "/etc/backlog.toml: tier 2: cron: \"*/5 * *\" is not a crontab(5) expression (Invalid pattern: Pattern must have 5 fields when seconds are disallowed.); write five fields like \"*/5 * * * *\" or an alias like \"@hourly\"",
            ),
            (
                "cron = \"0 * * * *\"",
                "",
                "/etc/backlog.toml: tier 2: no cadence; set every = \"1h\" or cron = \"0 * * * *\"",
            ),
            (
                "cron = \"0 * * * *\"",
                "cron = \"0 * * * *\"\nevery = \"1h\"",
                "/etc/backlog.toml: tier 2: both every and cron are set; keep one",
            ),
            (
                "every = \"5m\"",
                "every = \"0s\"",
                "/etc/backlog.toml: tier 1: every: must be longer than 0s",
            ),
            (
                "command = [\"./handler.sh\"]",
                "command = []",
                "/etc/backlog.toml: handler.command is empty; give the program and its arguments, like [\"./handler.sh\"]",
            ),
            (
                "command = [\"./handler.sh\"]",
                "command = [\"./h\"]\nexit_codes = { 0 = \"DONE\" }",
                "/etc/backlog.toml: handler.exit_codes: \"0\" is not an exit code; use numbers from 1 to 255",
            ),
            (
                "status = \"STATUS\"",
                "status = \"STATUS\"\nsuccess = \"NEW\"",
                "/etc/backlog.toml: table.success \"NEW\" is also in table.pending; a record marked successful would be tried forever",
            ),
            (
                "url = \"backlog.db\"",
                "url = \"postgres://u:secret@db/x\"\npassword_file = \"pw\"",
                "/etc/backlog.toml: database.url holds a password and database.password_file is set too; keep one (the file is the safer)",
            ),
            (
                "url = \"backlog.db\"",
                "url = \"postgres://u:secret@db/x?sslmode=sometimes\"",
                "/etc/backlog.toml: database.url is not a valid PostgreSQL URL (invalid connection string: invalid value for option `sslmode`); write it like \"postgres://user@host:5432/dbname?sslmode=require\"",
            ),
            (
                "url = \"backlog.db\"",
                "url = \"backlog.db\"\nschema = \"jobs\"",
                "/etc/backlog.toml: database.schema applies to PostgreSQL and MySQL only; remove it, or give a postgres:// or mysql:// url",
            ),
            (
                "inserted_at = \"DATE_INSERTED\"",
                "inserted_at = \"DATE_INSERTED\"\ninserted_at_format = \"iso\"",
                "/etc/backlog.toml:10:22: table.inserted_at_format: found the string \"iso\" where one of \"auto\", \"sqlite\", \"rfc3339\", \"unix\", \"unix_ms\" or \"native\" is expected; write it like inserted_at_format = \"auto\"",
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
        for (from, to, expected) in cases {
            assert!(GOOD.contains(from), "{from}");
            let text = GOOD.replacen(from, to, 1);
            assert_eq!(error_of(&text), *expected, "replacing {from:?} with {to:?}");
        }
    }

    /// A value of the wrong type is named by its key, with what the key takes and a
    /// line that sets it.
    #[test]
    fn a_value_of_the_wrong_type_gets_its_key_and_an_example() {
        let without_handler = GOOD.replace("[handler]\ncommand = [\"./handler.sh\"]\n", "");
        let cases = [
            (
                format!("handler = 3\n{without_handler}"),
                "/etc/backlog.toml:1:11: handler: found the number 3 where a section is expected; write it like [handler] on a line of its own, with command = [\"./handler.sh\"] below",
            ),
            (
                format!(
                    "tier = [\"1d\"]\n{}",
                    &GOOD[..GOOD.find("[[tier]]").unwrap()]
                ),
                "/etc/backlog.toml:1:9: tier 1: found the string \"1d\" where a [[tier]] section is expected; write it like [[tier]] on a line of its own, with window = \"1d\" and every = \"5m\" below",
            ),
            (
                GOOD.replace(
                    "command = [\"./handler.sh\"]",
                    "command = [\"./handler.sh\", 2]",
                ),
                "/etc/backlog.toml:12:28: handler.command: found the number 2 (item 2) where a list of strings (the program and its arguments) is expected; write it like command = [\"./handler.sh\"]",
            ),
            (
                GOOD.replace(
                    "command = [\"./handler.sh\"]",
                    "command = [\"./handler.sh\"]\nexit_codes = { 75 = 1 }",
                ),
                "/etc/backlog.toml:13:21: handler.exit_codes.75: found the number 1 where a status in quotes is expected; write it like 75 = \"1\"",
            ),
            (
                GOOD.replace("every = \"5m\"", "every = 5"),
                "/etc/backlog.toml:16:9: tier 1: every: found the number 5 where a duration in quotes is expected; write it like every = \"5m\"",
            ),
            (
                GOOD.replace("name = \"BACKLOG\"", "name = [\"BACKLOG\"]"),
                "/etc/backlog.toml:6:8: table.name: found the list [\"BACKLOG\"] where a column name in quotes is expected; write it like name = \"BACKLOG\"",
            ),
        ];
        for (text, expected) in cases {
            assert_eq!(error_of(&text), expected, "{text}");
        }
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
            "/etc/backlog.toml: database.claim_lease 1m is shorter than twice database.busy_timeout 45s: a tick waiting that long for a lock would lose its hold on its records; make claim_lease at least 90s, or busy_timeout at most 30s"
        );
        assert_eq!(
            error_of(&with(
                "backlog.db",
                "busy_timeout = \"2s\"\nclaim_lease = \"3s\""
            )),
            "/etc/backlog.toml: database.claim_lease 3s is shorter than twice database.busy_timeout 2s: a tick waiting that long for a lock would lose its hold on its records; make claim_lease at least 4s, or busy_timeout at most 1500ms"
        );
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

    /// `[tier]` for `[[tier]]` is one bracket short: the message says so.
    #[test]
    fn a_single_bracket_tier_is_told_to_double_them() {
        let head = &GOOD[..GOOD.find("[[tier]]").unwrap()];
        let cases = [
            (
                format!("{head}[tier]\nwindow = \"1d\"\nevery = \"5m\"\n"),
                "/etc/backlog.toml:14:1: tier: found a section ([tier]) in single brackets; use [[tier]] (double brackets), one per tier: write it like [[tier]] on a line of its own, with window = \"1d\" and every = \"5m\" below",
            ),
            (
                format!("tier = {{ window = \"1d\", every = \"5m\" }}\n{head}"),
                "/etc/backlog.toml:1:8: tier: found the table { window = \"1d\", every = \"5m\" }; use [[tier]] (double brackets), one per tier: write it like [[tier]] on a line of its own, with window = \"1d\" and every = \"5m\" below",
            ),
            (
                format!("tier = \"1d\"\n{head}"),
                "/etc/backlog.toml:1:8: tier: found the string \"1d\" where a list of [[tier]] sections is expected; write it like [[tier]] on a line of its own, with window = \"1d\" and every = \"5m\" below",
            ),
        ];
        for (text, expected) in cases {
            assert_eq!(error_of(&text), expected, "{text}");
        }
    }

    #[test]
    fn a_time_zone_is_an_iana_name() {
        let text = format!("timezone = \"Europe/Paris\"\n{GOOD}");
        let c = Config::parse(&text, Path::new("/etc/backlog.toml")).unwrap();
        assert_eq!(
            c.schedule.tiers[1].cadence.to_string(),
            "cron \"0 * * * *\" (Europe/Paris)"
        );
        assert_eq!(
            error_of(&format!("timezone = \"Europe/Pari\"\n{GOOD}")),
            "/etc/backlog.toml: timezone: \"Europe/Pari\" is not a time zone name; use an IANA name like \"Europe/Paris\" or \"UTC\""
        );
    }

    /// Every schedule the repository ships is valid.
    #[test]
    fn the_shipped_schedules_load() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("schedules");
        let mut seen = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if let Err(e) = Config::load(&path) {
                panic!("{e}");
            }
            seen += 1;
        }
        assert!(seen >= 4, "{seen} schedules");
    }

    #[test]
    fn a_file_without_tiers_is_an_error() {
        let text = &GOOD[..GOOD.find("[[tier]]").unwrap()];
        assert_eq!(
            error_of(text),
            "/etc/backlog.toml: no [[tier]] sections; a schedule needs at least one tier, like schedules/progressive.toml"
        );
    }
}

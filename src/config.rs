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
mod database;
mod handler;
mod history;
mod keys;
mod location;
#[cfg(feature = "mysql")]
mod mysql_url;
#[cfg(feature = "postgres")]
mod postgres_url;
mod ranges;
mod retry;
#[cfg(any(feature = "postgres", feature = "mysql"))]
mod server_url;
mod table;
mod tiers;
mod toml_error;
mod variables;

pub use alert::{AlertConfig, AlertUrl};
pub use database::{DEFAULT_SCHEMA, DatabaseConfig, DatabaseUrl};
use database::{RawDatabase, resolve_database};
pub use handler::{HandlerConfig, HandlerMode, MAX_CONCURRENCY};
pub use history::{HistoryConfig, HistoryRecord};
pub use location::{STDIN, find as find_schedule, is_stdin, search_path};
#[cfg(feature = "mysql")]
pub use mysql_url::{MysqlTls, MysqlUrl};
#[cfg(feature = "postgres")]
pub use postgres_url::{PostgresUrl, Verify};
pub use ranges::{MAX_BATCH_SIZE, MAX_LIMIT, MAX_SPREAD, SPAN};
use retry::RawRetry;
pub use retry::RetryConfig;
pub use table::{Labels, TableConfig};
use table::{RawTable, resolve_table};
pub use tiers::DEFAULT_LIMIT;
use tiers::{RawTier, resolve_schedule};
pub use variables::used_in as variables_used_in;

/// The schedule file could not be read or is not valid.
#[derive(Debug, thiserror::Error)]
#[error("{}: {message}", file.display())]
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
    handler: handler::RawHandler,
    retry: Option<RawRetry>,
    history: Option<history::RawHistory>,
    alert: Option<alert::RawAlert>,
    #[serde(default, rename = "tier")]
    tiers: Vec<RawTier>,
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
    /// The `[alert]` section: where failures are pushed, how often at most.
    pub alert: AlertConfig,
}

impl Config {
    /// Reads and validates a schedule file (`-`: standard input, read once).
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = location::read(path)?;
        Config::parse(&text, path)
    }

    /// Validates the text of a schedule file read from `path`.
    pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
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
        variables::expand(document.get_mut(), &environment)
            .map_err(|(span, message)| at(Some(span), message))?;
        let document = toml::Deserializer::from(document);
        let raw: RawFile = serde_path_to_error::deserialize(document).map_err(|e| {
            let (span, message) = toml_error::describe(e, text);
            at(span, message)
        })?;
        let dir = dir_of(path);
        let fail = |message: String| ConfigError {
            file: shown.to_path_buf(),
            message,
        };
        Ok(Config {
            path: path.to_path_buf(),
            database: resolve_database(raw.database, &dir).map_err(fail)?,
            table: resolve_table(raw.table, raw.retry).map_err(fail)?,
            handler: handler::resolve(raw.handler).map_err(fail)?,
            history: history::resolve(raw.history).map_err(fail)?,
            alert: alert::resolve(raw.alert).map_err(fail)?,
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
    variables::expand(document.get_mut(), &environment).ok()?;
    toml::Table::deserialize(toml::Deserializer::from(document)).ok()
}

/// A variable of the environment, for `${VAR}` in the file (one that is not UTF-8 is
/// as good as unset: it could not go into the file's text either).
fn environment(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// The folder relative paths of the file at `path` resolve against: absolute, and
/// through any symlink to the real file, so the database and handler resolve the same
/// wherever the tool runs and however the file is named.
pub(crate) fn dir_of(path: &Path) -> PathBuf {
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

    #[cfg(feature = "sqlite")]
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
    // Server URLs among its cases: run where every database is built in.
    #[cfg(all(feature = "postgres", feature = "mysql"))]
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
    // Server URLs among its cases: run where every database is built in.
    #[cfg(all(feature = "postgres", feature = "mysql"))]
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
    // Server URLs among its cases: run where every database is built in.
    #[cfg(all(feature = "postgres", feature = "mysql"))]
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

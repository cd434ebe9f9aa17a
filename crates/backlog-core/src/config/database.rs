//! The `[database]` section: where the backlog lives. A SQLite path resolved against
//! the schedule file's folder, or a server's URL read by its database's driver (see
//! `store::driver`) with its password settled; a URL of another kind is refused by its scheme alone, since the
//! rest may hold a password. Nothing here ever prints a password: what is shown is
//! the URLs' `shown`.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use super::KeyError;
use super::ranges::{BUSY_TIMEOUT, CLAIM_LEASE, span};
use super::server::{self, Server, ServerSection, ServerUrl};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawDatabase {
    url: Option<String>,
    busy_timeout: Option<String>,
    claim_lease: Option<String>,
    password_file: Option<String>,
    schema: Option<String>,
}

/// Where the backlog lives.
#[non_exhaustive]
pub enum DatabaseUrl {
    /// A SQLite file, already resolved against the schedule file's folder.
    Sqlite(PathBuf),
    /// A server (PostgreSQL, MySQL, MariaDB), as the driver of its URL's scheme read it
    /// (see `store::driver`), its password settled.
    Server(Box<dyn ServerUrl>),
}

impl DatabaseUrl {
    /// The scheme whose driver opens this database (`sqlite` for a file).
    pub fn scheme(&self) -> &'static str {
        match self {
            DatabaseUrl::Sqlite(_) => "sqlite",
            DatabaseUrl::Server(url) => url.scheme(),
        }
    }
}

impl Clone for DatabaseUrl {
    fn clone(&self) -> Self {
        match self {
            DatabaseUrl::Sqlite(path) => DatabaseUrl::Sqlite(path.clone()),
            DatabaseUrl::Server(url) => DatabaseUrl::Server(url.box_clone()),
        }
    }
}

/// Two URLs are the same database when they reach the same place as the same user:
/// the same file, or the same URL as shown (without its password).
impl PartialEq for DatabaseUrl {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (DatabaseUrl::Sqlite(a), DatabaseUrl::Sqlite(b)) => a == b,
            (DatabaseUrl::Server(a), DatabaseUrl::Server(b)) => {
                a.scheme() == b.scheme() && a.shown() == b.shown()
            }
            _ => false,
        }
    }
}

impl Eq for DatabaseUrl {}

impl DatabaseUrl {
    /// Whether runners on several hosts may share this database (a server), so that
    /// time is the server's clock rather than each host's (SQLite's runners are all
    /// on the host that has the file).
    pub fn is_server(&self) -> bool {
        match self {
            DatabaseUrl::Sqlite(_) => false,
            DatabaseUrl::Server(_) => true,
        }
    }
}

impl fmt::Display for DatabaseUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DatabaseUrl::Sqlite(p) => write!(f, "sqlite:{}", p.display()),
            DatabaseUrl::Server(url) => f.write_str(url.shown()),
        }
    }
}

impl fmt::Debug for DatabaseUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// The `[database]` section, resolved.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct DatabaseConfig {
    /// The SQLite file or PostgreSQL server holding the table and the tool's tables.
    pub url: DatabaseUrl,
    /// How long a write waits for another writer's lock before giving up: SQLite's
    /// write lock, MySQL's row locks (`innodb_lock_wait_timeout`, whole seconds).
    pub busy_timeout: Duration,
    /// How long a tick's claim on a record outlives the tick's last heartbeat: the
    /// longest a killed tick's records wait before another tick may take them.
    pub claim_lease: Duration,
    /// Where the tool's own tables (run log, claims, version) go: a PostgreSQL schema,
    /// or on MySQL a database (the URL's own unless `database.schema` names another).
    pub schema: String,
    /// The environment variable the URL came from (`BACKLOG_DATABASE_URL`), when it
    /// replaced the file's `database.url`.
    pub url_variable: Option<&'static str>,
    /// `database.password_file`, resolved against the schedule file's folder: read
    /// when the file is loaded, by whoever loads it (`crontab --install` checks that
    /// the crontab's user can).
    pub password_file: Option<PathBuf>,
}

/// The schema of the tool's own tables on PostgreSQL when the file names none.
pub const DEFAULT_SCHEMA: &str = "backlog";

/// `database.claim_lease` when the file gives none.
pub const DEFAULT_CLAIM_LEASE: Duration = Duration::from_secs(60);

/// `database.busy_timeout` when the file gives none, or half the lease if that is
/// shorter.
pub const DEFAULT_BUSY_TIMEOUT: Duration = Duration::from_secs(30);

/// The variable that, set and not empty, replaces `[database] url`: where a service
/// manager or a container keeps the secret a URL holds.
const URL_VARIABLE: &str = "BACKLOG_DATABASE_URL";

/// `BACKLOG_DATABASE_URL`, when it is set and not empty.
pub fn url_from_environment() -> Option<String> {
    std::env::var(URL_VARIABLE)
        .ok()
        .filter(|u| !u.trim().is_empty())
}

/// The `[database]` section resolved, its URL replaced by `BACKLOG_DATABASE_URL` when
/// that is set: a message about the URL then names the variable.
pub(super) fn resolve_database(
    mut raw: RawDatabase,
    dir: &Path,
) -> Result<DatabaseConfig, KeyError> {
    let Some(url) = url_from_environment() else {
        if raw.url.is_none() {
            return Err(KeyError::new(format!(
                "database.url is missing; set it to the database's path or URL, or set {URL_VARIABLE}"
            )));
        }
        return resolve_url(raw, dir);
    };
    raw.url = Some(url);
    // The variable is not in the file: its message names it, and points nowhere.
    let mut database =
        resolve_url(raw, dir).map_err(|e| match e.message.strip_prefix("database.url") {
            Some(rest) => KeyError::new(format!(
                "{URL_VARIABLE} (set in the environment, it replaces database.url){rest}"
            )),
            None => e,
        })?;
    database.url_variable = Some(URL_VARIABLE);
    Ok(database)
}

fn resolve_url(mut raw: RawDatabase, dir: &Path) -> Result<DatabaseConfig, KeyError> {
    let url = raw.url.clone().unwrap_or_default();
    let url = url.trim();
    let claim_lease = match raw.claim_lease.take() {
        Some(t) => span("database.claim_lease", &t, CLAIM_LEASE)?,
        None => DEFAULT_CLAIM_LEASE,
    };
    let busy_timeout = match raw.busy_timeout.take() {
        Some(t) => span("database.busy_timeout", &t, BUSY_TIMEOUT)?,
        // Half the lease at most, so that a short lease alone makes a valid file.
        None => DEFAULT_BUSY_TIMEOUT.min(claim_lease / 2),
    };
    if let Some(scheme) = server::server_scheme(url) {
        return server_database(scheme, raw, dir, busy_timeout, claim_lease);
    }
    if let Some(scheme) = foreign_scheme(url) {
        return Err(KeyError::new(format!(
            "database.url: {scheme:?} is not a scheme backlog knows; give a path or sqlite:… for SQLite, postgres:// or postgresql:// for PostgreSQL, mysql:// or mariadb:// for MySQL and MariaDB"
        )));
    }
    for (key, set) in [
        ("password_file", raw.password_file.is_some()),
        ("schema", raw.schema.is_some()),
    ] {
        if set {
            return Err(KeyError::new(format!(
                "database.{key} applies to PostgreSQL and MySQL only; remove it, or give a postgres:// or mysql:// url"
            )));
        }
    }
    sqlite_database(url, dir, busy_timeout, claim_lease)
}

fn sqlite_database(
    url: &str,
    dir: &Path,
    busy_timeout: Duration,
    claim_lease: Duration,
) -> Result<DatabaseConfig, KeyError> {
    let path = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))
        .unwrap_or(url);
    if path.is_empty() {
        return Err(
            "database.url is empty; give the path of a SQLite file, like \"backlog.db\"".into(),
        );
    }
    lease_outlives_lock_waits(claim_lease, busy_timeout)?;
    Ok(DatabaseConfig {
        url_variable: None,
        url: DatabaseUrl::Sqlite(crate::config::beside(dir, path)),
        busy_timeout,
        claim_lease,
        schema: DEFAULT_SCHEMA.to_string(),
        password_file: None,
    })
}

/// A server's section, read by the driver of its URL's scheme: refused, with the crate
/// to add, when the program has none installed.
fn server_database(
    scheme: &str,
    raw: RawDatabase,
    dir: &Path,
    busy_timeout: Duration,
    claim_lease: Duration,
) -> Result<DatabaseConfig, KeyError> {
    let reader = server::reader_for(scheme)
        .ok_or_else(|| format!("database.url {}", server::missing(scheme)))?;
    let password_file = raw.password_file.map(|f| crate::config::beside(dir, f));
    let section = ServerSection {
        url: raw.url.as_deref().unwrap_or_default().trim(),
        password_file: password_file.as_deref(),
        schema: raw.schema.as_deref(),
        busy_timeout,
        claim_lease,
    };
    let Server { url, schema } = reader.resolve(&section)?;
    Ok(DatabaseConfig {
        url_variable: None,
        url: DatabaseUrl::Server(url),
        busy_timeout,
        claim_lease,
        schema,
        password_file,
    })
}

/// On SQLite a write, the heartbeat's renewal of a tick's holds among them, may wait up
/// to `busy_timeout` for another writer's lock. Renewals come every quarter lease; one
/// that waits longer than half a lease lets the holds lapse, so another tick takes the
/// records while this one is still handing them out, and this one ends as lapsed (its
/// marks lost). MySQL's heartbeat may wait as long for a row lock; PostgreSQL does not
/// use `busy_timeout`.
pub fn lease_outlives_lock_waits(
    claim_lease: Duration,
    busy_timeout: Duration,
) -> Result<(), KeyError> {
    use crate::duration::compact;
    if claim_lease >= busy_timeout * 2 {
        return Ok(());
    }
    Err(KeyError::new(format!(
        "database.claim_lease {} is shorter than twice database.busy_timeout {}: a tick waiting that long for a lock would lose its hold on its records; make claim_lease at least {}, or busy_timeout at most {}",
        compact(claim_lease),
        compact(busy_timeout),
        compact(busy_timeout * 2),
        compact(claim_lease / 2),
    )))
}

/// The scheme of a URL that is neither PostgreSQL's nor SQLite's (`mysql://…`,
/// `http://…`, `postgresql+psycopg://…`), which would otherwise be taken for the name
/// of a SQLite file. Only the scheme is returned: the rest may hold a password.
fn foreign_scheme(url: &str) -> Option<&str> {
    let (scheme, rest) = url.split_once(':')?;
    let is_scheme = scheme
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c));
    let known = ["sqlite", "postgres", "postgresql", "mysql", "mariadb"];
    let database = [
        "mysql",
        "mariadb",
        "jdbc",
        "mssql",
        "sqlserver",
        "oracle",
        "mongodb",
        "redis",
    ];
    let lower = scheme.to_ascii_lowercase();
    (is_scheme
        && !known.contains(&scheme)
        && (rest.starts_with("//") || database.contains(&lower.as_str())))
    .then_some(scheme)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(url: &str) -> RawDatabase {
        RawDatabase {
            url: Some(url.into()),
            busy_timeout: None,
            claim_lease: None,
            password_file: None,
            schema: None,
        }
    }

    /// A server's URL with no driver installed for it (a library user who added
    /// another database's crate) is refused with the crate to add; a SQLite path needs
    /// none to be read (its store is opened by the driver, when installed).
    #[test]
    fn a_server_without_its_driver_is_refused_with_the_crate_to_add() {
        for (url, krate) in [
            ("postgres://u@h/db", "backlog-postgres"),
            ("mysql://u@h/db", "backlog-mysql"),
        ] {
            let message = resolve_url(raw(url), Path::new("/srv"))
                .err()
                .map(|e| e.message)
                .unwrap_or_default();
            assert!(
                message.contains("no driver") && message.contains(krate),
                "{url}: {message}"
            );
        }
        assert!(resolve_url(raw("backlog.db"), Path::new("/srv")).is_ok());
    }
}

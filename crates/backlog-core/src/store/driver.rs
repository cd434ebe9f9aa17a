//! The seam between the core and a database crate: a [`Driver`] reads the URLs of its
//! schemes and opens the store of a schedule file; the program installs the drivers it
//! links, and the core finds one by a URL's scheme.
//!
//! Why a registry rather than a feature per database: the core then depends on no
//! database's client library, and a database can live in a crate of its own, outside
//! this repository too (sqlx's `Any` driver works the same way). A fourth database is a
//! crate that implements [`Store`](super::Store) (with its supertraits), a `Driver`,
//! runs the driver test kit (`backlog-driver-tests`), and is installed by the program
//! before it loads a schedule file. docs/layout.md says more.

use std::any::Any;
use std::fmt;
use std::path::Path;
use std::sync::RwLock;
use std::time::Duration;

use super::{Store, StoreError};
use crate::config::{DatabaseConfig, DatabaseUrl, TableConfig};

/// A database crate's entry point (one static value per crate, installed with
/// [`install`]).
pub trait Driver: Send + Sync {
    /// What it reaches, for messages: "a PostgreSQL server".
    fn reaches(&self) -> &'static str;

    /// The URL schemes it reads, without `:`: the first is the one its URLs answer
    /// to in [`ServerUrl::scheme`]. A file database (SQLite) names `sqlite`, whose
    /// paths the core resolves itself.
    fn schemes(&self) -> &'static [&'static str];

    /// Reads a server's `[database]` section whose URL has one of this driver's
    /// schemes: the URL, with its password settled (from the URL, the section's
    /// password file or the database's usual environment variable), and the schema of
    /// the tool's own tables. The error is a message for the schedule file: it names the
    /// key and the fix, and never repeats the URL (it may hold a password).
    fn resolve(&self, section: &ServerSection<'_>) -> Result<Server, String> {
        let _ = section;
        Err(format!("database.url: {} is not read from a URL", self.reaches()))
    }

    /// Opens the store of a schedule file whose URL this driver read (or, for
    /// `sqlite`, whose path the core resolved).
    fn open(
        &self,
        database: &DatabaseConfig,
        table: &TableConfig,
    ) -> Result<Box<dyn Store>, StoreError>;
}

/// A server's `[database]` section, as a driver's [`Driver::resolve`] reads it.
#[derive(Debug)]
#[non_exhaustive]
pub struct ServerSection<'a> {
    /// `database.url` (or `BACKLOG_DATABASE_URL`), trimmed: it may hold a password.
    pub url: &'a str,
    /// `database.password_file`, resolved against the schedule file's folder.
    pub password_file: Option<&'a Path>,
    /// `database.schema`, when the file sets it.
    pub schema: Option<&'a str>,
    /// `database.busy_timeout`, or its default.
    pub busy_timeout: Duration,
    /// `database.claim_lease`, or its default.
    pub claim_lease: Duration,
}

/// What a driver read of a server's section.
#[derive(Debug)]
pub struct Server {
    /// The connection, password settled.
    pub url: Box<dyn ServerUrl>,
    /// Where the tool's own tables go (a PostgreSQL schema, a MySQL database).
    pub schema: String,
}

/// A server's URL as its driver read it; the driver downcasts it back to its own type
/// when it opens the store (`&dyn ServerUrl` is a `&dyn Any`). Only [`shown`] is ever
/// printed: its `Debug` must not show a password either.
///
/// [`shown`]: ServerUrl::shown
pub trait ServerUrl: fmt::Debug + Send + Sync + Any {
    /// The scheme of the driver that reads it (its first).
    fn scheme(&self) -> &'static str;

    /// The URL without its password, for messages.
    fn shown(&self) -> &str;

    /// The environment variable the database's own clients read a password from, and
    /// the password this URL settled on (none without one): what `crontab --install`
    /// hands a cron job that needs it.
    fn password_variable(&self) -> Option<(&'static str, Vec<u8>)>;

    /// A copy, boxed (a `DatabaseConfig` is cloned).
    fn box_clone(&self) -> Box<dyn ServerUrl>;
}

/// The drivers the program installed.
static DRIVERS: RwLock<Vec<&'static dyn Driver>> = RwLock::new(Vec::new());

/// The databases this project has a crate for, by scheme: what a message names when a
/// URL's driver is not installed.
const CRATES: [(&str, &str, &str); 5] = [
    ("sqlite", "a SQLite file", "backlog-sqlite"),
    ("postgres", "a PostgreSQL server", "backlog-postgres"),
    ("postgresql", "a PostgreSQL server", "backlog-postgres"),
    ("mysql", "a MySQL or MariaDB server", "backlog-mysql"),
    ("mariadb", "a MySQL or MariaDB server", "backlog-mysql"),
];

/// Installs a driver: the core then reads and opens the databases of its schemes.
/// Installing one twice does nothing.
pub fn install(driver: &'static dyn Driver) {
    let mut drivers = DRIVERS.write().unwrap_or_else(|e| e.into_inner());
    if !drivers
        .iter()
        .any(|d| d.schemes() == driver.schemes() && d.reaches() == driver.reaches())
    {
        drivers.push(driver);
    }
}

/// The installed driver of `scheme`; the error says what is missing and how to add it
/// (a sentence that follows the name of what gave the scheme).
pub fn for_scheme(scheme: &str) -> Result<&'static dyn Driver, String> {
    let drivers = DRIVERS.read().unwrap_or_else(|e| e.into_inner());
    if let Some(driver) = drivers.iter().find(|d| d.schemes().contains(&scheme)) {
        return Ok(*driver);
    }
    Err(match CRATES.iter().find(|(s, _, _)| *s == scheme) {
        Some((_, what, krate)) => {
            let module = krate.replace('-', "_");
            format!(
                "names {what}, and this program has no driver for it; add the crate {krate} and call {module}::install() before loading the file, or give another database"
            )
        }
        None => format!("names the scheme {scheme:?}, and this program has no driver for it"),
    })
}

/// The scheme of a server's URL (`postgres://…`): one the project has a crate for, or an
/// installed driver reads. None for a path, a `sqlite:` URL, or another scheme.
pub fn server_scheme(url: &str) -> Option<&str> {
    let (scheme, rest) = url.split_once("://")?;
    let _ = rest;
    let installed = DRIVERS
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .any(|d| d.schemes().contains(&scheme));
    let known = CRATES.iter().any(|(s, _, _)| *s == scheme);
    (scheme != "sqlite" && (installed || known)).then_some(scheme)
}

/// Opens the store a schedule file names, with the driver of its URL's scheme.
pub fn open(database: &DatabaseConfig, table: &TableConfig) -> Result<Box<dyn Store>, StoreError> {
    let driver = for_scheme(database.url.scheme())
        .map_err(|missing| StoreError::NoDriver(format!("the URL {missing}")))?;
    driver.open(database, table)
}

impl fmt::Debug for dyn Driver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.reaches())
    }
}

/// What a driver's `open` is given for a server: its own URL type, or an error if the
/// file's URL belongs to another driver.
pub fn server_url<T: ServerUrl>(database: &DatabaseConfig) -> Result<&T, StoreError> {
    if let DatabaseUrl::Server(url) = &database.url {
        let url: &dyn Any = url.as_ref();
        if let Some(url) = url.downcast_ref::<T>() {
            return Ok(url);
        }
    }
    Err(StoreError::NoDriver(
        "the URL is not one this driver reads".into(),
    ))
}

//! A server's URL as a database crate reads it. The schedule file names a database by
//! its URL's scheme; the crate of that database, installed by the program (see
//! `store::driver`), reads the rest: the core links no database's client library, so
//! it cannot parse a PostgreSQL connection string itself. This module is the half of a
//! driver that loading a schedule file needs; opening the store is the other half.

use std::any::Any;
use std::fmt;
use std::path::Path;
use std::sync::RwLock;
use std::time::Duration;

use super::KeyError;

/// How a database crate reads the URLs of its schemes (the schedule file's half of
/// its `store::driver::Driver`).
pub trait UrlReader: Send + Sync {
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
    fn resolve(&self, section: &ServerSection<'_>) -> Result<Server, KeyError> {
        let _ = section;
        Err(KeyError::new(format!(
            "database.url: {} is not read from a URL",
            self.reaches()
        )))
    }
}

/// A server's `[database]` section, as a driver's [`UrlReader::resolve`] reads it.
/// Its `Debug` shows the URL's scheme only: the rest may hold a password.
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

impl fmt::Debug for ServerSection<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scheme = self.url.split_once("://").map_or("?", |(scheme, _)| scheme);
        f.debug_struct("ServerSection")
            .field("url", &format_args!("{scheme}://…"))
            .field("password_file", &self.password_file)
            .field("schema", &self.schema)
            .field("busy_timeout", &self.busy_timeout)
            .field("claim_lease", &self.claim_lease)
            .finish()
    }
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

/// The URL readers the program installed, with its drivers.
static READERS: RwLock<Vec<&'static dyn UrlReader>> = RwLock::new(Vec::new());

/// The databases this project has a crate for, by scheme: what a message names when a
/// URL's driver is not installed.
const CRATES: [(&str, &str, &str); 5] = [
    ("sqlite", "a SQLite file", "backlog-sqlite"),
    ("postgres", "a PostgreSQL server", "backlog-postgres"),
    ("postgresql", "a PostgreSQL server", "backlog-postgres"),
    ("mysql", "a MySQL or MariaDB server", "backlog-mysql"),
    ("mariadb", "a MySQL or MariaDB server", "backlog-mysql"),
];

/// Installs a reader of URLs (`store::driver::install` does, for each driver).
/// Installing one twice does nothing.
pub fn install_reader(reader: &'static dyn UrlReader) {
    let mut readers = READERS.write().unwrap_or_else(|e| e.into_inner());
    if !readers
        .iter()
        .any(|r| r.schemes().iter().any(|s| reader.schemes().contains(s)))
    {
        readers.push(reader);
    }
}

/// The installed reader of `scheme`; none is what [`missing`] says.
pub fn reader_for(scheme: &str) -> Option<&'static dyn UrlReader> {
    let readers = READERS.read().unwrap_or_else(|e| e.into_inner());
    readers
        .iter()
        .find(|r| r.schemes().contains(&scheme))
        .copied()
}

/// What is missing when no driver of `scheme` is installed, and how to add it: a
/// sentence that follows the name of what gave the scheme ("database.url names…").
pub fn missing(scheme: &str) -> String {
    match CRATES.iter().find(|(s, _, _)| *s == scheme) {
        Some((_, what, krate)) => {
            let module = krate.replace('-', "_");
            let feature = krate.trim_start_matches("backlog-");
            format!(
                "names {what}, and this program has no driver for it; build it with the backlog crate's feature {feature} (or add the crate {krate} and call {module}::install() as the program starts), or give another database"
            )
        }
        None => format!("names the scheme {scheme:?}, and this program has no driver for it"),
    }
}

/// The scheme of a server's URL (`postgres://…`): one the project has a crate for, or an
/// installed driver reads. None for a path, a `sqlite:` URL, or another scheme.
pub fn server_scheme(url: &str) -> Option<&str> {
    let (scheme, _) = url.split_once("://")?;
    let installed = READERS
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .any(|r| r.schemes().contains(&scheme));
    let known = CRATES.iter().any(|(s, _, _)| *s == scheme);
    (scheme != "sqlite" && (installed || known)).then_some(scheme)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sections_debug_shows_no_password() {
        let section = ServerSection {
            url: "postgres://app:s3cret@db.example/orders",
            password_file: None,
            schema: None,
            busy_timeout: Duration::from_secs(5),
            claim_lease: Duration::from_secs(60),
        };
        let shown = format!("{section:?}");
        assert!(!shown.contains("s3cret"), "{shown}");
        assert!(shown.contains("postgres://…"), "{shown}");
    }
}

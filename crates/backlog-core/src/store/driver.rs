//! The seam between the core and a database crate: a [`Driver`] reads the URLs of its
//! schemes (its [`UrlReader`] half, which the schedule file needs) and opens the
//! store of a schedule file; the program installs the drivers it links, and the core
//! finds one by a URL's scheme.
//!
//! Why a registry rather than a feature per database: the core then depends on no
//! database's client library, and a database can live in a crate of its own, outside
//! this repository too (sqlx's `Any` driver works the same way). A fourth database is a
//! crate that implements [`Store`](super::Store) (with its supertraits) and a
//! `Driver`, runs the driver test kit (`backlog-driver-tests`), and is installed by the
//! program before it loads a schedule file. docs/layout.md says more.

use std::any::Any;
use std::fmt;
use std::sync::RwLock;

use super::{Store, StoreError};
use crate::config::server::{self, ServerUrl, UrlReader};
use crate::config::{DatabaseConfig, DatabaseUrl, TableConfig};

/// A database crate's entry point (one static value per crate, installed with
/// [`install`]): how it reads its URLs, and how it opens its store.
pub trait Driver: UrlReader {
    /// Opens the store of a schedule file whose URL this driver read (or, for
    /// `sqlite`, whose path the core resolved).
    fn open(
        &self,
        database: &DatabaseConfig,
        table: &TableConfig,
    ) -> Result<Box<dyn Store>, StoreError>;
}

/// The drivers the program installed.
static DRIVERS: RwLock<Vec<&'static dyn Driver>> = RwLock::new(Vec::new());

/// Installs a driver: the core then reads and opens the databases of its schemes.
///
/// The first driver installed for a scheme keeps it: installing one twice does
/// nothing, and a driver whose schemes overlap one already installed is not installed
/// at all (so a library the program links cannot take `postgres` from under the
/// program's own choice). Install the one you want first.
pub fn install(driver: &'static dyn Driver) {
    server::install_reader(driver);
    let mut drivers = DRIVERS.write().unwrap_or_else(|e| e.into_inner());
    if !drivers
        .iter()
        .any(|d| d.schemes().iter().any(|s| driver.schemes().contains(s)))
    {
        drivers.push(driver);
    }
}

/// Opens the store a schedule file names, with the driver of its URL's scheme.
pub fn open(database: &DatabaseConfig, table: &TableConfig) -> Result<Box<dyn Store>, StoreError> {
    let scheme = database.url.scheme();
    let driver = DRIVERS
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .find(|d| d.schemes().contains(&scheme))
        .copied();
    match driver {
        Some(driver) => driver.open(database, table),
        None => Err(StoreError::NoDriver(format!(
            "the URL {}",
            server::missing(scheme)
        ))),
    }
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

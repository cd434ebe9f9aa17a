//! The crate's [`Driver`]: the store opened on a SQLite file, whose path the core
//! resolved against the schedule file's folder.

use backlog_core::config::server::UrlReader;
use backlog_core::config::{DatabaseConfig, DatabaseUrl, TableConfig};
use backlog_core::store::driver::Driver;
use backlog_core::store::{Store, StoreError};

use crate::SqliteStore;

/// SQLite, as the core finds it for a file's path once [`crate::install`]ed.
pub struct Sqlite;

impl UrlReader for Sqlite {
    fn reaches(&self) -> &'static str {
        "a SQLite file"
    }

    fn schemes(&self) -> &'static [&'static str] {
        &["sqlite"]
    }
}

impl Driver for Sqlite {
    fn open(
        &self,
        database: &DatabaseConfig,
        table: &TableConfig,
    ) -> Result<Box<dyn Store>, StoreError> {
        let DatabaseUrl::Sqlite(path) = &database.url else {
            return Err(StoreError::NoDriver(
                "the URL is not a SQLite file's path".into(),
            ));
        };
        Ok(Box::new(SqliteStore::open(
            path,
            database.busy_timeout,
            table.clone(),
        )?))
    }
}

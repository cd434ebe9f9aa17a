//! The crate's [`Driver`]: `mysql://` and `mariadb://` URLs (`url`), and the store
//! opened on them.

use backlog_core::config::KeyError;
use backlog_core::config::server::{Server, ServerSection, ServerUrl, UrlReader};
use backlog_core::config::{DatabaseConfig, TableConfig, lease_outlives_lock_waits};
use backlog_core::store::driver::{self, Driver};
use backlog_core::store::{Store, StoreError};

use crate::MysqlStore;
use crate::url::{MysqlUrl, resolve_mysql};

/// MySQL and MariaDB, as the core finds them by a URL's scheme once
/// [`crate::install`]ed.
pub struct Mysql;

impl UrlReader for Mysql {
    fn reaches(&self) -> &'static str {
        "a MySQL or MariaDB server"
    }

    fn schemes(&self) -> &'static [&'static str] {
        &["mysql", "mariadb"]
    }

    fn resolve(&self, section: &ServerSection<'_>) -> Result<Server, KeyError> {
        let url = resolve_mysql(
            section.url,
            section.password_file,
            std::env::var("MYSQL_PWD").ok(),
        )?;
        let schema = match section.schema {
            Some(s) if s.trim().is_empty() || s.contains('?') => {
                return Err(KeyError::new(format!(
                    "database.schema {s:?} is no database name; name the database for the tool's own tables with letters, digits and _, or leave it out to use the URL's"
                )));
            }
            Some(s) => s.to_string(),
            None => url.database.clone(),
        };
        // MySQL's heartbeat may wait `busy_timeout` for a row lock.
        lease_outlives_lock_waits(section.claim_lease, section.busy_timeout)?;
        Ok(Server {
            url: Box::new(url),
            schema,
        })
    }
}

impl Driver for Mysql {
    fn open(
        &self,
        database: &DatabaseConfig,
        table: &TableConfig,
    ) -> Result<Box<dyn Store>, StoreError> {
        let url = driver::server_url::<MysqlUrl>(database)?;
        Ok(Box::new(MysqlStore::open(
            url,
            &database.schema,
            database.busy_timeout,
            table.clone(),
        )?))
    }
}

impl ServerUrl for MysqlUrl {
    fn scheme(&self) -> &'static str {
        "mysql"
    }

    fn shown(&self) -> &str {
        &self.shown
    }

    fn password_variable(&self) -> Option<(&'static str, Vec<u8>)> {
        Some(("MYSQL_PWD", self.password.clone()?.into_bytes()))
    }

    fn box_clone(&self) -> Box<dyn ServerUrl> {
        Box::new(self.clone())
    }
}

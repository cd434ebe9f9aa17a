//! The crate's [`Driver`]: `postgres://` and `postgresql://` URLs read as libpq reads
//! them (`url`), and the store opened on them.

use backlog_core::config::KeyError;
use backlog_core::config::server::{Server, ServerSection, ServerUrl, UrlReader};
use backlog_core::config::{DEFAULT_SCHEMA, DatabaseConfig, TableConfig};
use backlog_core::store::driver::{self, Driver};
use backlog_core::store::{Store, StoreError};

use crate::PostgresStore;
use crate::url::{PostgresUrl, resolve_postgres};

/// PostgreSQL, as the core finds it by a URL's scheme once [`crate::install`]ed.
pub struct Postgres;

impl UrlReader for Postgres {
    fn reaches(&self) -> &'static str {
        "a PostgreSQL server"
    }

    fn schemes(&self) -> &'static [&'static str] {
        &["postgres", "postgresql"]
    }

    fn resolve(&self, section: &ServerSection<'_>) -> Result<Server, KeyError> {
        let schema = section.schema.unwrap_or(DEFAULT_SCHEMA).to_string();
        if schema.trim().is_empty() {
            return Err(
                "database.schema is empty; name the schema for the tool's own tables, like \"backlog\""
                    .into(),
            );
        }
        // The statements the backends share number their parameters `?1`: a `?` in
        // the schema's name would be read as one.
        if schema.contains('?') {
            return Err(KeyError::new(format!(
                "database.schema {schema:?} holds a '?'; name the schema with letters, digits and _, like \"backlog\""
            )));
        }
        let url = resolve_postgres(
            section.url,
            section.password_file,
            std::env::var("PGPASSWORD").ok(),
        )?;
        Ok(Server {
            url: Box::new(url),
            schema,
        })
    }
}

impl Driver for Postgres {
    fn open(
        &self,
        database: &DatabaseConfig,
        table: &TableConfig,
    ) -> Result<Box<dyn Store>, StoreError> {
        let url = driver::server_url::<PostgresUrl>(database)?;
        Ok(Box::new(PostgresStore::open(
            url,
            &database.schema,
            table.clone(),
        )?))
    }
}

impl ServerUrl for PostgresUrl {
    fn scheme(&self) -> &'static str {
        "postgres"
    }

    fn shown(&self) -> &str {
        &self.shown
    }

    fn password_variable(&self) -> Option<(&'static str, Vec<u8>)> {
        Some(("PGPASSWORD", self.config.get_password()?.to_vec()))
    }

    fn box_clone(&self) -> Box<dyn ServerUrl> {
        Box::new(self.clone())
    }
}

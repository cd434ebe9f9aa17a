//! The heartbeat's connection on PostgreSQL (see `store::claims::ServerHeartbeat`): one
//! of its own, opened again when the server dropped it.

use crate::connection::connect;
use crate::connection::pg;
use crate::dialect::Pg;
use crate::url::PostgresUrl;
use backlog_core::store::StoreError;
use backlog_core::store::claims::Beating;
use backlog_core::store::sql::Sql;
use postgres::Client;

/// The heartbeat's connection on PostgreSQL (see `store::claims::ServerHeartbeat`).
pub(super) struct PgBeat {
    pub(super) client: Client,
    pub(super) url: PostgresUrl,
}

impl Beating for PgBeat {
    fn reconnect_if_lost(&mut self) -> Result<(), StoreError> {
        if self.client.is_closed() {
            self.client = connect(&self.url)?;
        }
        Ok(())
    }

    fn transaction(
        &mut self,
        context: &str,
        work: &mut dyn FnMut(&mut dyn Sql) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let mut tx = self.client.transaction().map_err(pg(context))?;
        work(&mut Pg(&mut tx))?;
        tx.commit().map_err(pg(context))
    }
}

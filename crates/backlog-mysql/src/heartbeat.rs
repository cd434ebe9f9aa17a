//! The heartbeat's connection on MySQL (see `store::claims::ServerHeartbeat`): one of
//! its own, opened again when the server dropped it.

use mysql::TxOpts;

use crate::connection::Mq;
use crate::connection::connect;
use crate::connection::my;
use crate::url::MysqlUrl;
use backlog_core::store::StoreError;
use backlog_core::store::claims::Beating;
use backlog_core::store::sql::Sql;
use mysql::Conn;

pub(super) struct MysqlBeat {
    pub(super) conn: Conn,
    pub(super) url: MysqlUrl,
    pub(super) lock_wait: std::time::Duration,
}

impl Beating for MysqlBeat {
    fn reconnect_if_lost(&mut self) -> Result<(), StoreError> {
        if self.conn.ping().is_err() {
            self.conn = connect(&self.url, self.lock_wait)?;
        }
        Ok(())
    }

    fn transaction(
        &mut self,
        context: &str,
        work: &mut dyn FnMut(&mut dyn Sql) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let mut tx = Mq(self
            .conn
            .start_transaction(TxOpts::default())
            .map_err(my(context))?);
        work(&mut tx)?;
        tx.0.commit().map_err(my(context))
    }
}

//! The heartbeat on MySQL: a connection of its own that renews a tick's claims and its
//! run-log row while the tick's own connection waits on a handler.

use mysql::TxOpts;
use mysql::prelude::Queryable;

use super::claims::lease_us;
use super::*;
use crate::store::fault::renewing;

pub(super) struct MysqlHeartbeat {
    pub(super) conn: Conn,
    pub(super) url: MysqlUrl,
    pub(super) lock_wait: std::time::Duration,
    pub(super) claims: String,
    pub(super) runs: String,
    pub(super) owner: String,
    pub(super) run_id: i64,
}

impl Heartbeat for MysqlHeartbeat {
    /// Renews the claims; a connection the server dropped (a restart, a failover) is
    /// opened again, since the claims outlive it in their table.
    fn beat(&mut self, lease_until: DateTime<Utc>) -> Result<(), StoreError> {
        if self.conn.ping().is_err() {
            self.conn = super::connect(&self.url, self.lock_wait)?;
        }
        let context = "renewing claims";
        renewing(context, || self.renew(lease_until, context))
    }
}

impl MysqlHeartbeat {
    /// One renewal, a transaction.
    fn renew(&mut self, lease_until: DateTime<Utc>, context: &str) -> Result<(), StoreError> {
        let mut tx = self
            .conn
            .start_transaction(TxOpts::default())
            .map_err(my(context))?;
        tx.exec_drop(
            format!(
                "UPDATE {} SET expires_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND WHERE owner = ?",
                self.claims
            ),
            (lease_us(lease_until), &self.owner),
        )
        .map_err(my(context))?;
        tx.exec_drop(
            format!(
                "UPDATE {} SET heartbeat_at = UTC_TIMESTAMP(6) WHERE id = ?",
                self.runs
            ),
            (self.run_id,),
        )
        .map_err(my(context))?;
        tx.commit().map_err(my(context))
    }
}

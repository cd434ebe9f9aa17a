//! The run log on MySQL: a tick's row opened, after the rows of silent ticks are
//! closed and what they held is collected (reads and the close are in `store::runs`).

use mysql::Value as My;
use mysql::prelude::Queryable;

use super::connection::rfc3339_of;
use super::*;
use crate::store::KEPT_OWNER;
use crate::store::fault::housekeeping;

impl MysqlStore {
    pub(super) fn open_run(&mut self, run: &RunStart) -> Result<i64, StoreError> {
        let runs = self.own_table("backlog_runs");
        let close = format!(
            "UPDATE {runs} SET outcome = 'abandoned', error = CONCAT('no heartbeat since ', {since}, ': the tick was killed or lost its database')
             WHERE table_name = ? AND outcome = 'running' AND heartbeat_at < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND",
            since = rfc3339_of("heartbeat_at")
        );
        let lease_us = i64::try_from(run.lease.as_micros()).unwrap_or(i64::MAX);
        self.conn
            .exec_drop(close, (&self.table.name, lease_us))
            .map_err(my("writing the run log"))?;
        // Failures kept past the end of their slot are collected.
        let collect = format!(
            "DELETE FROM {} WHERE table_name = ? AND owner = ? AND expires_at < UTC_TIMESTAMP(6)",
            self.own_table("backlog_claims")
        );
        // Housekeeping: a claim another session is writing may hold its row for a
        // while; what is not collected now is collected by a later tick (a kept
        // failure past its slot is free to take anyway).
        housekeeping(
            self.conn
                .exec_drop(collect, (&self.table.name, KEPT_OWNER))
                .map_err(my("dropping failures kept past their slot")),
        )?;
        self.max_per_record = run.history.max_per_record;
        let prefix = self.prefix.clone();
        crate::store::prune_attempts(&mut self.conn, &prefix, &self.table.name, &run.history)?;
        let sql = format!(
            "INSERT INTO {runs} (table_name, window_secs, tier, band_from_secs, band_to_secs, bands, clock, started_at, heartbeat_at, outcome, owner)
             VALUES (?, ?, ?, ?, ?, ?, ?, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), 'running', ?)"
        );
        self.conn
            .exec_drop(
                sql,
                vec![
                    My::from(self.table.name.as_str()),
                    My::from(run.window.as_secs()),
                    run.tier.map_or(My::NULL, |t| My::from(t as u64)),
                    My::from(run.younger.as_secs()),
                    My::from(run.older.as_secs()),
                    My::from(run.bands),
                    values::datetime(run.now.naive_utc()),
                    My::from(run.owner.as_str()),
                ],
            )
            .map_err(my("writing the run log"))?;
        Ok(self.conn.last_insert_id() as i64)
    }
}

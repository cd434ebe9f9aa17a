//! The run log on SQLite: a tick's row opened, after the rows of silent ticks are
//! closed and what they held is collected (reads and the close are in `store::runs`).

use super::*;

impl SqliteStore {
    pub(super) fn open_run(&mut self, run: &RunStart) -> Result<i64, StoreError> {
        let started = Utc::now().to_rfc3339_opts(SecondsFormat::Millis, true);
        // Stamps are RFC 3339 UTC with milliseconds: they compare as text.
        let silent_since = (Utc::now() - run.lease).to_rfc3339_opts(SecondsFormat::Millis, true);
        self.conn
            .execute(
                "UPDATE backlog_runs SET outcome = 'abandoned', error = 'no heartbeat since ' || heartbeat_at || ': the tick was killed or lost its database'
                 WHERE table_name = ?1 AND outcome = 'running' AND heartbeat_at < ?2",
                params![self.table.name, silent_since],
            )
            .map_err(db("writing the run log"))?;
        // The spans of killed ticks have run out: nobody will release them. Failures
        // kept until the end of their slot are collected once it is over.
        let now_ms = Utc::now().timestamp_millis();
        self.conn
            .execute(
                "DELETE FROM backlog_holds WHERE table_name = ?1 AND expires_at < ?2",
                params![self.table.name, now_ms],
            )
            .map_err(db("dropping spans that ran out"))?;
        self.conn
            .execute(
                "DELETE FROM backlog_tried WHERE table_name = ?1 AND expires_ms <= ?2",
                params![self.table.name, now_ms],
            )
            .map_err(db("dropping failures kept past their slot"))?;
        self.max_per_record = run.history.max_per_record;
        crate::store::prune_attempts(&mut self.conn, "", &self.table.name, &run.history)?;
        self.conn
            .execute(
                "INSERT INTO backlog_runs (table_name, window_secs, tier, band_from_secs, band_to_secs, bands, clock, started_at, heartbeat_at, outcome, owner)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8, 'running', ?9)",
                params![
                    self.table.name,
                    run.window.as_secs() as i64,
                    run.tier.map(|t| t as i64),
                    run.younger.as_secs() as i64,
                    run.older.as_secs() as i64,
                    run.bands,
                    run.now.to_rfc3339_opts(SecondsFormat::Secs, true),
                    started,
                    run.owner,
                ],
            )
            .map_err(db("writing the run log"))?;
        Ok(self.conn.last_insert_rowid())
    }
}

//! The run log on PostgreSQL: a tick's row opened, after the rows of silent ticks are
//! closed and what they held is collected (reads and the close are in `store::runs`).

use super::*;

impl PostgresStore {
    pub(super) fn has_run_log(&mut self) -> Result<bool, StoreError> {
        let runs = format!("{}.backlog_runs", self.schema);
        let row = self
            .client
            .query_one("SELECT to_regclass($1) IS NOT NULL", &[&runs])
            .map_err(pg("reading the run log"))?;
        Ok(row.get(0))
    }

    pub(super) fn open_run(&mut self, run: &RunStart) -> Result<i64, StoreError> {
        let close = format!(
            "UPDATE {} SET outcome = 'abandoned', error = 'no heartbeat since ' || heartbeat_at || ': the tick was killed or lost its database'
             WHERE table_name = $1 AND outcome = 'running' AND heartbeat_at < now() - make_interval(secs => $2)",
            self.own_table("backlog_runs")
        );
        self.client
            .execute(&close, &[&self.table.name, &run.lease.as_secs_f64()])
            .map_err(pg("writing the run log"))?;
        // Failures kept past the end of their slot are collected.
        let collect = format!(
            "DELETE FROM {} WHERE table_name = $1 AND owner = $2 AND expires_at < now()",
            self.own_table("backlog_claims")
        );
        self.client
            .execute(&collect, &[&self.table.name, &KEPT_OWNER])
            .map_err(pg("dropping failures kept past their slot"))?;
        self.max_per_record = run.history.max_per_record;
        let prefix = format!("{}.", self.schema);
        crate::store::prune_attempts(&mut self.client, &prefix, &self.table.name, &run.history)?;
        let sql = format!(
            "INSERT INTO {} (table_name, window_secs, tier, band_from_secs, band_to_secs, bands, clock, started_at, heartbeat_at, outcome, owner)
             VALUES ($1, $2, $3, $4, $5, $6, $7, now(), now(), 'running', $8) RETURNING id",
            self.own_table("backlog_runs")
        );
        let row = self
            .client
            .query_one(
                &sql,
                &[
                    &self.table.name,
                    &(run.window.as_secs() as i64),
                    &run.tier.map(|t| t as i32),
                    &(run.younger.as_secs() as i64),
                    &(run.older.as_secs() as i64),
                    &run.bands,
                    &run.now,
                    &run.owner,
                ],
            )
            .map_err(pg("writing the run log"))?;
        Ok(row.get(0))
    }
}

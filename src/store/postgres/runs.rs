//! The run log on PostgreSQL: a tick's row, opened and closed, and what `status` and
//! `--if-due` read of it.

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

    pub(super) fn run_row(row: &postgres::Row) -> RunRow {
        let stamp =
            |t: Option<DateTime<Utc>>| t.map(|t| t.to_rfc3339_opts(SecondsFormat::Millis, true));
        RunRow {
            run_id: row.get(0),
            window_secs: row.get::<_, i64>(1) as u64,
            clock: row.get(2),
            started_at: stamp(row.get(3)).unwrap_or_default(),
            finished_at: stamp(row.get(4)),
            selected: row.get::<_, i64>(5) as u64,
            succeeded: row.get::<_, i64>(6) as u64,
            failed: row.get::<_, i64>(7) as u64,
            skipped: row.get::<_, i64>(8) as u64,
            outcome: row.get(9),
            error: row.get(10),
        }
    }

    pub(super) fn read_last_tick(
        &mut self,
        window: Duration,
    ) -> Result<Option<DateTime<Utc>>, StoreError> {
        if !self.has_run_log()? {
            return Ok(None);
        }
        let sql = format!(
            "SELECT clock FROM {} WHERE table_name = $1 AND window_secs = $2 AND outcome NOT IN ('failed', 'lapsed') ORDER BY id DESC LIMIT 1",
            self.own_table("backlog_runs")
        );
        Ok(self
            .client
            .query_opt(&sql, &[&self.table.name, &(window.as_secs() as i64)])
            .map_err(pg("reading the run log"))?
            .map(|r| r.get(0)))
    }

    pub(super) fn read_last_runs(&mut self) -> Result<Vec<RunRow>, StoreError> {
        if !self.has_run_log()? {
            return Ok(Vec::new());
        }
        let runs = self.own_table("backlog_runs");
        let sql = format!(
            "SELECT id, window_secs, clock, started_at, finished_at, selected, succeeded, failed, skipped, outcome, error
             FROM {runs}
             WHERE id IN (SELECT max(id) FROM {runs} WHERE table_name = $1 AND window_secs > 0 GROUP BY window_secs)
             ORDER BY window_secs"
        );
        Ok(self
            .client
            .query(&sql, &[&self.table.name])
            .map_err(pg("reading the run log"))?
            .iter()
            .map(Self::run_row)
            .collect())
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
            .execute(&collect, &[&self.table.name, &TRIED])
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

    pub(super) fn close_run(&mut self, run_id: i64, end: &RunEnd) -> Result<(), StoreError> {
        let sql = format!(
            "UPDATE {} SET finished_at = now(), selected = $2, succeeded = $3, failed = $4, skipped = $5, outcome = $6, error = $7, lost = $8 WHERE id = $1",
            self.own_table("backlog_runs")
        );
        self.client
            .execute(
                &sql,
                &[
                    &run_id,
                    &(end.selected as i64),
                    &(end.succeeded as i64),
                    &(end.failed as i64),
                    &(end.skipped as i64),
                    &end.outcome,
                    &end.error,
                    &(end.lost as i64),
                ],
            )
            .map_err(pg("writing the run log"))?;
        Ok(())
    }
}

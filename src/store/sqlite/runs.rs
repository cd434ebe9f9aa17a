//! The run log on SQLite: a tick's row, opened and closed, and what `status` and
//! `--if-due` read of it.

use super::*;

impl SqliteStore {
    pub(super) fn read_last_runs(&mut self) -> Result<Vec<RunRow>, StoreError> {
        if !self.has_run_log()? {
            return Ok(Vec::new());
        }
        let mut stmt = self
            .conn
            .prepare(
                "SELECT id, window_secs, clock, started_at, finished_at, selected, succeeded, failed, skipped, outcome, error
                 FROM backlog_runs
                 WHERE id IN (SELECT max(id) FROM backlog_runs WHERE table_name = ?1 AND window_secs > 0 GROUP BY window_secs)
                 ORDER BY window_secs",
            )
            .map_err(db("reading the run log"))?;
        stmt.query_map([&self.table.name], |r| {
            let clock: String = r.get(2)?;
            Ok(RunRow {
                run_id: r.get(0)?,
                window_secs: r.get::<_, i64>(1)? as u64,
                clock: DateTime::parse_from_rfc3339(&clock)
                    .map(|t| t.with_timezone(&Utc))
                    .unwrap_or_default(),
                started_at: r.get(3)?,
                finished_at: r.get(4)?,
                selected: r.get::<_, i64>(5)? as u64,
                succeeded: r.get::<_, i64>(6)? as u64,
                failed: r.get::<_, i64>(7)? as u64,
                skipped: r.get::<_, i64>(8)? as u64,
                outcome: r.get(9)?,
                error: r.get(10)?,
            })
        })
        .and_then(Iterator::collect)
        .map_err(db("reading the run log"))
    }

    pub(super) fn read_last_tick(
        &mut self,
        window: Duration,
    ) -> Result<Option<DateTime<Utc>>, StoreError> {
        if !self.has_run_log()? {
            return Ok(None);
        }
        let clock: Option<String> = self
            .conn
            .query_row(
                "SELECT clock FROM backlog_runs WHERE table_name = ?1 AND window_secs = ?2 AND outcome NOT IN ('failed', 'lapsed') ORDER BY id DESC LIMIT 1",
                params![self.table.name, window.as_secs() as i64],
                |r| r.get(0),
            )
            .optional()
            .map_err(db("reading the run log"))?;
        clock
            .map(|c| {
                DateTime::parse_from_rfc3339(&c)
                    .map(|t| t.with_timezone(&Utc))
                    .map_err(|e| {
                        StoreError::Schema(format!(
                            "backlog_runs holds a clock {c:?} that is not RFC 3339: {e}"
                        ))
                    })
            })
            .transpose()
    }

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

    pub(super) fn close_run(&mut self, run_id: i64, end: &RunEnd) -> Result<(), StoreError> {
        let finished = Utc::now().to_rfc3339_opts(SecondsFormat::Millis, true);
        self.conn
            .execute(
                "UPDATE backlog_runs SET finished_at = ?2, selected = ?3, succeeded = ?4, failed = ?5, skipped = ?6, outcome = ?7, error = ?8, lost = ?9 WHERE id = ?1",
                params![run_id, finished, end.selected as i64, end.succeeded as i64, end.failed as i64, end.skipped as i64, end.outcome, end.error, end.lost as i64],
            )
            .map_err(db("writing the run log"))?;
        Ok(())
    }
}

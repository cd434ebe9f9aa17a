//! The run log on MySQL: a tick's row, opened and closed, and what `status` and
//! `--if-due` read of it.

use mysql::Value as My;
use mysql::prelude::Queryable;

use super::connection::rfc3339_of;
use super::*;
use crate::store::KEPT_OWNER;

/// A time of the run log (UTC) as RFC 3339 text with milliseconds.
fn stamp(v: &My) -> Option<String> {
    values::naive(v).map(|t| {
        t.and_utc()
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
    })
}

fn int(v: &My) -> i64 {
    match v {
        My::Int(i) => *i,
        My::UInt(u) => i64::try_from(*u).unwrap_or(i64::MAX),
        other => values::text(other)
            .and_then(|t| t.parse().ok())
            .unwrap_or(0),
    }
}

impl MysqlStore {
    pub(super) fn read_last_tick(
        &mut self,
        window: Duration,
    ) -> Result<Option<DateTime<Utc>>, StoreError> {
        if !self.has_own_tables()? {
            return Ok(None);
        }
        let sql = format!(
            "SELECT clock FROM {} WHERE table_name = ? AND window_secs = ? AND outcome NOT IN ('failed', 'lapsed') ORDER BY id DESC LIMIT 1",
            self.own_table("backlog_runs")
        );
        let clock: Option<My> = self
            .conn
            .exec_first(sql, (&self.table.name, window.as_secs()))
            .map_err(my("reading the run log"))?;
        Ok(clock.as_ref().and_then(values::naive).map(|t| t.and_utc()))
    }

    pub(super) fn read_last_runs(&mut self) -> Result<Vec<RunRow>, StoreError> {
        if !self.has_own_tables()? {
            return Ok(Vec::new());
        }
        let runs = self.own_table("backlog_runs");
        let sql = format!(
            "SELECT id, window_secs, clock, started_at, finished_at, selected, succeeded, failed, skipped, outcome, error
             FROM {runs}
             WHERE id IN (SELECT max(id) FROM {runs} WHERE table_name = ? AND window_secs > 0 GROUP BY window_secs)
             ORDER BY window_secs"
        );
        let rows: Vec<mysql::Row> = self
            .conn
            .exec(sql, (&self.table.name,))
            .map_err(my("reading the run log"))?;
        Ok(rows
            .into_iter()
            .map(|row| {
                let v = row.unwrap();
                RunRow {
                    run_id: int(&v[0]),
                    window_secs: int(&v[1]).max(0) as u64,
                    clock: values::naive(&v[2])
                        .map(|t| t.and_utc())
                        .unwrap_or_default(),
                    started_at: stamp(&v[3]).unwrap_or_default(),
                    finished_at: stamp(&v[4]),
                    selected: int(&v[5]).max(0) as u64,
                    succeeded: int(&v[6]).max(0) as u64,
                    failed: int(&v[7]).max(0) as u64,
                    skipped: int(&v[8]).max(0) as u64,
                    outcome: values::text(&v[9]).unwrap_or_default(),
                    error: values::text(&v[10]),
                }
            })
            .collect())
    }

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
        self.conn
            .exec_drop(collect, (&self.table.name, KEPT_OWNER))
            .map_err(my("dropping failures kept past their slot"))?;
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

    pub(super) fn close_run(&mut self, run_id: i64, end: &RunEnd) -> Result<(), StoreError> {
        let sql = format!(
            "UPDATE {} SET finished_at = UTC_TIMESTAMP(6), selected = ?, succeeded = ?, failed = ?, skipped = ?, outcome = ?, error = ?, lost = ? WHERE id = ?",
            self.own_table("backlog_runs")
        );
        self.conn
            .exec_drop(
                sql,
                vec![
                    My::from(end.selected),
                    My::from(end.succeeded),
                    My::from(end.failed),
                    My::from(end.skipped),
                    My::from(end.outcome),
                    end.error.as_deref().map_or(My::NULL, My::from),
                    My::from(end.lost),
                    My::from(run_id),
                ],
            )
            .map_err(my("writing the run log"))
    }
}

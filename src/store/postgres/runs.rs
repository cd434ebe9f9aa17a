//! The run log on PostgreSQL: a tick's row opened (`store::runs`), after the failures
//! kept past their slot are dropped.

use super::*;
use crate::store::runs;

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
        self.max_per_record = run.history.max_per_record;
        let prefix = format!("{}.", self.schema);
        let table = self.table.name.clone();
        runs::open(&mut self.client, &prefix, &table, run, &mut |sql| {
            runs::collect_kept(sql, &prefix, &table)
        })
    }
}

//! The run log on PostgreSQL: whether it is there, and a tick's row opened as on
//! every server (`store::claims::open_run`).

use crate::PostgresStore;
use crate::connection::pg;
use backlog_core::store::RunStart;
use backlog_core::store::StoreError;
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
        backlog_core::store::claims::open_run(&mut self.client, &prefix, &table, run)
    }
}

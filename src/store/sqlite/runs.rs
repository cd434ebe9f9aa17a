//! The run log on SQLite: a tick's row opened (`store::runs`), after the spans of
//! killed ticks and the failures kept past their slot are dropped.

use super::*;
use crate::store::runs;
use crate::store::sql::{Sql, failed};

impl SqliteStore {
    pub(super) fn open_run(&mut self, run: &RunStart) -> Result<i64, StoreError> {
        self.max_per_record = run.history.max_per_record;
        let table = self.table.name.clone();
        // The spans of killed ticks have run out: nobody will release them. Failures
        // kept until the end of their slot are collected once it is over.
        let mut collect = |sql: &mut dyn Sql| {
            let now_ms = Utc::now().timestamp_millis();
            sql.execute(
                "DELETE FROM backlog_holds WHERE table_name = ?1 AND expires_at < ?2",
                &[table.as_str().into(), now_ms.into()],
            )
            .map_err(failed("dropping spans that ran out"))?;
            sql.execute(
                "DELETE FROM backlog_tried WHERE table_name = ?1 AND expires_ms <= ?2",
                &[table.as_str().into(), now_ms.into()],
            )
            .map_err(failed("dropping failures kept past their slot"))?;
            Ok(())
        };
        runs::open(&mut self.conn, "", &self.table.name, run, &mut collect)
    }
}

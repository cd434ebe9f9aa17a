//! The run log on MySQL: a tick's row opened (`store::runs`), after the failures kept
//! past their slot are dropped.

use super::*;
use crate::store::runs;

impl MysqlStore {
    pub(super) fn open_run(&mut self, run: &RunStart) -> Result<i64, StoreError> {
        self.max_per_record = run.history.max_per_record;
        let prefix = self.prefix.clone();
        let table = self.table.name.clone();
        runs::open(&mut self.conn, &prefix, &table, run, &mut |sql| {
            runs::collect_kept(sql, &prefix, &table)
        })
    }
}

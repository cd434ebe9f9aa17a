//! Reading a timestamp column's samples to detect its format (`store::samples`), by
//! the server's plans.

use mysql::prelude::Queryable;

use crate::MysqlStore;
use crate::connection::my;
use crate::values;
use backlog_core::record::Scalar;
use backlog_core::store::StoreError;
use backlog_core::store::samples;
use backlog_core::timestamp::Sample;

impl MysqlStore {
    /// The samples of a text or integer column (see `store::samples`), by the server's
    /// plans. `table` is quoted.
    pub(super) fn samples(
        &mut self,
        table: &str,
        column: &str,
        id: &str,
    ) -> Result<Vec<Sample>, StoreError> {
        let target = samples::Target::new(table, column, id, &self.table.name);
        let mut sampler = MysqlSampler {
            conn: &mut self.conn,
            context: format!("reading {column} of {}", self.table.name),
        };
        samples::read(&mut sampler, &target, &|e| e.to_string())
    }
}

/// `store::samples` on MySQL and MariaDB.
struct MysqlSampler<'a> {
    conn: &'a mut mysql::Conn,
    context: String,
}

impl samples::Sampler for MysqlSampler<'_> {
    /// By the `Extra` column of the classic `EXPLAIN` (`Using filesort`). A MySQL
    /// server whose `explain_format` is JSON or TREE has none: read as no sort, the
    /// column's own order, as before `store::samples`.
    fn sorts(&mut self, sql: &str, _: &str) -> Result<bool, StoreError> {
        let plan: Vec<mysql::Row> = self
            .conn
            .query(format!("EXPLAIN {sql}"))
            .map_err(my(self.context.clone()))?;
        Ok(plan.iter().any(|row| {
            row.columns_ref()
                .iter()
                .position(|c| c.name_str().eq_ignore_ascii_case("Extra"))
                .and_then(|i| row.as_ref(i))
                .and_then(values::text)
                .is_some_and(|extra| extra.contains("filesort"))
        }))
    }

    fn pair(&mut self, sql: &str) -> Result<Vec<Sample>, StoreError> {
        // A prepared statement, whose integers come back as numbers.
        let row: Option<mysql::Row> = self
            .conn
            .exec_first(sql, ())
            .map_err(my(self.context.clone()))?;
        Ok(row
            .map(mysql::Row::unwrap)
            .unwrap_or_default()
            .into_iter()
            .filter_map(values::scalar)
            .map(|v| match v {
                Scalar::Int(i) => Sample::Int(i),
                other => Sample::Text(other.to_string()),
            })
            .collect())
    }
}

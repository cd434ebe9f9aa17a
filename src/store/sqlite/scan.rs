//! What `doctor` reads of the table on SQLite: how SQLite plans the band query, and
//! the inserted-at column's distinct values, a page at a time.

use super::pages::sorts_all;
use super::*;

impl SqliteStore {
    pub(super) fn plan_band(&mut self) -> Result<QueryPlan, StoreError> {
        let sql = self.page_sql(true, false, false, false);
        let query = format!("EXPLAIN QUERY PLAN {sql}");
        let mut stmt = self
            .conn
            .prepare(&query)
            .map_err(db("explaining the band query"))?;
        // Bind placeholders of the column's own type: the plan depends on it, not on them.
        let format = self.format();
        let bound = format.encode(Utc::now());
        let n = stmt.parameter_count();
        let params: Vec<&dyn ToSql> = vec![&bound as &dyn ToSql; n];
        let detail: Vec<String> = stmt
            .query_map(params_from_iter(params), |r| r.get::<_, String>(3))
            .and_then(Iterator::collect)
            .map_err(db("explaining the band query"))?;
        let detail = detail.join("; ");
        let ins = &self.table.inserted_at;
        // A range on the inserted-at column, alone or after an equality on the status
        // (an index on status and inserted-at, read one status at a time), and no sort.
        let upper = detail.to_ascii_uppercase();
        let ins_upper = ins.to_ascii_uppercase();
        let uses_index = upper.contains("USING")
            && (upper.contains(&format!("({ins_upper}>?"))
                || upper.contains(&format!("AND {ins_upper}>?")))
            && !sorts_all(&upper);
        let create_index = (!uses_index).then(|| {
            format!(
                "CREATE INDEX {} ON {} ({});",
                quote(&index_name(&self.table.name, ins)),
                self.sql().table,
                self.sql().inserted_at
            )
        });
        Ok(QueryPlan {
            uses_index,
            detail,
            create_index,
        })
    }

    pub(super) fn read_inserted_at(
        &mut self,
        after: Option<&Scalar>,
        limit: usize,
    ) -> Result<Vec<Scalar>, StoreError> {
        let sql = self.sql();
        let query = format!(
            "SELECT DISTINCT {ins} FROM {t} WHERE {ins} IS NOT NULL AND (?1 IS NULL OR {ins} > ?1) ORDER BY {ins} LIMIT ?2",
            ins = sql.inserted_at,
            t = sql.table
        );
        let mut stmt = self
            .conn
            .prepare_cached(&query)
            .map_err(db("reading inserted-at values"))?;
        stmt.query_map(params![after, limit as i64], |r| Ok(scalar(r.get_ref(0)?)))
            .and_then(Iterator::collect)
            .map_err(db("reading inserted-at values"))
    }
}

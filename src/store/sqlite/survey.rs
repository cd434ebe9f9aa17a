//! What `status`, `doctor` and the metrics read of the table on SQLite (`Survey`): a
//! range's records counted by status, as a whole or status by status through an index on
//! (status, inserted-at) where none starts with inserted-at (`store::band_statuses`), as
//! a tick over an empty band does too; how SQLite plans the band query; the inserted-at
//! column's distinct values, a page at a time.

use super::pages::sorts_all;
use super::*;
use crate::store::band_statuses;

impl SqliteStore {
    /// Whether no index of `table` starts with the inserted-at column and one that is
    /// not partial starts with `status` and then it (see `Statements::statuses_by_index`).
    pub(super) fn statuses_by_index(&self, table: &str, status: &str) -> Result<bool, StoreError> {
        let ins = &self.table.inserted_at;
        let index_on = |first: &str, second: Option<&str>| -> Result<bool, StoreError> {
            self.conn
                .query_row(
                    "SELECT EXISTS (SELECT 1 FROM pragma_index_list(?1) l
                       JOIN pragma_index_info(l.name) a ON a.seqno = 0 AND a.name = ?2 COLLATE NOCASE
                       LEFT JOIN pragma_index_info(l.name) b ON b.seqno = 1
                      WHERE l.partial = 0 AND (?3 IS NULL OR b.name = ?3 COLLATE NOCASE))",
                    params![table, first, second],
                    |r| r.get(0),
                )
                .map_err(db("reading the table's indexes"))
        };
        Ok(!index_on(ins, None)? && index_on(status, Some(ins))?)
    }
}

impl Survey for SqliteStore {
    fn count_by_status(&mut self, range: &Range) -> Result<Vec<(String, u64)>, StoreError> {
        let sql = self.sql();
        let mut clauses = vec!["1 = 1".to_string()];
        let mut params: Vec<&dyn ToSql> = Vec::new();
        if let Some(from) = &range.from {
            let op = if range.from_exclusive { ">" } else { ">=" };
            params.push(from);
            clauses.push(format!("{} {op} ?{}", sql.inserted_at, params.len()));
        }
        if let Some(to) = &range.to {
            let op = if range.to_inclusive { "<=" } else { "<" };
            params.push(to);
            clauses.push(format!("{} {op} ?{}", sql.inserted_at, params.len()));
        }
        if sql.statuses_by_index {
            let band = clauses.join(" AND ");
            let mut index = SqliteStatuses {
                conn: &self.conn,
                next: band_statuses::next_sql(&sql.table, &sql.status, "?1", &|e| e.to_string()),
                count: band_statuses::count_sql(
                    &sql.table,
                    &sql.status,
                    &band,
                    &format!("?{}", params.len() + 1),
                    range.sample,
                ),
                bounds: params
                    .iter()
                    .map(|p| p.to_sql())
                    .collect::<Result<_, _>>()
                    .map_err(db("binding the band"))?,
                context: format!("counting the records of {}", self.table.name),
            };
            if let Some(counts) = band_statuses::counts(&mut index, range.sample.is_none())? {
                return Ok(counts);
            }
        }
        let query = match range.sample {
            None => format!(
                "SELECT {st}, count(*) FROM {t} WHERE {} GROUP BY {st} ORDER BY {st}",
                clauses.join(" AND "),
                st = sql.status,
                t = sql.table
            ),
            Some(n) => format!(
                "SELECT {st}, count(*) FROM (SELECT {st} FROM {t} WHERE {} LIMIT {n}) GROUP BY {st} ORDER BY {st}",
                clauses.join(" AND "),
                st = sql.status,
                t = sql.table
            ),
        };
        let context = format!("counting the records of {}", self.table.name);
        let mut stmt = self.conn.prepare(&query).map_err(db(context.clone()))?;
        stmt.query_map(params_from_iter(params), |r| {
            Ok((
                scalar(r.get_ref(0)?).to_string(),
                r.get::<_, i64>(1)? as u64,
            ))
        })
        .and_then(Iterator::collect)
        .map_err(db(context))
    }

    fn band_plan(&mut self) -> Result<QueryPlan, StoreError> {
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
            partitions: None,
        })
    }

    fn inserted_at_page(
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

/// `store::band_statuses` on SQLite.
struct SqliteStatuses<'a> {
    conn: &'a Connection,
    /// The first status, the next one.
    next: [String; 2],
    count: String,
    /// The band's bounds, bound before the status.
    bounds: Vec<ToSqlOutput<'a>>,
    context: String,
}

impl band_statuses::StatusIndex for SqliteStatuses<'_> {
    fn next(&mut self, after: Option<&Scalar>) -> Result<Option<Scalar>, StoreError> {
        let read = |r: &rusqlite::Row<'_>| {
            Ok(Some(r.get_ref(0)?)
                .filter(|v| *v != ValueRef::Null)
                .map(scalar))
        };
        match after {
            None => self.conn.query_row(&self.next[0], [], read),
            Some(after) => self.conn.query_row(&self.next[1], [after], read),
        }
        .map_err(db(self.context.clone()))
    }

    fn count(&mut self, status: &Scalar) -> Result<u64, StoreError> {
        let mut values: Vec<&dyn ToSql> = self.bounds.iter().map(|b| b as &dyn ToSql).collect();
        values.push(status);
        self.conn
            .query_row(&self.count, params_from_iter(values), |r| {
                r.get::<_, i64>(0)
            })
            .map(|n| n.max(0) as u64)
            .map_err(db(self.context.clone()))
    }
}

//! What `status`, `doctor` and the metrics read of the table on SQLite (`Survey`): a
//! range's records counted by status, as a whole or status by status through an index on
//! (status, inserted-at) where none starts with inserted-at (`store::band_statuses`), as
//! a tick over an empty band does too; how SQLite plans the band query; the inserted-at
//! column's distinct values, a page at a time.

use super::pages::sorts_all;
use crate::Bind;
use crate::SqliteStore;
use crate::db;
use crate::dialect::LiteRef;
use crate::scalar;
use backlog_core::record::Scalar;
use backlog_core::store::Kind;
use backlog_core::store::QueryPlan;
use backlog_core::store::Range;
use backlog_core::store::StoreError;
use backlog_core::store::Survey;
use backlog_core::store::TableColumn;
use backlog_core::store::TableShape;
use backlog_core::store::band_statuses;
use backlog_core::store::index_name;
use backlog_core::store::quote;
use backlog_core::store::shape;
use chrono::DateTime;
use chrono::Utc;
use rusqlite::ToSql;
use rusqlite::params;
use rusqlite::params_from_iter;

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
        let statuses = band_statuses::Statuses {
            table: &sql.table,
            status: &sql.status,
            inserted_at: &sql.inserted_at,
            grouped: "{}",
            least: "{}",
            bound: "{}",
            by_index: sql.statuses_by_index,
        };
        let context = format!("counting the records of {}", self.table.name);
        band_statuses::count_by_status(&mut LiteRef(&self.conn), &statuses, range, &context)
    }

    fn oldest_in(
        &mut self,
        statuses: &[String],
        range: &Range,
    ) -> Result<Option<DateTime<Utc>>, StoreError> {
        // A status at a time: a seek through an index on (status, inserted-at), or a
        // range of one on inserted-at that stops at its first match.
        let sql = self.sql();
        let (band, bounds) = range.condition(&sql.inserted_at, 2, |n| format!("?{n}"));
        let query = format!(
            "SELECT * FROM {t} WHERE {st} = ?1 AND {band} ORDER BY {ins} ASC LIMIT 1",
            t = sql.table,
            st = sql.status,
            ins = sql.inserted_at
        );
        let bounds: Vec<Bind> = bounds.into_iter().map(Bind::from).collect();
        let mut oldest = None;
        for status in statuses {
            let mut params: Vec<&dyn ToSql> = vec![status];
            params.extend(bounds.iter().map(|b| b as &dyn ToSql));
            let found = self.records(&query, &params)?.pop();
            oldest = backlog_core::store::earlier(oldest, found.and_then(|r| r.inserted_time));
        }
        Ok(oldest)
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
        let bound = Bind::from(format.encode(Utc::now()));
        let n = stmt.parameter_count();
        let params: Vec<&dyn ToSql> = vec![&bound as &dyn ToSql; n];
        let detail: Vec<String> = stmt
            .query_map(params_from_iter(params), |r| r.get::<_, String>(3))
            .and_then(Iterator::collect)
            .map_err(db("explaining the band query"))?;
        let lines = detail;
        let detail = lines.join("; ");
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
            // SQLite's plan is a few short lines: all of them, a sort included.
            summary: detail,
            lines,
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
        stmt.query_map(params![Bind::from(after), limit as i64], |r| {
            Ok(scalar(r.get_ref(0)?))
        })
        .and_then(Iterator::collect)
        .map_err(db("reading inserted-at values"))
    }

    fn table_shape(&mut self) -> Result<TableShape, StoreError> {
        let name = self.resolve_table()?;
        let context = format!("reading the columns of {name}");
        let mut stmt = self
            .conn
            .prepare("SELECT name, type, pk FROM pragma_table_info(?1) ORDER BY cid")
            .map_err(db(&context))?;
        let rows: Vec<(String, String, i64)> = stmt
            .query_map([&name], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .and_then(Iterator::collect)
            .map_err(db(&context))?;
        let mut key: Vec<(i64, String)> = rows
            .iter()
            .filter(|r| r.2 > 0)
            .map(|r| (r.2, r.0.clone()))
            .collect();
        key.sort();
        let columns = rows
            .into_iter()
            .map(|(name, sql_type, _)| TableColumn {
                kind: kind(&sql_type),
                name,
                sql_type,
                labels: Vec::new(),
            })
            .collect();
        Ok(TableShape {
            quoted: quote(&name),
            name,
            columns,
            primary_key: key.into_iter().map(|k| k.1).collect(),
        })
    }

    fn values(
        &mut self,
        shape: &TableShape,
        column: &str,
        limit: usize,
        sample: Option<usize>,
    ) -> Result<Vec<(String, u64)>, StoreError> {
        let query = format!(
            "SELECT CAST(v AS TEXT), count(*) FROM (SELECT {c} AS v FROM {t} WHERE {c} IS NOT NULL LIMIT ?2) GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT ?1",
            c = quote(column),
            t = shape.quoted
        );
        let context = format!("counting the values of {column} in {}", shape.name);
        let mut stmt = self.conn.prepare(&query).map_err(db(&context))?;
        let sample = sample.map_or(shape::ALL, |n| n as i64);
        stmt.query_map([limit as i64 + 1, sample], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)? as u64))
        })
        .and_then(Iterator::collect)
        .map_err(db(&context))
    }
}

/// What a declared type holds, by SQLite's affinity rules (an `INT` anywhere in the
/// name is an integer, `CHAR`, `CLOB` or `TEXT` text), a date or time named as such.
fn kind(declared: &str) -> Kind {
    let t = declared.to_ascii_uppercase();
    if t.contains("INT") {
        Kind::Integer
    } else if t.contains("DATE") || t.contains("TIME") {
        Kind::Timestamp
    } else if t.contains("CHAR") || t.contains("CLOB") || t.contains("TEXT") || t.is_empty() {
        Kind::Text
    } else {
        Kind::Other
    }
}

//! What `status` and `doctor` read of the table on MySQL: its records counted by status,
//! how the server plans the band query, and the inserted-at column's distinct values, a
//! page at a time.

use mysql::prelude::Queryable;

use crate::MysqlStore;
use crate::connection::my;
use crate::schema::{INTEGERS, TEXTS, text};
use crate::values;
use backlog_core::record::Scalar;
use backlog_core::store::Kind;
use backlog_core::store::QueryPlan;
use backlog_core::store::Range;
use backlog_core::store::StoreError;
use backlog_core::store::Survey;
use backlog_core::store::TableColumn;
use backlog_core::store::TableShape;
use backlog_core::store::band_statuses;
use backlog_core::store::shape;
use backlog_core::store::{index_name, quote};
use chrono::DateTime;
use chrono::Utc;

impl Survey for MysqlStore {
    fn count_by_status(&mut self, range: &Range) -> Result<Vec<(String, u64)>, StoreError> {
        let shape = self.shape();
        let (table, status, ins) = (
            shape.table.clone(),
            shape.quoted(shape.status),
            shape.quoted(shape.inserted_at),
        );
        let statuses = band_statuses::Statuses {
            table: &table,
            status: &status,
            inserted_at: &ins,
            // Grouped by the bytes: statuses that differ in case only are two.
            grouped: "CAST({} AS BINARY)",
            least: "{}",
            bound: "{}",
            by_index: shape.status_age_index.is_some(),
        };
        let context = format!("counting the records of {}", self.table.name);
        band_statuses::count_by_status(&mut self.conn, &statuses, range, &context)
    }

    fn oldest_in(
        &mut self,
        statuses: &[String],
        range: &Range,
    ) -> Result<Option<DateTime<Utc>>, StoreError> {
        // A status at a time: a seek through an index on (status, inserted-at), or a
        // range of one on inserted-at that stops at its first match.
        let shape = self.shape();
        let ins = format!("t.{}", shape.quoted(shape.inserted_at));
        let (band, bounds) = range.condition(&ins, 1, |_| "?".to_string());
        let bounds: Vec<mysql::Value> = bounds.into_iter().map(values::bound).collect();
        let mut oldest = None;
        for status in statuses {
            let (status, mut params) = self.status_in(std::slice::from_ref(status));
            params.extend(bounds.iter().cloned());
            let clause = format!("WHERE {status} AND {band} ORDER BY {ins} ASC LIMIT 1");
            let found = self.query_records(true, &clause, params)?.pop();
            oldest = backlog_core::store::earlier(oldest, found.and_then(|r| r.inserted_time));
        }
        Ok(oldest)
    }

    fn band_plan(&mut self) -> Result<QueryPlan, StoreError> {
        let shape = self.shape();
        let ins = shape.quoted(shape.inserted_at);
        let now = Utc::now();
        let format = self.format();
        let bounds = vec![
            values::bound(&format.encode(now - chrono::Duration::days(7))),
            values::bound(&format.encode(now - chrono::Duration::days(1))),
        ];
        let (sql, params) = self.page_query(&format!("t.{ins} >= ? AND t.{ins} < ?"), bounds, 200);
        let sql = format!("EXPLAIN {sql}");
        let (database, table) = shape.schema_name.clone();
        let bare = shape.names[shape.inserted_at].clone();
        let rows: Vec<mysql::Row> = self
            .conn
            .exec(sql, params)
            .map_err(my("explaining the band query"))?;
        let mut detail = Vec::new();
        let mut keys = Vec::new();
        let mut sorts = false;
        for row in rows {
            let field = |name: &str| {
                row.columns_ref()
                    .iter()
                    .position(|c| c.name_str().eq_ignore_ascii_case(name))
                    .and_then(|i| row.as_ref(i))
                    .and_then(values::text)
                    .unwrap_or_default()
            };
            let (kind, key, extra) = (field("type"), field("key"), field("Extra"));
            // The merge of the per-status pages (`<derived2>`, `<union2,3>`) sorts a
            // few pages' rows, not the band.
            if field("table").starts_with('<') {
                continue;
            }
            sorts |= extra.contains("filesort");
            detail.push(format!(
                "type={kind} key={key} rows={} extra={extra}",
                field("rows")
            ));
            if matches!(kind.as_str(), "range" | "ref" | "index") && !key.is_empty() {
                keys.push(key);
            }
        }
        let mut uses_index = false;
        for key in keys {
            let columns: Vec<mysql::Value> = self
                .conn
                .exec(
                    "SELECT COLUMN_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND INDEX_NAME = ? ORDER BY SEQ_IN_INDEX",
                    (&database, &table, &key),
                )
                .map_err(my("reading the table's indexes"))?;
            uses_index |= columns
                .iter()
                .any(|c| values::text(c).as_deref() == Some(&bare));
        }
        let uses_index = uses_index && !sorts;
        // Written for the mysql client, which reads identifiers in backquotes.
        let create_index = (!uses_index).then(|| {
            let tick = |name: &str| format!("`{}`", name.replace('`', "``"));
            format!(
                "CREATE INDEX {} ON {}.{} ({});",
                tick(&index_name(&self.table.name, &bare)),
                tick(&database),
                tick(&table),
                tick(&bare)
            )
        });
        Ok(QueryPlan {
            uses_index,
            // A row per table the query reads: each is a scan.
            summary: QueryPlan::summary_of(&detail, ""),
            lines: detail,
            create_index,
            partitions: None,
        })
    }

    fn inserted_at_page(
        &mut self,
        after: Option<&Scalar>,
        limit: usize,
    ) -> Result<Vec<Scalar>, StoreError> {
        let shape = self.shape();
        let ins = quote(&shape.names[shape.inserted_at]);
        let mut params = Vec::new();
        let clause = match after {
            Some(after) => {
                params.push(values::bound(after));
                format!("{ins} > ?")
            }
            None => format!("{ins} IS NOT NULL"),
        };
        params.push(mysql::Value::UInt(limit as u64));
        let rows: Vec<mysql::Value> = self
            .conn
            .0
            .exec(
                format!(
                    "SELECT DISTINCT {ins} FROM {} WHERE {clause} ORDER BY {ins} LIMIT ?",
                    shape.table
                ),
                params,
            )
            .map_err(my(format!(
                "reading {} of {}",
                self.table.inserted_at, self.table.name
            )))?;
        Ok(rows.into_iter().filter_map(values::scalar).collect())
    }

    fn table_shape(&mut self) -> Result<TableShape, StoreError> {
        let (database, table) = self.resolve_table()?;
        let context = format!("reading the columns of {}", self.table.name);
        let (names, _) = self.columns(&database, &table)?;
        let key: Vec<mysql::Value> = self
            .conn
            .exec(
                "SELECT COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE
                 WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND CONSTRAINT_NAME = 'PRIMARY'
                 ORDER BY ORDINAL_POSITION",
                (&database, &table),
            )
            .map_err(my(&context))?;
        let enums: Vec<(String, Vec<String>)> = self
            .conn
            .exec::<(mysql::Value, mysql::Value), _, _>(
                "SELECT COLUMN_NAME, COLUMN_TYPE FROM information_schema.COLUMNS
                 WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND DATA_TYPE = 'enum'",
                (&database, &table),
            )
            .map_err(my(&context))?
            .iter()
            .map(|(n, t)| (text(n), enum_labels(&text(t))))
            .collect();
        let quoted = format!("{}.{}", quote(&database), quote(&table));
        // Qualified as the name asked for was.
        let name = if self.table.name.contains('.') {
            format!("{database}.{table}")
        } else {
            table
        };
        Ok(TableShape {
            name,
            quoted,
            columns: names
                .into_iter()
                .map(|(name, sql_type)| TableColumn {
                    kind: kind(&sql_type),
                    labels: enums
                        .iter()
                        .find(|(n, _)| *n == name)
                        .map(|(_, labels)| labels.clone())
                        .unwrap_or_default(),
                    name,
                    sql_type,
                })
                .collect(),
            primary_key: key.iter().map(text).collect(),
        })
    }

    fn values(
        &mut self,
        shape: &TableShape,
        column: &str,
        limit: usize,
        sample: Option<usize>,
    ) -> Result<Vec<(String, u64)>, StoreError> {
        let sample = sample.map_or(shape::ALL, |n| n as i64);
        let rows: Vec<(mysql::Value, u64)> = self
            .conn
            .0
            .exec(
                format!(
                    // Grouped by the bytes, as count_by_status groups: a collation
                    // that ignores case or trailing spaces would make two statuses one.
                    "SELECT CAST(v AS BINARY), count(*) FROM (SELECT {c} AS v FROM {t} WHERE {c} IS NOT NULL LIMIT ?) s GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT ?",
                    c = quote(column),
                    t = shape.quoted
                ),
                (sample, limit as u64 + 1),
            )
            .map_err(my(format!(
                "counting the values of {column} in {}",
                shape.name
            )))?;
        Ok(rows.iter().map(|(v, n)| (text(v), *n)).collect())
    }
}

/// The labels of `enum('new','done','it''s')`, as information_schema writes the type.
fn enum_labels(column_type: &str) -> Vec<String> {
    let inner = column_type
        .strip_prefix("enum(")
        .and_then(|t| t.strip_suffix(')'))
        .unwrap_or("");
    let mut labels = Vec::new();
    let mut chars = inner.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\'' {
            continue;
        }
        let mut label = String::new();
        while let Some(c) = chars.next() {
            match c {
                '\'' if chars.peek() == Some(&'\'') => {
                    chars.next();
                    label.push('\'');
                }
                '\'' => break,
                c => label.push(c),
            }
        }
        labels.push(label);
    }
    labels
}

/// What a type holds, by its `DATA_TYPE`.
fn kind(data_type: &str) -> Kind {
    match data_type {
        t if INTEGERS.contains(&t) => Kind::Integer,
        t if TEXTS.contains(&t) => Kind::Text,
        "enum" => Kind::Enum,
        // A date alone is no instant: the band's bounds are.
        "datetime" | "timestamp" => Kind::Timestamp,
        _ => Kind::Other,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_enumerations_labels_are_read_as_information_schema_writes_them() {
        assert_eq!(
            super::enum_labels("enum('new','done','it''s','a,b')"),
            ["new", "done", "it's", "a,b"]
        );
        assert!(super::enum_labels("varchar(10)").is_empty());
    }
}

//! Reading the band on MySQL: page queries, rows into records, and the reads `status`,
//! `doctor` and `show` make.

use mysql::prelude::Queryable;

use super::connection::placeholders;
use super::*;
use crate::record::{Columns, Statuses};
use crate::store::band_statuses;
use crate::store::{index_name, quote};

/// The clause that matches the statuses of column `status` (quoted) exactly, and its
/// parameters. A text column compares in its collation, which ignores case by default
/// (`new` would match `NEW`); statuses are compared exactly on every backend, so the
/// bytes are compared too, beside the comparison an index on the column serves.
pub(super) fn status_in(status: &str, statuses: &[String]) -> (String, Vec<mysql::Value>) {
    let list = placeholders(statuses.len());
    let values: Vec<mysql::Value> = statuses
        .iter()
        .map(|s| mysql::Value::Bytes(s.as_bytes().to_vec()))
        .collect();
    (
        format!("(t.{status} IN ({list}) AND CAST(t.{status} AS BINARY) IN ({list}))"),
        [values.clone(), values].concat(),
    )
}

/// Rows of `shape.select` as records, their inserted-at values read in `format`.
pub(super) fn records_of(
    shape: &Shape,
    format: TimestampFormat,
    rows: Vec<mysql::Row>,
) -> Vec<Record> {
    let mut statuses = Statuses::default();
    rows.into_iter()
        .map(|row| {
            let raw = row.unwrap();
            let id = shape.id_kind.read(raw[shape.id].clone());
            let status = values::text(&raw[shape.status]).unwrap_or_default();
            let inserted_at = values::scalar(raw[shape.inserted_at].clone())
                .unwrap_or(Scalar::Text(String::new()));
            let inserted_time = format.decode(&inserted_at);
            let json = raw
                .into_iter()
                .zip(&shape.types)
                .map(|(v, t)| values::json(v, t))
                .collect();
            Record::new(
                id,
                statuses.get(status.as_bytes()),
                inserted_at,
                inserted_time,
                Columns::new(Arc::clone(&shape.names), json),
            )
        })
        .collect()
}

impl MysqlStore {
    /// Rows of `shape.select` as records.
    fn records(&self, rows: Vec<mysql::Row>) -> Vec<Record> {
        records_of(self.shape(), self.format(), rows)
    }

    /// Runs `shape.select` with `clause` and its parameters (`shape.select_by_age`
    /// when `by_age`: the clause reads a range of ages, in their order).
    pub(super) fn query_records(
        &mut self,
        by_age: bool,
        clause: &str,
        params: Vec<mysql::Value>,
    ) -> Result<Vec<Record>, StoreError> {
        let shape = self.shape();
        let select = if by_age {
            &shape.select_by_age
        } else {
            &shape.select
        };
        let sql = format!("{select} {clause}");
        let rows: Vec<mysql::Row> = self
            .conn
            .exec(sql, params)
            .map_err(my(format!("selecting from {}", self.table.name)))?;
        Ok(self.records(rows))
    }

    /// The clause that matches the statuses `statuses` exactly, and its parameters.
    pub(super) fn status_in(&self, statuses: &[String]) -> (String, Vec<mysql::Value>) {
        status_in(&self.shape().quoted(self.shape().status), statuses)
    }

    pub(super) fn select_page(
        &mut self,
        band: &BandQuery,
        after: Option<&Cursor>,
        limit: usize,
    ) -> Result<Vec<Record>, StoreError> {
        let (sql, params) = self.page(band, after, limit);
        let rows: Vec<mysql::Row> = self
            .conn
            .exec(sql, params)
            .map_err(my(format!("selecting from {}", self.table.name)))?;
        Ok(self.records(rows))
    }

    /// Takes a page for `owner`: reads it and claims the records `wanted` in one
    /// transaction. Where the page is one query (through the inserted-at index) and
    /// the tick wants every record, it locks its rows as it reads them, skipping those another runner's transaction
    /// holds (`FOR UPDATE SKIP LOCKED`): runners reading the band at the same moment
    /// get pages of their own instead of all reading one and all but one finding it
    /// claimed. (One status at a time, merged, the page is read, then its rows locked
    /// as they are claimed: a locking read cannot be one branch of a union everywhere.)
    pub(super) fn take_page(
        &mut self,
        owner: &str,
        band: &BandQuery,
        after: Option<&Cursor>,
        limit: usize,
        lease_until: DateTime<Utc>,
        wanted: &dyn Fn(&Record) -> bool,
    ) -> Result<Page, StoreError> {
        let plan = self.claim_plan(owner, lease_until, band.take_tried, band.clock);
        let (mut sql, params) = self.page(band, after, limit);
        // Locked as read only for a tick that wants every record: a row locked and not
        // wanted would be skipped by a tick that wants it (another tier's, a
        // `--retry-failed` run) and missed for its slot.
        if band.wants_all && !self.pages_by_status() {
            sql.push_str(" FOR UPDATE SKIP LOCKED");
        }
        let shape = self
            .shape
            .as_ref()
            .expect("inspect() runs before any query");
        let format = self.format.expect("inspect() runs before any query");
        let (read, ours) = connection::transaction(&mut self.conn, "claiming records", |tx| {
            let rows: Vec<mysql::Row> = tx.exec(&sql, params.clone())?;
            let read = records_of(shape, format, rows);
            let ids: Vec<&Scalar> = read.iter().filter(|r| wanted(r)).map(|r| &r.id).collect();
            let ours = super::claims::claim_in(tx, &plan, &ids)?;
            Ok((read, ours))
        })?;
        Ok(Page::sorted(
            read,
            |_, r| ours.contains(&r.id.to_string()),
            wanted,
        ))
    }

    /// Whether pages are read one pending status at a time and merged (see
    /// `page_query`).
    fn pages_by_status(&self) -> bool {
        self.shape().status_age_index.is_some() && self.table.pending.len() > 1
    }

    /// The SQL of the page after `after` (the band's first without), and its
    /// parameters.
    pub(super) fn page(
        &self,
        band: &BandQuery,
        after: Option<&Cursor>,
        limit: usize,
    ) -> (String, Vec<mysql::Value>) {
        let shape = self.shape();
        let (ins, id) = (shape.quoted(shape.inserted_at), shape.quoted(shape.id));
        let mut params = vec![values::bound(&band.from)];
        let range = match after {
            None => {
                params.push(values::bound(&band.to));
                let op = if band.to_inclusive { "<=" } else { "<" };
                format!("t.{ins} >= ? AND t.{ins} {op} ?")
            }
            Some(c) => {
                let at = values::bound(&c.inserted_at);
                let cursor_id = match &c.id {
                    Scalar::Int(i) => mysql::Value::Int(*i),
                    other => shape
                        .id_kind
                        .bind(&other.to_string())
                        .unwrap_or(mysql::Value::NULL),
                };
                params.extend([at.clone(), at.clone(), at, cursor_id]);
                // Written out rather than as a row comparison, which MySQL does not
                // read as an index range.
                format!(
                    "t.{ins} >= ? AND t.{ins} <= ? AND (t.{ins} < ? OR (t.{ins} = ? AND t.{id} < ?))"
                )
            }
        };
        self.page_query(&range, params, limit)
    }

    /// A page of the band: the records in `range` (whose parameters are `params`) of a
    /// pending status, newest first, at most `limit`. Read through the inserted-at index
    /// (`FORCE INDEX`), or, where the table has none but one on (status, inserted-at),
    /// one status at a time through that one, each an index range in the band's order,
    /// merged: one query for several statuses would sort the whole rest of the band at
    /// every page.
    fn page_query(
        &self,
        range: &str,
        params: Vec<mysql::Value>,
        limit: usize,
    ) -> (String, Vec<mysql::Value>) {
        let shape = self.shape();
        let (ins, id) = (shape.quoted(shape.inserted_at), shape.quoted(shape.id));
        let order = format!("ORDER BY t.{ins} DESC, t.{id} DESC LIMIT ?");
        let limit = mysql::Value::UInt(limit as u64);
        let pending = &self.table.pending;
        match &shape.status_age_index {
            Some(index) if self.pages_by_status() => {
                let mut all = Vec::new();
                let branches: Vec<String> = pending
                    .iter()
                    .map(|status| {
                        let (exact, values) = status_in(&shape.quoted(shape.status), std::slice::from_ref(status));
                        all.extend(params.iter().cloned());
                        all.extend(values);
                        all.push(limit.clone());
                        format!(
                            "(SELECT t.* FROM {} t FORCE INDEX ({}) WHERE {range} AND {exact} {order})",
                            shape.table,
                            quote(index)
                        )
                    })
                    .collect();
                all.push(limit);
                (
                    format!(
                        "SELECT {} FROM ({}) t {order}",
                        shape.list,
                        branches.join(" UNION ALL ")
                    ),
                    all,
                )
            }
            _ => {
                let (exact, values) = self.status_in(pending);
                let mut all = params;
                all.extend(values);
                all.push(limit);
                (
                    format!("{} WHERE {range} AND {exact} {order}", shape.select_by_age),
                    all,
                )
            }
        }
    }

    pub(super) fn count_statuses(
        &mut self,
        range: &Range,
    ) -> Result<Vec<(String, u64)>, StoreError> {
        let shape = self.shape();
        let ins = format!("t.{}", shape.quoted(shape.inserted_at));
        let (table, st) = (
            shape.table.clone(),
            format!("t.{}", shape.quoted(shape.status)),
        );
        let by_index = shape.status_age_index.is_some();
        let mut clauses = vec!["TRUE".to_string()];
        let mut params = Vec::new();
        if let Some(from) = &range.from {
            let op = if range.from_exclusive { ">" } else { ">=" };
            params.push(values::bound(from));
            clauses.push(format!("{ins} {op} ?"));
        }
        if let Some(to) = &range.to {
            let op = if range.to_inclusive { "<=" } else { "<" };
            params.push(values::bound(to));
            clauses.push(format!("{ins} {op} ?"));
        }
        if by_index {
            let t = format!("{table} t");
            let mut index = MysqlStatuses {
                conn: &mut self.conn,
                next: band_statuses::next_sql(&t, &st, "?", &|e| e.to_string()),
                count: band_statuses::count_sql(&t, &st, &clauses.join(" AND "), "?", range.sample),
                bounds: params.clone(),
                context: format!("counting the records of {}", self.table.name),
            };
            if let Some(counts) = band_statuses::counts(&mut index, range.sample.is_none())? {
                return Ok(counts);
            }
        }
        // Grouped by the bytes: statuses that differ in case only are two.
        let status = format!("CAST({st} AS BINARY)");
        let sql = match range.sample {
            None => format!(
                "SELECT {status}, count(*) FROM {table} t WHERE {} GROUP BY 1 ORDER BY 1",
                clauses.join(" AND ")
            ),
            Some(n) => format!(
                "SELECT s, count(*) FROM (SELECT {status} AS s FROM {table} t WHERE {} LIMIT {n}) x GROUP BY 1 ORDER BY 1",
                clauses.join(" AND ")
            ),
        };
        let rows: Vec<(mysql::Value, i64)> = self
            .conn
            .exec(sql, params)
            .map_err(my(format!("counting the records of {}", self.table.name)))?;
        Ok(rows
            .into_iter()
            .map(|(s, n)| (values::text(&s).unwrap_or_default(), n.max(0) as u64))
            .collect())
    }

    pub(super) fn read_oldest(
        &mut self,
        statuses: &[String],
        before: Option<DateTime<Utc>>,
        limit: usize,
    ) -> Result<Vec<Record>, StoreError> {
        let shape = self.shape();
        let ins = shape.quoted(shape.inserted_at);
        let (status, mut params) = self.status_in(statuses);
        let before = match before {
            Some(t) => {
                params.push(values::bound(&self.format().encode(t)));
                format!("AND t.{ins} < ?")
            }
            None => String::new(),
        };
        params.push(mysql::Value::UInt(limit as u64));
        self.query_records(
            true,
            &format!(
                "WHERE {status} AND t.{ins} IS NOT NULL {before} ORDER BY t.{ins} ASC LIMIT ?"
            ),
            params,
        )
    }

    pub(super) fn find_record(&mut self, id: &str) -> Result<Option<Record>, StoreError> {
        let shape = self.shape();
        // Text that is no id of the column's type (`abc` for a bigint) is no record.
        let Some(bound) = shape.id_kind.bind(id) else {
            return Ok(None);
        };
        let clause = format!("WHERE t.{} = ?", shape.quoted(shape.id));
        Ok(self.query_records(false, &clause, vec![bound])?.pop())
    }

    pub(super) fn plan_band(&mut self) -> Result<QueryPlan, StoreError> {
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
            format!(
                "CREATE INDEX `{}` ON `{database}`.`{table}` (`{bare}`);",
                index_name(&self.table.name, &bare)
            )
        });
        Ok(QueryPlan {
            uses_index,
            detail: detail.join("; "),
            create_index,
        })
    }

    pub(super) fn read_inserted_at(
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
}

/// `store::band_statuses` on MySQL and MariaDB.
struct MysqlStatuses<'a> {
    conn: &'a mut mysql::Conn,
    /// The first status, the next one.
    next: [String; 2],
    count: String,
    /// The band's bounds, bound after the status.
    bounds: Vec<mysql::Value>,
    context: String,
}

impl band_statuses::StatusIndex for MysqlStatuses<'_> {
    fn next(&mut self, after: Option<&Scalar>) -> Result<Option<Scalar>, StoreError> {
        let found: Option<mysql::Value> = match after {
            None => self.conn.exec_first(&self.next[0], ()),
            Some(after) => self
                .conn
                .exec_first(&self.next[1], vec![values::bound(after)]),
        }
        .map_err(my(self.context.clone()))?;
        Ok(found.and_then(values::scalar))
    }

    fn count(&mut self, status: &Scalar) -> Result<u64, StoreError> {
        let mut params = vec![values::bound(status)];
        params.extend(self.bounds.iter().cloned());
        let n: Option<i64> = self
            .conn
            .exec_first(&self.count, params)
            .map_err(my(self.context.clone()))?;
        Ok(n.unwrap_or(0).max(0) as u64)
    }
}

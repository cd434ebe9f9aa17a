//! Reading the band on MySQL: page queries, rows into records, and the reads `status`,
//! `doctor` and `show` make.

use mysql::prelude::Queryable;

use super::connection::placeholders;
use crate::MysqlStore;
use crate::Shape;
use crate::connection::my;
use crate::values;
use backlog_core::record::Record;
use backlog_core::record::Scalar;
use backlog_core::record::{Columns, Statuses};
use backlog_core::store::BandQuery;
use backlog_core::store::Cursor;
use backlog_core::store::Reads;
use backlog_core::store::StoreError;
use backlog_core::store::quote;
use backlog_core::timestamp::TimestampFormat;
use chrono::DateTime;
use chrono::Utc;
use std::sync::Arc;

/// The clause that matches column `status` (quoted) of `t` with the statuses whose
/// placeholders are `{list}`, exactly. A text column compares in its collation, which
/// ignores case by default (`new` would match `NEW`); statuses are compared exactly on
/// every backend, so the bytes are compared too, beside the comparison an index on the
/// column serves. The list comes twice: its values are bound twice.
pub(super) fn exact_status(status: &str) -> String {
    format!("(t.{status} IN ({{list}}) AND CAST(t.{status} AS BINARY) IN ({{list}}))")
}

/// `exact_status` with the statuses' placeholders, and its parameters.
pub(super) fn status_in(status: &str, statuses: &[String]) -> (String, Vec<mysql::Value>) {
    let values: Vec<mysql::Value> = statuses
        .iter()
        .map(|s| mysql::Value::Bytes(s.as_bytes().to_vec()))
        .collect();
    (
        exact_status(status).replace("{list}", &placeholders(statuses.len())),
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
    let binary: Arc<[bool]> = shape.types.iter().map(|t| values::is_binary(t)).collect();
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
                Columns::new(Arc::clone(&shape.names), json).with_binary(Arc::clone(&binary)),
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

    /// Whether pages are read one pending status at a time and merged (see
    /// `page_query`).
    pub(super) fn pages_by_status(&self) -> bool {
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
    pub(super) fn page_query(
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
}

impl Reads for MysqlStore {
    fn select(
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

    fn oldest_of(
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

    fn find(&mut self, id: &str) -> Result<Option<Record>, StoreError> {
        let shape = self.shape();
        // Text that is no id of the column's type (`abc` for a bigint) is said so.
        let Some(bound) = shape.id_kind.bind(id) else {
            return Err(StoreError::not_an_id(
                id,
                &self.table,
                shape.id_kind.holds(),
            ));
        };
        let clause = format!("WHERE t.{} = ?", shape.quoted(shape.id));
        Ok(self.query_records(false, &clause, vec![bound])?.pop())
    }
}

//! Reading the band on PostgreSQL: page queries, rows into records, and the reads
//! `status` and `show` make.

use crate::Bound;
use crate::PostgresStore;
use crate::connection::pg;
use backlog_core::record::Record;
use backlog_core::record::Scalar;
use backlog_core::record::Statuses;
use backlog_core::store::BandQuery;
use backlog_core::store::Cursor;
use backlog_core::store::Reads;
use backlog_core::store::StoreError;
use backlog_core::timestamp::TimestampFormat;
use chrono::DateTime;
use chrono::Utc;
use postgres::Statement;
use postgres::types::{ToSql, Type};
use serde_json::Value;
use std::sync::Arc;
/// The select list `records` reads, on the table aliased `t`: the row as JSON, the id
/// and status as text, and the inserted-at value in the type `format` decodes.
pub(super) fn select_records(
    table: &str,
    id: &str,
    status: &str,
    ins: &str,
    format: TimestampFormat,
) -> String {
    let read_ins = match format {
        TimestampFormat::UnixSeconds | TimestampFormat::UnixMillis => format!("t.{ins}::int8"),
        TimestampFormat::Text(_) => format!("t.{ins}::text"),
        TimestampFormat::Timestamptz | TimestampFormat::Timestamp(_) => format!("t.{ins}"),
    };
    format!(
        "SELECT row_to_json(t)::text, t.{id}::text, t.{status}::text, {read_ins} FROM {table} t"
    )
}

/// PostgreSQL's hex form of bytes (`\x00ff10`) as base64 (`AP8Q`); none for text
/// that is not whole hex pairs, which is then left as it is rather than losing bytes.
pub(super) fn base64_of_hex(hex: &str) -> Option<String> {
    use base64::Engine as _;
    let bytes = hex::decode(hex.strip_prefix("\\x")?).ok()?;
    Some(base64::engine::general_purpose::STANDARD.encode(bytes))
}

impl PostgresStore {
    /// Whether the band's pages should be read one pending status at a time and
    /// merged: when no index of the table starts with the inserted-at column but one
    /// starts with the status and then it. A single query for several statuses cannot
    /// read such an index in inserted-at order, so every page would sort the whole rest
    /// of the band (a bitmap scan and a sort: 29 times the time of a page read per
    /// status on a band of 75,000); per status, each is an index range read backwards,
    /// and the server merges them (`Merge Append`).
    pub(super) fn pages_by_status(
        &mut self,
        oid: u32,
        status: &str,
        inserted_at: &str,
    ) -> Result<bool, StoreError> {
        let row = self
            .client
            .query_typed_one(
                "WITH k AS (
                    SELECT (SELECT attnum FROM pg_attribute WHERE attrelid = $1 AND attname = $2) AS st,
                           (SELECT attnum FROM pg_attribute WHERE attrelid = $1 AND attname = $3) AS ins)
                 SELECT EXISTS (SELECT 1 FROM pg_index i, k WHERE i.indrelid = $1 AND i.indkey[0] = k.ins),
                        EXISTS (SELECT 1 FROM pg_index i, k WHERE i.indrelid = $1 AND i.indkey[0] = k.st AND i.indkey[1] = k.ins)",
                &[(&oid, Type::OID), (&status, Type::TEXT), (&inserted_at, Type::TEXT)],
            )
            .map_err(pg("reading the table's indexes"))?;
        let (by_age, by_status_and_age): (bool, bool) = (row.get(0), row.get(1));
        Ok(!by_age && by_status_and_age)
    }

    /// Reads rows of `SELECT row_to_json(t)::text, id::text, status::text, inserted_at`.
    pub(super) fn records(&self, rows: &[postgres::Row]) -> Result<Vec<Record>, StoreError> {
        let format = self.format();
        let int_id = self.prepared().int_id;
        let bytea = &self.prepared().bytea;
        let mut statuses = Statuses::default();
        rows.iter()
            .map(|row| {
                let json: String = row.get(0);
                let mut columns = match serde_json::from_str(&json) {
                    Ok(Value::Object(map)) => map,
                    _ => {
                        return Err(StoreError::Schema(format!(
                            "row_to_json of {} gave no JSON object",
                            self.table.name
                        )));
                    }
                };
                for name in bytea {
                    if let Some(Value::String(hex)) = columns.get_mut(name)
                        && let Some(b64) = base64_of_hex(hex)
                    {
                        *hex = b64;
                    }
                }
                let id: String = row.get(1);
                let inserted_at = match format {
                    TimestampFormat::UnixSeconds | TimestampFormat::UnixMillis => {
                        Scalar::Int(row.get(3))
                    }
                    TimestampFormat::Text(_) => Scalar::Text(row.get(3)),
                    TimestampFormat::Timestamptz => Scalar::Time(row.get(3)),
                    TimestampFormat::Timestamp(_) => Scalar::Naive(row.get(3)),
                };
                let inserted_time = format.decode(&inserted_at);
                let binary: Option<Arc<[bool]>> = (!bytea.is_empty())
                    .then(|| columns.keys().map(|name| bytea.contains(name)).collect());
                let columns = backlog_core::record::Columns::from(columns);
                Ok(Record::new(
                    match id.parse() {
                        Ok(n) if int_id => Scalar::Int(n),
                        _ => Scalar::Text(id),
                    },
                    statuses.get(row.get::<_, &str>(2).as_bytes()),
                    inserted_at,
                    inserted_time,
                    match binary {
                        Some(binary) => columns.with_binary(binary),
                        None => columns,
                    },
                ))
            })
            .collect()
    }

    /// Runs a query of the `records` shape built from the table's select list.
    pub(super) fn query_records(
        &mut self,
        where_order: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Record>, StoreError> {
        let p = self.prepared();
        let sql = format!(
            "{} {where_order}",
            select_records(
                &p.table,
                &p.id.quoted,
                &p.status.quoted,
                &p.inserted_at,
                self.format()
            )
        );
        let rows = self
            .client
            .query(&sql, params)
            .map_err(pg(format!("selecting from {}", self.table.name)))?;
        self.records(&rows)
    }

    /// The rows of a page: the first (`first`, by whether the band's end is inclusive)
    /// or the one after `after` (`next`), with `more` bound after the page's own.
    pub(super) fn page_rows(
        &mut self,
        first: &[Statement; 2],
        next: &Statement,
        band: &BandQuery,
        after: Option<&Cursor>,
        limit: usize,
        more: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<postgres::Row>, StoreError> {
        let limit = limit as i64;
        let pending = &self.table.pending;
        let from = Bound(&band.from);
        let rows = match after {
            None => {
                let to = Bound(&band.to);
                let mut params: Vec<&(dyn ToSql + Sync)> = vec![&from, &to, pending, &limit];
                params.extend(more);
                self.client
                    .query(&first[usize::from(band.to_inclusive)], &params)
            }
            Some(c) => {
                let (at, id) = (Bound(&c.inserted_at), c.id.to_string());
                let mut params: Vec<&(dyn ToSql + Sync)> = vec![&from, &at, pending, &limit, &id];
                params.extend(more);
                self.client.query(next, &params)
            }
        };
        rows.map_err(pg(format!("selecting from {}", self.table.name)))
    }
}

impl Reads for PostgresStore {
    fn select(
        &mut self,
        band: &BandQuery,
        after: Option<&Cursor>,
        limit: usize,
    ) -> Result<Vec<Record>, StoreError> {
        let p = self.prepared();
        let (first, next) = (p.first_page.clone(), p.next_page.clone());
        let rows = self.page_rows(&first, &next, band, after, limit, &[])?;
        self.records(&rows)
    }

    fn oldest_of(
        &mut self,
        statuses: &[String],
        before: Option<DateTime<Utc>>,
        limit: usize,
    ) -> Result<Vec<Record>, StoreError> {
        let p = self.prepared();
        let before = before.map(|t| self.format().encode(t));
        let clause = format!(
            "WHERE t.{st} = ANY ($1::text[]::{stt}[]) AND t.{ins} IS NOT NULL {before} ORDER BY t.{ins} ASC LIMIT $2",
            st = p.status.quoted,
            stt = p.status.sql_type,
            ins = p.inserted_at,
            before = if before.is_some() {
                format!("AND t.{} < $3", p.inserted_at)
            } else {
                String::new()
            }
        );
        let statuses = statuses.to_vec();
        let limit = limit as i64;
        match &before {
            Some(b) => self.query_records(&clause, &[&statuses, &limit, &Bound(b)]),
            None => self.query_records(&clause, &[&statuses, &limit]),
        }
    }

    fn find(&mut self, id: &str) -> Result<Option<Record>, StoreError> {
        let p = self.prepared();
        // Text that is no id of the column's type (`abc` for a bigint) is said so; the
        // server would refuse the cast.
        let (fits, holds) = match p.id.sql_type.as_str() {
            "bigint" => (id.parse::<i64>().is_ok(), "integers"),
            "integer" => (id.parse::<i32>().is_ok(), "integers (32-bit)"),
            "smallint" => (id.parse::<i16>().is_ok(), "integers (16-bit)"),
            "uuid" => (uuid::Uuid::parse_str(id).is_ok(), "uuids"),
            _ => (true, ""),
        };
        if !fits {
            return Err(StoreError::not_an_id(id, &self.table, holds));
        }
        let clause = format!("WHERE t.{} = $1::text::{}", p.id.quoted, p.id.sql_type);
        Ok(self.query_records(&clause, &[&id])?.pop())
    }
}

#[cfg(test)]
mod tests {
    use super::base64_of_hex;

    #[test]
    fn bytea_hex_becomes_base64_and_anything_else_stays_as_it_is() {
        assert_eq!(base64_of_hex("\\x00ff10").as_deref(), Some("AP8Q"));
        assert_eq!(base64_of_hex("\\x").as_deref(), Some(""));
        for bad in ["\\x0g", "\\x0", "00ff", "\\xzz10"] {
            assert_eq!(base64_of_hex(bad), None, "{bad}");
        }
    }
}

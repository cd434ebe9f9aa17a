//! Reading the band on PostgreSQL: page queries, rows into records, and the reads
//! `status` and `show` make.

use super::*;
use crate::store::band_statuses;

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
            .query_one(
                "WITH k AS (
                    SELECT (SELECT attnum FROM pg_attribute WHERE attrelid = $1 AND attname = $2) AS st,
                           (SELECT attnum FROM pg_attribute WHERE attrelid = $1 AND attname = $3) AS ins)
                 SELECT EXISTS (SELECT 1 FROM pg_index i, k WHERE i.indrelid = $1 AND i.indkey[0] = k.ins),
                        EXISTS (SELECT 1 FROM pg_index i, k WHERE i.indrelid = $1 AND i.indkey[0] = k.st AND i.indkey[1] = k.ins)",
                &[&oid, &status, &inserted_at],
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
                Ok(Record::new(
                    match id.parse() {
                        Ok(n) if int_id => Scalar::Int(n),
                        _ => Scalar::Text(id),
                    },
                    statuses.get(row.get::<_, &str>(2).as_bytes()),
                    inserted_at,
                    inserted_time,
                    columns.into(),
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

    pub(super) fn select_page(
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

    /// The rows of a page: the first (`first`, by whether the band's end is inclusive)
    /// or the one after `after` (`next`), with `more` bound after the page's own.
    fn page_rows(
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

    pub(super) fn take_page(
        &mut self,
        owner: &str,
        band: &BandQuery,
        after: Option<&Cursor>,
        limit: usize,
        lease_until: DateTime<Utc>,
        wanted: &dyn Fn(&Record) -> bool,
    ) -> Result<Page, StoreError> {
        // Runners on several hosts share a band, so each record is claimed on its own,
        // in one transaction a page: the page locks its rows no other tick holds or is
        // taking (see `TakeSql::page`), then one statement claims them (see
        // `claim_sql`). Only for a tick that wants every record it reads, and a page that
        // is one index range: a row locked and not wanted would be skipped by a tick
        // that wants it, and the pages read one status at a time would lock a page of
        // each. Otherwise the page is read, and the rows of the records wanted locked as
        // they are claimed, as before.
        if !self.locks_pages(band) {
            let read = self.select_page(band, after, limit)?;
            return self.claim_page(read, owner, lease_until, band, false, wanted);
        }
        self.client
            .batch_execute("BEGIN")
            .map_err(pg("taking a page"))?;
        // A panic on the way (a library user's `wanted`, a row of an unexpected type)
        // must not leave the session inside the transaction, holding the page's rows.
        let taken = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.take_in_transaction(owner, band, after, limit, lease_until, wanted)
        }))
        .unwrap_or_else(|panic| {
            let _ = self.client.batch_execute("ROLLBACK");
            std::panic::resume_unwind(panic)
        });
        let end = if taken.is_ok() { "COMMIT" } else { "ROLLBACK" };
        match (taken, self.client.batch_execute(end)) {
            (Ok(page), Ok(())) => Ok(page),
            (Err(e), _) => Err(e),
            (Ok(_), Err(e)) => Err(pg("taking a page")(e)),
        }
    }

    /// Whether the pages of `band` are taken locked (see `take_page`).
    pub(super) fn locks_pages(&self, band: &BandQuery) -> bool {
        band.wants_all && !self.pages_by_status
    }

    fn take_in_transaction(
        &mut self,
        owner: &str,
        band: &BandQuery,
        after: Option<&Cursor>,
        limit: usize,
        lease_until: DateTime<Utc>,
        wanted: &dyn Fn(&Record) -> bool,
    ) -> Result<Page, StoreError> {
        let own = self.own_statements();
        let name = self.table.name.clone();
        let more: [&(dyn ToSql + Sync); 4] = [&name, &band.take_tried, &band.clock, &KEPT_OWNER];
        let rows = self.page_rows(&own.take_first, &own.take_next, band, after, limit, &more)?;
        let read = self.records(&rows)?;
        self.claim_page(read, owner, lease_until, band, true, wanted)
    }

    /// Claims the records of a page `read` that the tick wants (`locked`: their rows
    /// are this transaction's already), and sorts the page by what became the tick's.
    fn claim_page(
        &mut self,
        read: Vec<Record>,
        owner: &str,
        lease_until: DateTime<Utc>,
        band: &BandQuery,
        locked: bool,
        wanted: &dyn Fn(&Record) -> bool,
    ) -> Result<Page, StoreError> {
        let ids: Vec<Scalar> = read
            .iter()
            .filter(|r| wanted(r))
            .map(|r| r.id.clone())
            .collect();
        let ours = if ids.is_empty() {
            std::collections::HashSet::new()
        } else {
            self.claim(owner, &ids, lease_until, band, locked)?
        };
        Ok(Page::sorted(
            read,
            |_, r| ours.contains(&r.id.to_string()),
            wanted,
        ))
    }

    pub(super) fn count_statuses(
        &mut self,
        range: &Range,
    ) -> Result<Vec<(String, u64)>, StoreError> {
        let p = self.prepared();
        let mut clauses = vec!["true".to_string()];
        let mut bounds = Vec::new();
        if let Some(from) = &range.from {
            let op = if range.from_exclusive { ">" } else { ">=" };
            bounds.push(Bound(from));
            clauses.push(format!("{} {op} ${}", p.inserted_at, bounds.len()));
        }
        if let Some(to) = &range.to {
            let op = if range.to_inclusive { "<=" } else { "<" };
            bounds.push(Bound(to));
            clauses.push(format!("{} {op} ${}", p.inserted_at, bounds.len()));
        }
        let (t, st) = (p.table.clone(), p.status.quoted.clone());
        if self.statuses_by_index {
            let typed = format!("::text::{}", self.prepared().status.sql_type);
            let band = clauses.join(" AND ");
            let mut index = PgStatuses {
                client: &mut self.client,
                next: band_statuses::next_sql(&t, &st, &format!("$1{typed}"), &|e| {
                    format!("{e}::text")
                }),
                count: band_statuses::count_sql(
                    &t,
                    &st,
                    &band,
                    &format!("${}{typed}", bounds.len() + 1),
                    range.sample,
                ),
                bounds: bounds.clone(),
                context: format!("counting the records of {}", self.table.name),
            };
            if let Some(counts) = band_statuses::counts(&mut index, range.sample.is_none())? {
                return Ok(counts);
            }
        }
        let sql = match range.sample {
            None => format!(
                "SELECT {st}::text, count(*) FROM {t} WHERE {} GROUP BY 1 ORDER BY 1",
                clauses.join(" AND "),
            ),
            Some(n) => format!(
                "SELECT s::text, count(*) FROM (SELECT {st} AS s FROM {t} WHERE {} LIMIT {n}) x GROUP BY 1 ORDER BY 1",
                clauses.join(" AND "),
            ),
        };
        let params: Vec<&(dyn ToSql + Sync)> =
            bounds.iter().map(|b| b as &(dyn ToSql + Sync)).collect();
        Ok(self
            .client
            .query(&sql, &params)
            .map_err(pg(format!("counting the records of {}", self.table.name)))?
            .iter()
            .map(|r| {
                (
                    r.get::<_, Option<String>>(0).unwrap_or_default(),
                    r.get::<_, i64>(1) as u64,
                )
            })
            .collect())
    }

    pub(super) fn read_oldest(
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

    pub(super) fn find_record(&mut self, id: &str) -> Result<Option<Record>, StoreError> {
        let p = self.prepared();
        // Text that is no id of the column's type (`abc` for a bigint) is no record;
        // the server would refuse the cast.
        let fits = match p.id.sql_type.as_str() {
            "bigint" => id.parse::<i64>().is_ok(),
            "integer" => id.parse::<i32>().is_ok(),
            "smallint" => id.parse::<i16>().is_ok(),
            "uuid" => uuid::Uuid::parse_str(id).is_ok(),
            _ => true,
        };
        if !fits {
            return Ok(None);
        }
        let clause = format!("WHERE t.{} = $1::text::{}", p.id.quoted, p.id.sql_type);
        Ok(self.query_records(&clause, &[&id])?.pop())
    }
}

/// `store::band_statuses` on PostgreSQL: statuses read and bound as text, cast to the
/// column's type.
struct PgStatuses<'a> {
    client: &'a mut postgres::Client,
    /// The first status, the next one.
    next: [String; 2],
    count: String,
    /// The band's bounds, bound before the status.
    bounds: Vec<Bound<'a>>,
    context: String,
}

impl band_statuses::StatusIndex for PgStatuses<'_> {
    fn next(&mut self, after: Option<&Scalar>) -> Result<Option<Scalar>, StoreError> {
        let row = match after {
            None => self.client.query_one(&self.next[0], &[]),
            Some(after) => self.client.query_one(&self.next[1], &[&after.to_string()]),
        }
        .map_err(pg(self.context.clone()))?;
        Ok(row.get::<_, Option<String>>(0).map(Scalar::Text))
    }

    fn count(&mut self, status: &Scalar) -> Result<u64, StoreError> {
        let status = status.to_string();
        let mut params: Vec<&(dyn ToSql + Sync)> = self
            .bounds
            .iter()
            .map(|b| b as &(dyn ToSql + Sync))
            .collect();
        params.push(&status);
        let n: i64 = self
            .client
            .query_one(&self.count, &params)
            .map_err(pg(self.context.clone()))?
            .get(0);
        Ok(n.max(0) as u64)
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

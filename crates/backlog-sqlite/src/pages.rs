//! Reading the band: the page queries (one status at a time where the index wants
//! it), rows into records, and the oldest records of a status (`show`, `retry`).

use crate::Bind;
use crate::Read;
use crate::SqliteStore;
use crate::db;
use crate::scalar;
use backlog_core::record::Cell;
use backlog_core::record::Columns;
use backlog_core::record::Record;
use backlog_core::record::RowBuffer;
use backlog_core::record::Scalar;
use backlog_core::record::Statuses;
use backlog_core::store::BandQuery;
use backlog_core::store::Cursor;
use backlog_core::store::Reads;
use backlog_core::store::StoreError;
use backlog_core::store::quote;
use backlog_core::store::sql::numbered;
use chrono::DateTime;
use chrono::Utc;
use rusqlite::ToSql;
use rusqlite::params_from_iter;
use rusqlite::types::ValueRef;
use std::sync::Arc;

/// The SQL of a table, with names checked against the schema and quoted.
#[derive(Debug, Clone)]
pub(super) struct Statements {
    pub(super) table: String,
    pub(super) id: String,
    pub(super) status: String,
    pub(super) inserted_at: String,
    pub(super) first_page: String,
    pub(super) next_page: String,
    pub(super) set_status: String,
    /// The status alone, for a mark that ends no try (with `[retry]`).
    pub(super) set_status_alone: String,
    /// Whether a page is read one pending status at a time and merged: where an index
    /// on (status, inserted-at) serves the band, a query for several statuses at once
    /// is several index ranges whose union SQLite sorts in a temporary B-tree, the
    /// rest of the band at every page; one query per status is an index range each,
    /// already in order.
    pub(super) by_status: bool,
    /// Whether the status is written `+status` in a page for all pending statuses at
    /// once, which keeps SQLite from an index on the status alone: given one on the
    /// status and one on the inserted-at column, its planner took the status's and
    /// sorted the rest of the band at every page (see `choose_pages`).
    pub(super) unindexed_status: bool,
    /// Whether no index starts with the inserted-at column but one starts with the
    /// status and then it: a sample of the band's statuses is then read status by
    /// status (`store::band_statuses`).
    pub(super) statuses_by_index: bool,
}

/// A quoted name (`"Date Inserted"`) as SQLite's plans write it: bare, in capitals here.
fn unquote_upper(quoted: &str) -> String {
    quoted
        .trim_matches('"')
        .replace("\"\"", "\"")
        .to_ascii_uppercase()
}

/// Whether a line of SQLite's query plan sorts all the rows read (`USE TEMP B-TREE FOR
/// ORDER BY`), not only those of one value of the index's column (`… FOR RIGHT PART OF
/// ORDER BY`, `… FOR LAST TERM OF ORDER BY`).
pub(super) fn sorts_all(plan: &str) -> bool {
    plan.to_ascii_uppercase()
        .contains("TEMP B-TREE FOR ORDER BY")
}

impl SqliteStore {
    pub(super) fn statements(
        &self,
        table: &str,
        [id, status, inserted_at]: &[String; 3],
    ) -> Statements {
        let (t, id, st, ins) = (quote(table), quote(id), quote(status), quote(inserted_at));
        // ?1 from, ?2 to, ?3 limit, ?4 the cursor's id, ?5 table, ?6 owner, ?7 the time
        // and ?8 the tick's clock for `{held}` (see `page_sql`), ?9… the pending statuses.
        let order = format!("ORDER BY {ins} DESC, {id} DESC LIMIT ?3");
        Statements {
            table: t.clone(),
            id: id.clone(),
            status: st.clone(),
            inserted_at: ins.clone(),
            first_page: format!(
                "SELECT *{{held}} FROM {t} WHERE {ins} >= ?1 AND {ins} <{{to}} ?2 AND {{status}} {{pending}} {order}"
            ),
            next_page: format!(
                "SELECT *{{held}} FROM {t} WHERE {ins} >= ?1 AND {ins} <= ?2 AND ({ins} < ?2 OR {id} < ?4) AND {{status}} {{pending}} {order}"
            ),
            set_status: match &self.table.retry {
                // The attempt count and time go with the status, in the same statement.
                Some(r) => format!(
                    "UPDATE {t} SET {st} = ?1, {count} = coalesce({count}, 0) + 1, {since} = ?3 WHERE {id} = ?2",
                    count = quote(&r.count),
                    since = quote(&r.since)
                ),
                None => format!("UPDATE {t} SET {st} = ?1 WHERE {id} = ?2"),
            },
            set_status_alone: format!("UPDATE {t} SET {st} = ?1 WHERE {id} = ?2"),
            by_status: false,
            unindexed_status: false,
            statuses_by_index: false,
        }
    }

    /// How pages are read, by SQLite's own plans: for all pending statuses at once,
    /// through the inserted-at index with the status kept from any index
    /// (`Statements::unindexed_status`), or as written; or else one status at a time
    /// (`Statements::by_status`). The first whose plan does not sort the band. `+STATUS`
    /// is tried only on a column of text affinity or none: `+` drops a column's
    /// affinity, so on an INTEGER status `+STATUS IN ('0', '2')` would compare the
    /// stored numbers with text and match nothing.
    pub(super) fn choose_pages(&mut self, table: &str, status: &str) -> Result<(), StoreError> {
        self.sql
            .as_mut()
            .expect("statements first")
            .statuses_by_index = self.statuses_by_index(table, status)?;
        // An index on (status, inserted-at) comes first where there is one, beside one
        // on inserted-at too: one status at a time, each page reads only the pending
        // records' keys, where a range of the inserted-at index reads every record of
        // the band, the done ones with the rest (most of a long tier's band).
        if self.table.pending.len() > 1 {
            self.sql.as_mut().expect("statements first").by_status = true;
            let (plan, sorts) = self.band_plan_lines()?;
            let ins = unquote_upper(&self.sql().inserted_at);
            let st = unquote_upper(&self.sql().status);
            if !sorts && plan.contains(&format!("({st}=? AND {ins}>?")) {
                return Ok(());
            }
            self.sql.as_mut().expect("statements first").by_status = false;
        }
        let plain = self.affinity_is_text(table, status)?;
        for unindexed in [true, false] {
            if unindexed && !plain {
                continue;
            }
            self.sql
                .as_mut()
                .expect("statements first")
                .unindexed_status = unindexed;
            if !self.band_plan_lines()?.1 {
                return Ok(());
            }
        }
        // One status at a time is the same query when there is one.
        self.sql.as_mut().expect("statements first").by_status = self.table.pending.len() > 1;
        Ok(())
    }

    /// The declared type of the table's column `column`, in capitals.
    fn declared_type(&self, column: &str) -> Result<String, StoreError> {
        let declared: String = self
            .conn
            .query_row(
                "SELECT type FROM pragma_table_info(?1) WHERE name = ?2 COLLATE NOCASE",
                [&self.table.name, column],
                |r| r.get(0),
            )
            .map_err(db("reading the id column's type"))?;
        Ok(declared.to_ascii_uppercase())
    }

    /// Whether column `column` of `table` has text affinity by its declared type, or
    /// none (SQLite's rules: INT → integer; CHAR, CLOB, TEXT → text; BLOB or no type →
    /// none; REAL, FLOA, DOUB → real; anything else numeric).
    fn affinity_is_text(&self, table: &str, column: &str) -> Result<bool, StoreError> {
        let declared: String = self
            .conn
            .query_row(
                "SELECT type FROM pragma_table_info(?1) WHERE name = ?2",
                [table, column],
                |r| r.get(0),
            )
            .map_err(db("reading the status column's type"))?;
        let t = declared.to_ascii_uppercase();
        Ok(!t.contains("INT")
            && (["CHAR", "CLOB", "TEXT", "BLOB"]
                .iter()
                .any(|k| t.contains(k))
                || t.is_empty()))
    }

    /// SQLite's plan of the first page as the statements now read it, in capitals,
    /// and whether it sorts the band in a temporary B-tree. A sort of the rows of one
    /// inserted-at value by id (`FOR RIGHT PART OF ORDER BY`, an id that is not the
    /// rowid) is no sort of the band.
    fn band_plan_lines(&self) -> Result<(String, bool), StoreError> {
        let sql = self.page_sql(true, false, false, false);
        let mut stmt = self
            .conn
            .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
            .map_err(db("planning the band query"))?;
        // Unbound values are NULL: the plan does not depend on them.
        let unbound = vec![rusqlite::types::Null; stmt.parameter_count()];
        let details: Vec<String> = stmt
            .query_map(params_from_iter(unbound), |r| r.get::<_, String>(3))
            .and_then(Iterator::collect)
            .map_err(db("planning the band query"))?;
        let sorts = details.iter().any(|d| sorts_all(d));
        Ok((details.join("; ").to_ascii_uppercase(), sorts))
    }

    /// The SQL a page query runs, for tests that check the plan. With `held`, each row
    /// ends with a column saying whether another live tick's span holds it.
    /// With `tried`, a row also counts as held when it failed in its tier's slot and is
    /// kept from the other ticks until the slot ends (`backlog_tried`).
    pub fn page_sql(&self, first: bool, to_inclusive: bool, held: bool, tried: bool) -> String {
        let q = self.sql();
        let sql = if first { &q.first_page } else { &q.next_page };
        let mut checks = Vec::new();
        if held {
            checks.push(format!(
                "EXISTS (SELECT 1 FROM backlog_holds h WHERE h.table_name = ?5 AND h.owner <> ?6 AND h.expires_at > ?7 AND {t}.{ins} BETWEEN h.low AND h.high)",
                t = q.table,
                ins = q.inserted_at
            ));
        }
        if tried {
            checks.push(format!(
                "EXISTS (SELECT 1 FROM backlog_tried k WHERE k.table_name = ?5 AND k.record_id = +{t}.{id} AND k.until_ms > ?8 AND k.expires_ms > ?7)",
                t = q.table,
                id = q.id
            ));
        }
        let held = if checks.is_empty() {
            String::new()
        } else {
            format!(", ({})", checks.join(" OR "))
        };
        let pending = if q.by_status {
            "= ?9".to_string()
        } else {
            format!("IN ({})", numbered(9, self.table.pending.len()))
        };
        let status = if q.unindexed_status && !q.by_status {
            format!("+{}", q.status)
        } else {
            q.status.clone()
        };
        sql.replace("{to}", if to_inclusive { "=" } else { "" })
            .replace("{held}", &held)
            .replace("{status}", &status)
            .replace("{pending}", &pending)
    }

    /// A page of the band: the records and, with `held`, whether another tick holds
    /// each. Parameters as `statements` numbers them.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn page(
        &self,
        band: &BandQuery,
        after: Option<&Cursor>,
        limit: usize,
        owner: &str,
        now_ms: i64,
        held: bool,
        tried: bool,
    ) -> Result<Read, StoreError> {
        let sql = self.page_sql(after.is_none(), band.to_inclusive, held, tried);
        let to = after.map_or(&band.to, |c| &c.inserted_at);
        let after_id = after.map(|c| &c.id);
        let limit = limit as i64;
        let clock_ms = band.clock.timestamp_millis();
        let (from, to, after_id) = (Bind::from(&band.from), Bind::from(to), Bind::from(after_id));
        let mut params: Vec<&dyn ToSql> = vec![
            &from,
            &to,
            &limit,
            &after_id,
            &self.table.name,
            &owner,
            &now_ms,
            &clock_ms,
        ];
        let flagged = held || tried;
        if !self.sql().by_status {
            params.extend(self.table.pending.iter().map(|p| p as &dyn ToSql));
            return self.rows(&sql, &params, flagged, limit as usize);
        }
        // One index range per status, each in band order, merged: the first `limit`
        // of the merge are the page. The merge is of keys read from the index alone
        // (inserted-at and the rowid are in it); then each status's rows are read, as
        // many as the merge kept of it. Reading `limit` whole rows of each status and
        // merging those read each page's rows twice over with two pending statuses,
        // every one a table lookup: on a table whose ids are scattered, most of a
        // tick's page reads.
        let counts: Vec<i64> = self
            .merged_counts(after.is_none(), band.to_inclusive, &params, limit)?
            .into_iter()
            .map(|n| n as i64)
            .collect();
        let mut merged: Vec<(Record, bool)> = Vec::new();
        for (status, count) in self.table.pending.iter().zip(&counts) {
            if *count == 0 {
                continue;
            }
            params[2] = count;
            params.truncate(8);
            params.push(status);
            let read = self.rows(&sql, &params, flagged, *count as usize)?;
            let held = read.held.into_iter().chain(std::iter::repeat(false));
            merged.extend(read.records.into_iter().zip(held));
        }
        merged.sort_unstable_by(|(a, _), (b, _)| {
            (b.inserted_at(), &b.id).cmp(&(a.inserted_at(), &a.id))
        });
        merged.truncate(limit as usize);
        let (records, held) = merged.into_iter().unzip();
        Ok(Read {
            records,
            held: if flagged { held } else { Vec::new() },
        })
    }

    /// How many records of each pending status the next page holds: the keys
    /// (inserted-at, id) of each status's index range, merged, the first `limit` kept.
    /// `params` as `page` binds them, the status last.
    fn merged_counts(
        &self,
        first: bool,
        to_inclusive: bool,
        params: &[&dyn ToSql],
        limit: i64,
    ) -> Result<Vec<usize>, StoreError> {
        let q = self.sql();
        let sql = self.page_sql(first, to_inclusive, false, false).replacen(
            "SELECT * FROM",
            &format!("SELECT {}, {} FROM", q.inserted_at, q.id),
            1,
        );
        let err = |e| db(format!("selecting from {}", self.table.name))(e);
        let mut stmt = self.conn.prepare_cached(&sql).map_err(err)?;
        let mut keys: Vec<(Scalar, Scalar, usize)> = Vec::new();
        let mut params = params[..8].to_vec();
        for (k, status) in self.table.pending.iter().enumerate() {
            params.truncate(8);
            params.push(status);
            let mut rows = stmt.query(params.as_slice()).map_err(err)?;
            while let Some(row) = rows.next().map_err(err)? {
                let at = scalar(row.get_ref(0).map_err(err)?);
                let id = scalar(row.get_ref(1).map_err(err)?);
                keys.push((at, id, k));
            }
        }
        keys.sort_unstable_by(|a, b| (&b.0, &b.1).cmp(&(&a.0, &a.1)));
        keys.truncate(limit as usize);
        let mut counts = vec![0; self.table.pending.len()];
        for (_, _, k) in keys {
            counts[k] += 1;
        }
        Ok(counts)
    }

    /// Runs a `SELECT *` on the table and reads its rows as records.
    pub(super) fn records(
        &self,
        sql: &str,
        params: &[&dyn ToSql],
    ) -> Result<Vec<Record>, StoreError> {
        Ok(self.rows(sql, params, false, 1)?.records)
    }

    /// Reads rows as records, `capacity` of them expected; with `flagged`, the last
    /// column is a flag, not the table's. The rows' values go into one `RowBuffer`
    /// that the records share.
    pub(super) fn rows(
        &self,
        sql: &str,
        params: &[&dyn ToSql],
        flagged: bool,
        capacity: usize,
    ) -> Result<Read, StoreError> {
        let format = self.format();
        // The context is written only when there is an error: rows come by the thousand.
        let err = |e| db(format!("selecting from {}", self.table.name))(e);
        let mut stmt = self.conn.prepare_cached(sql).map_err(err)?;
        let mut names: Vec<String> = stmt.column_names().map(String::from).collect();
        if flagged {
            names.pop();
        }
        let position = |wanted: &str| {
            names
                .iter()
                .position(|n| n.eq_ignore_ascii_case(wanted))
                .expect("inspect() checked the column")
        };
        let (id_at, status_at, ins_at) = (
            position(&self.table.id),
            position(&self.table.status),
            position(&self.table.inserted_at),
        );
        let width = names.len();
        // The last page's buffer, once its records are gone, lends this page its
        // memory: a page's worth allocated and freed each time made the heap grow and
        // shrink at every page.
        let mut buffer = match self.spare.take().map(Arc::try_unwrap) {
            Some(Ok(mut spare)) => {
                spare.reset(names.into(), capacity);
                spare
            }
            _ => RowBuffer::new(names.into(), capacity),
        };
        let mut held = Vec::new();
        let mut rows = stmt.query(params_from_iter(params)).map_err(err)?;
        while let Some(row) = rows.next().map_err(err)? {
            for i in 0..width {
                match row.get_ref(i).map_err(err)? {
                    ValueRef::Null => buffer.push_null(),
                    ValueRef::Integer(n) => buffer.push_int(n),
                    ValueRef::Real(f) => buffer.push_real(f),
                    ValueRef::Text(t) => buffer.push_text(t),
                    ValueRef::Blob(b) => buffer.push_blob(b),
                }
            }
            if flagged {
                held.push(row.get::<_, bool>(width).map_err(err)?);
            }
        }
        let buffer = Arc::new(buffer);
        self.spare.set(Some(Arc::clone(&buffer)));
        let mut statuses = Statuses::default();
        let records = (0..buffer.rows())
            .map(|i| {
                let cell = |column| buffer.cell(i, column);
                let status = match cell(status_at) {
                    Cell::Text(t) => statuses.get(t.as_bytes()),
                    other => statuses.get(other.to_scalar().to_string().as_bytes()),
                };
                Record::in_buffer(
                    cell(id_at).to_scalar(),
                    status,
                    ins_at,
                    format.decode_cell(cell(ins_at)),
                    Columns::buffered(Arc::clone(&buffer), i),
                )
            })
            .collect();
        Ok(Read { records, held })
    }
}

impl Reads for SqliteStore {
    fn select(
        &mut self,
        band: &BandQuery,
        after: Option<&Cursor>,
        limit: usize,
    ) -> Result<Vec<Record>, StoreError> {
        Ok(self.page(band, after, limit, "", 0, false, false)?.records)
    }

    fn oldest_of(
        &mut self,
        statuses: &[String],
        before: Option<DateTime<Utc>>,
        limit: usize,
    ) -> Result<Vec<Record>, StoreError> {
        let sql = self.sql();
        // As the band's pages: one status at a time where several at once would sort
        // every record of those statuses (see `Statements::by_status`).
        let one_at_a_time = sql.by_status && statuses.len() > 1;
        let list = if one_at_a_time {
            "?3".to_string()
        } else {
            numbered(3, statuses.len())
        };
        let query = format!(
            "SELECT * FROM {t} WHERE {st} IN ({list}) AND {ins} IS NOT NULL AND (?2 IS NULL OR {ins} < ?2) ORDER BY {ins} ASC LIMIT ?1",
            t = sql.table,
            st = sql.status,
            ins = sql.inserted_at
        );
        let limit_n = limit;
        let limit = limit as i64;
        let before = Bind::from(before.map(|t| self.format().encode(t)));
        let mut params: Vec<&dyn ToSql> = vec![&limit, &before];
        if !one_at_a_time {
            params.extend(statuses.iter().map(|p| p as &dyn ToSql));
            return self.records(&query, &params);
        }
        let mut merged = Vec::new();
        for status in statuses {
            params.truncate(2);
            params.push(status);
            merged.extend(self.records(&query, &params)?);
        }
        merged.sort_unstable_by_key(Record::inserted_at);
        merged.truncate(limit_n);
        Ok(merged)
    }

    fn find(&mut self, id: &str) -> Result<Option<Record>, StoreError> {
        let sql = self.sql();
        let query = format!("SELECT * FROM {} WHERE {} = ?1", sql.table, sql.id);
        // A column without affinity holds 42 and '42' as different values: try the
        // integer first when the text is one.
        if let Ok(n) = id.parse::<i64>()
            && let Some(r) = self.records(&query, &[&n])?.pop()
        {
            return Ok(Some(r));
        }
        if let Some(r) = self.records(&query, &[&id])?.pop() {
            return Ok(Some(r));
        }
        // An integer column could hold the text (SQLite stores what it is given), but
        // no row does: an id that is not an integer is said to be none, not missing.
        if id.parse::<i64>().is_err() && self.declared_type(&self.table.id)?.contains("INT") {
            return Err(StoreError::not_an_id(id, &self.table, "integers"));
        }
        Ok(None)
    }
}

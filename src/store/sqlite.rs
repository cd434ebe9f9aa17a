//! The SQLite backend: the embedded default.
//!
//! Writes are short `BEGIN IMMEDIATE` transactions (a page taken, a group of marks), so
//! several ticks, in one process or many, interleave on the database lock instead of
//! failing; no tick holds a read snapshot while its handlers run. The database file is
//! opened without `CREATE`: a typo in the path is an error, not a new empty database.
//!
//! A tick holds records by span, not one by one. Its row in `backlog_holds` says "the
//! inserted-at values from `low` to `high` are mine": `high` is where its first page
//! began, `low` moves down with each page it takes. A page is read inside the write
//! transaction that moves `low`, and records inside another live tick's span are
//! skipped, so no record is handed to two ticks at once. Ticks of disjoint tiers never
//! meet; a slow tick and the next one of its tier leapfrog page by page. Claiming each
//! record instead cost an insert and a delete in a second B-tree per record, which made
//! a tick about four times slower than the status updates it exists to write (see
//! BENCHMARKS.md). A record marked `ERROR` stays in its tick's span until the tick
//! ends, so an overlapping tick does not try it again meanwhile.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use chrono::{DateTime, SecondsFormat, Utc};
use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{
    Connection, OpenFlags, OptionalExtension, ToSql, Transaction, TransactionBehavior, params,
    params_from_iter,
};

use super::{
    BandQuery, Cursor, Heartbeat, Mark, Page, QueryPlan, Range, RunEnd, RunRow, RunStart, Store,
    StoreError, check_version, index_name, not_ours, quote,
};
use crate::config::TableConfig;
use crate::record::{Cell, Columns, Record, RowBuffer, Scalar, Statuses};
use crate::timestamp::{self, Sample, TimestampFormat};

const OWN_TABLES: &str = "
CREATE TABLE IF NOT EXISTS backlog_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT OR IGNORE INTO backlog_meta (key, value) VALUES ('schema_version', '4');
CREATE TABLE IF NOT EXISTS backlog_runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    table_name TEXT NOT NULL,
    window_secs INTEGER NOT NULL,
    tier INTEGER,
    band_from_secs INTEGER NOT NULL,
    band_to_secs INTEGER NOT NULL,
    bands TEXT NOT NULL,
    clock TEXT NOT NULL,
    started_at TEXT NOT NULL,
    heartbeat_at TEXT,
    finished_at TEXT,
    selected INTEGER NOT NULL DEFAULT 0,
    succeeded INTEGER NOT NULL DEFAULT 0,
    failed INTEGER NOT NULL DEFAULT 0,
    skipped INTEGER NOT NULL DEFAULT 0,
    lost INTEGER NOT NULL DEFAULT 0,
    outcome TEXT NOT NULL,
    error TEXT,
    owner TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS backlog_runs_by_window ON backlog_runs (table_name, window_secs, id);
CREATE TABLE IF NOT EXISTS backlog_holds (
    table_name TEXT NOT NULL,
    owner TEXT NOT NULL,
    low NOT NULL,
    high NOT NULL,
    expires_at INTEGER NOT NULL,
    PRIMARY KEY (table_name, owner)
);
CREATE TABLE IF NOT EXISTS backlog_tried (
    table_name TEXT NOT NULL,
    record_id NOT NULL,
    until_ms INTEGER NOT NULL,
    expires_ms INTEGER NOT NULL,
    PRIMARY KEY (table_name, record_id)
) WITHOUT ROWID;
";

/// The version of the tables above; `ensure_own_tables` migrates the earlier ones.
/// Version 1 claimed records one by one in `backlog_claims`; version 2 had no `lost`
/// count in the run log, and no `backlog_tried` (records that failed, kept from the
/// other ticks until the end of their tier's slot); version 3 no `backlog_attempts`
/// and no `backlog_pauses`.
const SCHEMA_VERSION: i64 = 4;

/// The shared tables (attempts, pauses), as SQLite writes them.
fn shared_tables() -> String {
    format!("{}{}", super::attempts::DDL, super::pauses::DDL)
        .replace("{s}", "")
        .replace("{id}", "INTEGER PRIMARY KEY AUTOINCREMENT")
}

/// Whether a tick other than ?2 holds a span of table ?1 at ?3 (unix milliseconds).
const OTHERS_HOLD: &str = "SELECT EXISTS (SELECT 1 FROM backlog_holds WHERE table_name = ?1 AND owner <> ?2 AND expires_at > ?3)";

/// Sets a tick's span: ?1 table, ?2 owner, ?3 low, ?4 high (kept once set), ?5 expiry,
/// ?6 now. A span that ran out is not extended: it changes no row, and the tick's hold
/// has lapsed (another tick may have taken what it covered).
const HOLD: &str = "INSERT INTO backlog_holds (table_name, owner, low, high, expires_at) VALUES (?1, ?2, ?3, ?4, ?5)
    ON CONFLICT (table_name, owner) DO UPDATE SET low = excluded.low, expires_at = excluded.expires_at
    WHERE backlog_holds.expires_at > ?6";

/// Sets a span to exactly ?3..?4 (`backlog retry`), like `HOLD` otherwise.
const SET_SPAN: &str = "INSERT INTO backlog_holds (table_name, owner, low, high, expires_at) VALUES (?1, ?2, ?3, ?4, ?5)
    ON CONFLICT (table_name, owner) DO UPDATE SET low = excluded.low, high = excluded.high, expires_at = excluded.expires_at
    WHERE backlog_holds.expires_at > ?6";

/// Moves a tick's span down past a later page: ?1 table, ?2 owner, ?3 low, ?5 expiry,
/// ?6 now (?4, the top, is the first page's). Only a live span moves: one that ran
/// out, or that another tick dropped as run out, is not made again.
const MOVE_HOLD: &str = "UPDATE backlog_holds SET low = ?3, expires_at = ?5
    WHERE table_name = ?1 AND owner = ?2 AND expires_at > ?6 AND ?4 IS NOT NULL";

/// Whether a record of table ?1 failed and is kept from a tick whose clock is ?2 at
/// the real time ?3 (unix milliseconds). A failure is kept until its next try by the
/// clock of the tick that failed it, and for no longer than that in real time, so a
/// tick run with a pinned clock (`--now`) keeps nothing from the real ticks for long.
const TRIED: &str = "SELECT EXISTS (SELECT 1 FROM backlog_tried WHERE table_name = ?1 AND until_ms > ?2 AND expires_ms > ?3)";

/// Keeps a record that failed from every tick: ?1 table, ?2 id, ?3 until (by the
/// tick's clock), ?4 the same wait in real time.
const KEEP_TRIED: &str = "INSERT OR REPLACE INTO backlog_tried (table_name, record_id, until_ms, expires_ms) VALUES (?1, ?2, ?3, ?4)";

/// Whether tick ?2 still holds its span of table ?1 at ?3 (unix milliseconds).
const HOLDS: &str = "SELECT EXISTS (SELECT 1 FROM backlog_holds WHERE table_name = ?1 AND owner = ?2 AND expires_at > ?3)";

/// Why a span no longer counts, for `StoreError::HoldLapsed`.
const LAPSED: &str = "its span in backlog_holds ran out, or another tick dropped it as run out";

/// The SQL of a table, with names checked against the schema and quoted.
#[derive(Debug, Clone)]
struct Statements {
    table: String,
    id: String,
    status: String,
    inserted_at: String,
    first_page: String,
    next_page: String,
    set_status: String,
    /// Whether a page is read one pending status at a time and merged: where an index
    /// on (status, inserted-at) serves the band, a query for several statuses at once
    /// is several index ranges whose union SQLite sorts in a temporary B-tree, the
    /// rest of the band at every page; one query per status is an index range each,
    /// already in order.
    by_status: bool,
}

/// A backlog table in a SQLite file, with the tool's tables beside it in the same file.
/// A tick holds records by the span of inserted-at values it read (`backlog_holds`), as
/// SQLite serializes writers anyway; every tick is on the host that has the file.
pub struct SqliteStore {
    conn: Connection,
    path: PathBuf,
    busy_timeout: Duration,
    table: TableConfig,
    format: Option<TimestampFormat>,
    /// The format of `[retry]`'s `since` column, when there is one.
    since_format: Option<TimestampFormat>,
    sql: Option<Statements>,
    /// The row buffer of the last query, kept to lend its memory to the next.
    spare: std::cell::Cell<Option<Arc<RowBuffer>>>,
    /// How many attempts a record keeps (`history.max_per_record`, from `begin_run`).
    max_per_record: u32,
}

/// Records a query read and, for a page read with the `held` flag, whether another
/// tick's span holds each.
struct Read {
    records: Vec<Record>,
    held: Vec<bool>,
}

fn db(context: impl Into<String>) -> impl FnOnce(rusqlite::Error) -> StoreError {
    let context = context.into();
    move |e| StoreError::Database {
        context,
        source: Box::new(e),
    }
}

impl ToSql for Scalar {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match self {
            Scalar::Int(i) => ToSqlOutput::from(*i),
            Scalar::Text(s) => ToSqlOutput::from(s.as_str()),
            // Native timestamps come only from PostgreSQL; written as text if ever bound.
            Scalar::Time(_) | Scalar::Naive(_) => ToSqlOutput::from(self.to_string()),
        })
    }
}

fn scalar(v: ValueRef<'_>) -> Scalar {
    match v {
        ValueRef::Integer(i) => Scalar::Int(i),
        ValueRef::Real(f) => Scalar::Text(f.to_string()),
        ValueRef::Text(t) => Scalar::Text(String::from_utf8_lossy(t).into_owned()),
        ValueRef::Blob(b) => Scalar::Text(base64::engine::general_purpose::STANDARD.encode(b)),
        ValueRef::Null => Scalar::Text(String::new()),
    }
}

fn connect(path: &Path, busy_timeout: Duration) -> Result<Connection, StoreError> {
    if !path.exists() {
        return Err(StoreError::NoDatabase);
    }
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(db(format!(
        "cannot open SQLite database {}",
        path.display()
    )))?;
    conn.busy_timeout(busy_timeout)
        .map_err(db("cannot set the busy timeout"))?;
    // In WAL mode, `synchronous = NORMAL` skips the fsync at each commit (about half a
    // tick's time with marks in groups of a hundred); SQLite's own advice for WAL. A
    // commit survives the process crashing; a power cut may undo the last few, which
    // leaves those records pending, to be tried again: at-least-once still holds. This
    // connection's setting only, never the application's.
    let journal: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .map_err(db("reading the journal mode"))?;
    if journal.eq_ignore_ascii_case("wal") {
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(db("setting synchronous = NORMAL"))?;
    }
    Ok(conn)
}

impl SqliteStore {
    /// Opens an existing SQLite database holding `table`.
    pub fn open(
        path: &Path,
        busy_timeout: Duration,
        table: TableConfig,
    ) -> Result<Self, StoreError> {
        let conn = connect(path, busy_timeout)?;
        Ok(SqliteStore {
            conn,
            path: path.to_path_buf(),
            busy_timeout,
            table,
            format: None,
            since_format: None,
            sql: None,
            spare: std::cell::Cell::new(None),
            max_per_record: crate::config::HistoryConfig::default().max_per_record,
        })
    }

    fn sql(&self) -> &Statements {
        self.sql.as_ref().expect("inspect() runs before any query")
    }

    fn format(&self) -> TimestampFormat {
        self.format.expect("inspect() runs before any query")
    }

    /// Resolves the table's real name and columns, case-insensitively as SQLite does.
    fn resolve_names(&self) -> Result<(String, [String; 3]), StoreError> {
        let found: Option<(String, String)> = self
            .conn
            .query_row(
                "SELECT name, type FROM sqlite_schema WHERE type IN ('table', 'view') AND name = ?1 COLLATE NOCASE",
                [&self.table.name],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(db("reading the schema"))?;
        if let Some((name, kind)) = &found
            && kind == "view"
        {
            return Err(StoreError::NotATable {
                table: name.clone(),
                kind: "view",
            });
        }
        let Some((table, _)) = found else {
            let mut stmt = self
                .conn
                .prepare("SELECT name FROM sqlite_schema WHERE type IN ('table', 'view') AND name NOT GLOB 'sqlite_*'
                  AND name NOT IN ('backlog_meta', 'backlog_runs', 'backlog_holds', 'backlog_claims', 'backlog_tried') ORDER BY name")
                .map_err(db("reading the schema"))?;
            let available = stmt
                .query_map([], |r| r.get(0))
                .and_then(Iterator::collect)
                .map_err(db("reading the schema"))?;
            return Err(StoreError::NoTable {
                table: self.table.name.clone(),
                available,
            });
        };
        let mut stmt = self
            .conn
            .prepare("SELECT name FROM pragma_table_info(?1)")
            .map_err(db("reading the schema"))?;
        let columns: Vec<String> = stmt
            .query_map([&table], |r| r.get(0))
            .and_then(Iterator::collect)
            .map_err(db("reading the schema"))?;
        let resolve = |key: &'static str, wanted: &str| {
            columns
                .iter()
                .find(|c| c.eq_ignore_ascii_case(wanted))
                .cloned()
                .ok_or_else(|| StoreError::NoColumn {
                    table: table.clone(),
                    column: wanted.to_string(),
                    key,
                    available: columns.clone(),
                })
        };
        let id = resolve("table.id", &self.table.id)?;
        let status = resolve("table.status", &self.table.status)?;
        let inserted_at = resolve("table.inserted_at", &self.table.inserted_at)?;
        if let Some(retry) = &self.table.retry {
            resolve("retry.count", &retry.count)?;
            resolve("retry.since", &retry.since)?;
        }
        Ok((table, [id, status, inserted_at]))
    }

    fn samples(&self, table: &str, column: &str) -> Result<Vec<Sample>, StoreError> {
        let mut samples = Vec::new();
        for order in ["DESC", "ASC"] {
            let sql = format!(
                "SELECT {c} FROM {t} WHERE {c} IS NOT NULL ORDER BY {c} {order} LIMIT 1",
                c = quote(column),
                t = quote(table)
            );
            let sample = self
                .conn
                .query_row(&sql, [], |r| {
                    Ok(match r.get_ref(0)? {
                        ValueRef::Integer(i) => Sample::Int(i),
                        ValueRef::Text(t) => Sample::Text(String::from_utf8_lossy(t).into_owned()),
                        ValueRef::Real(_) => Sample::Other("real".into()),
                        ValueRef::Blob(_) => Sample::Other("blob".into()),
                        ValueRef::Null => Sample::Other("null".into()),
                    })
                })
                .optional()
                .map_err(db(format!("reading {column} of {table}")))?;
            samples.extend(sample);
        }
        Ok(samples)
    }

    fn statements(&self, table: &str, [id, status, inserted_at]: &[String; 3]) -> Statements {
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
                "SELECT *{{held}} FROM {t} WHERE {ins} >= ?1 AND {ins} <{{to}} ?2 AND {st} {{pending}} {order}"
            ),
            next_page: format!(
                "SELECT *{{held}} FROM {t} WHERE {ins} >= ?1 AND {ins} <= ?2 AND ({ins} < ?2 OR {id} < ?4) AND {st} {{pending}} {order}"
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
            by_status: false,
        }
    }

    /// Whether the band query for all pending statuses at once sorts in a temporary
    /// B-tree (see `Statements::by_status`), by SQLite's own plan of it.
    fn sorts_the_band(&self) -> Result<bool, StoreError> {
        if self.table.pending.len() < 2 {
            return Ok(false);
        }
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
        Ok(details.iter().any(|d| d.contains("TEMP B-TREE")))
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
            let list: Vec<String> = (0..self.table.pending.len())
                .map(|i| format!("?{}", i + 9))
                .collect();
            format!("IN ({})", list.join(", "))
        };
        sql.replace("{to}", if to_inclusive { "=" } else { "" })
            .replace("{held}", &held)
            .replace("{pending}", &pending)
    }

    /// A page of the band: the records and, with `held`, whether another tick holds
    /// each. Parameters as `statements` numbers them.
    #[allow(clippy::too_many_arguments)]
    fn page(
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
        let mut params: Vec<&dyn ToSql> = vec![
            &band.from,
            to,
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
        // of the merge are the page.
        let mut merged: Vec<(Record, bool)> = Vec::new();
        for status in &self.table.pending {
            params.truncate(8);
            params.push(status);
            let read = self.rows(&sql, &params, flagged, limit as usize)?;
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

    /// Runs a `SELECT *` on the table and reads its rows as records.
    fn records(&self, sql: &str, params: &[&dyn ToSql]) -> Result<Vec<Record>, StoreError> {
        Ok(self.rows(sql, params, false, 1)?.records)
    }

    /// Reads rows as records, `capacity` of them expected; with `flagged`, the last
    /// column is a flag, not the table's. The rows' values go into one `RowBuffer`
    /// that the records share.
    fn rows(
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

    /// Whether the tool's run log exists yet (a dry run or a fresh database has none).
    fn has_run_log(&self) -> Result<bool, StoreError> {
        self.has_table("backlog_runs")
    }

    fn has_table(&self, name: &str) -> Result<bool, StoreError> {
        let n: i64 = self
            .conn
            .query_row(
                "SELECT count(*) FROM sqlite_schema WHERE name = ?1",
                [name],
                |r| r.get(0),
            )
            .map_err(db("reading the tool's tables"))?;
        Ok(n > 0)
    }
}

impl Store for SqliteStore {
    fn describe(&self) -> String {
        format!("sqlite:{}", self.path.display())
    }

    fn inspect(&mut self) -> Result<TimestampFormat, StoreError> {
        let (table, columns) = self.resolve_names()?;
        let samples = self.samples(&table, &columns[2])?;
        let format =
            timestamp::detect(self.table.inserted_at_format, &samples).map_err(|problem| {
                StoreError::Timestamps {
                    table: table.clone(),
                    column: columns[2].clone(),
                    problem,
                }
            })?;
        if let Some(retry) = &self.table.retry {
            let samples = self.samples(&table, &retry.since)?;
            let since =
                timestamp::detect(timestamp::FormatSetting::Auto, &samples).map_err(|problem| {
                    StoreError::Timestamps {
                        table: table.clone(),
                        column: retry.since.clone(),
                        problem,
                    }
                })?;
            // An empty column takes the inserted-at column's format.
            self.since_format = Some(if samples.is_empty() { format } else { since });
        }
        self.sql = Some(self.statements(&table, &columns));
        let by_status = self.sorts_the_band()?;
        if let Some(q) = self.sql.as_mut() {
            q.by_status = by_status;
        }
        self.format = Some(format);
        Ok(format)
    }

    fn ensure_own_tables(&mut self) -> Result<(), StoreError> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(db("creating the tool's own tables"))?;
        not_ours(
            &[
                "backlog_meta",
                "backlog_runs",
                "backlog_holds",
                "backlog_claims",
                "backlog_tried",
                "backlog_attempts",
                "backlog_pauses",
            ],
            &mut |table| {
                let columns: Vec<String> = tx
                    .prepare("SELECT name FROM pragma_table_info(?1)")
                    .and_then(|mut s| s.query_map([table], |r| r.get(0))?.collect())
                    .map_err(db("reading the schema"))?;
                Ok((!columns.is_empty()).then_some(columns))
            },
            "rename that table, or keep the backlog in another database file",
        )?;
        tx.execute_batch(OWN_TABLES)
            .and_then(|()| tx.execute_batch(&shared_tables()))
            .map_err(db("creating the tool's own tables"))?;
        let mut version: String = tx
            .query_row(
                "SELECT value FROM backlog_meta WHERE key = 'schema_version'",
                [],
                |r| r.get(0),
            )
            .map_err(db("reading backlog_meta"))?;
        if version == "1" {
            // Version 1 claimed records one by one. A tick of that release still running
            // would not see the new spans, so wait until its claims are gone.
            let live: i64 = tx
                .query_row(
                    "SELECT count(*) FROM backlog_claims WHERE expires_at > ?1",
                    [Utc::now().timestamp_millis()],
                    |r| r.get(0),
                )
                .map_err(db("reading backlog_claims"))?;
            if live > 0 {
                return Err(StoreError::Schema(format!(
                    "a tick of an earlier backlog release holds {live} {} in backlog_claims of {}; let it finish (or wait for its lease to run out), then run again to move the tool's tables to version {SCHEMA_VERSION}",
                    if live == 1 { "record" } else { "records" },
                    self.path.display()
                )));
            }
            tx.execute_batch(
                "DROP TABLE backlog_claims; UPDATE backlog_meta SET value = '2' WHERE key = 'schema_version';",
            )
            .map_err(db("moving the tool's tables to version 2"))?;
            version = "2".into();
        }
        if version == "2" {
            // A run log made just now, by the CREATE above, already has the column.
            let has_lost: bool = tx
                .query_row(
                    "SELECT EXISTS (SELECT 1 FROM pragma_table_info('backlog_runs') WHERE name = 'lost')",
                    [],
                    |r| r.get(0),
                )
                .map_err(db("reading backlog_runs"))?;
            let add = if has_lost {
                ""
            } else {
                "ALTER TABLE backlog_runs ADD COLUMN lost INTEGER NOT NULL DEFAULT 0;"
            };
            tx.execute_batch(&format!(
                "{add} UPDATE backlog_meta SET value = '3' WHERE key = 'schema_version';"
            ))
            .map_err(db("moving the tool's tables to version 3"))?;
            version = "3".into();
        }
        if version == "3" {
            // The CREATE above made the attempts and the pauses.
            tx.execute_batch("UPDATE backlog_meta SET value = '4' WHERE key = 'schema_version';")
                .map_err(db("moving the tool's tables to version 4"))?;
            version = "4".into();
        }
        check_version(&version, SCHEMA_VERSION, &self.path.display().to_string())?;
        tx.commit().map_err(db("creating the tool's own tables"))
    }

    fn select(
        &mut self,
        band: &BandQuery,
        after: Option<&Cursor>,
        limit: usize,
    ) -> Result<Vec<Record>, StoreError> {
        Ok(self.page(band, after, limit, "", 0, false, false)?.records)
    }

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
            (0..statuses.len())
                .map(|i| format!("?{}", i + 3))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let query = format!(
            "SELECT * FROM {t} WHERE {st} IN ({list}) AND {ins} IS NOT NULL AND (?2 IS NULL OR {ins} < ?2) ORDER BY {ins} ASC LIMIT ?1",
            t = sql.table,
            st = sql.status,
            ins = sql.inserted_at
        );
        let limit_n = limit;
        let limit = limit as i64;
        let before = before.map(|t| self.format().encode(t));
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
        Ok(self.records(&query, &[&id])?.pop())
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
            && !upper.contains("TEMP B-TREE");
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

    fn last_runs(&mut self) -> Result<Vec<RunRow>, StoreError> {
        if !self.has_run_log()? {
            return Ok(Vec::new());
        }
        let mut stmt = self
            .conn
            .prepare(
                "SELECT id, window_secs, clock, started_at, finished_at, selected, succeeded, failed, skipped, outcome, error
                 FROM backlog_runs
                 WHERE id IN (SELECT max(id) FROM backlog_runs WHERE table_name = ?1 AND window_secs > 0 GROUP BY window_secs)
                 ORDER BY window_secs",
            )
            .map_err(db("reading the run log"))?;
        stmt.query_map([&self.table.name], |r| {
            let clock: String = r.get(2)?;
            Ok(RunRow {
                run_id: r.get(0)?,
                window_secs: r.get::<_, i64>(1)? as u64,
                clock: DateTime::parse_from_rfc3339(&clock)
                    .map(|t| t.with_timezone(&Utc))
                    .unwrap_or_default(),
                started_at: r.get(3)?,
                finished_at: r.get(4)?,
                selected: r.get::<_, i64>(5)? as u64,
                succeeded: r.get::<_, i64>(6)? as u64,
                failed: r.get::<_, i64>(7)? as u64,
                skipped: r.get::<_, i64>(8)? as u64,
                outcome: r.get(9)?,
                error: r.get(10)?,
            })
        })
        .and_then(Iterator::collect)
        .map_err(db("reading the run log"))
    }

    fn take(
        &mut self,
        owner: &str,
        band: &BandQuery,
        after: Option<&Cursor>,
        limit: usize,
        lease_until: DateTime<Utc>,
        wanted: &dyn Fn(&Record) -> bool,
    ) -> Result<Page, StoreError> {
        // The page is read inside the write transaction that extends this tick's span,
        // so no other tick can take or mark its records in between. Another tick's
        // span is looked for only when one exists (rarely): the plain query costs
        // nothing beyond the band's own.
        let context = "taking a page of records";
        let tx = Transaction::new_unchecked(&self.conn, TransactionBehavior::Immediate)
            .map_err(db(context))?;
        // Read once the write lock is ours: a span that ran out while this tick waited
        // for the lock must be seen as run out.
        let now = Utc::now().timestamp_millis();
        let others: bool = tx
            .prepare_cached(OTHERS_HOLD)
            .and_then(|mut s| s.query_row(params![self.table.name, owner, now], |r| r.get(0)))
            .map_err(db(context))?;
        let tried: bool = !band.take_tried
            && tx
                .prepare_cached(TRIED)
                .and_then(|mut s| {
                    s.query_row(
                        params![self.table.name, band.clock.timestamp_millis(), now],
                        |r| r.get(0),
                    )
                })
                .map_err(db(context))?;
        let read = self.page(band, after, limit, owner, now, others, tried)?;
        // The span's top is set by the first page and kept (see HOLD).
        if let (Some(first), Some(last)) = (read.records.first(), read.records.last()) {
            let sql = if after.is_none() { HOLD } else { MOVE_HOLD };
            let changed = tx
                .prepare_cached(sql)
                .and_then(|mut s| {
                    s.execute(params![
                        self.table.name,
                        owner,
                        last.inserted_at(),
                        first.inserted_at(),
                        lease_until.timestamp_millis(),
                        now
                    ])
                })
                .map_err(db(context))?;
            if changed == 0 {
                return Err(StoreError::HoldLapsed(LAPSED.into()));
            }
        }
        tx.commit().map_err(db(context))?;
        let held = read.held;
        Ok(Page::sorted(
            read.records,
            |i, _| !held.get(i).copied().unwrap_or(false),
            wanted,
        ))
    }

    fn mark(&mut self, owner: &str, marks: &[Mark]) -> Result<Vec<usize>, StoreError> {
        // Only while the tick's span is live: a span is never extended once it ran
        // out, so a live one never lapsed, and no other tick took its records.
        // One UPDATE per record, in one transaction. An UPDATE of one row needs no
        // statement journal; one UPDATE of a group's rows (`IN (…)`) did, spilling it
        // to a temporary file. The records stay in the tick's span until it ends. A
        // binding stays until it is replaced, so the status (and the `[retry]` time)
        // is bound only when it differs from the mark before: nearly every mark of a
        // tick shares one.
        let write = |tx: &Transaction| -> rusqlite::Result<bool> {
            let now = Utc::now().timestamp_millis();
            let holds: bool = tx
                .prepare_cached(HOLDS)?
                .query_row(params![self.table.name, owner, now], |r| r.get(0))?;
            let mut conn: &Connection = tx;
            super::write_attempts(
                &mut conn,
                "",
                &self.table.name,
                marks,
                &|_| !holds,
                self.max_per_record,
            )
            .map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))?;
            if !holds {
                return Ok(false);
            }
            let mut set = tx.prepare_cached(&self.sql().set_status)?;
            let mut status: Option<&str> = None;
            let mut since: Option<DateTime<Utc>> = None;
            for m in marks {
                if status != Some(&*m.status) {
                    set.raw_bind_parameter(1, &*m.status)?;
                    status = Some(&m.status);
                }
                set.raw_bind_parameter(2, &m.id)?;
                if let Some(format) = self.since_format
                    && since != Some(m.at)
                {
                    set.raw_bind_parameter(3, format.encode(m.at))?;
                    since = Some(m.at);
                }
                set.raw_execute()?;
            }
            let mut keep = tx.prepare_cached(KEEP_TRIED)?;
            for m in marks {
                if let Some(until) = m.keep_until {
                    let expires = now + (until - m.at).num_milliseconds();
                    keep.execute(params![
                        self.table.name,
                        m.id,
                        until.timestamp_millis(),
                        expires
                    ])?;
                }
            }
            Ok(true)
        };
        let held = Transaction::new_unchecked(&self.conn, TransactionBehavior::Immediate)
            .and_then(|tx| {
                let held = write(&tx)?;
                tx.commit()?;
                Ok(held)
            })
            .map_err(db(format!("writing statuses to {}", self.table.name)))?;
        Ok(if held {
            Vec::new()
        } else {
            (0..marks.len()).collect()
        })
    }

    /// Each commit writes again every page its group touched, the B-trees' inner pages
    /// among them: with groups of 5,000 instead of 1,000 a tick with a fast handler
    /// went from 0.88–0.89 to 0.93–0.97 of the floor (BENCHMARKS.md, run 6). Such a
    /// group holds the write lock for about 17 ms. (PostgreSQL keeps 1,000: with
    /// 5,000, one runner was half as fast.)
    fn mark_group(&self) -> usize {
        5000
    }

    fn release(&mut self, owner: &str) -> Result<(), StoreError> {
        self.conn
            .execute(
                "DELETE FROM backlog_holds WHERE table_name = ?1 AND owner = ?2",
                params![self.table.name, owner],
            )
            .map_err(db("releasing this tick's span"))?;
        Ok(())
    }

    fn last_tick(&mut self, window: Duration) -> Result<Option<DateTime<Utc>>, StoreError> {
        if !self.has_run_log()? {
            return Ok(None);
        }
        let clock: Option<String> = self
            .conn
            .query_row(
                "SELECT clock FROM backlog_runs WHERE table_name = ?1 AND window_secs = ?2 AND outcome NOT IN ('failed', 'lapsed') ORDER BY id DESC LIMIT 1",
                params![self.table.name, window.as_secs() as i64],
                |r| r.get(0),
            )
            .optional()
            .map_err(db("reading the run log"))?;
        clock
            .map(|c| {
                DateTime::parse_from_rfc3339(&c)
                    .map(|t| t.with_timezone(&Utc))
                    .map_err(|e| {
                        StoreError::Schema(format!(
                            "backlog_runs holds a clock {c:?} that is not RFC 3339: {e}"
                        ))
                    })
            })
            .transpose()
    }

    fn begin_run(&mut self, run: &RunStart) -> Result<i64, StoreError> {
        let started = Utc::now().to_rfc3339_opts(SecondsFormat::Millis, true);
        // Stamps are RFC 3339 UTC with milliseconds: they compare as text.
        let silent_since = (Utc::now() - run.lease).to_rfc3339_opts(SecondsFormat::Millis, true);
        self.conn
            .execute(
                "UPDATE backlog_runs SET outcome = 'abandoned', error = 'no heartbeat since ' || heartbeat_at || ': the tick was killed or lost its database'
                 WHERE table_name = ?1 AND outcome = 'running' AND heartbeat_at < ?2",
                params![self.table.name, silent_since],
            )
            .map_err(db("writing the run log"))?;
        // The spans of killed ticks have run out: nobody will release them. Failures
        // kept until the end of their slot are collected once it is over.
        let now_ms = Utc::now().timestamp_millis();
        self.conn
            .execute(
                "DELETE FROM backlog_holds WHERE table_name = ?1 AND expires_at < ?2",
                params![self.table.name, now_ms],
            )
            .map_err(db("dropping spans that ran out"))?;
        self.conn
            .execute(
                "DELETE FROM backlog_tried WHERE table_name = ?1 AND expires_ms <= ?2",
                params![self.table.name, now_ms],
            )
            .map_err(db("dropping failures kept past their slot"))?;
        self.max_per_record = run.history.max_per_record;
        super::prune_attempts(&mut self.conn, "", &self.table.name, &run.history)?;
        self.conn
            .execute(
                "INSERT INTO backlog_runs (table_name, window_secs, tier, band_from_secs, band_to_secs, bands, clock, started_at, heartbeat_at, outcome, owner)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8, 'running', ?9)",
                params![
                    self.table.name,
                    run.window.as_secs() as i64,
                    run.tier.map(|t| t as i64),
                    run.younger.as_secs() as i64,
                    run.older.as_secs() as i64,
                    run.bands,
                    run.now.to_rfc3339_opts(SecondsFormat::Secs, true),
                    started,
                    run.owner,
                ],
            )
            .map_err(db("writing the run log"))?;
        Ok(self.conn.last_insert_rowid())
    }

    fn finish_run(&mut self, run_id: i64, end: &RunEnd) -> Result<(), StoreError> {
        let finished = Utc::now().to_rfc3339_opts(SecondsFormat::Millis, true);
        self.conn
            .execute(
                "UPDATE backlog_runs SET finished_at = ?2, selected = ?3, succeeded = ?4, failed = ?5, skipped = ?6, outcome = ?7, error = ?8, lost = ?9 WHERE id = ?1",
                params![run_id, finished, end.selected as i64, end.succeeded as i64, end.failed as i64, end.skipped as i64, end.outcome, end.error, end.lost as i64],
            )
            .map_err(db("writing the run log"))?;
        Ok(())
    }

    fn take_records(
        &mut self,
        owner: &str,
        records: Vec<Record>,
        lease_until: DateTime<Utc>,
    ) -> Result<Vec<Record>, StoreError> {
        let context = "holding the records to retry";
        let tx = Transaction::new_unchecked(&self.conn, TransactionBehavior::Immediate)
            .map_err(db(context))?;
        let now = Utc::now().timestamp_millis();
        let mut taken = Vec::new();
        for record in records {
            // Read again under the write lock: its status now, and whether a live span
            // of another tick covers it.
            let status: Option<String> = tx
                .query_row(
                    &format!(
                        "SELECT {status} FROM {table} WHERE {id} = ?1",
                        status = self.sql().status,
                        table = self.sql().table,
                        id = self.sql().id
                    ),
                    [&record.id],
                    |r| r.get(0),
                )
                .optional()
                .map_err(db(context))?;
            let held: bool = tx
                .query_row(
                    "SELECT EXISTS (SELECT 1 FROM backlog_holds WHERE table_name = ?1 AND owner <> ?2 AND expires_at > ?3 AND ?4 BETWEEN low AND high)",
                    params![self.table.name, owner, now, record.inserted_at()],
                    |r| r.get(0),
                )
                .map_err(db(context))?;
            if status.is_some_and(|s| self.table.is_pending(&s)) && !held {
                taken.push(record);
            }
        }
        // One span from the lowest to the highest, set afresh (a retry holds one record
        // at a time, and its span moves to each): marks are written while it is live.
        let low = taken.iter().map(Record::inserted_at).min();
        let high = taken.iter().map(Record::inserted_at).max();
        if let (Some(low), Some(high)) = (low, high) {
            tx.execute(
                SET_SPAN,
                params![
                    self.table.name,
                    owner,
                    low,
                    high,
                    lease_until.timestamp_millis(),
                    now
                ],
            )
            .map_err(db(context))?;
        }
        tx.commit().map_err(db(context))?;
        Ok(taken)
    }

    fn holder(&mut self, record: &Record) -> Result<Option<super::Held>, StoreError> {
        if !self.has_run_log()? {
            return Ok(None);
        }
        let context = "reading the tool's holds";
        let now = Utc::now().timestamp_millis();
        let at = |ms: i64| DateTime::from_timestamp_millis(ms).unwrap_or_default();
        let tick: Option<(String, i64)> = self
            .conn
            .query_row(
                "SELECT owner, expires_at FROM backlog_holds WHERE table_name = ?1 AND expires_at > ?2 AND ?3 BETWEEN low AND high ORDER BY expires_at DESC LIMIT 1",
                params![self.table.name, now, record.inserted_at()],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(db(context))?;
        if let Some((owner, until)) = tick {
            return Ok(Some(super::Held {
                owner: Some(owner),
                until: at(until),
            }));
        }
        let kept: Option<i64> = self
            .conn
            .query_row(
                "SELECT until_ms FROM backlog_tried WHERE table_name = ?1 AND record_id = ?2 AND expires_ms > ?3",
                params![self.table.name, record.id, now],
                |r| r.get(0),
            )
            .optional()
            .map_err(db(context))?;
        Ok(kept.map(|until| super::Held {
            owner: None,
            until: at(until),
        }))
    }

    fn held_counts(&mut self) -> Result<(u64, u64), StoreError> {
        if !self.has_run_log()? {
            return Ok((0, 0));
        }
        let context = "counting the records held";
        let now = Utc::now().timestamp_millis();
        let q = self.sql();
        // An index range of the table per live span (a tick or two at a time); a span
        // covers the records its tick read, of which the pending ones are still its.
        let pending: Vec<String> = (0..self.table.pending.len())
            .map(|i| format!("?{}", i + 3))
            .collect();
        let mut values: Vec<&dyn ToSql> = vec![&self.table.name, &now];
        values.extend(self.table.pending.iter().map(|p| p as &dyn ToSql));
        let held: i64 = self
            .conn
            .query_row(
                &format!(
                    "SELECT count(*) FROM backlog_holds h JOIN {t} ON {t}.{ins} BETWEEN h.low AND h.high WHERE h.table_name = ?1 AND h.expires_at > ?2 AND {t}.{st} IN ({})",
                    pending.join(", "),
                    t = q.table,
                    ins = q.inserted_at,
                    st = q.status
                ),
                params_from_iter(values),
                |r| r.get(0),
            )
            .map_err(db(context))?;
        // Kept failures whose record is still pending (one retried since is not).
        let mut values: Vec<&dyn ToSql> = vec![&self.table.name, &now];
        values.extend(self.table.pending.iter().map(|p| p as &dyn ToSql));
        let kept: i64 = self
            .conn
            .query_row(
                &format!(
                    "SELECT count(*) FROM backlog_tried k JOIN {t} ON {t}.{id} = k.record_id WHERE k.table_name = ?1 AND k.expires_ms > ?2 AND {t}.{st} IN ({})",
                    pending.join(", "),
                    t = q.table,
                    id = q.id,
                    st = q.status
                ),
                params_from_iter(values),
                |r| r.get(0),
            )
            .map_err(db(context))?;
        Ok((held as u64, kept as u64))
    }

    fn table(&self) -> &TableConfig {
        &self.table
    }

    fn own(&mut self) -> Result<super::Own<'_>, StoreError> {
        // Made together, by version 4: a database of an earlier one has neither.
        let exists = self.has_table("backlog_pauses")?;
        Ok(super::Own {
            sql: &mut self.conn,
            prefix: String::new(),
            table: &self.table.name,
            exists,
        })
    }

    fn heartbeat(&self, owner: &str, run_id: i64) -> Result<Box<dyn Heartbeat>, StoreError> {
        let conn = connect(&self.path, self.busy_timeout)?;
        Ok(Box::new(SqliteHeartbeat {
            conn,
            owner: owner.to_string(),
            run_id,
            held: false,
        }))
    }
}

struct SqliteHeartbeat {
    conn: Connection,
    owner: String,
    run_id: i64,
    /// The tick's span was seen: once it is gone, the hold lapsed.
    held: bool,
}

impl Heartbeat for SqliteHeartbeat {
    fn beat(&mut self, lease_until: DateTime<Utc>) -> Result<(), StoreError> {
        let now = Utc::now().to_rfc3339_opts(SecondsFormat::Millis, true);
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(db("renewing claims"))?;
        // A span that ran out stays out (see HOLD); the tick learns its hold lapsed.
        let now_ms = Utc::now().timestamp_millis();
        let renewed = tx
            .execute(
                "UPDATE backlog_holds SET expires_at = ?1 WHERE owner = ?2 AND expires_at > ?3",
                params![lease_until.timestamp_millis(), self.owner, now_ms],
            )
            .map_err(db("renewing claims"))?;
        if renewed == 0 {
            let lapsed: bool = tx
                .query_row(
                    "SELECT EXISTS (SELECT 1 FROM backlog_holds WHERE owner = ?1)",
                    params![self.owner],
                    |r| r.get(0),
                )
                .map_err(db("renewing claims"))?;
            if lapsed || self.held {
                return Err(StoreError::HoldLapsed(LAPSED.into()));
            }
        } else {
            self.held = true;
        }
        tx.execute(
            "UPDATE backlog_runs SET heartbeat_at = ?1 WHERE id = ?2",
            params![now, self.run_id],
        )
        .map_err(db("renewing claims"))?;
        tx.commit().map_err(db("renewing claims"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records of a page the tick still holds keep their values while the next page is
    /// read: only a buffer no record refers to any more lends its memory.
    #[test]
    fn records_of_a_page_outlive_the_next_page() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("backlog.db");
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch(
            "CREATE TABLE BACKLOG (ID INTEGER PRIMARY KEY, STATUS TEXT, DATE_INSERTED TEXT, PAYLOAD);",
        )
        .unwrap();
        for id in 1..=6_i64 {
            conn.execute(
                "INSERT INTO BACKLOG VALUES (?1, 'NEW', ?2, ?3)",
                params![
                    id,
                    format!("2026-11-2{id} 12:00:00"),
                    format!("payload {id}")
                ],
            )
            .unwrap();
        }
        drop(conn);
        let table = TableConfig::new("BACKLOG", "ID", "STATUS", "DATE_INSERTED");
        let mut store = SqliteStore::open(&path, Duration::from_secs(1), table).unwrap();
        store.inspect().unwrap();
        let band = BandQuery {
            from: Scalar::Text("2026-01-01 00:00:00".into()),
            to: Scalar::Text("2027-01-01 00:00:00".into()),
            to_inclusive: true,
            take_tried: false,
            clock: Utc::now(),
        };
        let payloads = |records: &[Record]| -> Vec<String> {
            records
                .iter()
                .map(|r| r.columns["PAYLOAD"].as_str().unwrap().to_string())
                .collect()
        };
        let first = store.select(&band, None, 3).unwrap();
        let cursor = Cursor::after(first.last().unwrap());
        let second = store.select(&band, Some(&cursor), 3).unwrap();
        assert_eq!(payloads(&first), ["payload 6", "payload 5", "payload 4"]);
        assert_eq!(payloads(&second), ["payload 3", "payload 2", "payload 1"]);
        assert_eq!(
            first[0].inserted_at(),
            Scalar::Text("2026-11-26 12:00:00".into())
        );
        assert_eq!(
            serde_json::to_string(&second[2].columns).unwrap(),
            r#"{"ID":1,"STATUS":"NEW","DATE_INSERTED":"2026-11-21 12:00:00","PAYLOAD":"payload 1"}"#
        );
        // Once its records are gone, a page's buffer is reused; the new page reads right.
        drop(first);
        drop(second);
        let again = store.select(&band, Some(&cursor), 2).unwrap();
        assert_eq!(payloads(&again), ["payload 3", "payload 2"]);
    }
}

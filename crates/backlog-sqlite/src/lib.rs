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
//! docs/benchmarks.md). The span's top comes down as the tick marks its records (a failure
//! stays kept from the other ticks by `backlog_tried`), and a person's action may take
//! over what the tick has read and not handed out yet (`takeover`).
//!
//! Parts: `schema` (the tool's tables and their versions, reading the table's names),
//! `pages` (the band's page queries and records: `Reads`), `survey` (records by status,
//! the band's plan, the inserted-at values: `Survey`), `holds` (spans, marks, kept
//! failures, the heartbeat: `Holds`), `takeover` (what a person's action may take of a
//! tick's span); here, the store itself, and the run log opened
//! once the spans of killed ticks are dropped.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use chrono::Utc;
use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{Connection, OpenFlags, ToSql};

use backlog_core::config::TableConfig;
use backlog_core::record::{Record, RowBuffer, Scalar};
use backlog_core::store::sql::{Sql, failed};
use backlog_core::store::{RunStart, Store, StoreError, runs};
use backlog_core::timestamp::TimestampFormat;

mod dialect;
mod driver;
mod holds;
mod pages;
mod schema;
mod survey;
mod takeover;

pub use driver::Sqlite;

/// The driver the core uses for this database's files: call it once, before loading a
/// schedule file (the `backlog` command does at its start).
pub fn install() {
    backlog_core::store::driver::install(&Sqlite);
}

use dialect::Lite;
use pages::Statements;

/// A backlog table in a SQLite file, with the tool's tables beside it in the same file.
/// A tick holds records by the span of inserted-at values it read (`backlog_holds`), as
/// SQLite serializes writers anyway; every tick is on the host that has the file.
pub struct SqliteStore {
    conn: Lite,
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
    /// Whether a group of marks cost more than `SCATTERED` a mark to write (the
    /// table's rows are scattered, and larger groups pay); none before the first
    /// group large enough to tell (see `mark_group`).
    scattered: Option<bool>,
    /// What the tick running on this store took and has not settled, and how far it
    /// handed its span out (see `takeover`).
    handing: Option<takeover::Handing>,
}

/// The cost of a mark, commit included (its fsyncs in a rollback journal, a WAL
/// checkpoint that falls in it), above which its group's rows are taken as scattered
/// over the table. Judged on groups without attempts. Marks written in id order, on tables of 1,000,000 rows
/// (docs/benchmarks.md, issue 15): 0.6–1.5 µs where the ids follow the dates, 7.5–10 µs
/// (WAL) and 14–33 µs (rollback journal) where they do not.
const SCATTERED: Duration = Duration::from_micros(4);

/// Records a query read and, for a page read with the `held` flag, whether another
/// tick's span holds each.
struct Read {
    records: Vec<Record>,
    held: Vec<bool>,
}

/// A failed statement, named by what it was doing. A full disk (`SQLITE_FULL`) is
/// told as such (`Fault::DiskFull`): a tick whose heartbeat meets it stops at once.
fn db(context: impl Into<String>) -> impl FnOnce(rusqlite::Error) -> StoreError {
    let context = context.into();
    move |e| StoreError::Database {
        context,
        source: cause(e),
    }
}

/// SQLite's error as the store's protocol reads it: a full disk is a
/// `Fault::DiskFull`, whichever statement met it (the shared ones too, see `dialect`):
/// `SQLITE_FULL`, or in WAL mode `SQLITE_IOERR_SHMSIZE`, its shared-memory file
/// (`-shm`) that could not grow, which SQLite says as a mere "disk I/O error".
fn cause(e: rusqlite::Error) -> backlog_core::store::sql::SqlError {
    let full = |message: String| -> backlog_core::store::sql::SqlError {
        Box::new(backlog_core::store::fault::DbError {
            fault: backlog_core::store::Fault::DiskFull,
            message,
        })
    };
    match e.sqlite_error() {
        Some(err) if err.code == rusqlite::ErrorCode::DiskFull => full(e.to_string()),
        Some(err) if err.extended_code == rusqlite::ffi::SQLITE_IOERR_SHMSIZE => full(
            "database or disk is full (SQLite cannot make room for the WAL's -shm file)".into(),
        ),
        _ => Box::new(e),
    }
}

/// A value of the user's table bound as a parameter, or NULL (`Scalar` is the core's
/// type, `ToSql` rusqlite's trait: a type of this crate must stand between them).
struct Bind(Option<Scalar>);

impl From<&Scalar> for Bind {
    fn from(s: &Scalar) -> Bind {
        Bind(Some(s.clone()))
    }
}

impl From<Scalar> for Bind {
    fn from(s: Scalar) -> Bind {
        Bind(Some(s))
    }
}

impl From<Option<&Scalar>> for Bind {
    fn from(s: Option<&Scalar>) -> Bind {
        Bind(s.cloned())
    }
}

impl From<Option<Scalar>> for Bind {
    fn from(s: Option<Scalar>) -> Bind {
        Bind(s)
    }
}

impl ToSql for Bind {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        let Some(s) = &self.0 else {
            return Ok(ToSqlOutput::from(rusqlite::types::Null));
        };
        Ok(match s {
            Scalar::Int(i) => ToSqlOutput::from(*i),
            Scalar::Text(s) => ToSqlOutput::from(s.as_str()),
            // Native timestamps come only from PostgreSQL; written as text if ever bound.
            Scalar::Time(_) | Scalar::Naive(_) | _ => ToSqlOutput::from(s.to_string()),
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

/// The WAL's pages at which this connection's commits copy it back into the database
/// on a nearly full disk (SQLite's default: 1,000), and its size once it starts over
/// (see `connect`).
const WAL_PAGES: i64 = 64;

/// Free room under which a disk is nearly full: sixteen WALs of SQLite's default
/// size (4 MB), the most a tick's would grow to beside what the marks add.
const NEARLY_FULL: u64 = 64 << 20;

/// The room left for an unprivileged writer on the file system of `path`; none when
/// it cannot be read (the WAL is then left as SQLite keeps it).
fn room_left(path: &Path) -> Option<u64> {
    let stat = rustix::fs::statvfs(path).ok()?;
    Some(stat.f_bavail.saturating_mul(stat.f_frsize))
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
        // A tick commits a group of marks at a time: each commit appends the pages it
        // changed to the WAL again, which by SQLite's default is copied back and
        // started over only past 1,000 pages (4 MB). On a nearly full disk that growth
        // alone filled it (1.3 MB of WAL for 600 records). There, checkpointed every
        // WAL_PAGES and cut back to that size when it starts over, the WAL of a tick's
        // writes stays within a few hundred kilobytes; elsewhere the checkpoints'
        // syncs would cost a fifth of a large tick's time (0.926 s against 1.108 s
        // for 67,500 records, docs/benchmarks.md).
        if room_left(path).is_some_and(|room| room < NEARLY_FULL) {
            conn.pragma_update(None, "wal_autocheckpoint", WAL_PAGES)
                .map_err(db("setting wal_autocheckpoint"))?;
            let page_size: i64 = conn
                .query_row("PRAGMA page_size", [], |r| r.get(0))
                .map_err(db("reading the page size"))?;
            conn.pragma_update(None, "journal_size_limit", WAL_PAGES * page_size)
                .map_err(db("setting journal_size_limit"))?;
        }
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
            conn: Lite(conn),
            path: path.to_path_buf(),
            busy_timeout,
            table,
            format: None,
            since_format: None,
            sql: None,
            spare: std::cell::Cell::new(None),
            max_per_record: backlog_core::config::HistoryConfig::default().max_per_record,
            scattered: None,
            handing: None,
        })
    }

    fn sql(&self) -> &Statements {
        self.sql.as_ref().expect("inspect() runs before any query")
    }

    fn format(&self) -> TimestampFormat {
        self.format.expect("inspect() runs before any query")
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
        let samples = self.samples(&table, &columns[2], &columns[0])?;
        let format = backlog_core::timestamp::detect(self.table.inserted_at_format, &samples)
            .map_err(|problem| StoreError::Timestamps {
                table: table.clone(),
                column: columns[2].clone(),
                problem: problem.to_string(),
            })?;
        if let Some(retry) = &self.table.retry {
            let samples = self.samples(&table, &retry.since, &columns[0])?;
            let since = backlog_core::timestamp::detect(
                backlog_core::timestamp::FormatSetting::Auto,
                &samples,
            )
            .map_err(|problem| StoreError::Timestamps {
                table: table.clone(),
                column: retry.since.clone(),
                problem: problem.to_string(),
            })?;
            // An empty column takes the inserted-at column's format.
            self.since_format = Some(if samples.is_empty() { format } else { since });
        }
        self.sql = Some(self.statements(&table, &columns));
        self.choose_pages(&table, &columns[1])?;
        self.format = Some(format);
        Ok(format)
    }

    fn ensure_own_tables(&mut self) -> Result<(), StoreError> {
        self.create_own_tables()
    }

    fn begin_run(&mut self, run: &RunStart) -> Result<i64, StoreError> {
        self.max_per_record = run.history.max_per_record;
        let table = self.table.name.clone();
        // The spans of killed ticks have run out: nobody will release them. Failures
        // kept until the end of their slot are collected once it is over.
        let mut collect = |sql: &mut dyn Sql| {
            let now_ms = Utc::now().timestamp_millis();
            sql.execute(
                "DELETE FROM backlog_holds WHERE table_name = ?1 AND expires_at < ?2",
                &[table.as_str().into(), now_ms.into()],
            )
            .map_err(failed("dropping spans that ran out"))?;
            // Takeovers from ticks that are gone: nothing will hand those records out.
            sql.execute(
                "DELETE FROM backlog_takeovers WHERE table_name = ?1 AND owner NOT IN (SELECT owner FROM backlog_holds WHERE table_name = ?1)",
                &[table.as_str().into()],
            )
            .map_err(failed("dropping takeovers from ticks that ended"))?;
            sql.execute(
                "DELETE FROM backlog_tried WHERE table_name = ?1 AND expires_ms <= ?2",
                &[table.as_str().into(), now_ms.into()],
            )
            .map_err(failed("dropping failures kept past their slot"))?;
            Ok(())
        };
        runs::open(&mut self.conn, "", &self.table.name, run, &mut collect)
    }

    fn table(&self) -> &TableConfig {
        &self.table
    }

    fn own(&mut self, table: &str) -> Result<backlog_core::store::Own<'_>, StoreError> {
        let exists = self.has_table(table)?;
        Ok(backlog_core::store::Own {
            sql: &mut self.conn,
            prefix: String::new(),
            table: &self.table.name,
            exists,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use backlog_core::store::{BandQuery, Cursor, Range, Reads, Survey};
    use rusqlite::params;

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
            wants_all: true,
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

    /// A database with no room left (`max_page_count` here, a full disk in life) is
    /// told as a full disk, which stops a tick's heartbeat at once; other errors not.
    #[test]
    fn a_full_database_is_told_as_such() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE t (x TEXT); PRAGMA max_page_count = 3;")
            .unwrap();
        let full = conn
            .execute("INSERT INTO t VALUES (?1)", [&"x".repeat(20_000)])
            .map_err(db("writing statuses to t"))
            .unwrap_err();
        assert_eq!(full.fault(), backlog_core::store::Fault::DiskFull);
        assert_eq!(
            full.to_string(),
            "writing statuses to t: database or disk is full"
        );
        let other = conn
            .execute("INSERT INTO nowhere VALUES (1)", [])
            .map_err(db("writing"))
            .unwrap_err();
        assert_eq!(other.fault(), backlog_core::store::Fault::Other);
    }

    /// The virtual-machine steps of what a tick over an empty band reads, `inspect` and
    /// the sample of the band's statuses, on a table of `rows` records indexed on
    /// (status, inserted-at) alone, with a `[retry]` since column without an index.
    fn empty_tick_steps(rows: i64) -> u64 {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("backlog.db");
        let mut conn = Connection::open(&path).unwrap();
        conn.execute_batch(
            "CREATE TABLE BACKLOG (ID INTEGER PRIMARY KEY, STATUS TEXT, DATE_INSERTED TEXT, TRIES INTEGER, TRIED_AT TEXT);
             CREATE INDEX BACKLOG_BY_STATUS_DATE ON BACKLOG (STATUS, DATE_INSERTED);",
        )
        .unwrap();
        conn.execute(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?1)
             INSERT INTO BACKLOG SELECT i, 'NEW', datetime(1790000000 + i * 97 % 1000003, 'unixepoch'), NULL, NULL FROM n",
            [rows],
        )
        .unwrap();
        let steps = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let counted = Arc::clone(&steps);
        conn.progress_handler(
            1,
            Some(move || {
                counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                false
            }),
        )
        .unwrap();
        let mut table = TableConfig::new("BACKLOG", "ID", "STATUS", "DATE_INSERTED");
        table.retry = Some(backlog_core::config::RetryConfig::new(
            "exponential",
            "TRIES",
            "TRIED_AT",
        ));
        let mut store = SqliteStore::open(&path, Duration::from_secs(1), table).unwrap();
        store.conn = Lite(conn);
        store.inspect().unwrap();
        let empty = Range {
            from: Some(Scalar::Text("2030-01-01 00:00:00".into())),
            to: Some(Scalar::Text("2030-01-02 00:00:00".into())),
            sample: Some(1000),
            ..Range::default()
        };
        assert_eq!(store.count_by_status(&empty).unwrap(), []);
        steps.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// An empty band must cost about the same on a large table as on a small one
    /// (DESIGN.md): the inserted-at column's format is read through neither a sort of
    /// the table nor a scan, nor is the sample of the band's statuses.
    #[test]
    fn an_empty_band_does_not_follow_the_size_of_the_table() {
        let small = empty_tick_steps(2_000);
        let large = empty_tick_steps(100_000);
        assert!(
            large < small * 2,
            "an empty tick took {large} steps on 100,000 records against {small} on 2,000"
        );
    }
}

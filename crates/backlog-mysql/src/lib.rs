//! The MySQL and MariaDB backend: one backlog, many runners on many machines, as on
//! PostgreSQL.
//!
//! Claims live in the tool's own claims table, with leases on the database's clock,
//! for the reasons `backlog_core::store::claims` gives (a handler may run for minutes; a row lock lives
//! as long as a connection a vanished host leaves open; the engine stays the same).
//! Row locks are taken for a moment only: the transaction that claims a page locks the
//! records it wants that are still pending (`FOR UPDATE SKIP LOCKED`, MySQL 8 and
//! MariaDB 10.6), then their claims, decides which are free, and writes those; the
//! transaction that marks locks the same rows first. Every change to a record's claim
//! thus happens under its row's lock, so two runners never hold a record at once.
//!
//! Every connection sets UTC, ANSI quotes and READ COMMITTED first (`connection`), so
//! the statements the backends share run here as written. A transaction the server
//! rolls back for a deadlock (1213) or a lock wait timeout (1205) is tried again a few
//! times; a connection lost mid-tick ends the tick cleanly, its claims running out
//! with their lease.
//!
//! Parts: `connection` (TLS, errors, the shared statements' placeholders), `schema`
//! (the tool's tables, the user's table and its columns), `samples` (a timestamp
//! column's format), `values` (MySQL's values as records and bounds), `pages` (the
//! band's pages and records: `Reads`), `survey` (counts, the band's plan, the
//! inserted-at values: `Survey`), `claims` (pages taken, claims, marks, kept failures:
//! `Holds`), `heartbeat` (its connection; the renewal is every server's,
//! `backlog_core::store::claims::ServerHeartbeat`); here, the store itself (the run log is opened as
//! on every server, `backlog_core::store::claims::open_run`).

use std::sync::Arc;

use chrono::{DateTime, Utc};
use mysql::Conn;
use mysql::prelude::Queryable;

use backlog_core::config::TableConfig;
use backlog_core::store::{Holds, Mark, MarkWriter, RunStart, Store, StoreError};
use backlog_core::timestamp::TimestampFormat;

mod claims;
mod connection;
mod driver;
mod heartbeat;
mod pages;
mod samples;
mod schema;
mod survey;
mod url;
mod values;

pub use driver::Mysql;
pub use url::{MysqlTls, MysqlUrl};

/// The driver the core uses for this database's URLs: call it once, before loading a
/// schedule file (the `backlog` command does at its start).
pub fn install() {
    backlog_core::store::driver::install(&Mysql);
}

use backlog_core::store::claims::row_locks::Subject;
use backlog_core::store::fault::retrying;
use connection::{Mq, connect, my};
use values::IdKind;

/// What a tick knows of the user's table once `inspect` read it.
#[derive(Clone)]
struct Shape {
    /// The table, quoted with its database: `"shop"."orders"`.
    table: String,
    /// The table as the claim protocol writes it (`backlog_core::store::claims::row_locks`). Its
    /// rows are locked by id through the index that starts with the id when there is
    /// one (`FORCE INDEX`): on a small table the optimizer may read `id IN (…)` by
    /// scanning another index, and MariaDB then kept every row it scanned locked, not
    /// only those it found: a page read beside the marks' connection skipped records
    /// it should have taken.
    subject: Subject,
    /// Whether an index starts with the id (`subject.by_id` goes through it).
    id_indexed: bool,
    /// The database and the table's own name, unquoted, for information_schema.
    schema_name: (String, String),
    /// Every column's name, in table order, shared by the records of a page.
    names: Arc<[String]>,
    /// Every column's `DATA_TYPE` (`bigint`, `varchar`, `datetime`…), in table order.
    types: Vec<String>,
    /// `t."a", t."b", …`: every column, in table order.
    list: String,
    /// `SELECT t."a", t."b", … FROM table t`.
    select: String,
    /// An index that starts with the status and then the inserted-at column, where no
    /// index starts with the inserted-at column: pages read one status at a time
    /// through it (`pages::page_query`).
    status_age_index: Option<String>,
    /// The same, reading the table through its index on the inserted-at column when
    /// it has one (`FORCE INDEX`): a page is then an index range read in the band's
    /// order, whatever the optimizer's statistics say of a small or new table.
    select_by_age: String,
    /// The places of the id, status and inserted-at columns in `names`.
    id: usize,
    status: usize,
    inserted_at: usize,
    /// How ids are bound and shown.
    id_kind: IdKind,
}

impl Shape {
    fn quoted(&self, column: usize) -> String {
        backlog_core::store::quote(&self.names[column])
    }
}

/// A backlog table on a MySQL or MariaDB server, with the tool's tables in the same
/// database or the one `database.schema` names. A tick claims each record it holds
/// (`backlog_claims`), so runners on many hosts can share one band.
pub struct MysqlStore {
    conn: Mq<Conn>,
    url: MysqlUrl,
    /// How long a statement waits for another's row lock (`database.busy_timeout`).
    lock_wait: std::time::Duration,
    /// The database of the tool's own tables, quoted, with a dot: `"shop".`.
    prefix: String,
    /// The same, unquoted.
    own_database: String,
    table: TableConfig,
    format: Option<TimestampFormat>,
    since_format: Option<TimestampFormat>,
    shape: Option<Shape>,
    /// How many attempts a record keeps (`history.max_per_record`, from `begin_run`).
    max_per_record: u32,
    /// The tool's tables are there (`ensure_own_tables` made them ready): `own` need
    /// not ask again, a round trip each time a tick reads one.
    own_ready: bool,
}

impl MysqlStore {
    /// Connects to the server; `database` names where the tool's own tables go, and
    /// `lock_wait` how long a statement waits for another's row lock.
    pub fn open(
        url: &MysqlUrl,
        database: &str,
        lock_wait: std::time::Duration,
        table: TableConfig,
    ) -> Result<Self, StoreError> {
        let conn = connect(url, lock_wait)?;
        Ok(MysqlStore {
            conn: Mq(conn),
            url: url.clone(),
            lock_wait,
            prefix: format!("{}.", backlog_core::store::quote(database)),
            own_database: database.to_string(),
            table,
            format: None,
            since_format: None,
            shape: None,
            max_per_record: backlog_core::config::HistoryConfig::default().max_per_record,
            own_ready: false,
        })
    }

    fn shape(&self) -> &Shape {
        self.shape
            .as_ref()
            .expect("inspect() runs before any query")
    }

    fn format(&self) -> TimestampFormat {
        self.format.expect("inspect() runs before any query")
    }

    /// Whether the tool's table `table` is there (a dry run or a new database has
    /// none).
    fn has_table(&mut self, table: &str) -> Result<bool, StoreError> {
        let found: Option<i64> = self
            .conn
            .exec_first(
                "SELECT count(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?",
                (self.own_database.as_str(), table),
            )
            .map_err(my("reading the tool's tables"))?;
        Ok(found == Some(1))
    }
}

impl MarkWriter for MysqlStore {
    fn mark(&mut self, owner: &str, marks: &[Mark]) -> Result<Vec<usize>, StoreError> {
        Holds::mark(self, owner, marks)
    }
}

impl Store for MysqlStore {
    fn describe(&self) -> String {
        self.url.shown.clone()
    }

    fn inspect(&mut self) -> Result<TimestampFormat, StoreError> {
        self.inspect_table()
    }

    fn ensure_own_tables(&mut self) -> Result<(), StoreError> {
        self.create_own_tables()?;
        self.own_ready = true;
        Ok(())
    }

    fn begin_run(&mut self, run: &RunStart) -> Result<i64, StoreError> {
        self.max_per_record = run.history.max_per_record;
        let (prefix, table) = (self.prefix.clone(), self.table.name.clone());
        retrying("writing the run log", || {
            backlog_core::store::claims::open_run(&mut self.conn, &prefix, &table, run)
        })
    }

    fn clock(&mut self) -> Result<DateTime<Utc>, StoreError> {
        let now: Option<mysql::Value> = self
            .conn
            .query_first("SELECT UTC_TIMESTAMP(6)")
            .map_err(my("reading the database's clock"))?;
        now.as_ref()
            .and_then(values::naive)
            .map(|t| t.and_utc())
            .ok_or_else(|| StoreError::Schema("UTC_TIMESTAMP(6) gave no time".into()))
    }

    fn table(&self) -> &TableConfig {
        &self.table
    }

    fn own(&mut self, table: &str) -> Result<backlog_core::store::Own<'_>, StoreError> {
        let ready = self.own_ready && backlog_core::store::claims::is_own(table);
        let exists = ready || self.has_table(table)?;
        Ok(backlog_core::store::Own {
            sql: &mut self.conn,
            prefix: self.prefix.clone(),
            table: &self.table.name,
            exists,
        })
    }
}

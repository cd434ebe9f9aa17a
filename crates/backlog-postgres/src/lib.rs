//! The PostgreSQL backend: one backlog, many runners on many machines.
//!
//! Claims live in the tool's own claims table, with leases; why a table, and not row
//! locks held for the handler's time, advisory locks or an unlogged table:
//! `backlog_core::store::claims`.
//!
//! So a claim costs one row written and deleted; what keeps that cheap is doing it a
//! page at a time. A page is taken in one short transaction: a statement that reads
//! the page and locks its rows (`TakeSql::page`: `FOR NO KEY UPDATE SKIP LOCKED`, only
//! rows no claim holds), then one that claims them (`INSERT … ON CONFLICT`); a tick that
//! does not want every record it reads (spread, `[retry]`), or pages read one status at
//! a time, read the page, then lock the rows of the records wanted as they claim them
//! (`claim_sql`). The marks are one statement per status (`set_status_sql`), which lets
//! go of the claims and writes the statuses where they were still this tick's.
//!
//! The row locks last that transaction only. They keep a page from racing a tick
//! marking the same records (it skips the rows or sees their new statuses), and they
//! give runners that read the band at the same moment pages of their own: each skips
//! the rows another is taking, where they used to read the same page and all but one
//! find it taken (four runners on two cores went from 0.5–1 × one runner to 1.2 ×).
//! Leases are measured on the database's clock (`now()`), never a runner's, so runners
//! with skewed clocks agree on when a claim ran out.
//!
//! Ids and statuses are bound as text and cast to the column's own type in the SQL
//! (`$1::text[]::uuid[]`): a cast on the parameter keeps the comparison with the bare
//! column, so primary-key and index lookups stay lookups, for any id type.
//!
//! Parts: `connection` (TLS, errors as one line), `schema` (the tool's tables, the
//! user's table and its columns), `statements` (the SQL a tick runs, prepared),
//! `pages` (the band's pages and records: `Reads`), `survey` (counts, the band's plan, the
//! inserted-at values: `Survey`), `claims` (pages taken, claims, marks, kept failures, the
//! heartbeat's connection: `Holds`; the renewal is every server's,
//! `backlog_core::store::claims::ServerHeartbeat`), `runs` (the run log); here, the store itself.

use chrono::{DateTime, Utc};
use postgres::types::{IsNull, ToSql, Type, to_sql_checked};
use postgres::{Client, Statement};

use backlog_core::config::TableConfig;
use backlog_core::record::Scalar;
use backlog_core::store::{Holds, Mark, MarkWriter, RunStart, Store, StoreError, quote};
use backlog_core::timestamp::TimestampFormat;

mod claims;
mod connection;
mod dialect;
mod driver;
mod url;
use dialect::Pg;
mod heartbeat;
mod pages;
mod runs;
mod schema;
mod statements;
mod survey;

pub use driver::Postgres;
pub use url::{PostgresUrl, Verify};

/// The driver the core uses for this database's URLs: call it once, before loading a
/// schedule file (the `backlog` command does at its start).
pub fn install() {
    backlog_core::store::driver::install(&Postgres);
}

use backlog_core::store::fault::retrying;
pub(crate) use connection::db_error;
use connection::{connect, pg};

/// A bound for the inserted-at column, converted to the column's own type.
#[derive(Debug, Clone, Copy)]
struct Bound<'a>(&'a Scalar);

impl ToSql for Bound<'_> {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut bytes::BytesMut,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        match (self.0, ty) {
            (Scalar::Int(i), &Type::INT8) => i.to_sql(ty, out),
            (Scalar::Int(i), &Type::INT4) => i32::try_from(*i)?.to_sql(ty, out),
            (Scalar::Int(i), &Type::INT2) => i16::try_from(*i)?.to_sql(ty, out),
            (Scalar::Time(t), &Type::TIMESTAMPTZ) => t.to_sql(ty, out),
            (Scalar::Naive(t), &Type::TIMESTAMP) => t.to_sql(ty, out),
            (Scalar::Text(s), _) => s.as_str().to_sql(ty, out),
            (other, ty) => Err(format!("cannot bind {other} as {ty}").into()),
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    to_sql_checked!();
}

/// What the tick needs to know about one of the table's key columns.
#[derive(Debug, Clone)]
struct Column {
    /// Quoted, as it goes into SQL.
    quoted: String,
    /// `format_type()` of the column: `bigint`, `uuid`, `character varying(20)`…
    sql_type: String,
}

/// The names, types and prepared statements of a table, settled by `inspect`.
struct Prepared {
    table: String,
    id: Column,
    status: Column,
    inserted_at: String,
    /// The column holds an integer type: ids are read back as numbers.
    int_id: bool,
    /// `bytea` columns, whose JSON (`\\x00ff`) is rewritten as base64, as on SQLite.
    bytea: Vec<String>,
    first_page: [Statement; 2],
    next_page: Statement,
    /// Locks a group's rows before its marks read the claims (see `mark`).
    lock_rows: Statement,
    /// The statements that use the tool's own tables, prepared once `ensure_own_tables`
    /// made sure they exist (a dry run or `doctor` never creates them).
    own_sql: OwnSql,
    own: Option<Own>,
    /// The SQL of the first page (exclusive end), for `band_plan`.
    first_page_sql: String,
}

/// The SQL of the statements on the tool's own tables (see `schema::prepare`).
struct OwnSql {
    take_first: [String; 2],
    take_next: String,
    claim: String,
    claim_locked: String,
    set_status: [String; 2],
    lock_claims: String,
}

/// Those statements, prepared.
#[derive(Clone)]
struct Own {
    /// The pages a tick takes: as `first_page` and `next_page`, which records another
    /// tick holds said by a NULL JSON.
    take_first: [Statement; 2],
    take_next: Statement,
    /// Claims records, locking their rows; and the records of a page taken, whose rows
    /// its transaction locked.
    claim: Statement,
    claim_locked: Statement,
    /// Lets go of the claims and writes the status where this tick still claimed:
    /// with `[retry]`'s count and time (a try), and the status alone.
    set_status: [Statement; 2],
    /// Locks the claims a tick's marks let go of, in the order its heartbeat locks
    /// them in (see `claims::ServerHeartbeat`).
    lock_claims: Statement,
}

/// A backlog table on a PostgreSQL server, with the tool's tables in a schema of their
/// own. A tick claims each record it holds (`backlog_claims`), so runners on many hosts
/// can share one band.
pub struct PostgresStore {
    client: Pg<Client>,
    url: PostgresUrl,
    /// The tool's own schema, quoted.
    schema: String,
    table: TableConfig,
    format: Option<TimestampFormat>,
    since_format: Option<TimestampFormat>,
    prepared: Option<Prepared>,
    /// How many attempts a record keeps (`history.max_per_record`, from `begin_run`).
    max_per_record: u32,
    /// Pages are read one pending status at a time and merged (see
    /// `pages::pages_by_status`), decided by `inspect` from the table's indexes.
    pages_by_status: bool,
    /// Whether the same index, on (status, inserted-at) with none on inserted-at, is
    /// how a sample of the band's statuses is read, whatever the pending statuses
    /// (`backlog_core::store::band_statuses`).
    statuses_by_index: bool,
    /// The server plans a statement with its parameters' values on request
    /// (`plan_cache_mode`, PostgreSQL 12 and later; see `claims::write_marks`).
    custom_plans: bool,
    /// The tool's tables are there (`ensure_own_tables` made them ready): `own` need
    /// not ask again, a round trip each time a tick reads one.
    own_ready: bool,
}

impl PostgresStore {
    /// Connects to the server; `schema` names where the tool's own tables go.
    pub fn open(url: &PostgresUrl, schema: &str, table: TableConfig) -> Result<Self, StoreError> {
        let mut client = connect(url)?;
        let version: i32 = client
            .query_typed_one("SELECT current_setting('server_version_num')::int", &[])
            .map_err(pg("reading the server's version"))?
            .get(0);
        Ok(PostgresStore {
            client: Pg(client),
            url: url.clone(),
            schema: quote(schema),
            table,
            format: None,
            since_format: None,
            prepared: None,
            max_per_record: backlog_core::config::HistoryConfig::default().max_per_record,
            pages_by_status: false,
            statuses_by_index: false,
            custom_plans: version >= 120_000,
            own_ready: false,
        })
    }

    fn prepared(&self) -> &Prepared {
        self.prepared
            .as_ref()
            .expect("inspect() runs before any query")
    }

    /// The statements on the tool's own tables (after `ensure_own_tables`).
    fn own_statements(&self) -> Own {
        self.prepared()
            .own
            .clone()
            .expect("ensure_own_tables() runs before any claim")
    }

    fn format(&self) -> TimestampFormat {
        self.format.expect("inspect() runs before any query")
    }

    fn own_table(&self, table: &str) -> String {
        format!("{}.{table}", self.schema)
    }
}

impl MarkWriter for PostgresStore {
    fn mark(&mut self, owner: &str, marks: &[Mark]) -> Result<Vec<usize>, StoreError> {
        Holds::mark(self, owner, marks)
    }
}

impl Store for PostgresStore {
    fn describe(&self) -> String {
        self.url.shown.clone()
    }

    fn inspect(&mut self) -> Result<TimestampFormat, StoreError> {
        self.inspect_table_knowing(None)
    }

    fn ensure_own_tables(&mut self) -> Result<(), StoreError> {
        retrying("creating the tool's tables", || self.create_own_tables())?;
        self.own_ready = true;
        Ok(())
    }

    fn begin_run(&mut self, run: &RunStart) -> Result<i64, StoreError> {
        retrying("writing the run log", || self.open_run(run))
    }

    fn clock(&mut self) -> Result<DateTime<Utc>, StoreError> {
        self.client
            .query_typed_one("SELECT now()", &[])
            .map(|row| row.get(0))
            .map_err(pg("reading the database's clock"))
    }

    fn table(&self) -> &TableConfig {
        &self.table
    }

    fn own(&mut self, table: &str) -> Result<backlog_core::store::Own<'_>, StoreError> {
        let ready = self.own_ready && backlog_core::store::claims::is_own(table);
        let table = self.own_table(table);
        let exists: bool = ready
            || self
                .client
                .query_typed_one(
                    "SELECT to_regclass($1) IS NOT NULL",
                    &[(&table, Type::TEXT)],
                )
                .map_err(pg("reading the tool's tables"))?
                .get(0);
        Ok(backlog_core::store::Own {
            sql: &mut self.client,
            prefix: format!("{}.", self.schema),
            table: &self.table.name,
            exists,
        })
    }
}

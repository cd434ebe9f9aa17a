//! The tool's own tables on MySQL (DDL, version) and what a tick learns of the user's
//! table before it starts: its database and name, its columns and their types, the
//! inserted-at format.

use mysql::prelude::Queryable;

use super::*;
use crate::store::{check_version, not_ours, quote};
use crate::timestamp::{self, FormatSetting};

/// The tool's own tables in the database `{s}` (quoted, with its dot). The columns of
/// `backlog_attempts` and `backlog_pauses` are those of the other backends, whose
/// statements this one shares; text that is part of a key is a `VARCHAR` (MySQL
/// indexes no `TEXT`), compared byte for byte (`utf8mb4_bin`: ids `a` and `A` are two
/// records). Indexes are declared with their tables, so that `IF NOT EXISTS` covers
/// them (MySQL has no `CREATE INDEX IF NOT EXISTS`).
const OWN_TABLES: [&str; 5] = [
    r#"CREATE TABLE IF NOT EXISTS {s}backlog_meta ("key" VARCHAR(64) PRIMARY KEY, value TEXT NOT NULL) {o}"#,
    "CREATE TABLE IF NOT EXISTS {s}backlog_runs (
        id BIGINT AUTO_INCREMENT PRIMARY KEY,
        table_name VARCHAR(255) NOT NULL,
        window_secs BIGINT NOT NULL,
        tier INT,
        band_from_secs BIGINT NOT NULL,
        band_to_secs BIGINT NOT NULL,
        bands VARCHAR(32) NOT NULL,
        clock DATETIME(6) NOT NULL,
        started_at DATETIME(6) NOT NULL,
        heartbeat_at DATETIME(6),
        finished_at DATETIME(6),
        selected BIGINT NOT NULL DEFAULT 0,
        succeeded BIGINT NOT NULL DEFAULT 0,
        failed BIGINT NOT NULL DEFAULT 0,
        skipped BIGINT NOT NULL DEFAULT 0,
        lost BIGINT NOT NULL DEFAULT 0,
        outcome VARCHAR(32) NOT NULL,
        error TEXT,
        owner VARCHAR(255) NOT NULL,
        INDEX backlog_runs_by_window (table_name, window_secs, id)
    ) {o}",
    "CREATE TABLE IF NOT EXISTS {s}backlog_claims (
        table_name VARCHAR(255) NOT NULL,
        record_id VARCHAR(255) NOT NULL,
        owner VARCHAR(255) NOT NULL,
        claimed_at DATETIME(6) NOT NULL,
        expires_at DATETIME(6) NOT NULL,
        PRIMARY KEY (table_name, record_id),
        INDEX backlog_claims_by_owner (owner)
    ) {o}",
    r#"CREATE TABLE IF NOT EXISTS {s}backlog_attempts (
        id BIGINT AUTO_INCREMENT PRIMARY KEY,
        table_name VARCHAR(255) NOT NULL,
        record_id VARCHAR(255) NOT NULL,
        run_id BIGINT NOT NULL,
        window_secs BIGINT NOT NULL,
        started_ms BIGINT NOT NULL,
        took_ms BIGINT NOT NULL,
        status TEXT NOT NULL,
        outcome VARCHAR(16) NOT NULL,
        code BIGINT,
        "signal" BIGINT,
        detail TEXT NOT NULL,
        output TEXT NOT NULL,
        INDEX backlog_attempts_by_record (table_name, record_id, id),
        INDEX backlog_attempts_by_time (table_name, started_ms)
    ) {o}"#,
    "CREATE TABLE IF NOT EXISTS {s}backlog_pauses (
        table_name VARCHAR(255) NOT NULL,
        window_secs BIGINT NOT NULL,
        since_ms BIGINT NOT NULL,
        until_ms BIGINT,
        reason TEXT,
        by_whom TEXT NOT NULL,
        PRIMARY KEY (table_name, window_secs)
    ) {o}",
];

/// The tables' options: InnoDB for row locks and transactions, text compared byte for
/// byte.
const TABLE_OPTIONS: &str = "ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin";

/// The version of the tables above on MySQL; a release that changes them adds a
/// migration to `create_own_tables`.
const SCHEMA_VERSION: i64 = 1;

/// The name of the lock that serialises the creation of the tool's tables, so that
/// eight runners starting at once on a new database do not race their DDL.
const OWN_TABLES_LOCK: &str = "backlog: own tables";

/// Integer types of MySQL, whose values read as numbers.
const INTEGERS: [&str; 5] = ["tinyint", "smallint", "mediumint", "int", "bigint"];

/// Text types of MySQL.
const TEXTS: [&str; 6] = [
    "char",
    "varchar",
    "tinytext",
    "text",
    "mediumtext",
    "longtext",
];

/// Text of a value of information_schema.
fn text(v: &mysql::Value) -> String {
    values::text(v).unwrap_or_default()
}

impl MysqlStore {
    /// Finds the table (`name` or `database.name`), exactly or else case-insensitively:
    /// its database and name.
    fn resolve_table(&mut self) -> Result<(String, String), StoreError> {
        let (database, name) = match self.table.name.split_once('.') {
            Some((d, n)) => (d.to_string(), n.to_string()),
            None => (self.url.database.clone(), self.table.name.clone()),
        };
        let row: Option<(mysql::Value, mysql::Value, mysql::Value)> = self
            .conn
            .exec_first(
                "SELECT TABLE_SCHEMA, TABLE_NAME, TABLE_TYPE FROM information_schema.TABLES
                 WHERE LOWER(TABLE_SCHEMA) = LOWER(?) AND LOWER(TABLE_NAME) = LOWER(?)
                 ORDER BY TABLE_NAME = ? DESC, TABLE_SCHEMA = ? DESC LIMIT 1",
                (&database, &name, &name, &database),
            )
            .map_err(my("reading the schema"))?;
        if let Some((db, table, kind)) = row {
            let table = text(&table);
            if text(&kind) == "VIEW" {
                return Err(StoreError::NotATable {
                    table,
                    kind: "view",
                });
            }
            return Ok((text(&db), table));
        }
        let available: Vec<mysql::Value> = self
            .conn
            .exec(
                "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? ORDER BY 1",
                (&database,),
            )
            .map_err(my("reading the schema"))?;
        Err(StoreError::NoTable {
            table: self.table.name.clone(),
            available: available.iter().map(text).collect(),
        })
    }

    /// The table's columns: name and `DATA_TYPE`, in table order.
    fn columns(
        &mut self,
        database: &str,
        table: &str,
    ) -> Result<Vec<(String, String)>, StoreError> {
        let rows: Vec<(mysql::Value, mysql::Value)> = self
            .conn
            .exec(
                "SELECT COLUMN_NAME, DATA_TYPE FROM information_schema.COLUMNS
                 WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION",
                (database, table),
            )
            .map_err(my("reading the schema"))?;
        Ok(rows
            .iter()
            .map(|(n, t)| (text(n), text(t).to_ascii_lowercase()))
            .collect())
    }

    /// Decides the format of a timestamp column from its type and, for text and
    /// integer columns, its values; a column with no value yet takes `empty` if given.
    fn column_format(
        &mut self,
        table: &str,
        (name, data_type): &(String, String),
        id: &str,
        setting: FormatSetting,
        empty: Option<TimestampFormat>,
    ) -> Result<TimestampFormat, StoreError> {
        let table_name = self.table.name.clone();
        let problem = |problem: String| StoreError::Timestamps {
            table: table_name.clone(),
            column: name.clone(),
            problem,
        };
        // The session's zone is UTC, so a TIMESTAMP reads as UTC wall-clock time; a
        // DATETIME is in the zone the file says (UTC by default).
        let native = match data_type.as_str() {
            "datetime" => Some(TimestampFormat::Timestamp(
                self.table.inserted_at_timezone.unwrap_or(chrono_tz::UTC),
            )),
            "timestamp" => Some(TimestampFormat::Timestamp(chrono_tz::UTC)),
            _ => None,
        };
        match (native, setting) {
            (Some(f), FormatSetting::Auto | FormatSetting::Native) => return Ok(f),
            (Some(_), other) => {
                return Err(problem(format!(
                    "is of type {data_type}, not {other:?} values; set table.inserted_at_format = \"native\" (or \"auto\")"
                )));
            }
            (None, _) => {}
        }
        if !INTEGERS.contains(&data_type.as_str()) && !TEXTS.contains(&data_type.as_str()) {
            return Err(problem(format!(
                "is of type {data_type}; backlog reads DATETIME, TIMESTAMP, integer unix seconds or milliseconds, or text timestamps"
            )));
        }
        let samples = self.samples(table, name, id)?;
        match empty {
            Some(f) if samples.is_empty() => Ok(f),
            _ => timestamp::detect(setting, &samples).map_err(problem),
        }
    }

    pub(super) fn inspect_table(&mut self) -> Result<TimestampFormat, StoreError> {
        let (database, name) = self.resolve_table()?;
        let table = format!("{}.{}", quote(&database), quote(&name));
        let columns = self.columns(&database, &name)?;
        let names: Vec<String> = columns.iter().map(|c| c.0.clone()).collect();
        let find = |key: &'static str, wanted: &str| {
            columns
                .iter()
                .position(|c| c.0 == wanted)
                .or_else(|| {
                    columns
                        .iter()
                        .position(|c| c.0.eq_ignore_ascii_case(wanted))
                })
                .ok_or_else(|| StoreError::NoColumn {
                    table: self.table.name.clone(),
                    column: wanted.to_string(),
                    key,
                    available: names.clone(),
                })
        };
        let id = find("table.id", &self.table.id)?;
        let status = find("table.status", &self.table.status)?;
        let inserted_at = find("table.inserted_at", &self.table.inserted_at)?;
        let retry = match &self.table.retry {
            Some(r) => Some((
                find("retry.count", &r.count)?,
                find("retry.since", &r.since)?,
            )),
            None => None,
        };
        if self.table.inserted_at_timezone.is_some() && columns[inserted_at].1 != "datetime" {
            return Err(StoreError::Timestamps {
                table: self.table.name.clone(),
                column: columns[inserted_at].0.clone(),
                problem: format!(
                    "is of type {}; table.inserted_at_timezone applies to a DATETIME column only (TIMESTAMP values are UTC)",
                    columns[inserted_at].1
                ),
            });
        }
        let format = self.column_format(
            &table,
            &columns[inserted_at],
            &columns[id].0,
            self.table.inserted_at_format,
            None,
        )?;
        if let Some((_, since)) = retry {
            self.since_format = Some(self.column_format(
                &table,
                &columns[since],
                &columns[id].0,
                FormatSetting::Auto,
                Some(format),
            )?);
        }
        self.format = Some(format);
        let list: Vec<String> = names.iter().map(|n| format!("t.{}", quote(n))).collect();
        let list = list.join(", ");
        let select = format!("SELECT {list} FROM {table} t");
        let usable = self.usable_indexes()?;
        let age_index =
            self.index_starting_with(&usable, &database, &name, &columns[inserted_at].0)?;
        let status_age_index = match age_index {
            Some(_) => None,
            None => self.status_age_index(
                &usable,
                &database,
                &name,
                &columns[status].0,
                &columns[inserted_at].0,
            )?,
        };
        let id_index = self.index_starting_with(&usable, &database, &name, &columns[id].0)?;
        let by_id = match &id_index {
            Some(index) => format!("{table} t FORCE INDEX ({})", quote(index)),
            None => format!("{table} t"),
        };
        let by_age = match age_index {
            Some(index) => format!("{select} FORCE INDEX ({})", quote(&index)),
            None => select.clone(),
        };
        self.shape = Some(Shape {
            list,
            status_age_index,
            select,
            select_by_age: by_age,
            by_id,
            id_indexed: id_index.is_some(),
            table,
            schema_name: (database, name),
            id_kind: IdKind::of(&columns[id].1),
            types: columns.iter().map(|c| c.1.clone()).collect(),
            names: names.into(),
            id,
            status,
            inserted_at,
        });
        Ok(format)
    }

    /// An index of the table whose first column is `column`, if there is one that a
    /// `FORCE INDEX` may name (see `usable_indexes`); the primary key first.
    fn index_starting_with(
        &mut self,
        usable: &str,
        database: &str,
        table: &str,
        column: &str,
    ) -> Result<Option<String>, StoreError> {
        let name: Option<mysql::Value> = self
            .conn
            .exec_first(
                format!(
                    "SELECT INDEX_NAME FROM information_schema.STATISTICS a
                     WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND COLUMN_NAME = ? AND SEQ_IN_INDEX = 1
                       AND {usable}
                     ORDER BY INDEX_NAME = 'PRIMARY' DESC, INDEX_NAME LIMIT 1"
                ),
                (database, table, column),
            )
            .map_err(my("reading the table's indexes"))?;
        Ok(name.as_ref().map(text))
    }

    /// The condition on `information_schema.STATISTICS a` that keeps the indexes a
    /// `FORCE INDEX` may name: B-trees, and not an index MySQL 8 made invisible
    /// (`IS_VISIBLE`) or MariaDB 10.6+ ignored (`IGNORED`); both refuse a hint that
    /// names one (error 1176, "Key … doesn't exist"), which failed every page and mark.
    /// Older servers have neither column.
    fn usable_indexes(&mut self) -> Result<String, StoreError> {
        let column: Option<mysql::Value> = self
            .conn
            .exec_first(
                "SELECT COLUMN_NAME FROM information_schema.COLUMNS
                 WHERE TABLE_SCHEMA = 'information_schema' AND TABLE_NAME = 'STATISTICS'
                   AND COLUMN_NAME IN ('IS_VISIBLE', 'IGNORED')
                 ORDER BY COLUMN_NAME LIMIT 1",
                (),
            )
            .map_err(my("reading the table's indexes"))?;
        let shown = match column.as_ref().map(text).as_deref() {
            Some("IS_VISIBLE") => " AND a.IS_VISIBLE = 'YES'",
            Some("IGNORED") => " AND a.IGNORED = 'NO'",
            _ => "",
        };
        Ok(format!("a.INDEX_TYPE = 'BTREE'{shown}"))
    }

    /// An index of the table that starts with `status` and then `inserted_at`.
    fn status_age_index(
        &mut self,
        usable: &str,
        database: &str,
        table: &str,
        status: &str,
        inserted_at: &str,
    ) -> Result<Option<String>, StoreError> {
        let name: Option<mysql::Value> = self
            .conn
            .exec_first(
                format!(
                    "SELECT a.INDEX_NAME FROM information_schema.STATISTICS a JOIN information_schema.STATISTICS b
                       ON b.TABLE_SCHEMA = a.TABLE_SCHEMA AND b.TABLE_NAME = a.TABLE_NAME AND b.INDEX_NAME = a.INDEX_NAME
                     WHERE a.TABLE_SCHEMA = ? AND a.TABLE_NAME = ? AND a.SEQ_IN_INDEX = 1 AND a.COLUMN_NAME = ?
                       AND b.SEQ_IN_INDEX = 2 AND b.COLUMN_NAME = ? AND {usable}
                     ORDER BY a.INDEX_NAME LIMIT 1"
                ),
                (database, table, status, inserted_at),
            )
            .map_err(my("reading the table's indexes"))?;
        Ok(name.as_ref().map(text))
    }

    /// The version in `backlog_meta`, or none while any of the tool's tables is missing.
    fn own_version(&mut self) -> Result<Option<String>, StoreError> {
        let context = "reading the tool's tables";
        let found: Option<i64> = self
            .conn
            .exec_first(
                "SELECT count(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME IN ('backlog_meta', 'backlog_runs', 'backlog_claims', 'backlog_attempts', 'backlog_pauses')",
                (&self.own_database,),
            )
            .map_err(my(context))?;
        if found != Some(5) {
            return Ok(None);
        }
        let version: Option<mysql::Value> = self
            .conn
            .query_first(format!(
                r#"SELECT value FROM {} WHERE "key" = 'schema_version'"#,
                self.own_table("backlog_meta")
            ))
            .map_err(my(context))?;
        Ok(version.as_ref().map(text))
    }

    pub(super) fn create_own_tables(&mut self) -> Result<(), StoreError> {
        let context = "creating the tool's own tables";
        let database = self.own_database.clone();
        let conn = &mut self.conn;
        not_ours(
            &[
                "backlog_meta",
                "backlog_runs",
                "backlog_claims",
                "backlog_attempts",
                "backlog_pauses",
            ],
            &mut |table| {
                let rows: Vec<mysql::Value> = conn
                    .exec(
                        "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?",
                        (&database, table),
                    )
                    .map_err(my(context))?;
                Ok((!rows.is_empty()).then(|| rows.iter().map(text).collect()))
            },
            &format!(
                "rename that table, or give the tool a database of its own with database.schema (now {database:?})"
            ),
        )?;
        // Tables made by an administrator (or an earlier run) need no DDL, so a runner
        // may work without the right to create anything.
        if self.own_version()?.is_none() {
            let locked: Option<i64> = self
                .conn
                .exec_first("SELECT GET_LOCK(?, 60)", (OWN_TABLES_LOCK,))
                .map_err(my(context))?;
            if locked != Some(1) {
                return Err(StoreError::Database {
                    context: context.into(),
                    source: "another runner held the lock on the tool's tables for a minute".into(),
                });
            }
            let made = self.make_own_tables();
            let _ = self
                .conn
                .exec_drop("SELECT RELEASE_LOCK(?)", (OWN_TABLES_LOCK,));
            made?;
        }
        let found = self.own_version()?;
        check_version(
            &found.unwrap_or_default(),
            SCHEMA_VERSION,
            &format!("database {}", self.prefix.trim_end_matches('.')),
        )
    }

    /// The DDL, under the lock: the database if it is not the URL's, the tables, and
    /// the version last, so that a creation cut short is done again.
    fn make_own_tables(&mut self) -> Result<(), StoreError> {
        let context = "creating the tool's own tables (this needs the right to create tables there: run one tick as a user who has it, or have an administrator run it once)";
        if self.own_version()?.is_some() {
            return Ok(());
        }
        if self.own_database != self.url.database {
            self.conn
                .query_drop(format!(
                    "CREATE DATABASE IF NOT EXISTS {}",
                    quote(&self.own_database)
                ))
                .map_err(my(context))?;
        }
        for ddl in OWN_TABLES {
            self.conn
                .query_drop(
                    ddl.replace("{s}", &self.prefix)
                        .replace("{o}", TABLE_OPTIONS),
                )
                .map_err(my(context))?;
        }
        self.conn
            .exec_drop(
                format!(
                    r#"INSERT IGNORE INTO {} ("key", value) VALUES ('schema_version', ?)"#,
                    self.own_table("backlog_meta")
                ),
                (SCHEMA_VERSION.to_string(),),
            )
            .map_err(my(context))
    }
}

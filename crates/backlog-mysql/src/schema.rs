//! The tool's own tables on MySQL (DDL, version) and what a tick learns of the user's
//! table before it starts: its database and name, its columns and their types, the
//! inserted-at format.

use mysql::prelude::Queryable;

use crate::MysqlStore;
use crate::Shape;
use crate::connection::Mq;
use crate::connection::my;
use crate::values;
use crate::values::IdKind;
use backlog_core::store::StoreError;
use backlog_core::store::claims::row_locks::Subject;
use backlog_core::store::quote;
use backlog_core::store::samples::{self, Typed};
use backlog_core::store::sql::Sql;
use backlog_core::store::tables;
use backlog_core::timestamp::FormatSetting;
use backlog_core::timestamp::TimestampFormat;
use mysql::Conn;

/// The tables' options: InnoDB for row locks and transactions, text compared byte for
/// byte (`utf8mb4_bin`: ids `a` and `A` are two records).
const TABLE_OPTIONS: &str = "ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin";

/// The name of the lock that serialises the creation of the tool's tables, so that
/// eight runners starting at once on a new database do not race their DDL.
const OWN_TABLES_LOCK: &str = "backlog: own tables";

/// Integer types of MySQL, whose values read as numbers.
pub(crate) const INTEGERS: [&str; 5] = ["tinyint", "smallint", "mediumint", "int", "bigint"];

/// Text types of MySQL.
pub(crate) const TEXTS: [&str; 6] = [
    "char",
    "varchar",
    "tinytext",
    "text",
    "mediumtext",
    "longtext",
];

/// A table's columns as information_schema gives them: name and `DATA_TYPE`, in
/// table order, and whether each is an unsigned number.
type Columns = (Vec<(String, String)>, Vec<bool>);

/// Text of a value of information_schema.
pub(crate) fn text(v: &mysql::Value) -> String {
    values::text(v).unwrap_or_default()
}

impl MysqlStore {
    /// Finds the table (`name` or `database.name`), exactly or else case-insensitively:
    /// its database and name.
    pub(crate) fn resolve_table(&mut self) -> Result<(String, String), StoreError> {
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

    /// The table's columns.
    pub(crate) fn columns(&mut self, database: &str, table: &str) -> Result<Columns, StoreError> {
        let rows: Vec<(mysql::Value, mysql::Value, i64)> = self
            .conn
            .exec(
                "SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE LIKE '%unsigned%' FROM information_schema.COLUMNS
                 WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION",
                (database, table),
            )
            .map_err(my("reading the schema"))?;
        Ok((
            rows.iter()
                .map(|(n, t, _)| (text(n), text(t).to_ascii_lowercase()))
                .collect(),
            rows.iter().map(|r| r.2 == 1).collect(),
        ))
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
        // The session's zone is UTC, so a TIMESTAMP reads as UTC wall-clock time; a
        // DATETIME is in the zone the file says (UTC by default).
        let typed = match data_type.as_str() {
            "datetime" => Typed::Native(TimestampFormat::Timestamp(
                self.table.inserted_at_timezone.unwrap_or(chrono_tz::UTC),
            )),
            "timestamp" => Typed::Native(TimestampFormat::Timestamp(chrono_tz::UTC)),
            t if INTEGERS.contains(&t) => Typed::Values { integer: true },
            t if TEXTS.contains(&t) => Typed::Values { integer: false },
            _ => Typed::Other,
        };
        let table_name = self.table.name.clone();
        samples::format_of(
            (&table_name, name, data_type),
            typed,
            "DATETIME, TIMESTAMP, integer unix seconds or milliseconds, or text timestamps",
            (setting, empty),
            &mut |_| self.samples(table, name, id),
        )
    }

    pub(super) fn inspect_table(&mut self) -> Result<TimestampFormat, StoreError> {
        let (database, name) = self.resolve_table()?;
        let table = format!("{}.{}", quote(&database), quote(&name));
        let (columns, unsigned) = self.columns(&database, &name)?;
        let names: Vec<String> = columns.iter().map(|c| c.0.clone()).collect();
        let named = backlog_core::store::columns::find(&self.table, &names)?;
        let (id, status, inserted_at, retry) =
            (named.id, named.status, named.inserted_at, named.retry);
        let (ins_name, ins_type) = &columns[inserted_at];
        samples::zone_applies(
            &self.table,
            (ins_name, ins_type),
            "DATETIME",
            " (TIMESTAMP values are UTC)",
        )?;
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
        let id_kind = IdKind::of(&columns[id].1);
        let (idq, st) = (quote(&columns[id].0), quote(&columns[status].0));
        let subject = Subject {
            by_id: match &id_index {
                Some(index) => format!("{table} t FORCE INDEX ({})", quote(index)),
                None => format!("{table} t"),
            },
            table: table.clone(),
            // As `IdKind::read` shows it: a binary id in hex, lower-case.
            id_text: match id_kind {
                IdKind::Binary => format!("LOWER(HEX(t.{idq}))"),
                _ => format!("CAST(t.{idq} AS CHAR)"),
            },
            id_param: match id_kind {
                IdKind::Binary => "UNHEX({})",
                IdKind::Int if unsigned[id] => "CAST({} AS UNSIGNED)",
                _ => "{}",
            }
            .into(),
            integer_ids: id_kind == IdKind::Int,
            id: idq,
            status_in: super::pages::exact_status(&st),
            status_text: format!("CAST(t.{st} AS CHAR)"),
            status: st,
            retry: retry.map(|(count, since)| (quote(&columns[count].0), quote(&columns[since].0))),
            claims_by_key: format!("{}backlog_claims FORCE INDEX (PRIMARY)", self.prefix),
            claims_by_owner: format!(
                "{}backlog_claims FORCE INDEX (backlog_claims_by_owner)",
                self.prefix
            ),
            row_lock: "FOR UPDATE",
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
            subject,
            id_indexed: id_index.is_some(),
            table,
            schema_name: (database, name),
            id_kind,
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

    /// Makes the tool's tables ready (`store::tables::ensure`). MySQL commits each DDL
    /// statement by itself: a named lock keeps the other runners out meanwhile, and the
    /// version is written last, so that a creation cut short is done again.
    pub(super) fn create_own_tables(&mut self) -> Result<(), StoreError> {
        let mut ddl = MysqlDdl {
            conn: &mut self.conn,
            database: &self.own_database,
            prefix: &self.prefix,
            url_database: &self.url.database,
        };
        tables::ensure(&mut ddl)
    }
}

/// The tool's tables on MySQL (`store::tables`), in their database.
struct MysqlDdl<'a> {
    conn: &'a mut Mq<Conn>,
    /// Unquoted.
    database: &'a str,
    /// Quoted, with its dot.
    prefix: &'a str,
    /// The URL's database, which is there already.
    url_database: &'a str,
}

impl tables::Ddl for MysqlDdl<'_> {
    fn sql(&mut self) -> &mut dyn Sql {
        &mut *self.conn
    }

    fn prefix(&self) -> String {
        self.prefix.to_string()
    }

    fn place(&self) -> String {
        format!("database {}", self.prefix.trim_end_matches('.'))
    }

    fn apart(&self) -> String {
        format!(
            "rename that table, or give the tool a database of its own with database.schema (now {:?})",
            self.database
        )
    }

    fn spell(&self, placeholder: &str) -> &'static str {
        match placeholder {
            "serial" => "BIGINT AUTO_INCREMENT PRIMARY KEY",
            "bigint" => "BIGINT",
            "int" => "INT",
            "key" => "VARCHAR(255)",
            "time" => "DATETIME(6)",
            _ => "TEXT",
        }
    }

    fn tables(&self) -> Vec<&'static tables::Table> {
        backlog_core::store::claims::tables()
    }

    fn columns(&mut self, names: &[&str]) -> Result<tables::Columns, StoreError> {
        let mut found = tables::Columns::new();
        if names.is_empty() {
            return Ok(found);
        }
        let sql = format!(
            "SELECT TABLE_NAME, COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME IN ({}) ORDER BY TABLE_NAME, ORDINAL_POSITION",
            vec!["?"; names.len()].join(", ")
        );
        let mut params = vec![mysql::Value::from(self.database)];
        params.extend(names.iter().map(|&n| mysql::Value::from(n)));
        let rows: Vec<(mysql::Value, mysql::Value)> = self
            .conn
            .exec(sql, params)
            .map_err(my("reading the tool's tables"))?;
        for (table, column) in rows {
            found.entry(text(&table)).or_default().push(text(&column));
        }
        Ok(found)
    }

    fn lock(&mut self) -> Result<(), StoreError> {
        let locked: Option<i64> = self
            .conn
            .exec_first("SELECT GET_LOCK(?, 60)", (OWN_TABLES_LOCK,))
            .map_err(my("waiting for the lock on the tool's tables"))?;
        if locked != Some(1) {
            return Err(StoreError::Database {
                context: "creating the tool's own tables".into(),
                source: "another runner held the lock on the tool's tables for a minute".into(),
            });
        }
        Ok(())
    }

    fn unlock(&mut self) {
        let _ = self
            .conn
            .exec_drop("SELECT RELEASE_LOCK(?)", (OWN_TABLES_LOCK,));
    }

    fn make_place(&mut self) -> Result<(), StoreError> {
        if self.database == self.url_database {
            return Ok(());
        }
        self.conn
            .query_drop(format!("CREATE DATABASE IF NOT EXISTS {}", quote(self.database)))
            .map_err(my("creating the tool's database (this needs the right to create one: run one tick as a user who has it, or have an administrator create it)"))
    }

    fn inline_indexes(&self) -> bool {
        true
    }

    fn options(&self, _table: &tables::Table) -> &'static str {
        TABLE_OPTIONS
    }

    fn base(&self) -> i64 {
        1
    }
}

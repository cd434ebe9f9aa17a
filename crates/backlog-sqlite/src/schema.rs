//! The tool's own tables on SQLite: their DDL and version, and how a table's names
//! and its inserted-at values are read before a tick (`inspect`).

use crate::SqliteStore;
use crate::db;
use crate::dialect::LiteRef;
use crate::holds;
use crate::takeover;
use backlog_core::store::StoreError;
use backlog_core::store::quote;
use backlog_core::store::samples;
use backlog_core::store::sql::Sql;
use backlog_core::store::tables::{self, Table};
use backlog_core::timestamp::Sample;
use chrono::Utc;
use rusqlite::OptionalExtension;
use rusqlite::TransactionBehavior;
use rusqlite::types::ValueRef;

impl SqliteStore {
    /// Resolves the table's real name and columns, case-insensitively as SQLite does.
    pub(super) fn resolve_names(&self) -> Result<(String, [String; 3]), StoreError> {
        let table = self.resolve_table()?;
        let mut stmt = self
            .conn
            .prepare("SELECT name FROM pragma_table_info(?1)")
            .map_err(db("reading the schema"))?;
        let columns: Vec<String> = stmt
            .query_map([&table], |r| r.get(0))
            .and_then(Iterator::collect)
            .map_err(db("reading the schema"))?;
        let named = backlog_core::store::columns::find(&self.table, &columns)?;
        let [id, status, inserted_at] =
            [named.id, named.status, named.inserted_at].map(|i| columns[i].clone());
        Ok((table, [id, status, inserted_at]))
    }

    /// The table's real name, found case-insensitively as SQLite does; a view or a
    /// missing table is an error that names the tables there are.
    pub(super) fn resolve_table(&self) -> Result<String, StoreError> {
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
                .prepare(&format!(
                    "SELECT name FROM sqlite_schema WHERE type IN ('table', 'view') AND name NOT GLOB 'sqlite_*'
                     AND name NOT IN ({}) ORDER BY name",
                    // The tool's, and the claims of version 1.
                    own_tables()
                        .iter()
                        .map(|t| t.name)
                        .chain(["backlog_claims"])
                        .map(|n| format!("'{n}'"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
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
        Ok(table)
    }

    /// The samples of a timestamp column (see `store::samples`), by SQLite's plans.
    pub(super) fn samples(
        &self,
        table: &str,
        column: &str,
        id: &str,
    ) -> Result<Vec<Sample>, StoreError> {
        let t = quote(table);
        let target = samples::Target::new(&t, column, id, table);
        let mut sampler = SqliteSampler {
            conn: LiteRef(&self.conn),
            context: format!("reading {column} of {table}"),
        };
        samples::read(&mut sampler, &target, &|e| e.to_string())
    }

    /// Makes the tool's tables ready (`store::tables::ensure`), in one transaction that
    /// holds the database's write lock from its start: no other tick writes DDL meanwhile.
    pub(super) fn create_own_tables(&mut self) -> Result<(), StoreError> {
        let context = "creating the tool's own tables";
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(db(context))?;
        let mut ddl = SqliteDdl {
            conn: LiteRef(&tx),
            path: self.path.display().to_string(),
        };
        tables::ensure(&mut ddl)?;
        // How far a tick handed its span out (`takeover`): spans of an earlier release
        // have none, which a person's action reads as all in hand. A column, not a
        // version: that release's ticks and actions work beside it unchanged.
        let holds = tables::Ddl::columns(&mut ddl, &[holds::HOLDS_TABLE.name])?
            .remove(holds::HOLDS_TABLE.name)
            .unwrap_or_default();
        if !holds.iter().any(|c| c == "handed") {
            tx.execute_batch("ALTER TABLE backlog_holds ADD COLUMN handed")
                .map_err(db(context))?;
        }
        tx.commit().map_err(db(context))
    }
}

/// The tool's tables on SQLite: the shared ones and its spans'.
fn own_tables() -> Vec<&'static Table> {
    let mut tables = tables::SHARED.to_vec();
    tables.extend([
        &holds::HOLDS_TABLE,
        &holds::TRIED_TABLE,
        &takeover::TAKEOVERS_TABLE,
    ]);
    tables
}

/// The tool's tables on SQLite (`store::tables`), in the main database of the file.
struct SqliteDdl<'a> {
    conn: LiteRef<'a>,
    path: String,
}

impl tables::Ddl for SqliteDdl<'_> {
    fn sql(&mut self) -> &mut dyn Sql {
        &mut self.conn
    }

    fn prefix(&self) -> String {
        String::new()
    }

    fn place(&self) -> String {
        self.path.clone()
    }

    fn apart(&self) -> String {
        "rename that table, or keep the backlog in another database file".into()
    }

    fn spell(&self, placeholder: &str) -> &'static str {
        match placeholder {
            "serial" => "INTEGER PRIMARY KEY AUTOINCREMENT",
            "bigint" | "int" => "INTEGER",
            "any" => "",
            _ => "TEXT",
        }
    }

    fn tables(&self) -> Vec<&'static Table> {
        own_tables()
    }

    fn columns(&mut self, names: &[&str]) -> Result<tables::Columns, StoreError> {
        let mut found = tables::Columns::new();
        for &name in names {
            let columns: Vec<String> = self
                .conn
                .prepare_cached("SELECT name FROM pragma_table_info(?1)")
                .and_then(|mut s| s.query_map([name], |r| r.get(0))?.collect())
                .map_err(db("reading the schema"))?;
            if !columns.is_empty() {
                found.insert(name.to_string(), columns);
            }
        }
        Ok(found)
    }

    /// The transaction holds the write lock already.
    fn lock(&mut self) -> Result<(), StoreError> {
        Ok(())
    }

    /// Kept failures are found by key alone: their rows are kept in its order.
    fn options(&self, table: &Table) -> &'static str {
        if table.name == holds::TRIED_TABLE.name {
            "WITHOUT ROWID"
        } else {
            ""
        }
    }

    /// Version 1 claimed records one by one in `backlog_claims`; version 2 had no
    /// `lost` count in the run log, and no `backlog_tried` (records that failed, kept
    /// from the other ticks until the end of their tier's slot); version 3 no
    /// `backlog_attempts` and no `backlog_pauses`.
    fn base(&self) -> i64 {
        4
    }

    fn legacy(&mut self, version: i64) -> Result<(), StoreError> {
        let step = format!("moving the tool's tables to version {}", version + 1);
        match version {
            1 => {
                // A tick of that release still running would not see the new spans, so
                // wait until its claims are gone.
                let live: i64 = self
                    .conn
                    .query_row(
                        "SELECT count(*) FROM backlog_claims WHERE expires_at > ?1",
                        [Utc::now().timestamp_millis()],
                        |r| r.get(0),
                    )
                    .map_err(db("reading backlog_claims"))?;
                if live > 0 {
                    return Err(StoreError::Schema(format!(
                        "a tick of an earlier backlog release holds {live} {} in backlog_claims of {}; let it finish (or wait for its lease to run out), then run again to move the tool's tables to version {}",
                        if live == 1 { "record" } else { "records" },
                        self.path,
                        tables::version_for(self.base()),
                    )));
                }
                self.conn
                    .execute_batch("DROP TABLE backlog_claims")
                    .map_err(db(step))?;
            }
            // A run log made just now, by `ensure`, already has the column.
            2 if !self
                .columns(&["backlog_runs"])?
                .remove("backlog_runs")
                .unwrap_or_default()
                .iter()
                .any(|c| c == "lost") =>
            {
                self.conn
                    .execute_batch(
                        "ALTER TABLE backlog_runs ADD COLUMN lost INTEGER NOT NULL DEFAULT 0",
                    )
                    .map_err(db(step))?;
            }
            // `ensure` made what version 3 lacked: the attempts and the pauses.
            2 | 3 => {}
            _ => return tables::unknown(&self.path, version),
        }
        tables::set_version(self, version + 1)
    }
}

/// `store::samples` on SQLite.
struct SqliteSampler<'a> {
    conn: LiteRef<'a>,
    context: String,
}

impl samples::Sampler for SqliteSampler<'_> {
    fn sorts(&mut self, sql: &str, _: &str) -> Result<bool, StoreError> {
        let plan: Vec<String> = self
            .conn
            .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
            .and_then(|mut s| s.query_map([], |r| r.get::<_, String>(3))?.collect())
            .map_err(db(self.context.clone()))?;
        Ok(plan.iter().any(|line| super::pages::sorts_all(line)))
    }

    fn pair(&mut self, sql: &str) -> Result<Vec<Sample>, StoreError> {
        let sample = |v: ValueRef<'_>| match v {
            ValueRef::Integer(i) => Some(Sample::Int(i)),
            ValueRef::Text(t) => Some(Sample::Text(String::from_utf8_lossy(t).into_owned())),
            ValueRef::Real(_) => Some(Sample::Other("real".into())),
            ValueRef::Blob(_) => Some(Sample::Other("blob".into())),
            ValueRef::Null => None,
        };
        self.conn
            .query_row(sql, [], |r| {
                Ok([r.get_ref(0)?, r.get_ref(1)?]
                    .into_iter()
                    .filter_map(sample)
                    .collect())
            })
            .optional()
            .map(Option::unwrap_or_default)
            .map_err(db(self.context.clone()))
    }
}

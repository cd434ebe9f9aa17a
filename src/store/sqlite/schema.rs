//! The tool's own tables on SQLite: their DDL and version, and how a table's names
//! and its inserted-at values are read before a tick (`inspect`).

use super::*;
use crate::store::samples;

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
    format!(
        "{}{}",
        crate::store::attempts::DDL,
        crate::store::pauses::DDL
    )
    .replace("{s}", "")
    .replace("{id}", "INTEGER PRIMARY KEY AUTOINCREMENT")
}

impl SqliteStore {
    /// Resolves the table's real name and columns, case-insensitively as SQLite does.
    pub(super) fn resolve_names(&self) -> Result<(String, [String; 3]), StoreError> {
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
            conn: &self.conn,
            context: format!("reading {column} of {table}"),
        };
        samples::read(&mut sampler, &target, &|e| e.to_string())
    }

    pub(super) fn create_own_tables(&mut self) -> Result<(), StoreError> {
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
}

/// `store::samples` on SQLite.
struct SqliteSampler<'a> {
    conn: &'a Connection,
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

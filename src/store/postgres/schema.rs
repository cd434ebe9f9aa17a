//! The tool's own tables on PostgreSQL (DDL, version, migrations) and what a tick
//! learns of the user's table before it starts: its name on the search path, its
//! columns and their types, the inserted-at format, the prepared statements.

use super::*;
use crate::store::samples;

/// The tool's own tables, in the schema `{s}` (already quoted).
const OWN_TABLES: &str = "
CREATE SCHEMA IF NOT EXISTS {s};
CREATE TABLE IF NOT EXISTS {s}.backlog_meta (key text PRIMARY KEY, value text NOT NULL);
INSERT INTO {s}.backlog_meta (key, value) VALUES ('schema_version', '3') ON CONFLICT DO NOTHING;
CREATE TABLE IF NOT EXISTS {s}.backlog_runs (
    id bigserial PRIMARY KEY,
    table_name text NOT NULL,
    window_secs bigint NOT NULL,
    tier integer,
    band_from_secs bigint NOT NULL,
    band_to_secs bigint NOT NULL,
    bands text NOT NULL,
    clock timestamptz NOT NULL,
    started_at timestamptz NOT NULL,
    heartbeat_at timestamptz,
    finished_at timestamptz,
    selected bigint NOT NULL DEFAULT 0,
    succeeded bigint NOT NULL DEFAULT 0,
    failed bigint NOT NULL DEFAULT 0,
    skipped bigint NOT NULL DEFAULT 0,
    lost bigint NOT NULL DEFAULT 0,
    outcome text NOT NULL,
    error text,
    owner text NOT NULL
);
CREATE INDEX IF NOT EXISTS backlog_runs_by_window ON {s}.backlog_runs (table_name, window_secs, id);
CREATE TABLE IF NOT EXISTS {s}.backlog_claims (
    table_name text NOT NULL,
    record_id text NOT NULL,
    owner text NOT NULL,
    claimed_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (table_name, record_id)
);
CREATE INDEX IF NOT EXISTS backlog_claims_by_owner ON {s}.backlog_claims (owner);
";

/// The version of the tables above; a release that changes them adds a migration to
/// `ensure_own_tables`. Version 1 had no `lost` count in the run log; version 2 no
/// `backlog_attempts` and no `backlog_pauses`.
const SCHEMA_VERSION: i64 = 3;

/// The shared tables (attempts, pauses), as PostgreSQL writes them in schema `s`
/// (quoted).
fn shared_tables(s: &str) -> String {
    format!(
        "{}{}",
        crate::store::attempts::DDL,
        crate::store::pauses::DDL
    )
    .replace("{s}", &format!("{s}."))
    .replace("{id}", "bigserial PRIMARY KEY")
}

/// The key of the advisory lock that serialises the creation of the tool's tables, so
/// that eight runners starting at once on a new database do not race their DDL.
const OWN_TABLES_LOCK: i64 = 0x0062_6163_6b6c_6f67; // "backlog" in ASCII

impl PostgresStore {
    /// Finds the table (`name` or `schema.name`) on the search path, exactly or else
    /// case-insensitively, and returns its oid and quoted qualified name.
    pub(super) fn resolve_table(&mut self) -> Result<(u32, String), StoreError> {
        let (schema, name) = match self.table.name.split_once('.') {
            Some((s, n)) => (Some(s.to_string()), n.to_string()),
            None => (None, self.table.name.clone()),
        };
        let row = self
            .client
            .query_opt(
                "SELECT c.oid, n.nspname::text, c.relname::text, c.relkind::text
                 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                 WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f') AND lower(c.relname) = lower($1)
                   AND CASE WHEN $2::text IS NULL THEN n.nspname = ANY (current_schemas(false))
                            ELSE lower(n.nspname) = lower($2) END
                 ORDER BY c.relname = $1 DESC, n.nspname = $2 DESC,
                          array_position(current_schemas(false), n.nspname::text)
                 LIMIT 1",
                &[&name, &schema],
            )
            .map_err(pg("reading the schema"))?;
        if let Some(row) = row {
            let oid: u32 = row.get(0);
            let (nsp, rel): (String, String) = (row.get(1), row.get(2));
            // A foreign table takes UPDATEs where its wrapper does (postgres_fdw).
            let kind = match row.get::<_, String>(3).as_str() {
                "v" => Some("view"),
                "m" => Some("materialized view"),
                _ => None,
            };
            if let Some(kind) = kind {
                return Err(StoreError::NotATable { table: rel, kind });
            }
            return Ok((oid, format!("{}.{}", quote(&nsp), quote(&rel))));
        }
        let available = self
            .client
            .query(
                "SELECT CASE WHEN n.nspname = 'public' THEN c.relname::text ELSE n.nspname || '.' || c.relname END
                 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                 WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f')
                   AND n.nspname = ANY (current_schemas(false)) ORDER BY 1",
                &[],
            )
            .map_err(pg("reading the schema"))?
            .iter()
            .map(|r| r.get(0))
            .collect();
        Err(StoreError::NoTable {
            table: self.table.name.clone(),
            available,
        })
    }

    /// The table's columns: name, `format_type()` and type category.
    pub(super) fn columns(
        &mut self,
        oid: u32,
    ) -> Result<Vec<(String, String, String)>, StoreError> {
        Ok(self
            .client
            .query(
                "SELECT a.attname::text, format_type(a.atttypid, a.atttypmod), t.typcategory::text
                 FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
                 WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
                &[&oid],
            )
            .map_err(pg("reading the schema"))?
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2)))
            .collect())
    }

    /// The samples of a text or integer column (see `store::samples`), by the catalog's
    /// indexes. `table` is quoted.
    pub(super) fn samples(
        &mut self,
        table: &str,
        column: &str,
        id: &str,
        integer: bool,
    ) -> Result<Vec<Sample>, StoreError> {
        let target = samples::Target::new(table, column, id, &self.table.name);
        let mut sampler = PgSampler {
            client: &mut self.client,
            table,
            integer,
            context: format!("reading {column} of {}", self.table.name),
        };
        let cast = if integer { "int8" } else { "text" };
        samples::read(&mut sampler, &target, &|e| format!("{e}::{cast}"))
    }

    /// Decides the format of a timestamp column from its type and, for text and
    /// integer columns, its values; a column with no value yet takes `empty` if given.
    pub(super) fn column_format(
        &mut self,
        table: &str,
        (name, sql_type, category): &(String, String, String),
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
        let native = match sql_type.as_str() {
            "timestamp with time zone" => Some(TimestampFormat::Timestamptz),
            "timestamp without time zone" => Some(TimestampFormat::Timestamp(
                self.table.inserted_at_timezone.unwrap_or(chrono_tz::UTC),
            )),
            _ => None,
        };
        match (native, setting) {
            (Some(f), FormatSetting::Auto | FormatSetting::Native) => return Ok(f),
            (Some(_), other) => {
                return Err(problem(format!(
                    "is of type {sql_type}, not {other:?} values; set table.inserted_at_format = \"native\" (or \"auto\")"
                )));
            }
            (None, _) => {}
        }
        let integer = matches!(sql_type.as_str(), "bigint" | "integer" | "smallint");
        if !integer && category != "S" {
            return Err(problem(format!(
                "is of type {sql_type}; backlog reads timestamptz, timestamp, integer unix seconds or milliseconds, or text timestamps"
            )));
        }
        let samples = self.samples(table, name, id, integer)?;
        match empty {
            Some(f) if samples.is_empty() => Ok(f),
            _ => timestamp::detect(setting, &samples).map_err(problem),
        }
    }

    pub(super) fn inspect_table(&mut self) -> Result<TimestampFormat, StoreError> {
        self.inspect_table_knowing(None)
    }

    /// `inspect_table`, with the formats of the inserted-at and `[retry]` since columns
    /// already `known` (a marks' writer has its tick's): sampling a text or integer
    /// column without an index scans the table.
    pub(super) fn inspect_table_knowing(
        &mut self,
        known: Option<(TimestampFormat, Option<TimestampFormat>)>,
    ) -> Result<TimestampFormat, StoreError> {
        let (oid, table) = self.resolve_table()?;
        let columns = self.columns(oid)?;
        let names: Vec<String> = columns.iter().map(|c| c.0.clone()).collect();
        let find = |key: &'static str, wanted: &str| {
            columns
                .iter()
                .find(|c| c.0 == wanted)
                .or_else(|| columns.iter().find(|c| c.0.eq_ignore_ascii_case(wanted)))
                .cloned()
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
        if self.table.inserted_at_timezone.is_some()
            && inserted_at.1 != "timestamp without time zone"
        {
            return Err(StoreError::Timestamps {
                table: self.table.name.clone(),
                column: inserted_at.0.clone(),
                problem: format!(
                    "is of type {}; table.inserted_at_timezone applies to a timestamp without time zone column only",
                    inserted_at.1
                ),
            });
        }
        let format = match known {
            Some((format, _)) => format,
            None => self.column_format(
                &table,
                &inserted_at,
                &id.0,
                self.table.inserted_at_format,
                None,
            )?,
        };
        self.statuses_by_index = self.pages_by_status(oid, &status.0, &inserted_at.0)?;
        self.pages_by_status = self.table.pending.len() > 1 && self.statuses_by_index;
        if let Some((_, since)) = &retry {
            // An empty text or integer column takes the inserted-at column's format.
            self.since_format = match known {
                Some((_, Some(since))) => Some(since),
                _ => Some(self.column_format(
                    &table,
                    since,
                    &id.0,
                    FormatSetting::Auto,
                    Some(format),
                )?),
            };
        }
        self.format = Some(format);
        let int_id = matches!(id.1.as_str(), "bigint" | "integer" | "smallint");
        let prepared = self.prepare(
            table,
            Column {
                quoted: quote(&id.0),
                sql_type: id.1,
            },
            Column {
                quoted: quote(&status.0),
                sql_type: status.1,
            },
            quote(&inserted_at.0),
            int_id,
            columns
                .iter()
                .filter(|c| c.1 == "bytea")
                .map(|c| c.0.clone())
                .collect(),
        )?;
        self.prepared = Some(prepared);
        Ok(format)
    }

    pub(super) fn create_own_tables(&mut self) -> Result<(), StoreError> {
        let context = "creating the tool's own tables";
        let [meta, runs, claims] =
            ["backlog_meta", "backlog_runs", "backlog_claims"].map(|t| self.own_table(t));
        // The version, or none while any of the three tables is missing.
        let version = |tx: &mut postgres::Transaction<'_>| -> Result<Option<String>, StoreError> {
            let exists: bool = tx
                .query_one(
                    "SELECT to_regclass($1) IS NOT NULL AND to_regclass($2) IS NOT NULL AND to_regclass($3) IS NOT NULL",
                    &[&meta, &runs, &claims],
                )
                .map_err(pg(context))?
                .get(0);
            if !exists {
                return Ok(None);
            }
            Ok(tx
                .query_opt(
                    &format!("SELECT value FROM {meta} WHERE key = 'schema_version'"),
                    &[],
                )
                .map_err(pg(context))?
                .map(|r| r.get(0)))
        };
        let mut tx = self.client.transaction().map_err(pg(context))?;
        let schema = self.schema.trim_matches('"').replace("\"\"", "\"");
        not_ours(
            &[
                "backlog_meta",
                "backlog_runs",
                "backlog_claims",
                "backlog_attempts",
                "backlog_pauses",
            ],
            &mut |table| {
                let rows = tx
                    .query(
                        "SELECT column_name::text FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2",
                        &[&schema, &table],
                    )
                    .map_err(pg(context))?;
                Ok((!rows.is_empty()).then(|| rows.iter().map(|r| r.get(0)).collect()))
            },
            &format!(
                "rename that table, or give the tool a schema of its own with database.schema (now {schema:?})"
            ),
        )?;
        // Tables made by an administrator (or an earlier run) need no DDL, so a runner
        // may work without the right to create anything.
        let mut found = version(&mut tx)?;
        if found.is_none() {
            tx.execute("SELECT pg_advisory_xact_lock($1)", &[&OWN_TABLES_LOCK])
                .map_err(pg(context))?;
            tx.batch_execute(&OWN_TABLES.replace("{s}", &self.schema))
                .map_err(pg(context))?;
            tx.batch_execute(&shared_tables(&self.schema))
                .map_err(pg(context))?;
            found = version(&mut tx)?;
        }
        if found.as_deref() == Some("1") {
            // DDL once, by the first runner of this release; the others wait for it.
            tx.execute("SELECT pg_advisory_xact_lock($1)", &[&OWN_TABLES_LOCK])
                .map_err(pg(context))?;
            if version(&mut tx)?.as_deref() == Some("1") {
                tx.batch_execute(&format!(
                    "ALTER TABLE {runs} ADD COLUMN IF NOT EXISTS lost bigint NOT NULL DEFAULT 0;
                     UPDATE {meta} SET value = '2' WHERE key = 'schema_version';"
                ))
                .map_err(pg("moving the tool's tables to version 2 (this needs the right to alter them: run one tick as their owner)"))?;
            }
            found = version(&mut tx)?;
        }
        if found.as_deref() == Some("2") {
            tx.execute("SELECT pg_advisory_xact_lock($1)", &[&OWN_TABLES_LOCK])
                .map_err(pg(context))?;
            if version(&mut tx)?.as_deref() == Some("2") {
                tx.batch_execute(&format!(
                    "{} UPDATE {meta} SET value = '3' WHERE key = 'schema_version';",
                    shared_tables(&self.schema)
                ))
                .map_err(pg("moving the tool's tables to version 3 (this needs the right to create tables in the tool's schema: run one tick as their owner)"))?;
            }
            found = version(&mut tx)?;
        }
        check_version(
            &found.unwrap_or_default(),
            SCHEMA_VERSION,
            &format!("schema {}", self.schema),
        )?;
        tx.commit().map_err(pg(context))?;
        self.prepare_own()
    }
}

/// `store::samples` on PostgreSQL: values read as 64-bit integers or as text.
struct PgSampler<'a> {
    client: &'a mut postgres::Client,
    /// The table, quoted.
    table: &'a str,
    integer: bool,
    context: String,
}

impl samples::Sampler for PgSampler<'_> {
    /// By the catalog: a valid B-tree index, not partial, whose first column is
    /// `column`. The planner sorts a small table rather than read its index.
    fn sorts(&mut self, _: &str, column: &str) -> Result<bool, StoreError> {
        let indexed: bool = self
            .client
            .query_one(
                "SELECT EXISTS (SELECT 1 FROM pg_index i
                   JOIN pg_class ic ON ic.oid = i.indexrelid
                   JOIN pg_am am ON am.oid = ic.relam
                   JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
                  WHERE i.indrelid = $1::text::regclass AND a.attname = $2 AND am.amname = 'btree'
                    AND i.indisvalid AND i.indpred IS NULL)",
                &[&self.table, &column],
            )
            .map_err(pg(self.context.clone()))?
            .get(0);
        Ok(!indexed)
    }

    fn pair(&mut self, sql: &str) -> Result<Vec<Sample>, StoreError> {
        let Some(row) = self
            .client
            .query_opt(sql, &[])
            .map_err(pg(self.context.clone()))?
        else {
            return Ok(Vec::new());
        };
        Ok((0..2)
            .filter_map(|i| {
                if self.integer {
                    row.get::<_, Option<i64>>(i).map(Sample::Int)
                } else {
                    row.get::<_, Option<String>>(i).map(Sample::Text)
                }
            })
            .collect())
    }
}

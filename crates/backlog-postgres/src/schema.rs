//! The tool's own tables on PostgreSQL (DDL, version, migrations) and what a tick
//! learns of the user's table before it starts: its name on the search path, its
//! columns and their types, the inserted-at format, the prepared statements.

use crate::Column;
use crate::PostgresStore;
use crate::connection::pg;
use crate::dialect::Pg;
use backlog_core::store::StoreError;
use backlog_core::store::quote;
use backlog_core::store::samples::Typed;
use backlog_core::store::sql::Sql;
use backlog_core::store::{claims, samples, tables};
use backlog_core::timestamp::FormatSetting;
use backlog_core::timestamp::Sample;
use backlog_core::timestamp::TimestampFormat;
use postgres::types::Type;

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
            .query_typed_opt(
                "SELECT c.oid, n.nspname::text, c.relname::text, c.relkind::text
                 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                 WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f') AND lower(c.relname) = lower($1)
                   AND CASE WHEN $2::text IS NULL THEN n.nspname = ANY (current_schemas(false))
                            ELSE lower(n.nspname) = lower($2) END
                 ORDER BY c.relname = $1 DESC, n.nspname = $2 DESC,
                          array_position(current_schemas(false), n.nspname::text)
                 LIMIT 1",
                &[(&name, Type::TEXT), (&schema, Type::TEXT)],
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
            .0
            .query_typed(
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
            .0
            .query_typed(
                "SELECT a.attname::text, format_type(a.atttypid, a.atttypmod), t.typcategory::text
                 FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
                 WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
                &[(&oid, Type::OID)],
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
        let typed = match sql_type.as_str() {
            "timestamp with time zone" => Typed::Native(TimestampFormat::Timestamptz),
            "timestamp without time zone" => Typed::Native(TimestampFormat::Timestamp(
                self.table.inserted_at_timezone.unwrap_or(chrono_tz::UTC),
            )),
            "bigint" | "integer" | "smallint" => Typed::Values { integer: true },
            _ if category == "S" => Typed::Values { integer: false },
            _ => Typed::Other,
        };
        let table_name = self.table.name.clone();
        samples::format_of(
            (&table_name, name, sql_type),
            typed,
            "timestamptz, timestamp, integer unix seconds or milliseconds, or text timestamps",
            (setting, empty),
            &mut |integer| self.samples(table, name, id, integer),
        )
    }

    /// `Store::inspect`, with the formats of the inserted-at and `[retry]` since columns
    /// already `known` (a marks' writer has its tick's): sampling a text or integer
    /// column without an index scans the table.
    pub(super) fn inspect_table_knowing(
        &mut self,
        known: Option<(TimestampFormat, Option<TimestampFormat>)>,
    ) -> Result<TimestampFormat, StoreError> {
        let (oid, table) = self.resolve_table()?;
        let columns = self.columns(oid)?;
        let names: Vec<String> = columns.iter().map(|c| c.0.clone()).collect();
        let named = backlog_core::store::columns::find(&self.table, &names)?;
        let [id, status, inserted_at] =
            [named.id, named.status, named.inserted_at].map(|i| columns[i].clone());
        let retry = named
            .retry
            .map(|(count, since)| (columns[count].clone(), columns[since].clone()));
        samples::zone_applies(
            &self.table,
            (&inserted_at.0, &inserted_at.1),
            "timestamp without time zone",
            "",
        )?;
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

    /// Makes the tool's tables ready (`store::tables::ensure`) in one transaction, its
    /// DDL under an advisory lock; then prepares the statements that use them.
    pub(super) fn create_own_tables(&mut self) -> Result<(), StoreError> {
        let context = "creating the tool's own tables";
        let mut tx = self.client.transaction().map_err(pg(context))?;
        tables::ensure(&mut PgDdl {
            tx: Pg(&mut tx),
            schema: &self.schema,
        })?;
        tx.commit().map_err(pg(context))?;
        self.prepare_own()
    }
}

/// The tool's tables on PostgreSQL (`store::tables`), in their schema.
struct PgDdl<'a, 'b> {
    tx: Pg<&'a mut postgres::Transaction<'b>>,
    /// Quoted.
    schema: &'a str,
}

impl PgDdl<'_, '_> {
    /// The schema's name as the catalog has it.
    fn schema_name(&self) -> String {
        self.schema.trim_matches('"').replace("\"\"", "\"")
    }
}

impl tables::Ddl for PgDdl<'_, '_> {
    fn sql(&mut self) -> &mut dyn Sql {
        &mut self.tx
    }

    fn prefix(&self) -> String {
        format!("{}.", self.schema)
    }

    fn place(&self) -> String {
        format!("schema {}", self.schema)
    }

    fn apart(&self) -> String {
        format!(
            "rename that table, or give the tool a schema of its own with database.schema (now {:?})",
            self.schema_name()
        )
    }

    fn spell(&self, placeholder: &str) -> &'static str {
        match placeholder {
            "serial" => "bigserial PRIMARY KEY",
            "bigint" => "bigint",
            "int" => "integer",
            "time" => "timestamptz",
            _ => "text",
        }
    }

    fn tables(&self) -> Vec<&'static tables::Table> {
        claims::tables()
    }

    /// From the catalog, not `information_schema.columns`: every tick asks this of
    /// each of the tool's tables, and that view (which checks privileges column by
    /// column) took 47 ms for all of them, most of a tick's start-up (0.1 ms this way).
    fn columns(&mut self, names: &[&str]) -> Result<tables::Columns, StoreError> {
        // Typed, so that the question is one round trip, not a prepare and a run.
        let rows = self
            .tx
            .0
            .query_typed(
                "SELECT c.relname::text, a.attname::text
                   FROM pg_class c
                   JOIN pg_namespace n ON n.oid = c.relnamespace
                   JOIN pg_attribute a ON a.attrelid = c.oid
                  WHERE n.nspname = $1 AND c.relname = ANY($2)
                    AND a.attnum > 0 AND NOT a.attisdropped
                  ORDER BY c.relname, a.attnum",
                &[
                    (&self.schema_name(), Type::TEXT),
                    (&names, Type::TEXT_ARRAY),
                ],
            )
            .map_err(pg("reading the tool's tables"))?;
        let mut found = tables::Columns::new();
        for row in rows {
            found.entry(row.get(0)).or_default().push(row.get(1));
        }
        Ok(found)
    }

    fn lock(&mut self) -> Result<(), StoreError> {
        self.tx
            .0
            .query_typed(
                "SELECT pg_advisory_xact_lock($1)",
                &[(&OWN_TABLES_LOCK, Type::INT8)],
            )
            .map_err(pg("waiting for the lock on the tool's tables"))?;
        Ok(())
    }

    fn make_place(&mut self) -> Result<(), StoreError> {
        self.tx
            .batch_execute(&format!("CREATE SCHEMA IF NOT EXISTS {}", self.schema))
            .map_err(pg("creating the tool's schema (this needs the right to create one in the database: run one tick as a user who has it, or have an administrator create it)"))
    }

    /// Version 1 had no `lost` count in the run log; version 2 no `backlog_attempts`
    /// and no `backlog_pauses`.
    fn base(&self) -> i64 {
        3
    }

    fn legacy(&mut self, version: i64) -> Result<(), StoreError> {
        match version {
            1 => {
                let runs = format!("{}.backlog_runs", self.schema);
                self.tx
                    .batch_execute(&format!(
                        "ALTER TABLE {runs} ADD COLUMN IF NOT EXISTS lost bigint NOT NULL DEFAULT 0"
                    ))
                    .map_err(pg("moving the tool's tables to version 2 (this needs the right to alter them: run one tick as their owner)"))?;
            }
            // `ensure` made what version 2 lacked: the attempts and the pauses.
            2 => {}
            _ => return tables::unknown(&self.place(), version),
        }
        tables::set_version(self, version + 1)
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
            .query_typed_one(
                "SELECT EXISTS (SELECT 1 FROM pg_index i
                   JOIN pg_class ic ON ic.oid = i.indexrelid
                   JOIN pg_am am ON am.oid = ic.relam
                   JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
                  WHERE i.indrelid = $1::text::regclass AND a.attname = $2 AND am.amname = 'btree'
                    AND i.indisvalid AND i.indpred IS NULL)",
                &[(&self.table, Type::TEXT), (&column, Type::TEXT)],
            )
            .map_err(pg(self.context.clone()))?
            .get(0);
        Ok(!indexed)
    }

    fn pair(&mut self, sql: &str) -> Result<Vec<Sample>, StoreError> {
        let Some(row) = self
            .client
            .query_typed_opt(sql, &[])
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

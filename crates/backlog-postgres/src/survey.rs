//! What `status` and `doctor` read of the table on PostgreSQL: its records counted by
//! status, how the server plans the band query, and the inserted-at column's distinct
//! values, a page at a time.

use crate::Bound;
use crate::PostgresStore;
use crate::connection::pg;
use backlog_core::record::Record;
use backlog_core::record::Scalar;
use backlog_core::store::Kind;
use backlog_core::store::QueryPlan;
use backlog_core::store::Range;
use backlog_core::store::StoreError;
use backlog_core::store::Survey;
use backlog_core::store::TableColumn;
use backlog_core::store::TableShape;
use backlog_core::store::band_statuses;
use backlog_core::store::index_name;
use backlog_core::store::quote;
use backlog_core::store::shape;
use chrono::DateTime;
use chrono::Utc;
use postgres::types::ToSql;
use postgres::types::Type;

impl Survey for PostgresStore {
    fn count_by_status(&mut self, range: &Range) -> Result<Vec<(String, u64)>, StoreError> {
        let p = self.prepared();
        let (table, status, ins) = (
            p.table.clone(),
            p.status.quoted.clone(),
            p.inserted_at.clone(),
        );
        let bound = format!("CAST(CAST({{}} AS TEXT) AS {})", p.status.sql_type);
        let statuses = band_statuses::Statuses {
            table: &table,
            status: &status,
            inserted_at: &ins,
            grouped: "CAST({} AS TEXT)",
            least: "CAST({} AS TEXT)",
            bound: &bound,
            by_index: self.statuses_by_index,
        };
        let context = format!("counting the records of {}", self.table.name);
        band_statuses::count_by_status(&mut self.client, &statuses, range, &context)
    }

    fn oldest_in(
        &mut self,
        statuses: &[String],
        range: &Range,
    ) -> Result<Option<DateTime<Utc>>, StoreError> {
        // A status at a time: a seek through an index on (status, inserted-at), or a
        // range of one on inserted-at that stops at its first match.
        let p = self.prepared();
        let ins = format!("t.{}", p.inserted_at);
        let (band, bounds) = range.condition(&ins, 2, |n| format!("${n}"));
        let clause = format!(
            "WHERE t.{st} = $1::text::{stt} AND {band} ORDER BY {ins} ASC LIMIT 1",
            st = p.status.quoted,
            stt = p.status.sql_type,
        );
        let bounds: Vec<Bound> = bounds.into_iter().map(Bound).collect();
        let mut oldest = None;
        for status in statuses {
            let mut params: Vec<&(dyn ToSql + Sync)> = vec![status];
            params.extend(bounds.iter().map(|b| b as &(dyn ToSql + Sync)));
            let found = self.query_records(&clause, &params)?.pop();
            oldest = backlog_core::store::earlier(oldest, found.and_then(|r| r.inserted_time));
        }
        Ok(oldest)
    }

    fn band_plan(&mut self) -> Result<QueryPlan, StoreError> {
        let p = self
            .prepared
            .as_ref()
            .expect("inspect() runs before any query");
        let sql = format!("EXPLAIN {}", p.first_page_sql);
        let now = Utc::now();
        let format = self.format();
        let (from, to) = (
            format.encode(now - chrono::Duration::days(7)),
            format.encode(now - chrono::Duration::days(1)),
        );
        let pending = self.table.pending.clone();
        let limit: i64 = 200;
        // Whether an index serves the band, not whether the planner picks it for a
        // table yet small enough to read whole: a sequential scan is taken only when
        // no index can be.
        let context = "explaining the band query";
        let mut tx = self.client.0.transaction().map_err(pg(context))?;
        tx.batch_execute("SET LOCAL enable_seqscan = off")
            .map_err(pg(context))?;
        // As the server indents them, for `doctor -v`; trimmed, to be read.
        let lines: Vec<String> = tx
            .query(&sql, &[&Bound(&from), &Bound(&to), &pending, &limit])
            .map_err(pg(context))?
            .iter()
            .map(|r| r.get::<_, String>(0).trim_end().to_string())
            .collect();
        tx.rollback().map_err(pg(context))?;
        let detail: Vec<String> = lines.iter().map(|l| l.trim().to_string()).collect();
        let bare = p.inserted_at.trim_matches('"').to_string();
        let uses_index = detail
            .iter()
            .any(|line| line.starts_with("Index Cond:") && line.contains(&bare));
        let create_index = (!uses_index).then(|| {
            format!(
                "CREATE INDEX CONCURRENTLY {} ON {} ({});",
                quote(&index_name(&self.table.name, &bare)),
                p.table,
                p.inserted_at
            )
        });
        let partitions = self.partitions_read(&detail)?;
        // A node's line without its estimates, nor the query's alias of the table
        // (`t`, `t_1` on a partition or a status's branch): `->  Index Scan using …
        // on orders t  (cost=…)` is `Index Scan using … on orders`.
        let node = |line: &str| {
            let line = line.trim_start_matches("->").trim();
            let line = line.split("  (cost=").next().unwrap_or(line);
            let mut words: Vec<&str> = line.split_whitespace().collect();
            let alias = |w: &str| {
                w.strip_prefix('t').is_some_and(|n| {
                    n.trim_start_matches('_')
                        .chars()
                        .all(|c| c.is_ascii_digit())
                })
            };
            let n = words.len();
            if n > 3 && words[n - 3] == "on" && alias(words[n - 1]) {
                words.pop();
            }
            words.join(" ")
        };
        // The nodes that read the table (a bitmap's heap scan, not its index scan
        // below it; not a subquery's scan of its rows).
        let reads = |n: &String| {
            [
                "Seq Scan",
                "Index Scan",
                "Index Only Scan",
                "Bitmap Heap Scan",
            ]
            .iter()
            .any(|kind| n.starts_with(kind) || n.starts_with(&format!("Parallel {kind}")))
        };
        let scans: Vec<String> = detail
            .iter()
            .enumerate()
            .filter(|(i, line)| *i == 0 || line.starts_with("->"))
            .map(|(_, line)| node(line))
            .filter(reads)
            .collect();
        let summary = QueryPlan::summary_of(&scans, &node(detail.first().map_or("", |l| l)));
        Ok(QueryPlan {
            uses_index,
            summary,
            lines,
            create_index,
            partitions,
        })
    }

    fn inserted_at_page(
        &mut self,
        after: Option<&Scalar>,
        limit: usize,
    ) -> Result<Vec<Scalar>, StoreError> {
        // Whole records, one per distinct value: the store reads a value only through
        // a record (its format's decoding of the column's type).
        let ins = self.prepared().inserted_at.clone();
        let limit = limit as i64;
        match after {
            None => self.query_records(
                &format!(
                    "WHERE t.{ins} IS NOT NULL AND (t.tableoid, t.ctid) IN (SELECT DISTINCT ON (t2.{ins}) t2.tableoid, t2.ctid FROM {table} t2 WHERE t2.{ins} IS NOT NULL ORDER BY t2.{ins} LIMIT $1) ORDER BY t.{ins}",
                    table = self.prepared().table
                ),
                &[&limit],
            ),
            Some(after) => self.query_records(
                &format!(
                    "WHERE t.{ins} > $2 AND (t.tableoid, t.ctid) IN (SELECT DISTINCT ON (t2.{ins}) t2.tableoid, t2.ctid FROM {table} t2 WHERE t2.{ins} > $2 ORDER BY t2.{ins} LIMIT $1) ORDER BY t.{ins}",
                    table = self.prepared().table
                ),
                &[&limit, &Bound(after)],
            ),
        }
        .map(|records| records.iter().map(Record::inserted_at).collect())
    }

    fn table_shape(&mut self) -> Result<TableShape, StoreError> {
        let (oid, quoted) = self.resolve_table()?;
        let context = format!("reading the columns of {}", self.table.name);
        let mut columns: Vec<TableColumn> = self
            .columns(oid)?
            .into_iter()
            .map(|(name, sql_type, category)| TableColumn {
                kind: kind(&sql_type, &category),
                name,
                sql_type,
                labels: Vec::new(),
            })
            .collect();
        for column in columns.iter_mut().filter(|c| c.kind == Kind::Enum) {
            column.labels = self
                .client
                .0
                .query_typed(
                    "SELECT e.enumlabel::text FROM pg_attribute a
                       JOIN pg_enum e ON e.enumtypid = a.atttypid
                      WHERE a.attrelid = $1 AND a.attname = $2 ORDER BY e.enumsortorder",
                    &[(&oid, Type::OID), (&column.name, Type::TEXT)],
                )
                .map_err(pg(&context))?
                .iter()
                .map(|r| r.get(0))
                .collect();
        }
        let primary_key = self
            .client
            .0
            .query_typed(
                "SELECT a.attname::text FROM pg_index i
                   JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey::int2[])
                  WHERE i.indrelid = $1 AND i.indisprimary
                  ORDER BY array_position(i.indkey::int2[], a.attnum)",
                &[(&oid, Type::OID)],
            )
            .map_err(pg(&context))?
            .iter()
            .map(|r| r.get(0))
            .collect();
        let (schema, table) = self
            .client
            .query_typed_one(
                "SELECT n.nspname::text, c.relname::text FROM pg_class c
                   JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = $1",
                &[(&oid, Type::OID)],
            )
            .map(|r| (r.get::<_, String>(0), r.get::<_, String>(1)))
            .map_err(pg(&context))?;
        // Qualified as the name asked for was: `public.orders` stays so, `orders` too.
        let name = if self.table.name.contains('.') {
            format!("{schema}.{table}")
        } else {
            table
        };
        Ok(TableShape {
            name,
            quoted,
            columns,
            primary_key,
        })
    }

    fn values(
        &mut self,
        shape: &TableShape,
        column: &str,
        limit: usize,
        sample: Option<usize>,
    ) -> Result<Vec<(String, u64)>, StoreError> {
        let query = format!(
            "SELECT CAST(v AS TEXT), count(*) FROM (SELECT {c} AS v FROM {t} WHERE {c} IS NOT NULL LIMIT $2) s GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT $1",
            c = quote(column),
            t = shape.quoted
        );
        let context = format!("counting the values of {column} in {}", shape.name);
        let sample = sample.map_or(shape::ALL, |n| n as i64);
        Ok(self
            .client
            .0
            .query_typed(
                &query,
                &[(&(limit as i64 + 1), Type::INT8), (&sample, Type::INT8)],
            )
            .map_err(pg(&context))?
            .iter()
            .map(|r| (r.get(0), r.get::<_, i64>(1) as u64))
            .collect())
    }
}

/// What a type holds, by its name (`format_type`) and its category (`pg_type.typcategory`:
/// N numeric, S string, E enumeration, D date and time).
fn kind(sql_type: &str, category: &str) -> Kind {
    match category {
        "N" if matches!(sql_type, "smallint" | "integer" | "bigint") => Kind::Integer,
        "S" => Kind::Text,
        "E" => Kind::Enum,
        // A date alone is no instant: the band's bounds are.
        "D" if sql_type.starts_with("timestamp") => Kind::Timestamp,
        _ => Kind::Other,
    }
}

impl PostgresStore {
    /// On a partitioned table, the leaf partitions the plan `detail` reads and how
    /// many the table has; none for a table that is not partitioned.
    fn partitions_read(&mut self, detail: &[String]) -> Result<Option<(usize, usize)>, StoreError> {
        let table = self.prepared().table.clone();
        // Leaves named as EXPLAIN names them (quoted where they need it); a ctid is
        // unique only within one of them.
        let leaves: Vec<String> = self
            .client
            .query(
                "WITH RECURSIVE tree AS (
                     SELECT inhrelid FROM pg_inherits WHERE inhparent = $1::text::regclass
                     UNION ALL
                     SELECT i.inhrelid FROM pg_inherits i JOIN tree ON i.inhparent = tree.inhrelid)
                 SELECT quote_ident(c.relname::text) FROM tree JOIN pg_class c ON c.oid = tree.inhrelid
                 WHERE c.relkind <> 'p'
                   AND (SELECT relkind FROM pg_class WHERE oid = $1::text::regclass) = 'p'",
                &[&table],
            )
            .map_err(pg("reading the table's partitions"))?
            .iter()
            .map(|r| r.get(0))
            .collect();
        if leaves.is_empty() {
            return Ok(None);
        }
        let read = leaves
            .iter()
            .filter(|leaf| {
                let scan = format!(" on {leaf} ");
                detail.iter().any(|line| line.contains(&scan))
            })
            .count();
        Ok(Some((read, leaves.len())))
    }
}

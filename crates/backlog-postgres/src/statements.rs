//! The statements a tick runs on PostgreSQL, written once `inspect` knows the table's
//! columns: the band's pages, read and taken, the claims, and the marks; prepared on
//! the tick's connection, those on the tool's own tables once they exist.

use crate::Column;
use crate::Own;
use crate::OwnSql;
use crate::PostgresStore;
use crate::Prepared;
use crate::connection::pg;
use crate::pages::select_records;
use backlog_core::store::StoreError;
use backlog_core::store::quote;
use backlog_core::timestamp::TimestampFormat;
use postgres::types::Type;
impl PostgresStore {
    pub(super) fn prepare(
        &mut self,
        table: String,
        id: Column,
        status: Column,
        inserted_at: String,
        int_id: bool,
        bytea: Vec<String>,
    ) -> Result<Prepared, StoreError> {
        let ins = &inserted_at;
        let (idq, idt) = (&id.quoted, &id.sql_type);
        let (st, stt) = (&status.quoted, &status.sql_type);
        // $1 from, $2 to, $3 pending statuses, $4 limit, $5 the cursor's id.
        let order = format!("ORDER BY t.{ins} DESC, t.{idq} DESC LIMIT $4");
        let by_status = self.pages_by_status.then_some(self.table.pending.len());
        let format = self.format();
        let page = |range: String| match by_status {
            None => format!(
                "{} WHERE {range} AND t.{st} = ANY ($3::text[]::{stt}[]) {order}",
                select_records(&table, idq, st, ins, format)
            ),
            // One index range per status, merged (`pages::pages_by_status`).
            Some(n) => {
                let branches: Vec<String> = (1..=n)
                    .map(|k| {
                        format!(
                            "(SELECT t.* FROM {table} t WHERE {range} AND t.{st} = ($3::text[])[{k}]::{stt} {order})"
                        )
                    })
                    .collect();
                format!(
                    "{} {order}",
                    select_records(
                        &format!("({})", branches.join(" UNION ALL ")),
                        idq,
                        st,
                        ins,
                        format
                    )
                )
            }
        };
        let first = |op: &str| format!("t.{ins} >= $1 AND t.{ins} {op} $2");
        let next = format!(
            "t.{ins} >= $1 AND t.{ins} <= $2 AND (t.{ins}, t.{idq}) < ($2, $5::text::{idt})"
        );
        let first_page_sql = page(first("<"));
        let take = TakeSql {
            table: &table,
            claims: &self.own_table("backlog_claims"),
            id: &id,
            status: &status,
            ins,
            format,
        };
        let take_first = [take.page(&first("<"), 5), take.page(&first("<="), 5)];
        let take_next = take.page(&next, 6);
        let claims = self.own_table("backlog_claims");
        let [claim_sql, claim_locked_sql] = claim_statements(&claims, &table, &id, &status);
        let (set_status_sql, lock_rows_sql) = mark_statements(
            &claims,
            &table,
            (&id, &status, ins),
            self.table.retry.as_ref(),
        );
        let context = format!("preparing the queries on {}", self.table.name);
        let mut prepare = |sql: &str| self.client.prepare(sql).map_err(pg(context.clone()));
        Ok(Prepared {
            first_page: [prepare(&first_page_sql)?, prepare(&page(first("<=")))?],
            next_page: prepare(&page(next))?,
            lock_rows: prepare(&lock_rows_sql)?,
            own_sql: OwnSql {
                take_first,
                take_next,
                claim: claim_sql,
                claim_locked: claim_locked_sql,
                set_status: set_status_sql,
                lock_claims: lock_claims_sql(&claims),
            },
            own: None,
            first_page_sql,
            table,
            id,
            status,
            inserted_at,
            int_id,
            bytea,
        })
    }

    /// Prepares the statements on the tool's own tables, once (`ensure_own_tables`).
    pub(super) fn prepare_own(&mut self) -> Result<(), StoreError> {
        let p = self
            .prepared
            .as_mut()
            .expect("inspect() runs before any query");
        if p.own.is_none() {
            let context = "preparing the claim queries";
            let sql = &p.own_sql;
            let client = &mut self.client;
            let mut prepare =
                |sql: &str, types: &[Type]| client.prepare_typed(sql, types).map_err(pg(context));
            p.own = Some(Own {
                take_first: [
                    prepare(&sql.take_first[0], &[])?,
                    prepare(&sql.take_first[1], &[])?,
                ],
                take_next: prepare(&sql.take_next, &[])?,
                claim: prepare(&sql.claim, &[])?,
                // Typed: the statement leaves $2 unused.
                claim_locked: prepare(&sql.claim_locked, &CLAIM_TYPES)?,
                set_status: [
                    prepare(&sql.set_status[0], &[])?,
                    prepare(&sql.set_status[1], &[])?,
                ],
                lock_claims: prepare(&sql.lock_claims, &[])?,
            });
        }
        Ok(())
    }
}

/// Locks this owner's claims among the marks' ids ($1 table name, $2 owner, $3 the
/// ids), in the key's order: a heartbeat renewing them on the tick's other
/// connection locks them in the same (`claims::ServerHeartbeat`), so the marks'
/// statements, which let go of them a status at a time, never wait on it in a
/// circle (a deadlock PostgreSQL breaks only after `deadlock_timeout`).
fn lock_claims_sql(claims: &str) -> String {
    format!(
        "SELECT 1 FROM {claims} c JOIN unnest($3::text[]) AS k(id) ON c.record_id = k.id
         WHERE c.table_name = $1 AND c.owner = $2 ORDER BY c.table_name, c.record_id FOR UPDATE OF c"
    )
}

/// The claim statements: `claim` locks the rows still pending first; `claim_locked`
/// is for a page taken, whose transaction locked them already (and ignores $2).
fn claim_statements(claims: &str, table: &str, id: &Column, status: &Column) -> [String; 2] {
    let (idq, idt) = (&id.quoted, &id.sql_type);
    let (st, stt) = (&status.quoted, &status.sql_type);
    // $1 ids, $2 pending statuses, $3 table name, $4 owner, $5 lease in seconds, $6
    // whether to take records kept after a failure in this slot, $7 their owner, $8
    // the tick's clock (a kept failure's expiry is the end of its slot by that clock).
    let claim_from = |pending: &str| {
        format!(
            "WITH pending AS ({pending})
             INSERT INTO {claims} AS c (table_name, record_id, owner, claimed_at, expires_at)
             SELECT $3, id, $4, now(), now() + make_interval(secs => $5) FROM pending
             ON CONFLICT (table_name, record_id) DO UPDATE SET owner = excluded.owner,
                 claimed_at = excluded.claimed_at, expires_at = excluded.expires_at
             WHERE {}
             RETURNING record_id",
            takeable("excluded.claimed_at", 6, 7, 8)
        )
    };
    let claim_sql = claim_from(&format!(
        "SELECT t.{idq}::text AS id FROM {table} t
         WHERE t.{idq} = ANY ($1::text[]::{idt}[]) AND t.{st} = ANY ($2::text[]::{stt}[])
         FOR NO KEY UPDATE OF t SKIP LOCKED"
    ));
    let claim_locked_sql = claim_from("SELECT id FROM unnest($1::text[]) AS k(id)");
    [claim_sql, claim_locked_sql]
}

/// The statements that write a group's marks (with and without the `[retry]`
/// columns), and the one that locks the group's rows first.
fn mark_statements(
    claims: &str,
    table: &str,
    (id, status, ins): (&Column, &Column, &str),
    retry: Option<&backlog_core::config::RetryConfig>,
) -> ([String; 2], String) {
    let (idq, idt) = (&id.quoted, &id.sql_type);
    let (st, stt) = (&status.quoted, &status.sql_type);
    // One statement per group of marks of a status: it lets go of the group's claims
    // this owner still holds (a failure kept until its slot ends keeps its claim,
    // under `store::KEPT_OWNER`) and writes the status where it did, so
    // only the records this owner still claims are written (see `Store::mark`).
    // $1 status, $2 the ids whose claims go, $3 table name, $4 owner, $5 the ids of
    // the failures kept, $6 until when by the tick's clock, $7 for how many seconds
    // by the database's, $8 `KEPT_OWNER`, $9 and $10 the range of the marks'
    // inserted-at values (see `in_range`), then $11 the `[retry]` time.
    // Each id drives one lookup of its claim by the claims' key, and each claim one
    // lookup of its row by the id column's own type. The claims' statistics are
    // rarely right (the table fills and empties within a tick), so a plan that
    // trusts them goes wrong: `record_id = ANY ($2)` read every claim of the owner
    // and compared it with the whole array (a generic plan cannot hash it), 67 ms
    // for a group of 1,000 beside 12,000 claims; and a join written on
    // `t.id = ANY ($2)`, told a just emptied table holds one row, probed all the
    // group's ids once per claim. `write_marks` plans each group with its own
    // arrays (`plan_cache_mode`), where `unnest` is known to yield its length.
    let held = format!(
        "WITH gone AS (
            DELETE FROM {claims} c USING unnest($2::text[]) AS k(id)
            WHERE c.table_name = $3 AND c.record_id = k.id AND c.owner = $4
            RETURNING c.record_id
         ), kept AS (
            UPDATE {claims} c SET owner = $8, claimed_at = k.until,
                expires_at = now() + make_interval(secs => k.wait)
            FROM unnest($5::text[], $6::timestamptz[], $7::float8[]) AS k(id, until, wait)
            WHERE c.table_name = $3 AND c.record_id = k.id AND c.owner = $4
            RETURNING c.record_id
         ), held AS (SELECT record_id FROM gone UNION ALL SELECT record_id FROM kept)"
    );
    // $9 and $10: the least and the greatest inserted-at value of the marks, or NULL
    // where one could not be read. Planned with their values (`plan_cache_mode`),
    // the range leaves out the partitions of a table partitioned on that column
    // that hold none of the records (found by id alone, each id was looked up in
    // every partition's index).
    let in_range = |lo: usize| {
        // The comparison first: it gives the parameters the column's type.
        format!(
            "((t.{ins} >= ${lo} AND t.{ins} <= ${}) OR ${lo} IS NULL)",
            lo + 1
        )
    };
    let written = format!(
        "FROM held h WHERE t.{idq} = h.record_id::{idt} AND {} RETURNING h.record_id",
        in_range(9)
    );
    let status_alone = format!("{held} UPDATE {table} t SET {st} = $1::text::{stt} {written}");
    let set_status_sql = [
        match retry {
            // The attempt count and time go with the status, in the same statement.
            Some(r) => format!(
                "{held} UPDATE {table} t SET {st} = $1::text::{stt}, {count} = coalesce(t.{count}, 0) + 1, {since} = $11 {written}",
                count = quote(&r.count),
                since = quote(&r.since)
            ),
            None => status_alone.clone(),
        },
        status_alone,
    ];
    let lock_rows_sql = format!(
        "SELECT 1 FROM {table} t WHERE t.{idq} = ANY ($1::text[]::{idt}[]) AND {} FOR NO KEY UPDATE OF t",
        in_range(2)
    );
    (set_status_sql, lock_rows_sql)
}

/// Whether an existing claim `c` may be taken over, by the clock `now`: another tick's
/// that ran out, or a failure kept until its slot ends (owner `$kept`) once the tick's
/// clock (`$clock`) is past that end, it ran out, or the tick takes kept failures
/// (`$take_tried`). The claim statement and the pages taken share it.
pub(super) fn takeable(now: &str, take_tried: usize, kept: usize, clock: usize) -> String {
    format!(
        "(c.owner <> ${kept} AND c.expires_at < {now}) OR (c.owner = ${kept} AND (${take_tried} OR c.claimed_at <= ${clock} OR c.expires_at < {now}))"
    )
}

/// The parameters of the claim statements (see `claim_sql`).
const CLAIM_TYPES: [Type; 8] = [
    Type::TEXT_ARRAY,
    Type::TEXT_ARRAY,
    Type::TEXT,
    Type::TEXT,
    Type::FLOAT8,
    Type::BOOL,
    Type::TEXT,
    Type::TIMESTAMPTZ,
];

/// What the SQL of a page taken is written from (see `TakeSql::page`).
struct TakeSql<'a> {
    table: &'a str,
    claims: &'a str,
    id: &'a Column,
    status: &'a Column,
    ins: &'a str,
    format: TimestampFormat,
}

impl TakeSql<'_> {
    /// Whether another tick holds the record of row `t`: a claim that is not
    /// `takeable` by the statement's clock. Parameters from $n: the table's name,
    /// whether to take kept failures, the tick's clock, their owner. A scalar subquery,
    /// one lookup by the claims' key a row: written as EXISTS, the planner may hash the
    /// whole claims table for every page (all the kept failures too).
    fn held(&self, n: usize) -> String {
        format!(
            "(SELECT true FROM {} c WHERE c.table_name = ${n} AND c.record_id = t.{}::text AND NOT ({}))",
            self.claims,
            self.id.quoted,
            takeable("now()", n + 1, n + 3, n + 2)
        )
    }

    /// A page taken, in the band's `range` (on `t`, with $1 to $4, or $5, as a page
    /// read), the held parameters from $n. It locks the first rows no other tick holds
    /// or is taking now (`SKIP LOCKED`, counted by the LIMIT after it), for the claim
    /// statement that follows in the same transaction: runners that read the band at
    /// the same moment get pages of their own, instead of all reading the same page and
    /// all but one finding it taken, and a runner behind the others steps over their
    /// pages in its scan instead of reading them. What it steps over is counted once, as
    /// the tick begins (`held_by_others`).
    fn page(&self, range: &str, n: usize) -> String {
        let (table, ins) = (self.table, self.ins);
        let (idq, st, stt) = (&self.id.quoted, &self.status.quoted, &self.status.sql_type);
        let held = self.held(n);
        let order = format!("ORDER BY t.{ins} DESC, t.{idq} DESC");
        format!(
            "WITH page AS (
                SELECT t.* FROM {table} t
                WHERE {range} AND t.{st} = ANY ($3::text[]::{stt}[]) AND {held} IS NOT TRUE
                {order} LIMIT $4 FOR NO KEY UPDATE OF t SKIP LOCKED
             ) {} {order}",
            select_records("page", idq, st, ins, self.format)
        )
    }
}

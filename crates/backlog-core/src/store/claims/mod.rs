//! The servers' claims (PostgreSQL, MySQL: a row of `backlog_claims` a record), read
//! and written alike on both through the shared statements: the run-log row a tick
//! opens once the kept failures past their slot are dropped, a tick's release of what
//! it still holds, and who holds a record now. Claiming and marking are written once
//! too (`row_locks`), with PostgreSQL's faster path of its own for a tick's pages and
//! marks (arrays, prepared plans).
//!
//! Why a table of claims, with leases, on both servers. Row locks held for as long as
//! a handler runs (`SELECT … FOR UPDATE SKIP LOCKED` in a transaction left open) would
//! need no table, but:
//! - a handler may run for minutes, and a transaction open that long holds back vacuum
//!   on the whole database and blocks the application's own updates of those rows;
//! - a row lock lives as long as its connection, and the server keeps the connection
//!   of a host that vanished (power cut, network split) open until TCP gives up, which
//!   can take hours; a lease runs out `database.claim_lease` after the last heartbeat,
//!   whatever became of the host;
//! - the engine, its guarantees and its tests stay the same on every backend.
//!
//! Nor PostgreSQL's session advisory locks (Que's design), though they write nothing:
//! measured (docs/benchmarks.md, issue 15) a claim and its release cost 0.8 µs a record with
//! them against 13 µs in the table, about half of a tick's time a record; but they
//! cost guarantees:
//! - behind a pooler in transaction mode (pgbouncer's usual setting) consecutive
//!   statements run on different server connections: a lock is let go on the wrong
//!   one (and leaks), and two runners multiplexed on one server connection both get
//!   the same record, since a session's advisory locks are re-entrant: two at once;
//! - a server restart or a failover drops every lock while the handlers still run,
//!   and another runner takes their records: two at once (a claim in a logged table
//!   outlives it, and the heartbeat reconnects to renew it);
//! - a vanished host's locks last as long as its connection (see above), not a lease;
//! - the locks fill the server's shared lock table (`max_locks_per_transaction` ×
//!   `max_connections`: 6,400 slots by default, seven runners' pages of 1,000), after
//!   which every session on the server, the application's too, gets "out of shared
//!   memory";
//! - a failure kept from the ticks until its next slot outlives the tick's session,
//!   so the table would stay for those.
//!
//! An `UNLOGGED` claims table was measured too, and is not used either: a crash of the
//! server empties it and a standby promoted by a failover has none, both while
//! handlers run (two at once again), and it saved 1 µs of the 13 and nothing
//! measurable in a tick.

pub mod row_locks;

use chrono::{DateTime, Utc};

use super::fault::housekeeping;
use super::sql::{Sql, Value, failed, numbered};
use super::{Heartbeat, Held, KEPT_OWNER, Own, RunStart, StoreError, runs};

/// The servers' claims: a row per record a tick holds, or a failure kept until its
/// slot ends (`KEPT_OWNER`).
pub const TABLE: super::tables::Table = super::tables::Table {
    name: "backlog_claims",
    columns: "table_name {key} NOT NULL,
        record_id {key} NOT NULL,
        owner {key} NOT NULL,
        claimed_at {time} NOT NULL,
        expires_at {time} NOT NULL",
    key: Some("table_name, record_id"),
    indexes: &[("backlog_claims_by_owner", "owner")],
    mark: "record_id",
};

/// The tool's tables on a server: the shared ones and the claims.
pub fn tables() -> Vec<&'static super::tables::Table> {
    let mut tables = super::tables::SHARED.to_vec();
    tables.push(&TABLE);
    tables.push(&super::reaches::TABLE);
    tables
}

/// Whether `name` is one of the tool's tables on a server (`tables`): those a store
/// that made them ready knows are there.
pub fn is_own(name: &str) -> bool {
    tables().iter().any(|t| t.name == name)
}

/// Opens the run-log row of `run` on a server (`runs::open`), dropping the failures
/// the claims kept past their slot.
pub fn open_run(
    sql: &mut dyn Sql,
    s: &str,
    table: &str,
    run: &RunStart,
) -> Result<i64, StoreError> {
    runs::open(sql, s, table, run, &mut |sql| {
        collect_kept(sql, s, table)?;
        super::reaches::drop_ended(sql, s, table, run.lease)
    })
}

/// Drops the failures the servers' claims kept past the end of their slot. Housekeeping:
/// a claim another session is writing may hold its row for a while, and what is not
/// dropped now a later tick drops (a kept failure past its slot is free to take anyway).
fn collect_kept(sql: &mut dyn Sql, s: &str, table: &str) -> Result<(), StoreError> {
    let now = sql.now();
    housekeeping(
        sql.execute(
            &format!(
                "DELETE FROM {s}backlog_claims WHERE table_name = ?1 AND owner = ?2 AND expires_at < {now}"
            ),
            &[table.into(), KEPT_OWNER.into()],
        )
        .map(drop)
        .map_err(failed("dropping failures kept past their slot")),
    )
}

/// Lets go of every claim `owner` holds on the table (the kept failures, under
/// another owner, stay).
pub fn release(own: Own<'_>, owner: &str) -> Result<(), StoreError> {
    if !own.exists {
        return Ok(());
    }
    let s = &own.prefix;
    own.sql
        .execute(
            &format!("DELETE FROM {s}backlog_claims WHERE table_name = ?1 AND owner = ?2"),
            &[own.table.into(), owner.into()],
        )
        .map_err(failed("releasing claims"))?;
    Ok(())
}

/// Who holds the record with this id now: a tick until its claim runs out, or the
/// keep of a failure until its slot ends.
pub fn holder(own: Own<'_>, record_id: &str) -> Result<Option<Held>, StoreError> {
    Ok(held_by_id(own, &[record_id.to_string()])?.remove(record_id))
}

/// `holder` of each of `records`, in their order (`Holds::holders`).
pub fn holders(
    own: Own<'_>,
    records: &[&crate::record::Record],
) -> Result<Vec<Option<Held>>, StoreError> {
    let ids: Vec<String> = records.iter().map(|r| r.id.to_string()).collect();
    let mut held = held_by_id(own, &ids)?;
    Ok(ids.iter().map(|id| held.remove(id)).collect())
}

/// Who holds each of the records with these ids now (those held by none left out),
/// read 500 ids a statement: a dry run asks it of a page.
fn held_by_id(
    own: Own<'_>,
    record_ids: &[String],
) -> Result<std::collections::HashMap<String, Held>, StoreError> {
    let mut held = std::collections::HashMap::new();
    if !own.exists {
        return Ok(held);
    }
    let s = &own.prefix;
    let sql = own.sql;
    for ids in record_ids.chunks(500) {
        let mut params = vec![own.table.into()];
        params.extend(ids.iter().map(|id| id.as_str().into()));
        let rows = sql
            .query(
                &format!(
                    "SELECT record_id, owner, {claimed}, {expires} FROM {s}backlog_claims WHERE table_name = ?1 AND record_id IN ({list}) AND expires_at > {now}",
                    claimed = sql.rfc3339("claimed_at"),
                    expires = sql.rfc3339("expires_at"),
                    now = sql.now(),
                    list = super::sql::numbered(2, ids.len()),
                ),
                &params,
            )
            .map_err(failed("reading the tool's claims"))?;
        for row in &rows {
            let time = |i: usize| -> Result<DateTime<Utc>, StoreError> {
                let text = row[i].text().unwrap_or_default();
                DateTime::parse_from_rfc3339(&text)
                    .map(|t| t.with_timezone(&Utc))
                    .map_err(|e| {
                        StoreError::Schema(format!(
                            "backlog_claims holds a time {text:?} that is not RFC 3339: {e}"
                        ))
                    })
            };
            let holder = match row[1].text() {
                Some(owner) if owner == KEPT_OWNER => Held {
                    owner: None,
                    until: time(2)?,
                },
                owner => Held {
                    owner,
                    until: time(3)?,
                },
            };
            held.insert(row[0].text().unwrap_or_default(), holder);
        }
    }
    Ok(held)
}

/// Microseconds from now to `until` (a second at least), for a lease measured on the
/// database's clock.
pub fn lease_us(until: DateTime<Utc>) -> i64 {
    (until - Utc::now())
        .num_microseconds()
        .unwrap_or(i64::MAX)
        .max(1_000_000)
}

/// A server's connection of a tick's heartbeat: the dialect's part of `ServerHeartbeat`.
pub trait Beating: Send {
    /// Opens the connection again if the server dropped it (a restart, a failover): the
    /// claims outlive it in their table.
    fn reconnect_if_lost(&mut self) -> Result<(), StoreError>;

    /// Runs `work` in one transaction, committed if it succeeds.
    fn transaction(
        &mut self,
        context: &str,
        work: &mut dyn FnMut(&mut dyn Sql) -> Result<(), StoreError>,
    ) -> Result<(), StoreError>;
}

/// The claims one statement of a beat renews, at most: a list of ids per statement.
const RENEWED_AT_ONCE: usize = 1000;

/// A tick's heartbeat on a server, from a connection of its own: renews the tick's
/// claims and its run-log row while the tick's connection waits on a handler.
pub struct ServerHeartbeat<C> {
    /// The server connection the renewals go through, of its own.
    pub connection: C,
    /// The prefix of the tool's tables (their schema or database, with its dot).
    pub prefix: String,
    /// The tick whose claims it renews.
    pub owner: String,
    /// The tick's run-log row, whose heartbeat it writes.
    pub run_id: i64,
    /// The last beat stepped over claims another transaction held locked (false to
    /// begin with): the next waits for them.
    pub skipped: bool,
}

impl<C: Beating> Heartbeat for ServerHeartbeat<C> {
    /// Renews the claims until `lease_until`, a lease measured on the database's clock
    /// (its length from now on this host's), in one transaction with the run-log row's
    /// heartbeat.
    fn beat(&mut self, lease_until: DateTime<Utc>) -> Result<(), StoreError> {
        self.connection.reconnect_if_lost()?;
        let context = "renewing claims";
        let (s, owner, run_id) = (&self.prefix, self.owner.as_str(), self.run_id);
        let skip = !self.skipped;
        let mut skipped = false;
        let beat = super::fault::renewing(context, || {
            // From now, each try: one after a deadlock renews no further than asked.
            let lease_us = lease_us(lease_until);
            self.connection.transaction(context, &mut |sql| {
                // The claims locked first, in their key's order, the order the tick's
                // marks lock theirs in on its other connection (`row_locks::mark`,
                // PostgreSQL's `write_marks`): neither then waits on the other in a
                // circle, a deadlock the server would break only after a while (a
                // second on PostgreSQL) while the lease runs. Exactly those are renewed:
                // a claim written since is the next beat's. Every other beat steps over
                // those another transaction holds locked: most often the tick's marks,
                // letting go of answered records, and waiting for their transaction
                // cost a beat its round trips (over a link of 200 ms the holds went
                // half a lease without renewal). The beat after one that stepped over
                // any waits for them: a claim another runner's take holds locked (that
                // runner cut off mid-transaction) is renewed, or this beat waits and the
                // tick sees its holds age, within two beats, well within the lease.
                let lock = if skip { "FOR UPDATE SKIP LOCKED" } else { "FOR UPDATE" };
                let held = sql
                    .query(
                        &format!(
                            "SELECT table_name, record_id FROM {s}backlog_claims WHERE owner = ?1 ORDER BY table_name, record_id {lock}"
                        ),
                        &[owner.into()],
                    )
                    .map_err(failed(context))?;
                skipped = skip && {
                    let all = sql
                        .query(
                            &format!("SELECT count(*) FROM {s}backlog_claims WHERE owner = ?1"),
                            &[owner.into()],
                        )
                        .map_err(failed(context))?;
                    all.first().and_then(|row| row[0].int()).unwrap_or(0) > held.len() as i64
                };
                let mut by_table: Vec<(String, Vec<String>)> = Vec::new();
                for row in &held {
                    let (Some(table), Some(id)) = (row[0].text(), row[1].text()) else {
                        continue;
                    };
                    match by_table.last_mut() {
                        Some((t, ids)) if *t == table => ids.push(id),
                        _ => by_table.push((table, vec![id])),
                    }
                }
                for (table, ids) in &by_table {
                    for chunk in ids.chunks(RENEWED_AT_ONCE) {
                        let mut params: Vec<Value> =
                            vec![lease_us.into(), owner.into(), table.as_str().into()];
                        params.extend(chunk.iter().map(|id| Value::from(id.as_str())));
                        sql.execute(
                            &format!(
                                "UPDATE {s}backlog_claims SET expires_at = {} WHERE owner = ?2 AND table_name = ?3 AND record_id IN ({})",
                                sql.later("?1"),
                                numbered(4, chunk.len())
                            ),
                            &params,
                        )
                        .map_err(failed(context))?;
                    }
                }
                sql.execute(
                    &format!(
                        "UPDATE {s}backlog_runs SET heartbeat_at = {} WHERE id = ?1",
                        sql.now()
                    ),
                    &[run_id.into()],
                )
                .map_err(failed(context))?;
                Ok(())
            })
        });
        // A beat that failed renewed nothing: what the one before owed, the next owes.
        if beat.is_ok() {
            self.skipped = skipped;
        }
        beat
    }
}

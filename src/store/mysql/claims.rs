//! Claims on MySQL: a record is a runner's while its row in `backlog_claims` is; marks
//! are written only where the claim is still the runner's, failures keep theirs until
//! their slot ends, and the heartbeat renews them from a connection of its own. Every
//! change to a record's claim is made holding the record's row lock (see `mod.rs`).

use std::collections::{BTreeMap, HashSet};

use mysql::Value as My;
use mysql::prelude::Queryable;

use super::connection::placeholders;
use super::connection::{Failed, transaction};
use super::heartbeat::MysqlBeat;
use super::*;
use crate::store::claims::{ServerHeartbeat, lease_us};
use crate::store::{KEPT_OWNER, group_marks};

/// The ids as the id column's values (ids a page read are of its type).
fn bind_ids<'a>(kind: IdKind, ids: impl IntoIterator<Item = &'a Scalar>) -> Vec<My> {
    ids.into_iter()
        .map(|id| match id {
            Scalar::Int(i) => My::Int(*i),
            other => kind.bind(&other.to_string()).unwrap_or(My::NULL),
        })
        .collect()
}

/// What a claim needs besides the ids, settled before its transaction (see `claim_in`).
pub(super) struct ClaimPlan {
    /// Locks the still-pending rows among the ids (`{ids}` for their placeholders).
    lock: String,
    statuses: Vec<My>,
    kind: IdKind,
    claims: String,
    name: String,
    owner: String,
    lease: i64,
    take_tried: bool,
    clock: DateTime<Utc>,
}

impl MysqlStore {
    /// The claim of records for `owner` until `lease_until`; a failure kept until its
    /// slot ends is free when `take_tried`, or once `clock` reaches that end.
    pub(super) fn claim_plan(
        &self,
        owner: &str,
        lease_until: DateTime<Utc>,
        take_tried: bool,
        clock: DateTime<Utc>,
    ) -> ClaimPlan {
        let shape = self.shape();
        let (pending, statuses) = self.status_in(&self.table.pending);
        ClaimPlan {
            lock: format!(
                "SELECT t.{id} FROM {table} WHERE t.{id} IN ({{ids}}) AND {pending} FOR UPDATE SKIP LOCKED",
                id = shape.quoted(shape.id),
                table = shape.by_id,
            ),
            statuses,
            kind: shape.id_kind,
            claims: self.own_table("backlog_claims"),
            name: self.table.name.clone(),
            owner: owner.to_string(),
            lease: lease_us(lease_until),
            take_tried,
            clock,
        }
    }

    /// Claims each record if it is still pending and no live claim holds it (see
    /// `claim_plan`); returns the ids (as text) now this owner's.
    pub(super) fn claim(
        &mut self,
        plan: &ClaimPlan,
        ids: &[&Scalar],
    ) -> Result<HashSet<String>, StoreError> {
        if ids.is_empty() {
            return Ok(HashSet::new());
        }
        transaction(&mut self.conn, "claiming records", |tx| {
            claim_in(tx, plan, ids)
        })
    }
}

impl Holds for MysqlStore {
    /// Takes a page for `owner`: reads it and claims the records `wanted` in one
    /// transaction. Where the page is one query (through the inserted-at index) and
    /// the tick wants every record, it locks its rows as it reads them, skipping those another runner's transaction
    /// holds (`FOR UPDATE SKIP LOCKED`): runners reading the band at the same moment
    /// get pages of their own instead of all reading one and all but one finding it
    /// claimed. (One status at a time, merged, the page is read, then its rows locked
    /// as they are claimed: a locking read cannot be one branch of a union everywhere.)
    fn take(
        &mut self,
        owner: &str,
        band: &BandQuery,
        after: Option<&Cursor>,
        limit: usize,
        lease_until: DateTime<Utc>,
        wanted: &dyn Fn(&Record) -> bool,
    ) -> Result<Page, StoreError> {
        let plan = self.claim_plan(owner, lease_until, band.take_tried, band.clock);
        let (mut sql, params) = self.page(band, after, limit);
        // Locked as read only for a tick that wants every record: a row locked and not
        // wanted would be skipped by a tick that wants it (another tier's, a
        // `--retry-failed` run) and missed for its slot.
        if band.wants_all && !self.pages_by_status() {
            sql.push_str(" FOR UPDATE SKIP LOCKED");
        }
        let shape = self
            .shape
            .as_ref()
            .expect("inspect() runs before any query");
        let format = self.format.expect("inspect() runs before any query");
        let (read, ours) = connection::transaction(&mut self.conn, "claiming records", |tx| {
            let rows: Vec<mysql::Row> = tx.exec(&sql, params.clone())?;
            let read = super::pages::records_of(shape, format, rows);
            let ids: Vec<&Scalar> = read.iter().filter(|r| wanted(r)).map(|r| &r.id).collect();
            let ours = super::claims::claim_in(tx, &plan, &ids)?;
            Ok((read, ours))
        })?;
        Ok(Page::sorted(
            read,
            |_, r| ours.contains(&r.id.to_string()),
            wanted,
        ))
    }

    fn mark(&mut self, owner: &str, marks: &[Mark]) -> Result<Vec<usize>, StoreError> {
        // The rows first, then the claims: a runner that claims a record locks its row
        // before it reads the claim, so once the rows are ours the claims read below
        // show any takeover, and none can happen until we commit. Then one UPDATE per
        // distinct status (and `[retry]` time), writing only the records this owner
        // still claims; the failures' claims kept until their slot ends; the rest
        // deleted; the attempts; in one transaction.
        let context = format!("writing statuses to {}", self.table.name);
        let shape = self.shape();
        let (table, by_id, id, st) = (
            shape.table.clone(),
            shape.by_id.clone(),
            shape.quoted(shape.id),
            shape.quoted(shape.status),
        );
        let claims = self.own_table("backlog_claims");
        let all: Vec<String> = marks.iter().map(|m| m.id.to_string()).collect();
        let kind = shape.id_kind;
        let all_bound = bind_ids(kind, marks.iter().map(|m| &m.id));
        let groups = group_marks(marks, self.since_format);
        let retry = self.table.retry.clone();
        let prefix = self.prefix.clone();
        let max_per_record = self.max_per_record;
        let name = self.table.name.clone();
        transaction(&mut self.conn, &context, |tx| {
            tx.exec_drop(
                format!(
                    "SELECT 1 FROM {by_id} WHERE t.{id} IN ({}) FOR UPDATE",
                    placeholders(all.len())
                ),
                all_bound.clone(),
            )?;
            let mut params: Vec<My> = vec![name.as_str().into(), owner.into()];
            params.extend(all.iter().map(|i| My::from(i.as_str())));
            let held: HashSet<String> = tx
                .exec::<My, _, _>(
                    format!(
                        "SELECT record_id FROM {claims} WHERE table_name = ? AND owner = ? AND record_id IN ({})",
                        placeholders(all.len())
                    ),
                    params,
                )?
                .iter()
                .filter_map(values::text)
                .collect();
            for ((status, since), ids) in &groups {
                let ids: Vec<&Scalar> = ids
                    .iter()
                    .copied()
                    .filter(|i| held.contains(&i.to_string()))
                    .collect();
                if ids.is_empty() {
                    continue;
                }
                let mut params: Vec<My> = vec![My::from(*status)];
                let set = match (&retry, since) {
                    (Some(r), Some(since)) => {
                        params.push(values::bound(since));
                        format!(
                            "{st} = ?, {since_c} = ?, {count} = COALESCE({count}, 0) + 1",
                            count = crate::store::quote(&r.count),
                            since_c = crate::store::quote(&r.since)
                        )
                    }
                    _ => format!("{st} = ?"),
                };
                params.extend(bind_ids(kind, ids.iter().copied()));
                tx.exec_drop(
                    format!(
                        "UPDATE {table} SET {set} WHERE {id} IN ({})",
                        placeholders(ids.len())
                    ),
                    params,
                )?;
            }
            // Failures keep their claim, under another owner, until the end of their
            // slot: grouped by that end and the wait till then.
            let mut kept: BTreeMap<(i64, i64), Vec<&str>> = BTreeMap::new();
            for (m, i) in marks.iter().zip(&all) {
                if let Some(until) = m.keep_until
                    && held.contains(i)
                {
                    let wait = (until - m.at).num_microseconds().unwrap_or(i64::MAX).max(0);
                    kept.entry((until.timestamp_micros(), wait))
                        .or_default()
                        .push(i);
                }
            }
            for ((until, wait), ids) in kept {
                let until = DateTime::from_timestamp_micros(until).unwrap_or_default();
                let mut params: Vec<My> = vec![
                    KEPT_OWNER.into(),
                    values::datetime(until.naive_utc()),
                    My::Int(wait),
                    name.as_str().into(),
                    owner.into(),
                ];
                params.extend(ids.iter().map(|i| My::from(*i)));
                tx.exec_drop(
                    format!(
                        "UPDATE {claims} SET owner = ?, claimed_at = ?, expires_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND
                         WHERE table_name = ? AND owner = ? AND record_id IN ({})",
                        placeholders(ids.len())
                    ),
                    params,
                )?;
            }
            let mut params: Vec<My> = vec![name.as_str().into(), owner.into()];
            params.extend(all.iter().map(|i| My::from(i.as_str())));
            tx.exec_drop(
                format!(
                    "DELETE FROM {claims} WHERE table_name = ? AND owner = ? AND record_id IN ({})",
                    placeholders(all.len())
                ),
                params,
            )?;
            crate::store::write_with_marks(
                tx,
                &prefix,
                &name,
                marks,
                &|i| !held.contains(&all[i]),
                max_per_record,
            )?;
            Ok(all
                .iter()
                .enumerate()
                .filter(|(_, i)| !held.contains(*i))
                .map(|(n, _)| n)
                .collect())
        })
    }

    /// None where no index starts with the id: the marks' lock would scan the table,
    /// and, read beside it, pages would skip what it scanned (see `Shape::by_id`).
    fn mark_writer(&mut self) -> Result<Option<Box<dyn MarkWriter>>, StoreError> {
        if !self.shape().id_indexed {
            return Ok(None);
        }
        let mut writer = MysqlStore::open(
            &self.url,
            &self.own_database,
            self.lock_wait,
            self.table.clone(),
        )?;
        // What the tick's store read of the table, not read again: sampling a text
        // timestamp column without an index scans the table.
        writer.shape = self.shape.clone();
        writer.format = self.format;
        writer.since_format = self.since_format;
        writer.max_per_record = self.max_per_record;
        Ok(Some(Box::new(writer)))
    }

    fn release(&mut self, owner: &str) -> Result<(), StoreError> {
        retrying("releasing claims", || {
            crate::store::claims::release(self.own("backlog_claims")?, owner)
        })
    }

    fn heartbeat(&self, owner: &str, run_id: i64) -> Result<Box<dyn Heartbeat>, StoreError> {
        Ok(Box::new(ServerHeartbeat {
            connection: MysqlBeat {
                conn: connect(&self.url, self.lock_wait)?,
                url: self.url.clone(),
                lock_wait: self.lock_wait,
            },
            prefix: self.prefix.clone(),
            owner: owner.to_string(),
            run_id,
        }))
    }

    fn take_records(
        &mut self,
        owner: &str,
        records: Vec<Record>,
        lease_until: DateTime<Utc>,
    ) -> Result<Vec<Record>, StoreError> {
        // A failure kept until its slot ends is taken: a person asked for it.
        let ids: Vec<&Scalar> = records.iter().map(|r| &r.id).collect();
        let plan = self.claim_plan(owner, lease_until, true, Utc::now());
        let claimed = self.claim(&plan, &ids)?;
        Ok(records
            .into_iter()
            .filter(|r| claimed.contains(&r.id.to_string()))
            .collect())
    }

    fn holder(&mut self, record: &Record) -> Result<Option<Held>, StoreError> {
        crate::store::claims::holder(self.own("backlog_claims")?, &record.id.to_string())
    }

    fn held_counts(&mut self) -> Result<(u64, u64), StoreError> {
        if !self.has_table("backlog_claims")? {
            return Ok((0, 0));
        }
        let claims = self.own_table("backlog_claims");
        let context = "counting the records held";
        let held: Option<i64> = self
            .conn
            .exec_first(
                format!("SELECT count(*) FROM {claims} WHERE table_name = ? AND owner <> ? AND expires_at > UTC_TIMESTAMP(6)"),
                (&self.table.name, KEPT_OWNER),
            )
            .map_err(my(context))?;
        // Kept failures count while their record is still pending (one retried since
        // is not): looked up a thousand at a time.
        let kept: Vec<My> = self
            .conn
            .exec(
                format!("SELECT record_id FROM {claims} WHERE table_name = ? AND owner = ? AND expires_at > UTC_TIMESTAMP(6)"),
                (&self.table.name, KEPT_OWNER),
            )
            .map_err(my(context))?;
        let kind = self.shape().id_kind;
        let ids: Vec<My> = kept
            .iter()
            .filter_map(values::text)
            .filter_map(|i| kind.bind(&i))
            .collect();
        let mut still_pending = 0;
        for chunk in ids.chunks(1000) {
            let shape = self.shape();
            let (pending, statuses) = self.status_in(&self.table.pending);
            let mut params = chunk.to_vec();
            params.extend(statuses);
            let n: Option<i64> = self
                .conn
                .exec_first(
                    format!(
                        "SELECT count(*) FROM {} t WHERE t.{} IN ({}) AND {pending}",
                        shape.table,
                        shape.quoted(shape.id),
                        placeholders(chunk.len()),
                    ),
                    params,
                )
                .map_err(my(context))?;
            still_pending += n.unwrap_or(0);
        }
        Ok((held.unwrap_or(0).max(0) as u64, still_pending.max(0) as u64))
    }
}

/// `MysqlStore::claim` in the transaction `tx`: locks the rows still pending (those the
/// transaction locked already among them), then their claims, and writes those free.
pub(super) fn claim_in(
    tx: &mut mysql::Transaction<'_>,
    plan: &ClaimPlan,
    ids: &[&Scalar],
) -> Result<HashSet<String>, Failed> {
    if ids.is_empty() {
        return Ok(HashSet::new());
    }
    let &ClaimPlan {
        kind,
        ref claims,
        ref name,
        ref owner,
        lease,
        take_tried,
        clock,
        ..
    } = plan;
    let mut lock_params = bind_ids(kind, ids.iter().copied());
    lock_params.extend(plan.statuses.iter().cloned());
    let lock = plan.lock.replace("{ids}", &placeholders(ids.len()));
    let locked: Vec<My> = tx.exec(&lock, lock_params)?;
    let pending: Vec<String> = locked
        .into_iter()
        .map(|v| kind.read(v).to_string())
        .collect();
    if pending.is_empty() {
        return Ok(HashSet::new());
    }
    // The claims of those rows, locked against the heartbeats and releases of
    // other runners: free, lapsed, or a failure kept past its slot. Through the
    // primary key, so that no other claim is locked (see `Shape::by_id`).
    let mut params: Vec<My> = vec![values::datetime(clock.naive_utc()), name.as_str().into()];
    params.extend(pending.iter().map(|id| My::from(id.as_str())));
    let held: Vec<(My, My, i64, i64)> = tx.exec(
        format!(
            "SELECT record_id, owner, claimed_at <= ?, expires_at < UTC_TIMESTAMP(6)
                 FROM {claims} FORCE INDEX (PRIMARY)
                 WHERE table_name = ? AND record_id IN ({}) FOR UPDATE",
            placeholders(pending.len())
        ),
        params,
    )?;
    let taken: HashSet<String> = held
        .into_iter()
        .filter(|(_, holder, slot_over, expired)| {
            let kept = values::text(holder).as_deref() == Some(KEPT_OWNER);
            let free = *expired == 1 || kept && (take_tried || *slot_over == 1);
            !free
        })
        .filter_map(|(id, ..)| values::text(&id))
        .collect();
    let free: Vec<&String> = pending.iter().filter(|id| !taken.contains(*id)).collect();
    if free.is_empty() {
        return Ok(HashSet::new());
    }
    let rows =
        vec!["(?, ?, ?, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)"; free.len()];
    let mut params: Vec<My> = Vec::with_capacity(free.len() * 4);
    for id in &free {
        params.extend([
            My::from(name.as_str()),
            My::from(id.as_str()),
            My::from(owner),
            My::Int(lease),
        ]);
    }
    tx.exec_drop(
            format!(
                "INSERT INTO {claims} (table_name, record_id, owner, claimed_at, expires_at) VALUES {}
                 ON DUPLICATE KEY UPDATE owner = VALUES(owner), claimed_at = VALUES(claimed_at), expires_at = VALUES(expires_at)",
                rows.join(", ")
            ),
            params,
        )?;
    Ok(free.into_iter().cloned().collect())
}

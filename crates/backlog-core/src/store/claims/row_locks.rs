//! The claim protocol written once over the shared statements: pages' records claimed,
//! marks written only where the tick still claims the record, failures' claims kept
//! until their slot ends, and what the claims hold counted. MySQL runs it as it is;
//! PostgreSQL runs it for the claims of `backlog retry` and the counts, and has a
//! faster path of its own for a tick's pages and marks (arrays bound once, prepared
//! plans, `postgres::claims`).
//!
//! Every change to a record's claim is made holding the record's row lock: a claim
//! locks the rows still pending (skipping those another transaction holds), then
//! their claims, and writes those free; a mark locks the rows first, then reads the
//! claims, so once the rows are its own the claims it reads show any takeover, and
//! none can happen until it commits. A claim and a mark each run inside a transaction
//! of the dialect's (`fault::retrying` tries it again after a deadlock).

use std::collections::{BTreeMap, HashMap, HashSet};

use chrono::{DateTime, Utc};

use crate::record::Scalar;
use crate::store::sql::{Sql, Value, failed, numbered};
use crate::store::{KEPT_OWNER, Mark, StoreError, group_marks, write_with_marks};
use crate::timestamp::TimestampFormat;

/// The user's table as the protocol writes to it, in the dialect's spelling.
#[derive(Debug, Clone)]
pub struct Subject {
    /// The table, quoted (with its schema or database).
    pub table: String,
    /// The table aliased `t` for the statements that lock rows by id (MySQL: through
    /// the index that starts with the id, `FORCE INDEX`, see `mysql::Shape`).
    pub by_id: String,
    /// The id column, quoted.
    pub id: String,
    /// The id of `t` as the claims hold it: text, as the record's id is shown (a
    /// binary id in hex).
    pub id_text: String,
    /// An id as a value of the id column, `{}` its placeholder: MySQL's binary ids are
    /// `UNHEX({})`, its unsigned ones `CAST({} AS UNSIGNED)` (ids past the signed
    /// 64 bits are bound as text, which would compare as a float with the column);
    /// PostgreSQL casts the text to the column's type.
    pub id_param: String,
    /// Whether the id column holds integers: ids are then bound as integers, not as
    /// text (a comparison of text with an integer column is a float's, inexact past
    /// 2⁵³).
    pub integer_ids: bool,
    /// The status column, quoted.
    pub status: String,
    /// `t`'s status as text, whatever the column's type (an enum, a varchar).
    pub status_text: String,
    /// `t`'s status among the statuses whose placeholders are `{list}`, exactly (a
    /// column that compares text in any case still tells `new` from `NEW`).
    pub status_in: String,
    /// `[retry]`'s count and since columns, quoted, when the file has the section.
    pub retry: Option<(String, String)>,
    /// The tool's claims table, read by its key (MySQL: `FORCE INDEX (PRIMARY)`, so
    /// that locking some claims locks no other).
    pub claims_by_key: String,
    /// The claims table read by owner, the way a heartbeat's renewal locks a tick's
    /// claims (MySQL: `FORCE INDEX (backlog_claims_by_owner)`, whose entries InnoDB
    /// locks with the rows), so that a mark locks them in the same order.
    pub claims_by_owner: String,
    /// The lock a claim or a mark takes on the user's rows: `FOR UPDATE`, or on
    /// PostgreSQL `FOR NO KEY UPDATE OF t`, which lets the application insert rows
    /// that refer to them meanwhile.
    pub row_lock: &'static str,
}

impl Subject {
    /// The placeholders of `n` ids from `?first`, as values of the id column.
    fn ids(&self, first: usize, n: usize) -> String {
        (first..first + n)
            .map(|i| self.id_param.replace("{}", &format!("?{i}")))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// `t`'s status among `n` statuses bound from `?first`.
    fn status_among(&self, first: usize, n: usize) -> String {
        self.status_in.replace("{list}", &numbered(first, n))
    }

    /// An id, as a record or the claims hold it, bound for `id_param`.
    fn id_value(&self, id: &Scalar) -> Value {
        match id {
            Scalar::Int(i) => Value::Int(Some(*i)),
            other => self.id_of_text(&other.to_string()),
        }
    }

    /// An id the claims hold (text), bound for `id_param`: an integer as one.
    fn id_of_text(&self, id: &str) -> Value {
        match id.parse::<i64>() {
            Ok(i) if self.integer_ids => Value::Int(Some(i)),
            _ => Value::Text(Some(id.to_string())),
        }
    }
}

/// Where the claims are and whose they are.
pub struct Claims<'a> {
    /// The table and its columns.
    pub subject: &'a Subject,
    /// The prefix of the tool's tables (their schema or database, with its dot).
    pub prefix: &'a str,
    /// The table's name as the schedule file gives it: the claims' key.
    pub name: &'a str,
    /// The tick taking the records.
    pub owner: &'a str,
}

/// What a claim takes besides the ids.
pub struct Taking<'a> {
    /// The statuses a record must still have.
    pub pending: &'a [String],
    /// Until when, measured on the database's clock from now.
    pub lease_until: DateTime<Utc>,
    /// Whether a failure kept until its slot ends is taken anyway (`--retry-failed`,
    /// `backlog retry`), as it is once `clock`, the tick's, reaches that end.
    pub take_tried: bool,
    /// The tick's clock, for the claims kept past a failure.
    pub clock: DateTime<Utc>,
}

impl Claims<'_> {
    fn table(&self) -> String {
        format!("{}backlog_claims", self.prefix)
    }

    /// Claims each record of `ids` that is still pending and that no live claim holds;
    /// returns the ids (as text) now this owner's, each with its status as read under
    /// the row's lock: a record a tick marked while the caller waited has its new one.
    pub fn claim(
        &self,
        sql: &mut dyn Sql,
        taking: &Taking<'_>,
        ids: &[&Scalar],
    ) -> Result<HashMap<String, String>, StoreError> {
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        let context = "claiming records";
        let s = self.subject;
        // The rows still pending (those this transaction locked already among them).
        let mut params: Vec<Value> = ids.iter().map(|id| s.id_value(id)).collect();
        params.extend(taking.pending.iter().map(|p| Value::from(p.as_str())));
        let locked = sql
            .query(
                &format!(
                    "SELECT {}, {} FROM {} WHERE t.{} IN ({}) AND {} {} SKIP LOCKED",
                    s.id_text,
                    s.status_text,
                    s.by_id,
                    s.id,
                    s.ids(1, ids.len()),
                    s.status_among(ids.len() + 1, taking.pending.len()),
                    s.row_lock
                ),
                &params,
            )
            .map_err(failed(context))?;
        let status_of: HashMap<String, String> = (locked.iter())
            .filter_map(|row| Some((row[0].text()?, row[1].text()?)))
            .collect();
        let pending: Vec<String> = status_of.keys().cloned().collect();
        if pending.is_empty() {
            return Ok(HashMap::new());
        }
        // Their claims, locked against the heartbeats and releases of other runners:
        // free, lapsed, or a failure kept past its slot.
        let now = sql.now();
        let mut params: Vec<Value> = vec![sql.time_value(taking.clock), self.name.into()];
        params.extend(pending.iter().map(|id| Value::from(id.as_str())));
        let held = sql
            .query(
                &format!(
                    "SELECT record_id, owner, CASE WHEN claimed_at <= {} THEN 1 ELSE 0 END,
                            CASE WHEN expires_at < {now} THEN 1 ELSE 0 END
                     FROM {} WHERE table_name = ?2 AND record_id IN ({}) FOR UPDATE",
                    sql.time("?1"),
                    s.claims_by_key,
                    numbered(3, pending.len())
                ),
                &params,
            )
            .map_err(failed(context))?;
        let taken: HashSet<String> = held
            .iter()
            .filter(|row| {
                let kept = row[1].text().as_deref() == Some(KEPT_OWNER);
                let (slot_over, expired) = (row[2].int() == Some(1), row[3].int() == Some(1));
                !(expired || kept && (taking.take_tried || slot_over))
            })
            .filter_map(|row| row[0].text())
            .collect();
        let free: Vec<&String> = pending.iter().filter(|id| !taken.contains(*id)).collect();
        if free.is_empty() {
            return Ok(HashMap::new());
        }
        // ?1 the table's name, ?2 the owner, ?3 the lease in microseconds, ids from ?4.
        let rows: Vec<String> = (0..free.len())
            .map(|i| format!("(?1, ?{}, ?2, {now}, {})", i + 4, sql.later("?3")))
            .collect();
        let lease_us = super::lease_us(taking.lease_until);
        let mut params: Vec<Value> = vec![self.name.into(), self.owner.into(), lease_us.into()];
        params.extend(free.iter().map(|id| Value::from(id.as_str())));
        sql.execute(
            &format!(
                "INSERT INTO {} (table_name, record_id, owner, claimed_at, expires_at) VALUES {} {}",
                self.table(),
                rows.join(", "),
                sql.upsert(
                    &["table_name", "record_id"],
                    &["owner", "claimed_at", "expires_at"]
                )
            ),
            &params,
        )
        .map_err(failed(context))?;
        Ok((free.into_iter())
            .filter_map(|id| Some((id.clone(), status_of.get(id)?.clone())))
            .collect())
    }

    /// Writes `marks` where this owner still claims the record, in one transaction
    /// (`sql`): one UPDATE per distinct status (and `[retry]` time, in
    /// `since_format`); the failures' claims kept until their slot ends, the rest let
    /// go; the attempts (`max_per_record` a record). Returns the places of the marks
    /// not written: another tick took their records. (PostgreSQL marks through its
    /// arrays, `postgres::claims`.)
    pub fn mark(
        &self,
        sql: &mut dyn Sql,
        marks: &[Mark],
        since_format: Option<TimestampFormat>,
        max_per_record: u32,
    ) -> Result<Vec<usize>, StoreError> {
        let context = &format!("writing statuses to {}", self.name);
        let s = self.subject;
        let all: Vec<String> = marks.iter().map(|m| m.id.to_string()).collect();
        let n = all.len();
        // The rows first, then the claims (see the module's comment). Read, not
        // dropped: MySQL reports a deadlock or a lock wait timeout met while locking
        // among the rows, and a result dropped unread would lose it.
        sql.query(
            &format!(
                "SELECT 1 FROM {} WHERE t.{} IN ({}) {}",
                s.by_id,
                s.id,
                s.ids(1, n),
                s.row_lock
            ),
            &marks.iter().map(|m| s.id_value(&m.id)).collect::<Vec<_>>(),
        )
        .map_err(failed(context))?;
        let mut params: Vec<Value> = vec![self.name.into(), self.owner.into()];
        params.extend(all.iter().map(|i| Value::from(i.as_str())));
        // The claims locked as the tick's heartbeat locks them, in the key's order:
        // its renewal and these marks never wait on each other in a circle.
        let held: HashSet<String> = sql
            .query(
                &format!(
                    "SELECT record_id FROM {} WHERE owner = ?2 AND table_name = ?1 AND record_id IN ({}) ORDER BY table_name, record_id FOR UPDATE",
                    s.claims_by_owner,
                    numbered(3, n)
                ),
                &params,
            )
            .map_err(failed(context))?
            .iter()
            .filter_map(|row| row[0].text())
            .collect();
        for ((status, since), ids) in &group_marks(marks, since_format) {
            let ids: Vec<&Scalar> = ids
                .iter()
                .copied()
                .filter(|i| held.contains(&i.to_string()))
                .collect();
            if ids.is_empty() {
                continue;
            }
            let mut params: Vec<Value> = vec![(*status).into()];
            let set = match (&s.retry, since) {
                (Some((count, since_column)), Some(since)) => {
                    params.push(Value::Scalar(since.clone()));
                    format!(
                        "{} = ?1, {since_column} = ?2, {count} = COALESCE({count}, 0) + 1",
                        s.status
                    )
                }
                _ => format!("{} = ?1", s.status),
            };
            let first = params.len() + 1;
            params.extend(ids.iter().map(|id| s.id_value(id)));
            sql.execute(
                &format!(
                    "UPDATE {} SET {set} WHERE {} IN ({})",
                    s.table,
                    s.id,
                    s.ids(first, ids.len())
                ),
                &params,
            )
            .map_err(failed(context))?;
        }
        self.keep_failures(sql, marks, &all, &held, context)?;
        let mut params: Vec<Value> = vec![self.name.into(), self.owner.into()];
        params.extend(all.iter().map(|i| Value::from(i.as_str())));
        sql.execute(
            &format!(
                "DELETE FROM {} WHERE table_name = ?1 AND owner = ?2 AND record_id IN ({})",
                self.table(),
                numbered(3, n)
            ),
            &params,
        )
        .map_err(failed(context))?;
        write_with_marks(
            sql,
            self.prefix,
            self.name,
            marks,
            &|i| !held.contains(&all[i]),
            max_per_record,
        )?;
        Ok((0..n).filter(|&i| !held.contains(&all[i])).collect())
    }

    /// Failures keep their claim, under another owner, until the end of their slot:
    /// grouped by that end and the wait till then.
    fn keep_failures(
        &self,
        sql: &mut dyn Sql,
        marks: &[Mark],
        all: &[String],
        held: &HashSet<String>,
        context: &str,
    ) -> Result<(), StoreError> {
        let mut kept: BTreeMap<(i64, i64), Vec<&str>> = BTreeMap::new();
        for (m, i) in marks.iter().zip(all) {
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
            let mut params: Vec<Value> = vec![
                KEPT_OWNER.into(),
                sql.time_value(until),
                wait.into(),
                self.name.into(),
                self.owner.into(),
            ];
            params.extend(ids.iter().map(|i| Value::from(*i)));
            sql.execute(
                &format!(
                    "UPDATE {} SET owner = ?1, claimed_at = {}, expires_at = {}
                     WHERE table_name = ?4 AND owner = ?5 AND record_id IN ({})",
                    self.table(),
                    sql.time("?2"),
                    sql.later("?3"),
                    numbered(6, ids.len())
                ),
                &params,
            )
            .map_err(failed(context))?;
        }
        Ok(())
    }
}

/// How many records live claims of ticks hold on the table, and how many failures
/// are kept from the ticks while their record is still pending (one retried since is
/// not): looked up a thousand at a time.
pub fn held_counts(
    sql: &mut dyn Sql,
    subject: &Subject,
    prefix: &str,
    name: &str,
    pending: &[String],
) -> Result<(u64, u64), StoreError> {
    let context = "counting the records held";
    let now = sql.now();
    let claims = format!("{prefix}backlog_claims");
    let held = sql
        .query(
            &format!("SELECT count(*) FROM {claims} WHERE table_name = ?1 AND owner <> ?2 AND expires_at > {now}"),
            &[name.into(), KEPT_OWNER.into()],
        )
        .map_err(failed(context))?
        .first()
        .and_then(|row| row[0].int())
        .unwrap_or(0);
    let kept: Vec<Value> = sql
        .query(
            &format!("SELECT record_id FROM {claims} WHERE table_name = ?1 AND owner = ?2 AND expires_at > {now}"),
            &[name.into(), KEPT_OWNER.into()],
        )
        .map_err(failed(context))?
        .iter()
        .filter_map(|row| row[0].text())
        .map(|id| subject.id_of_text(&id))
        .collect();
    let mut still_pending = 0;
    for chunk in kept.chunks(1000) {
        let mut params = chunk.to_vec();
        params.extend(pending.iter().map(|p| Value::from(p.as_str())));
        still_pending += sql
            .query(
                &format!(
                    "SELECT count(*) FROM {} t WHERE t.{} IN ({}) AND {}",
                    subject.table,
                    subject.id,
                    subject.ids(1, chunk.len()),
                    subject.status_among(chunk.len() + 1, pending.len())
                ),
                &params,
            )
            .map_err(failed(context))?
            .first()
            .and_then(|row| row[0].int())
            .unwrap_or(0);
    }
    Ok((held.max(0) as u64, still_pending.max(0) as u64))
}

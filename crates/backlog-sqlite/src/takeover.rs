//! A person's action beside running ticks on SQLite: what of a tick's span it may take.
//!
//! A tick's span (`backlog_holds`) covers every record it read, from `low` to `high`.
//! Two things let a person's `retry`, `snooze` or `give-up` act on records in it while
//! the tick runs, as on a server, where a tick claims each record and lets it go with
//! its mark:
//!
//! - The span's top comes down as the tick settles its records: `high` is, after each
//!   group of marks, the newest record the tick took and has not marked yet (`Handing`).
//!   A record it marked, or read and did not take (another's, not its share), is no
//!   longer its own. A failure stays kept from the ticks by `backlog_tried`.
//! - The span says how far the tick has handed its records out: `handed`. Records of
//!   the span below it are read and queued, not in a handler; a person may take them
//!   over, which writes a row of `backlog_takeovers` naming the tick, and the tick
//!   skips them when their turn comes. A record at or above `handed`, up to `high`, may
//!   be in a handler now: a person's action waits for the tick to mark it.
//!
//! Never twice at once: a person's takeover and a tick's move of `handed` past a record
//! are both write transactions, so one comes first. The tick reads the takeovers
//! addressed to it in the transaction that moves `handed` down, and hands out nothing
//! below `handed`; a person takes over only what lies below it. A span without
//! `handed` (a tick of an earlier release) is taken as all in hand.

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

use crate::Bind;
use crate::SqliteStore;
use crate::db;
use crate::scalar;
use backlog_core::record::Record;
use backlog_core::record::Scalar;
use backlog_core::store::Mark;
use backlog_core::store::Page;
use backlog_core::store::StoreError;
use backlog_core::store::tables::Table;
use chrono::DateTime;
use chrono::Utc;
use rusqlite::Connection;
use rusqlite::OptionalExtension;
use rusqlite::Transaction;
use rusqlite::TransactionBehavior;
use rusqlite::params;

/// Records a person's action took over from a tick's queue: a row per record and tick,
/// until the tick ends.
pub(super) const TAKEOVERS_TABLE: Table = Table {
    name: "backlog_takeovers",
    columns: "table_name {key} NOT NULL,
        owner {key} NOT NULL,
        record_id {any} NOT NULL,
        taken_by {key} NOT NULL",
    key: Some("table_name, owner, record_id"),
    indexes: &[],
    mark: "taken_by",
};

/// A move of `handed` this soon after the last covers every record the tick has read
/// (its span's `low`), not only those handed out now, and the next page counts as
/// handed in the transaction that takes it: with a fast handler a tick writes nothing
/// more than its pages (one transaction more a tick, or a page that came more than
/// this after the last), and with a slow one, which hands out a record now and then, a
/// transaction a record, so that what waits in its queue stays free to take over. A
/// tick of 50,000 records and an in-process handler that does nothing made 59 moves
/// of `handed` in transactions of their own; folded into the pages, 2. With the
/// rest of what the takeovers ask (the records taken, in order; a comparison a
/// hand-out until `handed` covers what was read), such a tick of 86,400 records took
/// 3 % longer than before them (medians of 15, WAL, a release build without LTO).
const BULK_WITHIN: Duration = Duration::from_millis(100);

/// Moves a tick's `handed` down: ?1 table, ?2 owner, ?3 the new value, ?4 now. Only a
/// live span: one that ran out has lapsed.
const MOVE_HANDED: &str = "UPDATE backlog_holds SET handed = ?3
    WHERE table_name = ?1 AND owner = ?2 AND expires_at > ?4";

/// Moves a tick's span down past a later page, as `holds::MOVE_HOLD` does, and counts
/// the page as handed out with it: ?1 table, ?2 owner, ?3 low, ?5 expiry, ?6 now.
pub(super) const MOVE_HOLD_HANDED: &str =
    "UPDATE backlog_holds SET low = ?3, handed = ?3, expires_at = ?5
    WHERE table_name = ?1 AND owner = ?2 AND expires_at > ?6 AND ?4 IS NOT NULL";

/// Sets a span to exactly ?3..?4 (`backlog retry`), like `HOLD` otherwise: all of it
/// in hand, as a person's action handles what it holds.
const SET_SPAN: &str = "INSERT INTO backlog_holds (table_name, owner, low, high, expires_at, handed) VALUES (?1, ?2, ?3, ?4, ?5, ?3)
    ON CONFLICT (table_name, owner) DO UPDATE SET low = excluded.low, high = excluded.high, expires_at = excluded.expires_at, handed = excluded.handed
    WHERE backlog_holds.expires_at > ?6";

/// The records people took over from tick ?2 of table ?1.
const TAKEN_FROM: &str =
    "SELECT record_id FROM backlog_takeovers WHERE table_name = ?1 AND owner = ?2";

/// Brings a tick's span's top down to ?3, or to `low` when none: ?1 table, ?2 owner.
const SETTLED_TO: &str = "UPDATE backlog_holds SET high = coalesce(?3, low)
    WHERE table_name = ?1 AND owner = ?2";

/// The live spans of others than ?2 that cover a record inserted at ?4 (table ?1, at
/// ?3): their owner, and whether it may be in a handler (at or above `handed`).
const COVERING: &str = "SELECT owner, handed IS NULL OR ?4 >= handed FROM backlog_holds
    WHERE table_name = ?1 AND owner <> ?2 AND expires_at > ?3 AND ?4 BETWEEN low AND high";

/// A takeover: ?1 table, ?2 the tick, ?3 the record, ?4 the person's action.
const TAKE_OVER: &str = "INSERT OR IGNORE INTO backlog_takeovers (table_name, owner, record_id, taken_by) VALUES (?1, ?2, ?3, ?4)";

/// Records settled out of order, at most, before a tick stops bringing its span's top
/// down (it keeps it where it is, as before): a record it took and never settles (one
/// left alone, its inserted-at value in another UTC offset) would otherwise keep every
/// later one here.
const EARLY_MOST: usize = 10_000;

/// What a tick of this store has taken and not settled, and how far it handed out.
#[derive(Debug, Default)]
pub(super) struct Handing {
    /// The tick's name in the holds.
    pub(super) owner: String,
    /// The inserted-at values of the records taken, in the order taken (newest first),
    /// from the newest not yet marked (nor taken over): the span's top.
    taken: VecDeque<Scalar>,
    /// Values settled while a newer record was still out (concurrency, a batch), how
    /// many of each: dropped from `taken` once they come to its front.
    early: HashMap<Scalar, u32>,
    /// Too many settled out of order (see `EARLY_MOST`): the top stays.
    stuck: bool,
    /// The span's `low`, as last written.
    low: Option<Scalar>,
    /// Its `handed`, as last written.
    handed: Option<Scalar>,
    /// `handed` is `low`: every record read counts as handed, and a hand-out has
    /// nothing to compare.
    all_handed: bool,
    /// When `handed` was last moved.
    moved: Option<Instant>,
    /// The ids of records people took over from this tick, read with the last move.
    taken_away: HashSet<Scalar>,
}

impl Handing {
    fn add(&mut self, at: Scalar) {
        if !self.stuck {
            self.taken.push_back(at);
        }
    }

    /// One record settled: in the order taken, a pop from the front (and of those
    /// settled early behind it).
    fn settle(&mut self, at: &Scalar) {
        if self.stuck {
            return;
        }
        if self.taken.front() != Some(at) {
            *self.early.entry(at.clone()).or_default() += 1;
            if self.early.len() > EARLY_MOST {
                self.stuck = true;
                self.taken = VecDeque::new();
                self.early = HashMap::new();
            }
            return;
        }
        self.taken.pop_front();
        while let Some(front) = self.taken.front() {
            match self.early.get_mut(front) {
                Some(n) => {
                    *n -= 1;
                    if *n == 0 {
                        self.early.remove(front);
                    }
                    self.taken.pop_front();
                }
                None => break,
            }
        }
    }
}

impl SqliteStore {
    /// Whether tick `owner` hands its records out fast: it moved `handed` within
    /// `BULK_WITHIN`. Its next page then counts as handed as it is taken
    /// (`MOVE_HOLD_HANDED`), in the page's own transaction.
    pub(super) fn hands_out_fast(&self, owner: &str) -> bool {
        self.handing
            .as_ref()
            .filter(|h| h.owner == owner)
            .and_then(|h| h.moved)
            .is_some_and(|at| at.elapsed() < BULK_WITHIN)
    }

    /// Notes a page a tick took: its records are now its own, and its span reaches
    /// down to `low`; the top of a first page counts as handed (`HOLD` writes it so),
    /// and the whole page where it was taken as handed (`taken_away`: the takeovers
    /// read with it).
    pub(super) fn took(
        &mut self,
        owner: &str,
        page: &Page,
        top: Option<Scalar>,
        low: Scalar,
        taken_away: Option<Vec<Scalar>>,
    ) {
        let handing = match &mut self.handing {
            Some(handing) if handing.owner == owner => handing,
            // A store runs one tick at a time: another owner's is over.
            slot => slot.insert(Handing {
                owner: owner.to_string(),
                ..Handing::default()
            }),
        };
        for record in &page.taken {
            handing.add(record.inserted_at());
        }
        if handing.handed.is_none() {
            handing.handed = top;
        }
        match taken_away {
            Some(taken_away) => {
                handing.handed = Some(low.clone());
                handing.all_handed = true;
                handing.moved = Some(Instant::now());
                handing.taken_away.extend(taken_away);
            }
            None => handing.all_handed = false,
        }
        handing.low = Some(low);
    }

    /// Settles the records of `marks` and brings the span's top down to what is left
    /// of tick `owner`'s (`handing`, taken out of the store meanwhile), in the marks'
    /// transaction `tx`. A person's action, which holds exactly what it acts on and
    /// has none, keeps its span.
    pub(super) fn settle_span(
        &self,
        handing: Option<&mut Handing>,
        tx: &Connection,
        owner: &str,
        marks: &[Mark],
    ) -> rusqlite::Result<()> {
        let Some(handing) = handing else {
            return Ok(());
        };
        for mark in marks {
            if let Some(at) = &mark.inserted_at {
                handing.settle(at);
            }
        }
        if !handing.stuck {
            tx.prepare_cached(SETTLED_TO)?.execute(params![
                self.table.name,
                owner,
                Bind::from(handing.taken.front())
            ])?;
        }
        Ok(())
    }

    /// `Holds::hand_over` on SQLite: moves `handed` past `records` where it is not
    /// yet, reading the takeovers in the same transaction, and returns the places of
    /// those a person took over. Nearly always nothing to write and nothing taken
    /// over: a comparison a record.
    pub(super) fn hand_over_span(
        &mut self,
        owner: &str,
        records: &[Record],
    ) -> Result<Vec<usize>, StoreError> {
        let Some(handing) = self.handing.as_mut().filter(|h| h.owner == owner) else {
            return Ok(Vec::new());
        };
        if handing.all_handed && handing.taken_away.is_empty() {
            return Ok(Vec::new());
        }
        let Some(lowest) = records.iter().map(Record::inserted_at).min() else {
            return Ok(Vec::new());
        };
        if handing.handed.as_ref().is_none_or(|h| lowest < *h) {
            move_handed(&self.conn, &self.table.name, handing, owner, lowest)?;
        }
        if handing.taken_away.is_empty() {
            return Ok(Vec::new());
        }
        let dropped: Vec<usize> = records
            .iter()
            .enumerate()
            .filter(|(_, r)| handing.taken_away.contains(&r.id))
            .map(|(i, _)| i)
            .collect();
        for &i in &dropped {
            handing.settle(&records[i].inserted_at());
        }
        Ok(dropped)
    }
}

/// Moves tick `owner`'s `handed` down to `lowest`, or, soon after the last move, to its
/// span's `low` (see `BULK_WITHIN`), and reads the takeovers addressed to it, in one
/// write transaction.
fn move_handed(
    conn: &Connection,
    table: &str,
    handing: &mut Handing,
    owner: &str,
    lowest: Scalar,
) -> Result<(), StoreError> {
    let to = match (&handing.low, handing.moved) {
        (Some(low), Some(at)) if at.elapsed() < BULK_WITHIN && *low < lowest => low.clone(),
        _ => lowest,
    };
    let context = "noting the records this tick hands out";
    let tx =
        Transaction::new_unchecked(conn, TransactionBehavior::Immediate).map_err(db(context))?;
    let now = Utc::now().timestamp_millis();
    let changed = tx
        .prepare_cached(MOVE_HANDED)
        .and_then(|mut s| s.execute(params![table, owner, Bind::from(&to), now]))
        .map_err(db(context))?;
    if changed == 0 {
        return Err(StoreError::HoldLapsed(
            "its span in backlog_holds ran out, or another tick dropped it as run out".into(),
        ));
    }
    let taken = taken_from(&tx, table, owner).map_err(db(context))?;
    tx.commit().map_err(db(context))?;
    handing.all_handed = handing.low.as_ref() == Some(&to);
    handing.handed = Some(to);
    handing.moved = Some(Instant::now());
    handing.taken_away.extend(taken);
    Ok(())
}

/// The ids of the records people took over from tick `owner`, read in `tx`.
pub(super) fn taken_from(
    tx: &Connection,
    table: &str,
    owner: &str,
) -> rusqlite::Result<Vec<Scalar>> {
    tx.prepare_cached(TAKEN_FROM)?
        .query_map(params![table, owner], |r| Ok(scalar(r.get_ref(0)?)))?
        .collect()
}

impl SqliteStore {
    /// `Holds::take_records` on SQLite: each record still pending, unless a tick may
    /// have it in a handler (`take_over`); one span from the lowest to the highest.
    pub(super) fn take_for_action(
        &mut self,
        owner: &str,
        records: Vec<Record>,
        lease_until: DateTime<Utc>,
    ) -> Result<Vec<Record>, StoreError> {
        let context = "holding the records to retry";
        let tx = Transaction::new_unchecked(&self.conn, TransactionBehavior::Immediate)
            .map_err(db(context))?;
        let now = Utc::now().timestamp_millis();
        let mut taken = Vec::new();
        for mut record in records {
            // Read again under the write lock: its status now.
            let status: Option<String> = tx
                .query_row(
                    &format!(
                        "SELECT {status} FROM {table} WHERE {id} = ?1",
                        status = self.sql().status,
                        table = self.sql().table,
                        id = self.sql().id
                    ),
                    [Bind::from(&record.id)],
                    |r| r.get(0),
                )
                .optional()
                .map_err(db(context))?;
            // Not while a tick may have it in a handler; from a tick's queue, taken
            // over (see `takeover`).
            let Some(status) = status.filter(|s| self.table.is_pending(s)) else {
                continue;
            };
            if self.take_over(&tx, owner, now, &record)? {
                // Its status now: a tick may have marked it while the caller waited.
                record.status = status.into();
                taken.push(record);
            }
        }
        // One span from the lowest to the highest, set afresh (a retry holds one record
        // at a time, and its span moves to each): marks are written while it is live.
        let low = taken.iter().map(Record::inserted_at).min();
        let high = taken.iter().map(Record::inserted_at).max();
        if let (Some(low), Some(high)) = (low, high) {
            tx.execute(
                SET_SPAN,
                params![
                    self.table.name,
                    owner,
                    Bind::from(low),
                    Bind::from(high),
                    lease_until.timestamp_millis(),
                    now
                ],
            )
            .map_err(db(context))?;
        }
        tx.commit().map_err(db(context))?;
        Ok(taken)
    }

    /// Whether `record` may be taken by `owner`, a person's action, in the write
    /// transaction `tx`: not while a tick may have it in a handler; from a tick's
    /// queue, taken over (written in `tx`).
    pub(super) fn take_over(
        &self,
        tx: &Connection,
        owner: &str,
        now: i64,
        record: &Record,
    ) -> Result<bool, StoreError> {
        let context = "holding the records to act on";
        let covering: Vec<(String, bool)> = tx
            .prepare_cached(COVERING)
            .and_then(|mut s| {
                s.query_map(
                    params![
                        self.table.name,
                        owner,
                        now,
                        Bind::from(record.inserted_at())
                    ],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )?
                .collect()
            })
            .map_err(db(context))?;
        if covering.iter().any(|(_, in_hand)| *in_hand) {
            return Ok(false);
        }
        let mut take = tx.prepare_cached(TAKE_OVER).map_err(db(context))?;
        for (tick, _) in &covering {
            take.execute(params![
                self.table.name,
                tick,
                Bind::from(&record.id),
                owner
            ])
            .map_err(db(context))?;
        }
        Ok(true)
    }

    /// Forgets what tick `owner` held, as it lets go of its span, and the takeovers
    /// addressed to it.
    pub(super) fn let_go(&mut self, owner: &str) -> Result<(), StoreError> {
        if self.handing.as_ref().is_some_and(|h| h.owner == owner) {
            self.handing = None;
        }
        Connection::execute(
            &self.conn,
            "DELETE FROM backlog_takeovers WHERE table_name = ?1 AND owner = ?2",
            params![self.table.name, owner],
        )
        .map_err(db("releasing this tick's span"))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn top(handing: &Handing) -> Option<i64> {
        handing.taken.front().map(|s| match s {
            Scalar::Int(i) => *i,
            _ => unreachable!(),
        })
    }

    #[test]
    fn the_top_is_the_newest_record_taken_and_not_settled() {
        let mut handing = Handing::default();
        for at in [50, 40, 40, 30, 20] {
            handing.add(Scalar::Int(at));
        }
        assert_eq!(top(&handing), Some(50));
        // Out of order (another lane finished first): the top stays at 50.
        handing.settle(&Scalar::Int(40));
        handing.settle(&Scalar::Int(30));
        assert_eq!(top(&handing), Some(50));
        // 50 settled: the early ones behind it go too, down to the other 40.
        handing.settle(&Scalar::Int(50));
        assert_eq!(top(&handing), Some(40));
        handing.settle(&Scalar::Int(40));
        assert_eq!(top(&handing), Some(20));
        handing.settle(&Scalar::Int(20));
        assert_eq!(top(&handing), None);
        assert!(handing.early.is_empty());
    }

    #[test]
    fn a_record_never_settled_stops_the_top_from_coming_down_not_memory_from_growing() {
        let mut handing = Handing::default();
        for at in (0..=EARLY_MOST as i64 + 1).rev() {
            handing.add(Scalar::Int(at));
        }
        // The newest is left alone; every other one is settled.
        for at in (0..=EARLY_MOST as i64).rev() {
            handing.settle(&Scalar::Int(at));
        }
        assert!(handing.stuck);
        assert!(handing.taken.is_empty() && handing.early.is_empty());
    }
}

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

use std::collections::{BTreeMap, HashSet};
use std::time::{Duration, Instant};

use super::*;
use crate::store::tables::Table;

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
/// (its span's `low`), not only those handed out now: with a fast handler a tick then
/// writes about two more transactions a page, and with a slow one, which hands out a
/// record now and then, a transaction a record, so that what waits in its queue stays
/// free to take over.
const BULK_WITHIN: Duration = Duration::from_millis(100);

/// Moves a tick's `handed` down: ?1 table, ?2 owner, ?3 the new value, ?4 now. Only a
/// live span: one that ran out has lapsed.
const MOVE_HANDED: &str = "UPDATE backlog_holds SET handed = ?3
    WHERE table_name = ?1 AND owner = ?2 AND expires_at > ?4";

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

/// What a tick of this store has taken and not settled, and how far it handed out.
#[derive(Debug, Default)]
pub(super) struct Handing {
    /// The inserted-at values of the records taken and not yet marked (nor taken
    /// over), each with how many: the span's top is the greatest.
    unsettled: BTreeMap<Scalar, u32>,
    /// The span's `low`, as last written.
    low: Option<Scalar>,
    /// Its `handed`, as last written.
    handed: Option<Scalar>,
    /// When `handed` was last moved.
    moved: Option<Instant>,
    /// The ids of records people took over from this tick, read with the last move.
    taken_away: HashSet<Scalar>,
}

impl Handing {
    fn add(&mut self, at: Scalar) {
        *self.unsettled.entry(at).or_default() += 1;
    }

    fn settle(&mut self, at: &Scalar) {
        if let Some(n) = self.unsettled.get_mut(at) {
            *n -= 1;
            if *n == 0 {
                self.unsettled.remove(at);
            }
        }
    }
}

impl SqliteStore {
    /// Notes a page a tick took: its records are now its own, and its span reaches
    /// down to `low`; the top of a first page counts as handed (`HOLD` writes it so).
    pub(super) fn took(&mut self, owner: &str, page: &Page, top: Option<Scalar>, low: Scalar) {
        let handing = self.handing.entry(owner.to_string()).or_default();
        for record in &page.taken {
            handing.add(record.inserted_at());
        }
        if handing.handed.is_none() {
            handing.handed = top;
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
        let top = handing.unsettled.keys().next_back();
        tx.prepare_cached(SETTLED_TO)?
            .execute(params![self.table.name, owner, top])?;
        Ok(())
    }

    /// `Holds::hand_over` on SQLite: moves `handed` past `records` where it is not
    /// yet, reading the takeovers in the same transaction, and returns the places of
    /// those a person took over.
    pub(super) fn hand_over_span(
        &mut self,
        owner: &str,
        records: &[Record],
    ) -> Result<Vec<usize>, StoreError> {
        let Some(lowest) = records.iter().map(Record::inserted_at).min() else {
            return Ok(Vec::new());
        };
        let mut handing = self.handing.remove(owner).unwrap_or_default();
        let moved = self.move_handed(&mut handing, owner, lowest);
        let dropped: Vec<usize> = records
            .iter()
            .enumerate()
            .filter(|(_, r)| handing.taken_away.contains(&r.id))
            .map(|(i, _)| i)
            .collect();
        for &i in &dropped {
            handing.settle(&records[i].inserted_at());
        }
        self.handing.insert(owner.to_string(), handing);
        moved.map(|()| dropped)
    }

    fn move_handed(
        &self,
        handing: &mut Handing,
        owner: &str,
        lowest: Scalar,
    ) -> Result<(), StoreError> {
        if handing.handed.as_ref().is_some_and(|h| *h <= lowest) {
            return Ok(());
        }
        let to = match (&handing.low, handing.moved) {
            (Some(low), Some(at)) if at.elapsed() < BULK_WITHIN && *low < lowest => low.clone(),
            _ => lowest,
        };
        let context = "noting the records this tick hands out";
        let tx = Transaction::new_unchecked(&self.conn, TransactionBehavior::Immediate)
            .map_err(db(context))?;
        let now = Utc::now().timestamp_millis();
        let changed = tx
            .prepare_cached(MOVE_HANDED)
            .and_then(|mut s| s.execute(params![self.table.name, owner, to, now]))
            .map_err(db(context))?;
        if changed == 0 {
            return Err(StoreError::HoldLapsed(
                "its span in backlog_holds ran out, or another tick dropped it as run out".into(),
            ));
        }
        let taken: Vec<Scalar> = tx
            .prepare_cached(TAKEN_FROM)
            .and_then(|mut s| {
                s.query_map(params![self.table.name, owner], |r| {
                    Ok(scalar(r.get_ref(0)?))
                })?
                .collect()
            })
            .map_err(db(context))?;
        tx.commit().map_err(db(context))?;
        handing.handed = Some(to);
        handing.moved = Some(Instant::now());
        handing.taken_away.extend(taken);
        Ok(())
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
                    params![self.table.name, owner, now, record.inserted_at()],
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
            take.execute(params![self.table.name, tick, record.id, owner])
                .map_err(db(context))?;
        }
        Ok(true)
    }

    /// Forgets what tick `owner` held, as it lets go of its span, and the takeovers
    /// addressed to it.
    pub(super) fn let_go(&mut self, owner: &str) -> Result<(), StoreError> {
        self.handing.remove(owner);
        self.conn
            .execute(
                "DELETE FROM backlog_takeovers WHERE table_name = ?1 AND owner = ?2",
                params![self.table.name, owner],
            )
            .map_err(db("releasing this tick's span"))?;
        Ok(())
    }
}

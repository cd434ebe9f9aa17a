//! Holding records on SQLite: a tick's span of inserted-at values, taken with each
//! page, renewed by the heartbeat, checked by every mark; failures kept until their
//! slot ends; what `retry`, `show` and the metrics ask of them.

use crate::Bind;
use crate::SCATTERED;
use crate::SqliteStore;
use crate::connect;
use crate::db;
use crate::dialect::LiteRef;
use crate::takeover;
use backlog_core::record::Record;
use backlog_core::store::BandQuery;
use backlog_core::store::Cursor;
use backlog_core::store::Heartbeat;
use backlog_core::store::Holds;
use backlog_core::store::Mark;
use backlog_core::store::Page;
use backlog_core::store::StoreError;
use backlog_core::store::sql::numbered;
use backlog_core::store::tables::Table;
use chrono::DateTime;
use chrono::SecondsFormat;
use chrono::Utc;
use rusqlite::Connection;
use rusqlite::OptionalExtension;
use rusqlite::ToSql;
use rusqlite::Transaction;
use rusqlite::TransactionBehavior;
use rusqlite::params;
use rusqlite::params_from_iter;

/// A tick's span of inserted-at values: a row per tick; `low` and `high` are values of
/// the user's column, kept untyped.
pub(super) const HOLDS_TABLE: Table = Table {
    name: "backlog_holds",
    columns: "table_name {key} NOT NULL,
        owner {key} NOT NULL,
        low {any} NOT NULL,
        high {any} NOT NULL,
        expires_at {bigint} NOT NULL,
        handed {any}",
    key: Some("table_name, owner"),
    indexes: &[],
    mark: "low",
};

/// Failures kept from every tick until their slot ends: a row per record.
pub(super) const TRIED_TABLE: Table = Table {
    name: "backlog_tried",
    columns: "table_name {key} NOT NULL,
        record_id {any} NOT NULL,
        until_ms {bigint} NOT NULL,
        expires_ms {bigint} NOT NULL",
    key: Some("table_name, record_id"),
    indexes: &[],
    mark: "until_ms",
};

/// Whether a tick other than ?2 holds a span of table ?1 at ?3 (unix milliseconds).
const OTHERS_HOLD: &str = "SELECT EXISTS (SELECT 1 FROM backlog_holds WHERE table_name = ?1 AND owner <> ?2 AND expires_at > ?3)";

/// Sets a tick's span: ?1 table, ?2 owner, ?3 low, ?4 high (kept once set), ?5 expiry,
/// ?6 now; its top counts as handed out (see `takeover`). A span that ran out is not
/// extended: it changes no row, and the tick's hold has lapsed (another tick may have
/// taken what it covered).
const HOLD: &str = "INSERT INTO backlog_holds (table_name, owner, low, high, expires_at, handed) VALUES (?1, ?2, ?3, ?4, ?5, ?4)
    ON CONFLICT (table_name, owner) DO UPDATE SET low = excluded.low, expires_at = excluded.expires_at
    WHERE backlog_holds.expires_at > ?6";

/// Moves a tick's span down past a later page: ?1 table, ?2 owner, ?3 low, ?5 expiry,
/// ?6 now (?4, the top, is the first page's). Only a live span moves: one that ran
/// out, or that another tick dropped as run out, is not made again.
const MOVE_HOLD: &str = "UPDATE backlog_holds SET low = ?3, expires_at = ?5
    WHERE table_name = ?1 AND owner = ?2 AND expires_at > ?6 AND ?4 IS NOT NULL";

/// Whether a record of table ?1 failed and is kept from a tick whose clock is ?2 at
/// the real time ?3 (unix milliseconds). A failure is kept until its next try by the
/// clock of the tick that failed it, and for no longer than that in real time, so a
/// tick run with a pinned clock (`--now`) keeps nothing from the real ticks for long.
const TRIED: &str = "SELECT EXISTS (SELECT 1 FROM backlog_tried WHERE table_name = ?1 AND until_ms > ?2 AND expires_ms > ?3)";

/// Keeps a record that failed from every tick: ?1 table, ?2 id, ?3 until (by the
/// tick's clock), ?4 the same wait in real time.
const KEEP_TRIED: &str = "INSERT OR REPLACE INTO backlog_tried (table_name, record_id, until_ms, expires_ms) VALUES (?1, ?2, ?3, ?4)";

/// Whether tick ?2 still holds its span of table ?1 at ?3 (unix milliseconds).
const HOLDS: &str = "SELECT EXISTS (SELECT 1 FROM backlog_holds WHERE table_name = ?1 AND owner = ?2 AND expires_at > ?3)";

/// Why a span no longer counts, for `StoreError::HoldLapsed`.
const LAPSED: &str = "its span in backlog_holds ran out, or another tick dropped it as run out";

impl Holds for SqliteStore {
    fn take(
        &mut self,
        owner: &str,
        band: &BandQuery,
        after: Option<&Cursor>,
        limit: usize,
        lease_until: DateTime<Utc>,
        wanted: &dyn Fn(&Record) -> bool,
    ) -> Result<Page, StoreError> {
        // The page is read inside the write transaction that extends this tick's span,
        // so no other tick can take or mark its records in between. Another tick's
        // span is looked for only when one exists (rarely): the plain query costs
        // nothing beyond the band's own.
        let context = "taking a page of records";
        let tx = Transaction::new_unchecked(&self.conn, TransactionBehavior::Immediate)
            .map_err(db(context))?;
        // Read once the write lock is ours: a span that ran out while this tick waited
        // for the lock must be seen as run out.
        let now = Utc::now().timestamp_millis();
        let others: bool = tx
            .prepare_cached(OTHERS_HOLD)
            .and_then(|mut s| s.query_row(params![self.table.name, owner, now], |r| r.get(0)))
            .map_err(db(context))?;
        let tried: bool = !band.take_tried
            && tx
                .prepare_cached(TRIED)
                .and_then(|mut s| {
                    s.query_row(
                        params![self.table.name, band.clock.timestamp_millis(), now],
                        |r| r.get(0),
                    )
                })
                .map_err(db(context))?;
        let read = self.page(band, after, limit, owner, now, others, tried)?;
        // The span's top is set by the first page and kept (see HOLD), then brought
        // down as the tick settles its records (see `takeover`).
        let span = read
            .records
            .first()
            .zip(read.records.last())
            .map(|(first, last)| (first.inserted_at(), last.inserted_at()));
        // A tick that hands its records out fast counts a later page as handed with it
        // (see `takeover::BULK_WITHIN`): no write of its own before the hand-out.
        let fold = after.is_some() && self.hands_out_fast(owner);
        let mut taken_away = None;
        if let (Some(first), Some(last)) = (read.records.first(), read.records.last()) {
            let sql = match (after, fold) {
                (None, _) => HOLD,
                (Some(_), false) => MOVE_HOLD,
                (Some(_), true) => takeover::MOVE_HOLD_HANDED,
            };
            let changed = tx
                .prepare_cached(sql)
                .and_then(|mut s| {
                    s.execute(params![
                        self.table.name,
                        owner,
                        Bind::from(last.inserted_at()),
                        Bind::from(first.inserted_at()),
                        lease_until.timestamp_millis(),
                        now
                    ])
                })
                .map_err(db(context))?;
            if changed == 0 {
                return Err(StoreError::HoldLapsed(LAPSED.into()));
            }
            if fold {
                taken_away =
                    Some(takeover::taken_from(&tx, &self.table.name, owner).map_err(db(context))?);
            }
        }
        tx.commit().map_err(db(context))?;
        let held = read.held;
        let page = Page::sorted(
            read.records,
            |i, _| !held.get(i).copied().unwrap_or(false),
            wanted,
        );
        if let Some((top, low)) = span {
            self.took(
                owner,
                &page,
                after.is_none().then_some(top),
                low,
                taken_away,
            );
        }
        Ok(page)
    }

    fn mark(&mut self, owner: &str, marks: &[Mark]) -> Result<Vec<usize>, StoreError> {
        // Only while the tick's span is live: a span is never extended once it ran
        // out, so a live one never lapsed, and no other tick took its records.
        // One UPDATE per record, in one transaction. An UPDATE of one row needs no
        // statement journal; one UPDATE of a group's rows (`IN (…)`) did, spilling it
        // to a temporary file. The records stay in the tick's span until it ends. A
        // binding stays until it is replaced, so the status (and the `[retry]` time)
        // is bound only when it differs from the mark before: nearly every mark of a
        // tick shares one.
        let mut handing = self.handing.take();
        let mut write = |tx: &Transaction| -> rusqlite::Result<bool> {
            let now = Utc::now().timestamp_millis();
            let holds: bool = tx
                .prepare_cached(HOLDS)?
                .query_row(params![self.table.name, owner, now], |r| r.get(0))?;
            backlog_core::store::write_with_marks(
                &mut LiteRef(tx),
                "",
                &self.table.name,
                marks,
                &|_| !holds,
                self.max_per_record,
            )
            .map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))?;
            if !holds {
                return Ok(false);
            }
            let mut set = tx.prepare_cached(&self.sql().set_status)?;
            let mut alone = tx.prepare_cached(&self.sql().set_status_alone)?;
            let mut status: Option<&str> = None;
            let mut since: Option<DateTime<Utc>> = None;
            for m in by_id(marks) {
                if !m.tried && self.since_format.is_some() {
                    alone.execute(params![&*m.status, Bind::from(&m.id)])?;
                    continue;
                }
                if status != Some(&*m.status) {
                    set.raw_bind_parameter(1, &*m.status)?;
                    status = Some(&m.status);
                }
                set.raw_bind_parameter(2, Bind::from(&m.id))?;
                if let Some(format) = self.since_format
                    && since != Some(m.at)
                {
                    set.raw_bind_parameter(3, Bind::from(format.encode(m.at)))?;
                    since = Some(m.at);
                }
                set.raw_execute()?;
            }
            let mut keep = tx.prepare_cached(KEEP_TRIED)?;
            for m in marks {
                if let Some(until) = m.keep_until {
                    let expires = now + (until - m.at).num_milliseconds();
                    keep.execute(params![
                        self.table.name,
                        Bind::from(&m.id),
                        until.timestamp_millis(),
                        expires
                    ])?;
                }
            }
            let ours = handing.as_mut().filter(|h| h.owner == owner);
            self.settle_span(ours, tx, owner, marks)?;
            Ok(true)
        };
        // Timed from the write lock to the end of the commit: not the wait for the
        // lock (other ticks' groups), but the commit, where a WAL database writes the
        // pages the group changed.
        let mut took = std::time::Duration::ZERO;
        let held = Transaction::new_unchecked(&self.conn, TransactionBehavior::Immediate)
            .and_then(|tx| {
                let started = std::time::Instant::now();
                let held = write(&tx)?;
                tx.commit()?;
                took = started.elapsed();
                Ok(held)
            })
            .map_err(db(format!("writing statuses to {}", self.table.name)));
        self.handing = handing;
        let held = held?;
        // Judged on a group large enough to tell, of marks alone (see `mark_group`):
        // attempts kept with the marks cost their own writes, and a group grown for
        // them would hold a second of a failing handler's outputs.
        if marks.len() >= 1_000
            && self.scattered != Some(true)
            && marks.iter().all(|m| m.attempt.is_none())
        {
            self.scattered = Some(took > SCATTERED * marks.len() as u32);
        }
        Ok(if held {
            Vec::new()
        } else {
            (0..marks.len()).collect()
        })
    }

    /// Each commit writes again every page its group touched, the B-trees' inner pages
    /// among them (and, in a rollback journal, each once more into the journal): with
    /// groups of 5,000 instead of 1,000 a tick with a fast handler went from 0.88–0.89
    /// to 0.93–0.97 of the floor (docs/benchmarks.md, run 6). Where the ids are scattered
    /// over the table, nearly every mark of a group is a page of its own, so a tick of
    /// 67,500 records in groups of 5,000 wrote about twice the pages of one
    /// transaction, 1.9 s against 1.1 s (docs/benchmarks.md, issue 15); where they follow
    /// the dates, 5,000 marks share a few pages and a larger group gains nothing but
    /// holds more marks in memory (72 bytes each: 100,000 of them were 7 MB of a tick's
    /// 17). So the first group is 1,000, enough to judge by; the next are 5,000, or,
    /// once a group cost more than `SCATTERED` a mark to write, up to 100,000, bounded
    /// first by `TickOptions::mark_interval` (a second of handling). The cost, where it
    /// grows:
    /// a group holds the write lock for as long as it writes, 0.4–0.5 s (WAL) or 0.9 s (rollback journal) for 65,500
    /// scattered marks on that table; other ticks wait for it within their busy
    /// timeout. (PostgreSQL keeps 1,000: with 5,000, one runner was half as fast.)
    fn mark_group(&self) -> usize {
        match self.scattered {
            None => 1_000,
            Some(false) => 5_000,
            Some(true) => 100_000,
        }
    }

    fn release(&mut self, owner: &str) -> Result<(), StoreError> {
        Connection::execute(
            &self.conn,
            "DELETE FROM backlog_holds WHERE table_name = ?1 AND owner = ?2",
            params![self.table.name, owner],
        )
        .map_err(db("releasing this tick's span"))?;
        self.let_go(owner)
    }

    fn hand_over(&mut self, owner: &str, records: &[Record]) -> Result<Vec<usize>, StoreError> {
        self.hand_over_span(owner, records)
    }

    fn heartbeat(&self, owner: &str, run_id: i64) -> Result<Box<dyn Heartbeat>, StoreError> {
        let conn = connect(&self.path, self.busy_timeout)?;
        Ok(Box::new(SqliteHeartbeat {
            conn,
            owner: owner.to_string(),
            run_id,
            held: false,
        }))
    }

    fn take_records(
        &mut self,
        owner: &str,
        records: Vec<Record>,
        lease_until: DateTime<Utc>,
    ) -> Result<Vec<Record>, StoreError> {
        self.take_for_action(owner, records, lease_until)
    }

    fn holder(&mut self, record: &Record) -> Result<Option<backlog_core::store::Held>, StoreError> {
        if !self.has_run_log()? {
            return Ok(None);
        }
        let context = "reading the tool's holds";
        let now = Utc::now().timestamp_millis();
        let at = |ms: i64| DateTime::from_timestamp_millis(ms).unwrap_or_default();
        // Cached: a dry run asks it of every record it lists.
        let tick: Option<(String, i64)> = self
            .conn
            .prepare_cached(
                "SELECT owner, expires_at FROM backlog_holds WHERE table_name = ?1 AND expires_at > ?2 AND ?3 BETWEEN low AND high ORDER BY expires_at DESC LIMIT 1",
            )
            .and_then(|mut q| {
                q.query_row(params![self.table.name, now, Bind::from(record.inserted_at())], |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })
                .optional()
            })
            .map_err(db(context))?;
        if let Some((owner, until)) = tick {
            return Ok(Some(backlog_core::store::Held {
                owner: Some(owner),
                until: at(until),
            }));
        }
        let kept: Option<i64> = self
            .conn
            .prepare_cached(
                "SELECT until_ms FROM backlog_tried WHERE table_name = ?1 AND record_id = ?2 AND expires_ms > ?3",
            )
            .and_then(|mut q| {
                q.query_row(params![self.table.name, Bind::from(&record.id), now], |r| r.get(0))
                    .optional()
            })
            .map_err(db(context))?;
        Ok(kept.map(|until| backlog_core::store::Held {
            owner: None,
            until: at(until),
        }))
    }

    fn held_counts(&mut self) -> Result<(u64, u64), StoreError> {
        if !self.has_run_log()? {
            return Ok((0, 0));
        }
        let context = "counting the records held";
        let now = Utc::now().timestamp_millis();
        let q = self.sql();
        // Both counts join the table and count what is still pending: ?1 table, ?2
        // now, ?3… the pending statuses.
        let pending = numbered(3, self.table.pending.len());
        let count = |from: String| -> Result<i64, StoreError> {
            let mut values: Vec<&dyn ToSql> = vec![&self.table.name, &now];
            values.extend(self.table.pending.iter().map(|p| p as &dyn ToSql));
            self.conn
                .query_row(
                    &format!(
                        "SELECT count(*) FROM {from} AND {t}.{st} IN ({})",
                        pending,
                        t = q.table,
                        st = q.status
                    ),
                    params_from_iter(values),
                    |r| r.get(0),
                )
                .map_err(db(context))
        };
        // An index range of the table per live span (a tick or two at a time); a span
        // covers the records its tick read, of which the pending ones are still its.
        let held = count(format!(
            "backlog_holds h JOIN {t} ON {t}.{ins} BETWEEN h.low AND h.high WHERE h.table_name = ?1 AND h.expires_at > ?2",
            t = q.table,
            ins = q.inserted_at
        ))?;
        // Kept failures whose record is still pending (one retried since is not).
        let kept = count(format!(
            "backlog_tried k JOIN {t} ON {t}.{id} = k.record_id WHERE k.table_name = ?1 AND k.expires_ms > ?2",
            t = q.table,
            id = q.id
        ))?;
        Ok((held as u64, kept as u64))
    }
}

pub(super) struct SqliteHeartbeat {
    pub(super) conn: Connection,
    pub(super) owner: String,
    pub(super) run_id: i64,
    /// The tick's span was seen: once it is gone, the hold lapsed.
    pub(super) held: bool,
}

impl Heartbeat for SqliteHeartbeat {
    fn beat(&mut self, lease_until: DateTime<Utc>) -> Result<(), StoreError> {
        let now = Utc::now().to_rfc3339_opts(SecondsFormat::Millis, true);
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(db("renewing claims"))?;
        // A span that ran out stays out (see HOLD); the tick learns its hold lapsed.
        let now_ms = Utc::now().timestamp_millis();
        let renewed = tx
            .execute(
                "UPDATE backlog_holds SET expires_at = ?1 WHERE owner = ?2 AND expires_at > ?3",
                params![lease_until.timestamp_millis(), self.owner, now_ms],
            )
            .map_err(db("renewing claims"))?;
        if renewed == 0 {
            let lapsed: bool = tx
                .query_row(
                    "SELECT EXISTS (SELECT 1 FROM backlog_holds WHERE owner = ?1)",
                    params![self.owner],
                    |r| r.get(0),
                )
                .map_err(db("renewing claims"))?;
            if lapsed || self.held {
                return Err(StoreError::HoldLapsed(LAPSED.into()));
            }
        } else {
            self.held = true;
        }
        tx.execute(
            "UPDATE backlog_runs SET heartbeat_at = ?1 WHERE id = ?2",
            params![now, self.run_id],
        )
        .map_err(db("renewing claims"))?;
        tx.commit().map_err(db("renewing claims"))
    }
}

/// A group's marks in the order of their ids, which is the order of the table's B-tree
/// where the id is the rowid (or the key of a table without rowid): each page of the
/// table is then changed once a group, in one run, and written once, where marks in
/// the order they were handled (the dates') jump over the table and, past the page
/// cache's 2 MB, write the same page again and again. Scattered ids, a group of 65,500
/// marks in WAL: 705–755 → 426–465 ms; in a rollback journal, where each spill of the
/// cache syncs the journal first, no difference: two runs of 5 rounds side by side
/// found the id order 7 % slower and 5 % faster (docs/benchmarks.md, issue 15).
fn by_id(marks: &[Mark]) -> impl Iterator<Item = &Mark> {
    let mut sorted: Vec<&Mark> = marks.iter().collect();
    sorted.sort_by(|a, b| a.id.cmp(&b.id));
    sorted.into_iter()
}

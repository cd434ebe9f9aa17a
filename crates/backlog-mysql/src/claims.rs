//! Claims on MySQL: the protocol every server shares (`store::claims::row_locks`), run
//! in MySQL's transactions; a page is read and claimed in one, locking the rows it
//! reads where it can (see `take`).

use super::connection::transaction;
use super::heartbeat::MysqlBeat;
use crate::MysqlStore;
use crate::Shape;
use crate::connection::connect;
use backlog_core::config::TableConfig;
use backlog_core::record::Record;
use backlog_core::record::Scalar;
use backlog_core::store::BandQuery;
use backlog_core::store::Cursor;
use backlog_core::store::Heartbeat;
use backlog_core::store::Held;
use backlog_core::store::Holds;
use backlog_core::store::Mark;
use backlog_core::store::MarkWriter;
use backlog_core::store::Page;
use backlog_core::store::Store;
use backlog_core::store::StoreError;
use backlog_core::store::claims::ServerHeartbeat;
use backlog_core::store::claims::row_locks::{self, Claims, Taking};
use backlog_core::store::fault::retrying;
use chrono::DateTime;
use chrono::Utc;
use mysql::prelude::Queryable;

/// The claims of `owner` on the table (fields of a `MysqlStore`, borrowed beside its
/// connection).
fn claims<'a>(
    shape: &'a Option<Shape>,
    prefix: &'a str,
    table: &'a TableConfig,
    owner: &'a str,
) -> Claims<'a> {
    Claims {
        subject: &shape
            .as_ref()
            .expect("inspect() runs before any query")
            .subject,
        prefix,
        name: &table.name,
        owner,
    }
}

impl Holds for MysqlStore {
    /// Takes a page for `owner`: reads it and claims the records `wanted` in one
    /// transaction. Where the page is one query (through the inserted-at index) and
    /// the tick wants every record, it locks its rows as it reads them, skipping those
    /// another runner's transaction holds (`FOR UPDATE SKIP LOCKED`): runners reading
    /// the band at the same moment get pages of their own instead of all reading one
    /// and all but one finding it claimed. (One status at a time, merged, the page is
    /// read, then its rows locked as they are claimed: a locking read cannot be one
    /// branch of a union everywhere.)
    fn take(
        &mut self,
        owner: &str,
        band: &BandQuery,
        after: Option<&Cursor>,
        limit: usize,
        lease_until: DateTime<Utc>,
        wanted: &dyn Fn(&Record) -> bool,
    ) -> Result<Page, StoreError> {
        let (mut sql, params) = self.page(band, after, limit);
        // Locked as read only for a tick that wants every record: a row locked and not
        // wanted would be skipped by a tick that wants it (another tier's, a
        // `--retry-failed` run) and missed for its slot.
        if band.wants_all && !self.pages_by_status() {
            sql.push_str(" FOR UPDATE SKIP LOCKED");
        }
        let taking = Taking {
            pending: &self.table.pending,
            lease_until,
            take_tried: band.take_tried,
            clock: band.clock,
        };
        let format = self.format();
        let shape = self
            .shape
            .as_ref()
            .expect("inspect() runs before any query");
        let claims = claims(&self.shape, &self.prefix, &self.table, owner);
        let (read, ours) = transaction(&mut self.conn, "claiming records", |tx| {
            let rows: Vec<mysql::Row> = tx.exec(&sql, params.clone())?;
            let read = super::pages::records_of(shape, format, rows);
            let ids: Vec<&Scalar> = read.iter().filter(|r| wanted(r)).map(|r| &r.id).collect();
            let ours = claims.claim(tx, &taking, &ids)?;
            Ok((read, ours))
        })?;
        Ok(Page::sorted(
            read,
            |_, r| ours.contains_key(&r.id.to_string()),
            wanted,
        ))
    }

    fn mark(&mut self, owner: &str, marks: &[Mark]) -> Result<Vec<usize>, StoreError> {
        let context = format!("writing statuses to {}", self.table.name);
        let claims = claims(&self.shape, &self.prefix, &self.table, owner);
        let (since, max) = (self.since_format, self.max_per_record);
        transaction(&mut self.conn, &context, |tx| {
            Ok(claims.mark(tx, marks, since, max)?)
        })
    }

    /// None where no index starts with the id: the marks' lock would scan the table,
    /// and, read beside it, pages would skip what it scanned (see `Shape::subject`).
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
        writer.own_ready = self.own_ready;
        writer.format = self.format;
        writer.since_format = self.since_format;
        writer.max_per_record = self.max_per_record;
        Ok(Some(Box::new(writer)))
    }

    fn release(&mut self, owner: &str) -> Result<(), StoreError> {
        retrying("releasing claims", || {
            backlog_core::store::claims::release(self.own("backlog_claims")?, owner)
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
            skipped: false,
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
        if ids.is_empty() {
            return Ok(records);
        }
        let taking = Taking {
            pending: &self.table.pending,
            lease_until,
            take_tried: true,
            clock: Utc::now(),
        };
        let claims = claims(&self.shape, &self.prefix, &self.table, owner);
        let claimed = transaction(&mut self.conn, "claiming records", |tx| {
            Ok(claims.claim(tx, &taking, &ids)?)
        })?;
        // Each with its status now: a tick may have marked it while the caller waited.
        Ok(records
            .into_iter()
            .filter_map(|mut r| {
                r.status = claimed.get(&r.id.to_string())?.as_str().into();
                Some(r)
            })
            .collect())
    }

    fn holder(&mut self, record: &Record) -> Result<Option<Held>, StoreError> {
        backlog_core::store::claims::holder(self.own("backlog_claims")?, &record.id.to_string())
    }

    fn holders(&mut self, records: &[&Record]) -> Result<Vec<Option<Held>>, StoreError> {
        backlog_core::store::claims::holders(self.own("backlog_claims")?, records)
    }

    fn held_counts(&mut self) -> Result<(u64, u64), StoreError> {
        if !self.has_table("backlog_claims")? {
            return Ok((0, 0));
        }
        let shape = self
            .shape
            .as_ref()
            .expect("inspect() runs before any query");
        row_locks::held_counts(
            &mut self.conn,
            &shape.subject,
            &self.prefix,
            &self.table.name,
            &self.table.pending,
        )
    }
}

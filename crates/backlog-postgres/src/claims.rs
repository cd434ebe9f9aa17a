//! Claims on PostgreSQL: a record is a runner's while its row in `backlog_claims` is;
//! marks are written only where the claim is still the runner's, failures keep theirs
//! until their slot ends, and the heartbeat renews them from a connection of its own.

use super::heartbeat::PgBeat;
use crate::Bound;
use crate::PostgresStore;
use crate::connection::connect;
use crate::connection::pg;
use crate::dialect::Pg;
use backlog_core::record::Record;
use backlog_core::record::Scalar;
use backlog_core::store::BandQuery;
use backlog_core::store::Cursor;
use backlog_core::store::Heartbeat;
use backlog_core::store::Held;
use backlog_core::store::Holds;
use backlog_core::store::KEPT_OWNER;
use backlog_core::store::Mark;
use backlog_core::store::MarkWriter;
use backlog_core::store::Page;
use backlog_core::store::Reads;
use backlog_core::store::Store;
use backlog_core::store::StoreError;
use backlog_core::store::claims::ServerHeartbeat;
use backlog_core::store::claims::row_locks::{self, Claims, Subject, Taking};
use backlog_core::store::fault::retrying;
use backlog_core::store::group_marks;
use backlog_core::store::quote;
use chrono::DateTime;
use chrono::Utc;
use postgres::types::ToSql;

/// Seconds from now to `until`, for a lease measured on the database's clock.
pub(super) fn lease_secs(until: DateTime<Utc>) -> f64 {
    (until - Utc::now()).as_seconds_f64().max(1.0)
}

/// Ids as the text the SQL casts to the id column's type.
pub(super) fn ids_text<'a>(ids: impl IntoIterator<Item = &'a Scalar>) -> Vec<String> {
    ids.into_iter().map(ToString::to_string).collect()
}

impl PostgresStore {
    /// The table as the shared claim protocol names it (`store::claims::row_locks`),
    /// for what is not a tick's pages and marks: the claims of `backlog retry`, the
    /// counts of what is held.
    fn subject(&self) -> Subject {
        let p = self.prepared();
        let (idq, idt, st) = (&p.id.quoted, &p.id.sql_type, &p.status.quoted);
        Subject {
            table: p.table.clone(),
            by_id: format!("{} t", p.table),
            id: idq.clone(),
            id_text: format!("CAST(t.{idq} AS TEXT)"),
            // Text cast to the column's type: the comparison stays a lookup.
            id_param: format!("CAST(CAST({{}} AS TEXT) AS {idt})"),
            integer_ids: p.int_id,
            status: st.clone(),
            status_in: format!("CAST(t.{st} AS TEXT) IN ({{list}})"),
            status_text: format!("CAST(t.{st} AS TEXT)"),
            retry: (self.table.retry.as_ref()).map(|r| (quote(&r.count), quote(&r.since))),
            claims_by_key: self.own_table("backlog_claims"),
            claims_by_owner: self.own_table("backlog_claims"),
            row_lock: "FOR NO KEY UPDATE OF t",
        }
    }

    /// Claims each record for `owner` until `lease_until` if it is still pending and no
    /// live claim holds it; returns the ids (as text) now this owner's. `locked`: the
    /// transaction holds the rows already, read pending (a page taken).
    pub(super) fn claim(
        &mut self,
        owner: &str,
        ids: &[Scalar],
        lease_until: DateTime<Utc>,
        band: &BandQuery,
        locked: bool,
    ) -> Result<std::collections::HashSet<String>, StoreError> {
        let own = self.own_statements();
        let claim = if locked { own.claim_locked } else { own.claim };
        let rows = self
            .client
            .query(
                &claim,
                &[
                    &ids_text(ids),
                    &self.table.pending,
                    &self.table.name,
                    &owner,
                    &lease_secs(lease_until),
                    &band.take_tried,
                    &KEPT_OWNER,
                    &band.clock,
                ],
            )
            .map_err(pg("claiming records"))?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }

    pub(super) fn write_marks(
        &mut self,
        owner: &str,
        marks: &[Mark],
    ) -> Result<Vec<usize>, StoreError> {
        // One statement per distinct status (usually two: success and error), each
        // letting go of its records' claims and writing the status where this owner
        // still claimed them (see `set_status_sql`), in one transaction.
        let context = format!("writing statuses to {}", self.table.name);
        let own = self.own_statements();
        let (set_status, lock_claims) = (own.set_status, own.lock_claims);
        let lock_rows = self.prepared().lock_rows.clone();
        let all = ids_text(marks.iter().map(|m| &m.id));
        let place: std::collections::HashMap<&str, usize> = all
            .iter()
            .enumerate()
            .map(|(i, id)| (id.as_str(), i))
            .collect();
        let groups = group_marks(marks, self.since_format);
        // The marks' inserted-at values, least and greatest (none where one is not
        // known): the rows are found in the partitions of that range only.
        let range = inserted_range(marks);
        let (mut lo, mut hi) = (range.map(|r| Bound(r.0)), range.map(|r| Bound(r.1)));
        let mut tx = self.client.transaction().map_err(pg(context.clone()))?;
        // Each statement planned with its own arrays and range (see `set_status_sql`);
        // for this transaction only, so a pooled connection keeps its setting. (Before
        // PostgreSQL 12 the statement keeps the plans the server chooses.)
        if self.custom_plans {
            tx.batch_execute("SET LOCAL plan_cache_mode = force_custom_plan")
                .map_err(pg(context.clone()))?;
        }
        // The rows first, then the claims: a runner that claims a record locks its row
        // before it writes the claim, so once the rows are ours the claims read below
        // (a new snapshot) show any takeover, and none can happen until we commit.
        let locked = tx
            .query(&lock_rows, &[&all, &lo, &hi])
            .map_err(pg(context.clone()))?
            .len();
        // A row not in the range (its inserted-at value changed since it was read, by
        // a trigger or the handler) or gone: the rows are found by id alone, in every
        // partition, so that no mark is left unwritten for the range's sake.
        if locked < all.len() && range.is_some() {
            (lo, hi) = (None, None);
            tx.query(&lock_rows, &[&all, &lo, &hi])
                .map_err(pg(context.clone()))?;
        }
        tx.query(&lock_claims, &[&self.table.name, &owner, &all])
            .map_err(pg(context.clone()))?;
        let mut written = std::collections::HashSet::with_capacity(marks.len());
        for ((status, since), ids) in &groups {
            let places: Vec<usize> = ids
                .iter()
                .map(|id| place[id.to_string().as_str()])
                .collect();
            let Split {
                ids,
                kept_ids,
                until,
                wait,
            } = Split::of(&places, marks, &all);
            let name = &self.table.name;
            let params: [&(dyn ToSql + Sync); 10] = [
                status,
                &ids,
                name,
                &owner,
                &kept_ids,
                &until,
                &wait,
                &KEPT_OWNER,
                &lo,
                &hi,
            ];
            let rows = match since {
                Some(since) => {
                    let since = Bound(since);
                    let mut with_since = params.to_vec();
                    with_since.push(&since);
                    tx.query(&set_status[0], &with_since)
                }
                None => tx.query(&set_status[1], &params),
            }
            .map_err(pg(context.clone()))?;
            written.extend(rows.iter().map(|r| r.get::<_, String>(0)));
        }
        let prefix = format!("{}.", self.schema);
        backlog_core::store::write_with_marks(
            &mut Pg(&mut tx),
            &prefix,
            &self.table.name,
            marks,
            &|i| !written.contains(&all[i]),
            self.max_per_record,
        )?;
        tx.commit().map_err(pg(context))?;
        Ok(all
            .iter()
            .enumerate()
            .filter(|(_, id)| !written.contains(*id))
            .map(|(i, _)| i)
            .collect())
    }
}

impl PostgresStore {
    /// Takes a page, once (`Holds::take` tries again after a deadlock).
    fn take_once(
        &mut self,
        owner: &str,
        band: &BandQuery,
        after: Option<&Cursor>,
        limit: usize,
        lease_until: DateTime<Utc>,
        wanted: &dyn Fn(&Record) -> bool,
    ) -> Result<Page, StoreError> {
        // Runners on several hosts share a band, so each record is claimed on its own,
        // in one transaction a page: the page locks its rows no other tick holds or is
        // taking (see `TakeSql::page`), then one statement claims them (see
        // `claim_sql`). Only for a tick that wants every record it reads, and a page that
        // is one index range: a row locked and not wanted would be skipped by a tick
        // that wants it, and the pages read one status at a time would lock a page of
        // each. Otherwise the page is read, and the rows of the records wanted locked as
        // they are claimed, as before.
        if !self.locks_pages(band) {
            let read = self.select(band, after, limit)?;
            return self.claim_page(read, owner, lease_until, band, false, wanted);
        }
        self.client
            .batch_execute("BEGIN")
            .map_err(pg("taking a page"))?;
        // A panic on the way (a library user's `wanted`, a row of an unexpected type)
        // must not leave the session inside the transaction, holding the page's rows.
        let taken = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.take_in_transaction(owner, band, after, limit, lease_until, wanted)
        }))
        .unwrap_or_else(|panic| {
            let _ = self.client.batch_execute("ROLLBACK");
            std::panic::resume_unwind(panic)
        });
        let end = if taken.is_ok() { "COMMIT" } else { "ROLLBACK" };
        match (taken, self.client.batch_execute(end)) {
            (Ok(page), Ok(())) => Ok(page),
            (Err(e), _) => Err(e),
            (Ok(_), Err(e)) => Err(pg("taking a page")(e)),
        }
    }

    /// Whether the pages of `band` are taken locked (see `take_page`).
    fn locks_pages(&self, band: &BandQuery) -> bool {
        band.wants_all && !self.pages_by_status
    }

    fn take_in_transaction(
        &mut self,
        owner: &str,
        band: &BandQuery,
        after: Option<&Cursor>,
        limit: usize,
        lease_until: DateTime<Utc>,
        wanted: &dyn Fn(&Record) -> bool,
    ) -> Result<Page, StoreError> {
        let own = self.own_statements();
        let name = self.table.name.clone();
        let more: [&(dyn ToSql + Sync); 4] = [&name, &band.take_tried, &band.clock, &KEPT_OWNER];
        let rows = self.page_rows(&own.take_first, &own.take_next, band, after, limit, &more)?;
        let read = self.records(&rows)?;
        self.claim_page(read, owner, lease_until, band, true, wanted)
    }

    /// Claims the records of a page `read` that the tick wants (`locked`: their rows
    /// are this transaction's already), and sorts the page by what became the tick's.
    fn claim_page(
        &mut self,
        read: Vec<Record>,
        owner: &str,
        lease_until: DateTime<Utc>,
        band: &BandQuery,
        locked: bool,
        wanted: &dyn Fn(&Record) -> bool,
    ) -> Result<Page, StoreError> {
        let ids: Vec<Scalar> = read
            .iter()
            .filter(|r| wanted(r))
            .map(|r| r.id.clone())
            .collect();
        let ours = if ids.is_empty() {
            std::collections::HashSet::new()
        } else {
            self.claim(owner, &ids, lease_until, band, locked)?
        };
        Ok(Page::sorted(
            read,
            |_, r| ours.contains(&r.id.to_string()),
            wanted,
        ))
    }
}

impl Holds for PostgresStore {
    fn take(
        &mut self,
        owner: &str,
        band: &BandQuery,
        after: Option<&Cursor>,
        limit: usize,
        lease_until: DateTime<Utc>,
        wanted: &dyn Fn(&Record) -> bool,
    ) -> Result<Page, StoreError> {
        retrying("taking a page", || {
            self.take_once(owner, band, after, limit, lease_until, wanted)
        })
    }

    fn mark(&mut self, owner: &str, marks: &[Mark]) -> Result<Vec<usize>, StoreError> {
        let context = format!("writing statuses to {}", self.table.name);
        retrying(&context, || self.write_marks(owner, marks))
    }

    fn mark_writer(&mut self) -> Result<Option<Box<dyn MarkWriter>>, StoreError> {
        let mut url = self.url.clone();
        if url.config.get_application_name() == Some("backlog") {
            url.config.application_name("backlog marks");
        }
        let mut writer = PostgresStore {
            client: Pg(connect(&url)?),
            url,
            schema: self.schema.clone(),
            table: self.table.clone(),
            format: None,
            since_format: None,
            prepared: None,
            max_per_record: self.max_per_record,
            pages_by_status: false,
            statuses_by_index: false,
            custom_plans: self.custom_plans,
            own_ready: self.own_ready,
        };
        writer.inspect_table_knowing(self.format.map(|f| (f, self.since_format)))?;
        writer.prepare_own()?;
        Ok(Some(Box::new(writer)))
    }

    fn release(&mut self, owner: &str) -> Result<(), StoreError> {
        retrying("releasing claims", || {
            backlog_core::store::claims::release(self.own("backlog_claims")?, owner)
        })
    }

    fn held_by_others(&mut self, owner: &str, band: &BandQuery) -> Result<Option<u64>, StoreError> {
        if !self.locks_pages(band) {
            return Ok(None);
        }
        let p = self.prepared();
        let sql = format!(
            "SELECT count(*) FROM {claims} c JOIN {table} t ON t.{idq} = c.record_id::{idt}
             WHERE c.table_name = $1 AND c.owner <> $2 AND NOT ({takeable})
               AND t.{ins} >= $6 AND t.{ins} {to} $7 AND t.{st} = ANY ($8::text[]::{stt}[])",
            claims = self.own_table("backlog_claims"),
            table = p.table,
            idq = p.id.quoted,
            idt = p.id.sql_type,
            ins = p.inserted_at,
            st = p.status.quoted,
            stt = p.status.sql_type,
            takeable = super::statements::takeable("now()", 3, 4, 5),
            to = if band.to_inclusive { "<=" } else { "<" },
        );
        let row = self
            .client
            .query_one(
                &sql,
                &[
                    &self.table.name,
                    &owner,
                    &band.take_tried,
                    &KEPT_OWNER,
                    &band.clock,
                    &Bound(&band.from),
                    &Bound(&band.to),
                    &self.table.pending,
                ],
            )
            .map_err(pg("counting the records other ticks hold"))?;
        Ok(Some(row.get::<_, i64>(0) as u64))
    }

    fn heartbeat(&self, owner: &str, run_id: i64) -> Result<Box<dyn Heartbeat>, StoreError> {
        // Named apart in pg_stat_activity, for whoever looks at the server.
        let mut url = self.url.clone();
        if url.config.get_application_name() == Some("backlog") {
            url.config.application_name("backlog heartbeat");
        }
        Ok(Box::new(ServerHeartbeat {
            connection: PgBeat {
                client: connect(&url)?,
                url,
            },
            prefix: format!("{}.", self.schema),
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
        let subject = self.subject();
        let prefix = format!("{}.", self.schema);
        let claims = Claims {
            subject: &subject,
            prefix: &prefix,
            name: &self.table.name,
            owner,
        };
        let taking = Taking {
            pending: &self.table.pending,
            lease_until,
            take_tried: true,
            clock: Utc::now(),
        };
        let context = "claiming records";
        let claimed = retrying(context, || {
            let mut tx = self.client.transaction().map_err(pg(context))?;
            let claimed = claims.claim(&mut Pg(&mut tx), &taking, &ids)?;
            tx.commit().map_err(pg(context))?;
            Ok(claimed)
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
        if !self.has_run_log()? {
            return Ok((0, 0));
        }
        let subject = self.subject();
        let prefix = format!("{}.", self.schema);
        row_locks::held_counts(
            &mut self.client,
            &subject,
            &prefix,
            &self.table.name,
            &self.table.pending,
        )
    }
}

/// The least and the greatest inserted-at value of `marks`; none where one is not
/// known.
fn inserted_range(marks: &[Mark]) -> Option<(&Scalar, &Scalar)> {
    marks
        .iter()
        .map(|m| m.inserted_at.as_ref())
        .collect::<Option<Vec<&Scalar>>>()
        .and_then(|values| Some((*values.iter().min()?, *values.iter().max()?)))
}

/// A group of marks as its statement binds them: failures keep their claim, under
/// another owner, until the end of their slot; the others let theirs go.
struct Split<'a> {
    /// The ids whose claims go.
    ids: Vec<&'a String>,
    /// The ids of the failures kept, until when by the tick's clock, and for how many
    /// seconds.
    kept_ids: Vec<&'a String>,
    until: Vec<DateTime<Utc>>,
    wait: Vec<f64>,
}

impl<'a> Split<'a> {
    /// The marks at `places` of `marks`, whose ids as text are `all`.
    fn of(places: &[usize], marks: &[Mark], all: &'a [String]) -> Self {
        let (kept, gone): (Vec<usize>, Vec<usize>) =
            places.iter().partition(|&&i| marks[i].keep_until.is_some());
        let kept: Vec<(usize, DateTime<Utc>)> = kept
            .into_iter()
            .filter_map(|i| marks[i].keep_until.map(|u| (i, u)))
            .collect();
        Split {
            ids: gone.iter().map(|&i| &all[i]).collect(),
            kept_ids: kept.iter().map(|(i, _)| &all[*i]).collect(),
            until: kept.iter().map(|(_, u)| *u).collect(),
            wait: kept
                .iter()
                .map(|(i, u)| (*u - marks[*i].at).num_milliseconds() as f64 / 1000.0)
                .collect(),
        }
    }
}

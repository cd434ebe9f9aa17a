//! A person's action under way: the records taken a chunk at a time, paced, each acted
//! on only while held; those a tick holds now (in a handler) waited for, up to
//! `TickOptions::hold_wait`, and named if the wait ends first.
//!
//! A tick lets go of a record with its mark, so a record in a handler is free again
//! within its handler's timeout and a group of marks. What a tick has read and not
//! handed out yet is taken at once on SQLite (the tick skips it, see
//! `store::sqlite::takeover`); on a server, where the tick claims it as it reads it,
//! after the tick's handler had it.

use std::time::{Duration, Instant};

use opentelemetry::trace::TraceContextExt;

use super::{Action, RetrySummary};
use crate::error::Error;
use crate::handler::{Context, Handled};
use crate::record::Record;
use crate::store::Store;
use crate::tick::counterparts::Counterparts;
use crate::tick::heartbeat::{HeartbeatThread, Stale};
use crate::tick::lanes::catch_panic;
use crate::tick::marks::{MarkPlan, Marks, log_unshown};
use crate::tick::options::{Event, TickOptions};
use crate::tick::spacing::{Spacer, Spacing, rate_name};
use crate::trace_context::TraceParent;

/// How often the records a tick has in its handlers are asked for again.
const POLL: Duration = Duration::from_millis(200);

/// How many ids of the records a tick still held a summary names.
const NAMED: usize = 20;

/// An action under way: its run-log row, its owner's name and heartbeat.
pub(super) struct Acting<'a> {
    pub(super) table: &'a crate::TableConfig,
    pub(super) opts: &'a TickOptions,
    pub(super) owner: &'a str,
    pub(super) run_id: i64,
    pub(super) heartbeat: &'a HeartbeatThread,
    /// Names the store in its errors.
    pub(super) store_err: &'a dyn Fn(crate::store::StoreError) -> Error,
}

/// What a pass over the records left: skipped ones counted, those a tick holds kept
/// to ask for again, and why it stopped early.
#[derive(Default)]
struct Left {
    skipped: u64,
    held: Vec<Record>,
    stopped: Option<String>,
}

impl Acting<'_> {
    /// Takes the records a chunk at a time, paced, and runs the action on each held;
    /// then asks again for those a tick held, until they are free or
    /// `hold_wait` has passed. Each record is held on its own just before its handler
    /// runs (on SQLite, the span moves to it), so a retry of records far apart in age
    /// blocks no tick's band between them.
    pub(super) fn on(
        &self,
        store: &mut dyn Store,
        records: Vec<Record>,
        mut action: Action<'_>,
        on_event: &mut dyn FnMut(Event<'_>),
    ) -> Result<RetrySummary, Error> {
        let (opts, table) = (self.opts, self.table);
        let store_err = self.store_err;
        let asked = records.len() as u64;
        // A retry's failure is not kept from the ticks: the schedule goes on as before.
        let keep = |_: &Record| None;
        // A person asked: what became of each is kept, successes too.
        let history = crate::config::HistoryConfig {
            record: crate::config::HistoryRecord::All,
            ..opts.history.clone()
        };
        let plan = MarkPlan {
            owner: self.owner,
            now: opts.now,
            run_id: self.run_id,
            window: Duration::ZERO,
            tier: None,
            history,
        };
        // A group is a chunk: written once its records are settled (a retry's, each
        // as it ends), not one by one.
        let mut marks = Marks::new(
            table,
            plan,
            Some(action.chunk),
            action.chunk,
            Duration::from_secs(1),
            &keep,
        );
        let mut left = Left::default();
        let mut outcome;
        let mut busy = Vec::new();
        let mut waited: Option<Instant> = None;
        let mut round = records;
        loop {
            let mut pass = Left::default();
            outcome = self.pass(round, &mut action, store, &mut marks, &mut pass, on_event);
            left.skipped += pass.skipped;
            left.stopped = pass.stopped;
            if outcome.is_err() || left.stopped.is_some() || pass.held.is_empty() {
                left.skipped += pass.held.len() as u64;
                break;
            }
            let since = *waited.get_or_insert_with(Instant::now);
            if since.elapsed() >= opts.hold_wait {
                left.skipped += pass.held.len() as u64;
                busy = pass.held.iter().map(|r| r.id.to_string()).collect();
                break;
            }
            if !self.pause(POLL.min(opts.hold_wait.saturating_sub(since.elapsed()))) {
                left.skipped += pass.held.len() as u64;
                left.stopped = Some("stopped by a signal".to_string());
                break;
            }
            round = pass.held;
        }
        let written = marks.finish(store).map_err(store_err);
        log_unshown(&marks.tally);
        let tally = marks.tally;
        if !busy.is_empty() {
            tracing::warn!(
                "{} still held by a tick after {} (the handler's timeout and 5 s): not taken; act on {} again once the tick has marked {}",
                named(&busy),
                crate::duration::compact(opts.hold_wait),
                if busy.len() == 1 { "it" } else { "them" },
                if busy.len() == 1 { "it" } else { "them" },
            );
        }
        let summary = RetrySummary {
            run_id: self.run_id,
            asked,
            selected: tally.selected,
            succeeded: tally.succeeded,
            failed: tally.failed,
            skipped: left.skipped,
            lost: tally.lost,
            statuses: tally
                .statuses
                .into_iter()
                .map(|(s, n)| (s.to_string(), n))
                .collect(),
            stopped: left.stopped,
            busy,
        };
        outcome.and(written).map(|()| summary)
    }

    /// One pass over `records`: each chunk paced, held and acted on; what could not
    /// be taken counted in `left`, apart from what a tick holds now.
    fn pass(
        &self,
        records: Vec<Record>,
        action: &mut Action<'_>,
        store: &mut dyn Store,
        marks: &mut Marks<'_>,
        left: &mut Left,
        on_event: &mut dyn FnMut(Event<'_>),
    ) -> Result<(), Error> {
        let (opts, table, store_err) = (self.opts, self.table, self.store_err);
        let rate = Spacing::of(opts.rate, opts.auto_rate.as_ref()).filter(|_| action.calls);
        let name = rate_name(&table.name, Duration::ZERO, opts.rate_group.as_deref());
        // With a `rate_key`, each record keeps to its counterpart's rate, in turn.
        let mut counterparts = Counterparts::new(rate.clone(), &name, opts.rate_key.as_deref());
        let mut one = Spacer::new(rate.filter(|_| counterparts.is_none()), Some(name));
        let mut records = records.into_iter().peekable();
        let signal = || Some("stopped by a signal".to_string());
        while records.peek().is_some() {
            if opts.stop.load(std::sync::atomic::Ordering::Relaxed) {
                left.stopped = signal();
                break;
            }
            if let Some(Stale::Lapsed(why) | Stale::Failing(why)) = self.heartbeat.stale() {
                left.stopped = Some(why);
                break;
            }
            // Paced before the hold is taken, so that a record is held only while it
            // is about to be handed over.
            let pace = match (counterparts.as_mut(), records.peek()) {
                (Some(counterparts), Some(next)) => counterparts.pace_for(next),
                _ => &mut one,
            };
            pace.delay(action.chunk, store);
            if !pace.wait(action.chunk, &opts.stop) {
                left.stopped = signal();
                break;
            }
            let lease_until = chrono::Utc::now()
                + chrono::Duration::from_std(opts.lease).unwrap_or(chrono::Duration::MAX);
            let chunk: Vec<Record> = records.by_ref().take(action.chunk).collect();
            let asked = chunk.clone();
            let taken = store
                .take_records(self.owner, chunk, lease_until)
                .map_err(store_err)?;
            self.sort_out(asked, &taken, store, left)?;
            marks.failures.read(&taken, store).map_err(store_err)?;
            // An adapted pace learns from the calls as a tick's does.
            let mut paced = |record: &Record, handled: &Handled, took, store: &mut dyn Store| {
                match counterparts.as_mut() {
                    Some(counterparts) => counterparts.pace_for(record),
                    None => &mut one,
                }
                .outcome(handled, took, Instant::now(), store);
            };
            self.handle(taken, action, store, marks, on_event, &mut paced)?;
            // The chunk's marks go before the next chunk is held: on SQLite this
            // action's span moves to that chunk, and a record whose mark waited would
            // be free to a tick meanwhile. (The marks' interval is a second: asked to
            // wait that long, they go now.)
            marks
                .write_before(Duration::from_secs(1), store)
                .map_err(store_err)?;
        }
        one.flush(store);
        if let Some(counterparts) = counterparts.as_mut() {
            counterparts.flush(store);
        }
        Ok(())
    }

    /// Of `asked`, those not `taken`: skipped when no longer pending, else held by a
    /// tick now (in its handler, or claimed on a server, or its row locked by a tick's
    /// write that moment), to ask for again.
    fn sort_out(
        &self,
        asked: Vec<Record>,
        taken: &[Record],
        store: &mut dyn Store,
        left: &mut Left,
    ) -> Result<(), Error> {
        if asked.len() == taken.len() {
            return Ok(());
        }
        for record in asked {
            if taken.iter().any(|t| t.id == record.id) {
                continue;
            }
            let now = store.find(&record.id.to_string()).map_err(self.store_err)?;
            if now.is_some_and(|r| self.table.is_pending(&r.status)) {
                left.held.push(record);
            } else {
                left.skipped += 1;
            }
        }
        Ok(())
    }

    /// Waits `wait` unless asked to stop; false when asked.
    fn pause(&self, wait: Duration) -> bool {
        let until = Instant::now() + wait;
        while Instant::now() < until {
            if self.opts.stop.load(std::sync::atomic::Ordering::Relaxed) {
                return false;
            }
            std::thread::sleep(
                until
                    .saturating_duration_since(Instant::now())
                    .min(POLL / 4),
            );
        }
        !self.opts.stop.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Runs the action on each record taken, settling each as it ends.
    fn handle(
        &self,
        taken: Vec<Record>,
        action: &mut Action<'_>,
        store: &mut dyn Store,
        marks: &mut Marks<'_>,
        on_event: &mut dyn FnMut(Event<'_>),
        paced: Paced<'_>,
    ) -> Result<(), Error> {
        // No span of its own: the handler gets the caller's trace, if any.
        let caller = opentelemetry::Context::current();
        let traceparent = TraceParent::of(caller.span().span_context());
        for record in taken {
            let ctx = Context {
                table: &self.table.name,
                window: Duration::ZERO,
                age: record.age(self.opts.now).and_then(|a| a.to_std().ok()),
                cancel: Some(self.heartbeat.lapsed_flag()),
                traceparent,
                tracestate: None,
            };
            let started = Instant::now();
            let handled = catch_panic(|| (action.handle)(&record, &ctx)).map_err(Error::handler)?;
            paced(&record, &handled, started.elapsed(), store);
            marks
                .settle(&record, handled, started.elapsed(), store, on_event)
                .map_err(self.store_err)?;
        }
        Ok(())
    }
}

/// What `handle` tells of each record's call: the pace its start kept to learns from it.
type Paced<'a> = &'a mut dyn FnMut(&Record, &Handled, Duration, &mut dyn Store);

/// `records 3, 7` (the first `NAMED` of them, then how many more).
pub(super) fn named(ids: &[String]) -> String {
    let shown: Vec<&str> = ids.iter().take(NAMED).map(String::as_str).collect();
    let more = ids.len() - shown.len();
    format!(
        "{} {}{}",
        if ids.len() == 1 { "record" } else { "records" },
        shown.join(", "),
        if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        }
    )
}

//! The tick's loop, as named steps: take a page when the queue runs short, check the
//! holds are fresh, keep to the rate, hand a batch to a free lane; then settle what
//! comes back. It ends when the band is read and every batch out has come back, or
//! earlier when asked to stop, when the breaker trips, or when the holds go stale;
//! the batches already out are always waited for and marked.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use chrono::Utc;

use super::breaker::Breaker;
use super::counterparts::{Counterparts, HELD_MOST};
use super::heartbeat::{HeartbeatThread, Stale};
use super::lanes::{Done, Lanes, catch_panic};
use super::marks::Marks;
use super::options::{Event, TickOptions};
use super::pace::{Pace, STOP_CHECK, rate_name};
use super::pager::{PageSize, Pager};
use super::reach::Fleet;
use crate::error::Error;
use crate::handler::Context;
use crate::record::Record;
use crate::store::{BandQuery, Store, StoreError};

/// What the loop works with, beyond the store, the lanes and the marks.
pub(super) struct Plan<'a> {
    pub(super) opts: &'a TickOptions,
    pub(super) query: &'a BandQuery,
    /// Where the tick begins in its band (`place::stagger`); none: its newest end.
    pub(super) start: Option<crate::record::Scalar>,
    pub(super) limit: u64,
    /// The tick's run-log row and its name in the claims.
    pub(super) run_id: i64,
    /// The tier's slot the tick belongs to (`Cadence::tick_number`), for a tick that
    /// steps over what the other runners of its tier have read (`reach`): a tier's
    /// tick whose backend counted the records they hold as it began
    /// (`held_by_others`), so that stepping over them leaves the summary true. None:
    /// it reads its band alone.
    pub(super) fleet: Option<u64>,
    pub(super) owner: &'a str,
    pub(super) ctx: Context<'a>,
    /// Whether the tick wants a record of its band (spread, `[retry]` delay).
    pub(super) takes: &'a dyn Fn(&Record) -> bool,
    pub(super) heartbeat: &'a HeartbeatThread,
    /// The inserted-at column's format, to leave alone what the band cannot place.
    pub(super) format: &'a crate::timestamp::TimestampFormat,
}

pub(super) fn hand_out<'c>(
    plan: &Plan<'c>,
    store: &mut dyn Store,
    lanes: &mut Lanes<'_, 'c>,
    marks: &mut Marks<'_>,
    on_event: &mut dyn FnMut(Event<'_>),
) -> Result<(), Error> {
    let opts = plan.opts;
    let store_err = Error::store(store.describe());
    let handler_err = |source| Error::Handler { file: None, source };
    let batch = lanes.batch_size();
    let mut pager = Pager::starting_at(plan.query, plan.start.clone());
    if let Some(slot) = plan.fleet {
        pager = pager.in_fleet(Fleet::new(
            (opts.window, Some(slot), &store.table().pending),
            plan.run_id,
            plan.owner,
            opts.lease,
        ));
    }
    // The rate and the breaker are the fleet's: every runner of the table and tier (the
    // rate: or of its group) shares them; with a `rate_key`, each counterpart has a
    // rate of its own.
    let table = store.table().name.clone();
    let rate = rate_name(&table, opts.window, opts.rate_group.as_deref());
    let mut counterparts = Counterparts::new(opts.rate, &rate, opts.rate_key.as_deref());
    let one_rate = opts.rate.filter(|_| counterparts.is_none());
    let mut pace = Pace::new(one_rate, Some(rate));
    // Pages sized to the rate where there is one rate; the counterparts' together have
    // no bound the tick knows.
    let mut size = PageSize::new(
        opts.page_size,
        lanes.capacity(),
        batch,
        one_rate.map(|r| r.per_second()),
    );
    // Whether every record queued waits for its counterpart's rate: read on.
    let mut waiting = false;
    let tier = rate_name(&table, opts.window, None);
    let mut breaker = Breaker::new(
        opts.stop_after_failures,
        Some((tier, opts.breaker_cooldown)),
    );
    let mut queue: VecDeque<Record> = VecDeque::new();
    let mut taken: u64 = 0;
    // Records handled inline since the last page, and the time they took in the
    // handler, observed a page at a time. Only the handler's time: measured from the
    // page on, it counted the marks written meanwhile, so a tick that took a few records
    // of a page (other runners held the rest) and then wrote a group saw a slow handler
    // and shrank its pages to a record or two, a read and a claim each.
    let mut inline_run: (usize, Duration) = (0, Duration::ZERO);
    // Why the tick hands out no more: the batches already out are still settled, then
    // the tick ends with this error.
    let mut halt: Option<Error> = None;
    let context = |r: &Record| Context {
        age: r.age(opts.now).and_then(|a| a.to_std().ok()),
        ..plan.ctx
    };
    loop {
        while lanes.free() > 0
            && halt.is_none()
            && breaker.tripped.is_none()
            && marks.tally.lapsed.is_none()
        {
            if opts.stop.load(Ordering::Relaxed) {
                marks.tally.stopped = true;
                break;
            }
            // Take: a page when the queue is short of a batch.
            let short = queue.len() < batch || (waiting && queue.len() < HELD_MOST);
            if short && !pager.done && taken < plan.limit {
                if inline_run.0 > 0 {
                    size.observe(inline_run.0, inline_run.1);
                }
                // Reading on past records that wait for their counterparts: whole pages.
                let want = match std::mem::take(&mut waiting) {
                    true => opts
                        .page_size
                        .min(HELD_MOST.saturating_sub(queue.len()).max(1)),
                    false => size.next(),
                }
                .min((plan.limit - taken) as usize);
                let lease_until = Utc::now() + opts.lease;
                match pager.take(store, plan.owner, want, lease_until, plan.takes) {
                    Err(StoreError::HoldLapsed(why)) => {
                        let why = format!("this tick's hold lapsed ({why}); it hands out no more");
                        plan.heartbeat.lapse(why.clone());
                        marks.tally.lapsed = Some(why);
                    }
                    Err(e) => halt = Some(store_err(e)),
                    Ok(None) => pager.done = true,
                    Ok(Some(page)) => {
                        if let Err(e) = marks.failures.read(&page.taken, store) {
                            halt = Some(store_err(e));
                        }
                        inline_run = (0, Duration::ZERO);
                        size.took(page.taken.len());
                        marks.tally.deferred += page.deferred;
                        marks.tally.skipped += page.skipped;
                        taken += page.taken.len() as u64;
                        // A record whose inserted-at value cannot be placed in a band
                        // is left alone, and said.
                        for record in page.taken {
                            if !marks.tally.left_alone(&record, plan.format) {
                                queue.push_back(record);
                            }
                        }
                    }
                }
                continue;
            }
            if queue.is_empty() {
                break;
            }
            // With counterparts, the records whose counterparts may start now; where
            // every record queued waits for its counterpart, read on while the band has
            // more, else wait for the first.
            let mut chosen = match counterparts.as_mut() {
                None => None,
                Some(counterparts) => match counterparts.take(&mut queue, batch, store) {
                    Ok(records) => Some(records),
                    Err(wait) => {
                        waiting = true;
                        if pager.done || taken >= plan.limit || queue.len() >= HELD_MOST {
                            marks.write_before(wait, store).map_err(&store_err)?;
                            std::thread::sleep(wait.min(STOP_CHECK));
                        }
                        continue;
                    }
                },
            };
            waiting = false;
            // The breaker, the pace, then the holds, right before handing out. What the
            // breaker holds back of the records chosen goes back to the queue's front
            // (their counterparts' starts are spent: under the rate, never over it).
            let n = breaker.allow(
                chosen.as_ref().map_or(queue.len(), Vec::len).min(batch),
                store,
            );
            if let Some(chosen) = chosen.as_mut() {
                for record in chosen.drain(n..).rev() {
                    queue.push_front(record);
                }
            }
            if n == 0 {
                break;
            }
            let chosen = match chosen {
                Some(chosen) => Some(chosen),
                None => {
                    let wait = pace.delay(n, store);
                    if !wait.is_zero() {
                        marks.write_before(wait, store).map_err(&store_err)?;
                    }
                    if !pace.wait(n, &opts.stop) {
                        marks.tally.stopped = true;
                        break;
                    }
                    None
                }
            };
            match plan.heartbeat.stale() {
                None => {}
                Some(Stale::Lapsed(why)) => {
                    marks.tally.lapsed = Some(why);
                    break;
                }
                Some(Stale::Failing(why)) => {
                    halt = Some(store_err(StoreError::HoldLapsed(why)));
                    break;
                }
            }
            // Hand out.
            if let Some(handler) = lanes.inline() {
                // One record at a time on this thread, settled at once: no vectors.
                let record = match chosen {
                    Some(mut chosen) => chosen.pop(),
                    None => queue.pop_front(),
                }
                .expect("a record is chosen");
                let started = Instant::now();
                match catch_panic(|| handler.handle(&record, &context(&record))) {
                    Ok(handled) => {
                        let took = started.elapsed();
                        inline_run.0 += 1;
                        inline_run.1 += took;
                        breaker.count(&handled, store);
                        marks
                            .settle(&record, handled, took, store, on_event)
                            .map_err(&store_err)?;
                    }
                    Err(e) => halt = Some(handler_err(e)),
                }
                continue;
            }
            let records: Vec<Record> = chosen.unwrap_or_else(|| queue.drain(..n).collect());
            let contexts = records.iter().map(context).collect();
            if let Err(e) = lanes.send(records, contexts) {
                halt = Some(handler_err(e));
            }
        }
        // Settle what comes back; nothing out means the tick is done.
        let Some(Done {
            records,
            results,
            latency,
        }) = lanes.receive()
        else {
            break;
        };
        match results {
            Ok(results) => {
                size.observe(records.len(), latency);
                for (record, handled) in records.iter().zip(results) {
                    breaker.count(&handled, store);
                    let took = handled.took.unwrap_or(latency);
                    marks
                        .settle(record, handled, took, store, on_event)
                        .map_err(&store_err)?;
                }
            }
            Err(e) => {
                halt.get_or_insert(handler_err(e));
            }
        }
    }
    // Said once, by whoever runs the tick: `backlog run` as its error, the daemon as a
    // warning.
    marks.tally.breaker = breaker.tripped;
    halt.map_or(Ok(()), Err)
}

//! The tick's loop, as named steps: take a page when the queue runs short, check the
//! holds are fresh, keep to the rate, hand a batch to a free lane; then settle what
//! comes back. It ends when the band is read and every batch out has come back, or
//! earlier when asked to stop, when the breaker trips, or when the holds go stale;
//! the batches already out are always waited for and marked.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use chrono::Utc;

use super::breaker::{Breaker, Breakers};
use super::counterparts::{Counterparts, HELD_MOST, KeyOf};
use super::heartbeat::{HeartbeatThread, Stale};
use super::lanes::{Done, Lanes, catch_panic};
use super::marks::Marks;
use super::options::{Event, TickOptions};
use super::pager::{PageSize, Pager};
use super::reach::Fleet;
use super::spacing::{STOP_CHECK, Spacer, Spacing, rate_name};
use super::trace::TickTrace;
use crate::error::Error;
use crate::handler::{Context, Handled};
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
    trace: &mut TickTrace,
) -> Result<(), Error> {
    let mut round = Round::new(plan, store, &mut *lanes, trace);
    let ended = round.run(store, lanes, marks, on_event);
    // An adapted pace's last calls reach the fleet's row.
    round.pace.flush(store);
    if let Some(counterparts) = round.counterparts.as_mut() {
        counterparts.flush(store);
    }
    // Whatever ended it: the tick withdraws this, should it end early.
    marks.tally.withdrawal = round.pager.withdrawal(round.page_failed);
    ended?;
    // Said once, by whoever runs the tick: `backlog run` as its error, the daemon as a
    // warning.
    marks.tally.breaker = round.breaker.tripped;
    marks.tally.held_back = round.breakers.map_or(0, |b| b.held_back);
    round.halt.map_or(Ok(()), Err)
}

/// What the loop goes on with after choosing.
enum Choice {
    /// Look again: a page may be due, or a counterpart's start has come.
    Again,
    /// Hand out no more for now: the breaker holds everything back, the pace was
    /// stopped, or the holds went stale.
    Stop,
    /// These records.
    Hand(Chosen),
}

/// The records chosen to hand out: those of their counterparts' turns, or the first
/// `n` of the queue.
enum Chosen {
    Records(Vec<Record>),
    Front(usize),
}

/// The loop's state from one step to the next.
struct Round<'p, 'c> {
    plan: &'p Plan<'c>,
    /// The store's name, for its errors.
    database: String,
    batch: usize,
    pager: Pager,
    /// With a `rate_key`: each counterpart's rate.
    counterparts: Option<Counterparts>,
    pace: Spacer,
    size: PageSize,
    /// Whether every record queued waits for its counterpart's rate: read on.
    waiting: bool,
    breaker: Breaker,
    /// With a counterpart per record (`rate_key`, or a URL's host from the record)
    /// and a limit: a breaker each, in place of the tier's one.
    breakers: Option<Breakers>,
    /// `handler.concurrency_per_key`: the most records of one counterpart in their
    /// handlers at once, the counterparts' counts, and whether every record queued
    /// waits for its counterpart's calls to come back.
    per_key: Option<(
        usize,
        KeyOf,
        std::collections::HashMap<Option<String>, usize>,
    )>,
    capped: bool,
    queue: VecDeque<Record>,
    taken: u64,
    /// Records handled inline since the last page, and the time they took in the
    /// handler, observed a page at a time. Only the handler's time: measured from the
    /// page on, it counted the marks written meanwhile, so a tick that took a few
    /// records of a page (other runners held the rest) and then wrote a group saw a
    /// slow handler and shrank its pages to a record or two, a read and a claim each.
    inline_run: (usize, Duration),
    /// Why the tick hands out no more: the batches already out are still settled, then
    /// the tick ends with this error.
    halt: Option<Error>,
    /// Whether a page could not be taken (see `Pager::withdrawal`).
    page_failed: bool,
    /// The tick's spans: a record's starts as it goes out, ends as it is settled.
    trace: &'p mut TickTrace,
}

impl<'p, 'c> Round<'p, 'c> {
    fn new(
        plan: &'p Plan<'c>,
        store: &mut dyn Store,
        lanes: &mut Lanes<'_, 'c>,
        trace: &'p mut TickTrace,
    ) -> Self {
        let opts = plan.opts;
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
        // The rate and the breaker are the fleet's: every runner of the table and tier
        // (the rate: or of its group) shares them; with a `rate_key`, each counterpart
        // has a rate of its own.
        let table = store.table().name.clone();
        let rate = rate_name(&table, opts.window, opts.rate_group.as_deref());
        let spacing = Spacing::of(opts.rate, opts.auto_rate.as_ref());
        let counterparts = Counterparts::new(spacing.clone(), &rate, opts.rate_key.as_deref());
        let one_rate = spacing.filter(|_| counterparts.is_none());
        let tier = rate_name(&table, opts.window, None);
        let key = KeyOf::new(opts.rate_key.as_deref(), opts.counterpart_url.as_ref());
        let breakers = Breakers::new(
            opts.stop_after_failures,
            tier.clone(),
            opts.breaker_cooldown,
            key.clone(),
        );
        let per_key = opts
            .concurrency_per_key
            .zip(key)
            .map(|(n, key)| (n, key, std::collections::HashMap::new()));
        // The tier's breaker counts nothing where each counterpart has one.
        let limit = opts.stop_after_failures.filter(|_| breakers.is_none());
        Round {
            breakers,
            per_key,
            capped: false,
            plan,
            database: store.describe(),
            batch,
            pager,
            counterparts,
            pace: Spacer::new(one_rate.clone(), Some(rate)),
            // Pages sized to the rate where there is one rate; the counterparts'
            // together have no bound the tick knows.
            size: PageSize::new(
                opts.page_size,
                lanes.capacity(),
                batch,
                one_rate.and_then(|r| r.fixed()),
            ),
            waiting: false,
            breaker: Breaker::new(limit, Some((tier, opts.breaker_cooldown))),
            queue: VecDeque::new(),
            taken: 0,
            inline_run: (0, Duration::ZERO),
            halt: None,
            page_failed: false,
            trace,
        }
    }

    /// Hands out records and settles what comes back, until nothing is out and no
    /// more is to be handed out.
    fn run(
        &mut self,
        store: &mut dyn Store,
        lanes: &mut Lanes<'_, 'c>,
        marks: &mut Marks<'_>,
        on_event: &mut dyn FnMut(Event<'_>),
    ) -> Result<(), Error> {
        loop {
            while lanes.free() > 0 && !self.capped && self.going(marks) {
                // Answers already back are settled before the next start: while the
                // rate holds starts back, the pace learns from them, the breaker counts
                // them and their marks go, not once every lane is busy.
                if let Some(done) = lanes.ready() {
                    self.settle(done, store, marks, on_event)?;
                    continue;
                }
                if self.plan.opts.stop.load(Ordering::Relaxed) {
                    marks.tally.stopped = true;
                    break;
                }
                if self.short() {
                    self.take_page(store, marks);
                    continue;
                }
                if self.queue.is_empty() {
                    break;
                }
                match self.choose(store, marks)? {
                    Choice::Again => continue,
                    Choice::Stop => break,
                    Choice::Hand(chosen) => self.hand(chosen, store, lanes, marks, on_event)?,
                }
            }
            // Settle what comes back; nothing out means the tick is done.
            let Some(done) = lanes.receive() else {
                return Ok(());
            };
            self.settle(done, store, marks, on_event)?;
        }
    }

    fn store_err(&self, e: StoreError) -> Error {
        Error::store(&self.database)(e)
    }

    /// Whether the tick may hand out more: nothing halted it, tripped its breaker or
    /// let its holds lapse, and the database took every group of marks so far (a
    /// refused group stops the handing out at once: what it hands out after could not
    /// be marked either; the records out are still settled).
    fn going(&self, marks: &Marks<'_>) -> bool {
        self.halt.is_none()
            && self.breaker.tripped.is_none()
            && marks.tally.lapsed.is_none()
            && !marks.refused()
    }

    /// A group of marks the database refused: the tick hands out no more, and ends
    /// with this error once the records out have come back.
    fn refused(&mut self, e: StoreError) {
        let e = self.store_err(e);
        self.halt.get_or_insert(e);
    }

    /// Whether a page is due: the queue is short of a batch (or every record in it
    /// waits for its counterpart) and the band has more.
    fn short(&self) -> bool {
        let short = self.queue.len() < self.batch || (self.waiting && self.queue.len() < HELD_MOST);
        short && !self.pager.done && self.taken < self.plan.limit
    }

    /// Takes a page into the queue.
    fn take_page(&mut self, store: &mut dyn Store, marks: &mut Marks<'_>) {
        let (plan, opts) = (self.plan, self.plan.opts);
        if self.inline_run.0 > 0 {
            self.size.observe(self.inline_run.0, self.inline_run.1);
        }
        // Reading on past records that wait for their counterparts: whole pages.
        let want = match std::mem::take(&mut self.waiting) {
            true => opts
                .page_size
                .min(HELD_MOST.saturating_sub(self.queue.len()).max(1)),
            false => self.size.next(),
        }
        .min((plan.limit - self.taken) as usize);
        let lease_until = Utc::now() + opts.lease;
        match self
            .pager
            .take(store, plan.owner, want, lease_until, plan.takes)
        {
            Err(StoreError::HoldLapsed(why)) => {
                let why = format!("this tick's hold lapsed ({why}); it hands out no more");
                plan.heartbeat.lapse(why.clone());
                marks.tally.lapsed = Some(why);
                self.page_failed = true;
            }
            Err(e) => {
                self.halt = Some(self.store_err(e));
                self.page_failed = true;
            }
            Ok(None) => self.pager.done = true,
            Ok(Some(page)) => {
                if let Err(e) = marks.failures.read(&page.taken, store) {
                    self.halt = Some(self.store_err(e));
                }
                self.inline_run = (0, Duration::ZERO);
                self.size.took(page.taken.len());
                marks.tally.deferred += page.deferred;
                marks.tally.skipped += page.skipped;
                self.taken += page.taken.len() as u64;
                // A record whose inserted-at value cannot be placed in a band is left
                // alone, and said.
                for record in page.taken {
                    if !marks.tally.left_alone(&record, plan.format) {
                        self.queue.push_back(record);
                    }
                }
            }
        }
    }

    /// The counterparts' turns, the breaker, the pace, then the holds, right before
    /// handing out: which records go now.
    fn choose(&mut self, store: &mut dyn Store, marks: &mut Marks<'_>) -> Result<Choice, Error> {
        // With counterparts, the records whose counterparts may start now; where every
        // record queued waits for its counterpart, read on while the band has more,
        // else wait for the first.
        let mut chosen = match self.counterparts.as_mut() {
            None => None,
            Some(counterparts) => match counterparts.take(&mut self.queue, self.batch, store) {
                Ok(records) => Some(records),
                Err(wait) => {
                    self.waiting = true;
                    let plan = self.plan;
                    if self.pager.done || self.taken >= plan.limit || self.queue.len() >= HELD_MOST
                    {
                        if let Err(e) = marks.write_before(wait, store) {
                            self.refused(e);
                            return Ok(Choice::Stop);
                        }
                        std::thread::sleep(wait.min(STOP_CHECK));
                    }
                    return Ok(Choice::Again);
                }
            },
        };
        self.waiting = false;
        // One rate: the next start waits for it, in steps, so that the answers that
        // come back meanwhile are settled (`run`); an open breaker is asked first,
        // so that it spends none of the rate's starts, and the trial of a half-open
        // one is claimed once its start is due.
        if chosen.is_none() {
            if self.breaker.holds(store) {
                return Ok(Choice::Stop);
            }
            let n = self.queue.len().min(self.batch);
            let wait = self.pace.delay(n, store);
            if !wait.is_zero() {
                if let Err(e) = marks.write_before(wait, store) {
                    self.refused(e);
                    return Ok(Choice::Stop);
                }
                if wait > STOP_CHECK {
                    std::thread::sleep(STOP_CHECK);
                    return Ok(Choice::Again);
                }
            }
        }
        // What the breaker holds back of the records chosen goes back to the queue's
        // front (their starts are spent: under the rate, never over it).
        let n = self.breaker.allow(
            chosen
                .as_ref()
                .map_or(self.queue.len(), Vec::len)
                .min(self.batch),
            store,
        );
        if let Some(chosen) = chosen.as_mut() {
            for record in chosen.drain(n..).rev() {
                self.queue.push_front(record);
            }
        }
        if n == 0 {
            return Ok(Choice::Stop);
        }
        let chosen = match chosen {
            Some(chosen) => Chosen::Records(chosen),
            None => {
                if !self.pace.wait(n, &self.plan.opts.stop) {
                    marks.tally.stopped = true;
                    return Ok(Choice::Stop);
                }
                Chosen::Front(n)
            }
        };
        match self.plan.heartbeat.stale() {
            // The writer may have been refused while the pace waited.
            None if marks.refused() => Ok(Choice::Stop),
            None => Ok(Choice::Hand(chosen)),
            Some(Stale::Lapsed(why)) => {
                marks.tally.lapsed = Some(why);
                Ok(Choice::Stop)
            }
            Some(Stale::Failing(why)) => {
                self.halt = Some(self.store_err(StoreError::HoldLapsed(why)));
                Ok(Choice::Stop)
            }
        }
    }

    /// Hands the records chosen to a lane, or, with an inline handler, one record at
    /// a time on this thread, settled at once: no vectors.
    fn hand(
        &mut self,
        chosen: Chosen,
        store: &mut dyn Store,
        lanes: &mut Lanes<'_, 'c>,
        marks: &mut Marks<'_>,
        on_event: &mut dyn FnMut(Event<'_>),
    ) -> Result<(), Error> {
        if let Some(handler) = lanes.inline() {
            let record = match chosen {
                Chosen::Records(mut chosen) => chosen.pop(),
                Chosen::Front(_) => self.queue.pop_front(),
            }
            .expect("a record is chosen");
            if !self.counterpart_allows(&record, store) {
                return Ok(());
            }
            match self.taken_over(std::slice::from_ref(&record), store, marks) {
                Some(places) if places.is_empty() => {}
                _ => return Ok(()),
            }
            let ctx = self.context(&record);
            let started = Instant::now();
            match catch_panic(|| handler.handle(&record, &ctx)) {
                Ok(handled) => {
                    let handled = marks.resolve(handled);
                    let took = started.elapsed();
                    self.trace.record_back(&record, &handled, took);
                    self.inline_run.0 += 1;
                    self.inline_run.1 += took;
                    self.heard(&record, &handled, took, Instant::now(), store);
                    if let Err(e) = marks.settle(&record, handled, took, store, on_event) {
                        self.refused(e);
                    }
                }
                Err(e) => self.halt = Some(Error::handler(e)),
            }
            return Ok(());
        }
        let mut records: Vec<Record> = match chosen {
            Chosen::Records(chosen) => chosen,
            Chosen::Front(n) => self.queue.drain(..n).collect(),
        };
        records.retain(|r| self.counterpart_allows(r, store));
        self.keep_to_per_key(&mut records);
        if records.is_empty() {
            return Ok(());
        }
        let Some(places) = self.taken_over(&records, store, marks) else {
            return Ok(());
        };
        for &place in places.iter().rev() {
            records.remove(place);
        }
        if records.is_empty() {
            return Ok(());
        }
        let contexts = records.iter().map(|r| self.context(r)).collect();
        if let Err(e) = lanes.send(records, contexts) {
            self.halt = Some(Error::handler(e));
        }
        Ok(())
    }

    /// The places of those of `records`, about to go to a handler, that a person's
    /// action took over from the queue since their page was read (SQLite's spans: see
    /// `Holds::hand_over`), counted as skipped. None when the store could not say:
    /// none of them goes, and the tick hands out no more.
    fn taken_over(
        &mut self,
        records: &[Record],
        store: &mut dyn Store,
        marks: &mut Marks<'_>,
    ) -> Option<Vec<usize>> {
        match store.hand_over(self.plan.owner, records) {
            Ok(places) => {
                marks.tally.skipped += places.len() as u64;
                Some(places)
            }
            Err(StoreError::HoldLapsed(why)) => {
                let why = format!("this tick's hold lapsed ({why}); it hands out no more");
                self.plan.heartbeat.lapse(why.clone());
                marks.tally.lapsed = Some(why);
                None
            }
            Err(e) => {
                self.halt = Some(self.store_err(e));
                None
            }
        }
    }

    /// Marks a batch that came back from a lane.
    fn settle(
        &mut self,
        done: Done,
        store: &mut dyn Store,
        marks: &mut Marks<'_>,
        on_event: &mut dyn FnMut(Event<'_>),
    ) -> Result<(), Error> {
        let Done {
            records,
            results,
            latency,
            ended,
        } = done;
        self.came_back(&records);
        match results {
            Ok(results) => {
                self.size.observe(records.len(), latency);
                for (record, handled) in records.iter().zip(results) {
                    let handled = marks.resolve(handled);
                    let took = handled.took.unwrap_or(latency);
                    self.trace.record_back(record, &handled, took);
                    self.heard(record, &handled, took, ended, store);
                    if let Err(e) = marks.settle(record, handled, took, store, on_event) {
                        self.refused(e);
                    }
                }
            }
            Err(e) => {
                self.halt.get_or_insert(Error::handler(e));
            }
        }
        Ok(())
    }

    /// Counts an answer that came back at `ended` in the pace and then the breaker: an
    /// overload lowers the pace first, and a busy counterpart's refusal is the pace's
    /// alone (`Adapted::outcome`), unless it answers the breaker's trial.
    fn heard(
        &mut self,
        record: &Record,
        handled: &Handled,
        took: Duration,
        ended: Instant,
        store: &mut dyn Store,
    ) {
        let absorbed = self.pace_for(record).outcome(handled, took, ended, store);
        if let Some(breakers) = self.breakers.as_mut() {
            breakers.count(record, handled, absorbed, store);
        } else if !absorbed || self.breaker.trial_out() {
            self.breaker.count(handled, store);
        }
    }

    /// Keeps `records` to `handler.concurrency_per_key`: those whose counterpart has
    /// that many out go back to the queue's front, in order (a start reserved for them
    /// is spent: under the rate, never over it); where none may go, the tick waits for
    /// an answer before it chooses again.
    fn keep_to_per_key(&mut self, records: &mut Vec<Record>) {
        let Some((most, key, out)) = self.per_key.as_mut() else {
            return;
        };
        let mut back = Vec::new();
        let mut going = Vec::with_capacity(records.len());
        for record in records.drain(..) {
            let n = out.entry(key.of(&record)).or_default();
            if *n < *most {
                *n += 1;
                going.push(record);
            } else {
                back.push(record);
            }
        }
        self.capped = going.is_empty() && !back.is_empty();
        for record in back.into_iter().rev() {
            self.queue.push_front(record);
        }
        *records = going;
    }

    /// Counts records back from their handlers out of their counterparts' calls.
    fn came_back(&mut self, records: &[Record]) {
        let Some((_, key, out)) = self.per_key.as_mut() else {
            return;
        };
        for record in records {
            let counterpart = key.of(record);
            if let Some(n) = out.get_mut(&counterpart) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    out.remove(&counterpart);
                }
            }
        }
        self.capped = false;
    }

    /// Whether `record`'s counterpart's breaker lets it go out now (always, without a
    /// breaker per counterpart). One held back keeps its status, for its next slot.
    fn counterpart_allows(&mut self, record: &Record, store: &mut dyn Store) -> bool {
        self.breakers
            .as_mut()
            .is_none_or(|breakers| breakers.allow(record, store))
    }

    /// The pace `record`'s start kept to: its counterpart's, or the tick's.
    fn pace_for(&mut self, record: &Record) -> &mut Spacer {
        match self.counterparts.as_mut() {
            Some(counterparts) => counterparts.pace_for(record),
            None => &mut self.pace,
        }
    }

    /// The handler's context for a record going out: its age by the tick's clock, and
    /// its span (started here).
    fn context(&mut self, r: &Record) -> Context<'c> {
        Context {
            age: r.age(self.plan.opts.now).and_then(|a| a.to_std().ok()),
            traceparent: self.trace.record_out(r),
            ..self.plan.ctx
        }
    }
}

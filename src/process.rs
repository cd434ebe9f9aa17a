//! `process_backlog`: one tick of one tier.
//!
//! A tick takes the pending records of its band a page at a time, newest first: the
//! store reads each page and holds its records for the tick in the tool's own tables,
//! atomically, so a record another tick holds or just marked is not taken again. The
//! tick hands the records it took to the handler one by one (or a batch at a time), and
//! writes their new statuses in groups. A heartbeat thread renews the holds while
//! handlers run; at the end the tick lets go of what it still holds.
//!
//! What this guarantees: a record is marked only after its handler returned; no two
//! ticks hold a record at once; a tick that is killed leaves holds that expire after
//! one lease, so its unmarked records are tried again by a later tick (at-least-once).

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::config::TableConfig;
use crate::duration;
use crate::error::Error;
use crate::handler::{Context, Handled, Handler, Outcome};
use crate::record::{Record, Scalar};
use crate::schedule::{BandMode, Schedule};
use crate::store::{BandQuery, Cursor, Heartbeat, Mark, Page, RunEnd, RunStart, Store, StoreError};

/// How a tick runs, beyond what the schedule says.
#[derive(Debug, Clone)]
pub struct TickOptions {
    /// The window of the tier to run.
    pub window: Duration,
    /// The clock the band is computed from (`--now`, or the real time).
    pub now: DateTime<Utc>,
    /// Overrides the tier's limit.
    pub limit: Option<u64>,
    /// Select and report, without claiming, handling or writing anything.
    pub dry_run: bool,
    /// Set from outside (a signal) to stop taking records; the current handler finishes.
    pub stop: Arc<AtomicBool>,
    /// How long a claim lives without a heartbeat; a killed tick's records wait this long.
    pub lease: Duration,
    /// Records read (and held) per query.
    pub page_size: usize,
    /// Marks written per transaction, at most; none for the store's own size
    /// (`Store::mark_group`). `mark_interval` bounds how long a mark waits, so with
    /// slower handlers a group is smaller, and a crash re-hands at most one group, at
    /// most a second of handling.
    pub mark_group: Option<usize>,
    /// The longest a handled record waits for its mark to be written.
    pub mark_interval: Duration,
}

impl TickOptions {
    pub fn new(window: Duration, now: DateTime<Utc>) -> Self {
        TickOptions {
            window,
            now,
            limit: None,
            dry_run: false,
            stop: Arc::new(AtomicBool::new(false)),
            lease: Duration::from_secs(60),
            page_size: 1000,
            mark_group: None,
            mark_interval: Duration::from_secs(1),
        }
    }
}

/// What a tick reports as it goes, for progress bars and listings.
#[derive(Debug)]
pub enum Event<'a> {
    /// A record was handled and will be marked with `status`.
    Handled {
        record: &'a Record,
        handled: &'a Handled,
        status: &'a str,
    },
    /// A dry run would hand this record over.
    WouldHandle { record: &'a Record },
}

/// The band a tick covered, in the summary.
#[derive(Debug, Clone, Serialize)]
pub struct BandSummary {
    /// Ages over this (from 0 inclusive when `"0s"`).
    pub younger: String,
    /// Ages up to this, inclusive.
    pub older: String,
    /// The inserted-at bounds the band had at the tick's `now`.
    pub from: String,
    pub to: String,
}

/// What a tick did.
#[derive(Debug, Clone, Serialize)]
pub struct TickSummary {
    pub window: String,
    /// The tier's 1-based number; absent for a window that no tier has.
    pub tier: Option<usize>,
    pub cadence: Option<String>,
    pub bands: BandMode,
    pub band: BandSummary,
    pub now: DateTime<Utc>,
    pub database: String,
    pub table: String,
    /// The inserted-at format in use, as `table.inserted_at_format` names it.
    pub inserted_at_format: String,
    pub inserted_at_format_detected: bool,
    pub dry_run: bool,
    pub run_id: Option<i64>,
    /// Records handed to the handler (or, in a dry run, that would be).
    pub selected: u64,
    pub succeeded: u64,
    /// Records marked with any status other than the success status.
    pub failed: u64,
    /// Records of the band held by another tick, or marked by one since they were read.
    pub skipped: u64,
    /// Records of the band left to other ticks by the tier's `spread`.
    pub deferred: u64,
    /// The count of each status written.
    pub statuses: BTreeMap<String, u64>,
    pub limit: u64,
    pub limit_reached: bool,
    /// A stop was asked for (SIGINT, SIGTERM) and the tick ended early.
    pub stopped: bool,
    pub seconds: f64,
}

impl TickSummary {
    /// A one-line account, as `backlog run` prints it.
    pub fn line(&self, table: &TableConfig) -> String {
        let tier = match self.tier {
            Some(n) => format!(
                "tier {n} ({} {})",
                self.window,
                self.cadence.as_deref().unwrap_or_default()
            ),
            None => format!("window {} (no tier has it)", self.window),
        };
        let band = if self.band.younger == "0s" {
            format!("ages 0 to {}", self.band.older)
        } else {
            format!("ages over {} up to {}", self.band.younger, self.band.older)
        };
        let mut line = if self.dry_run {
            format!(
                "{tier}, {band}: dry run, would hand over {} records",
                self.selected
            )
        } else {
            // Statuses beyond success and error come from `handler.exit_codes`: name them.
            let mapped: Vec<String> = self
                .statuses
                .iter()
                .filter(|(s, _)| **s != table.success && **s != table.error)
                .map(|(s, n)| format!("{s} {n}"))
                .collect();
            let statuses = if mapped.is_empty() {
                String::new()
            } else {
                format!(" (of which {})", mapped.join(", "))
            };
            format!(
                "{tier}, {band}: selected {}, succeeded {}, failed {}{statuses}, skipped {}{} in {:.2}s",
                self.selected,
                self.succeeded,
                self.failed,
                self.skipped,
                if self.deferred > 0 {
                    format!(", deferred {} to later ticks (spread)", self.deferred)
                } else {
                    String::new()
                },
                self.seconds
            )
        };
        if self.limit_reached {
            line.push_str(&format!(
                "; limit {} reached, the rest waits for the next tick",
                self.limit
            ));
        }
        if self.stopped {
            line.push_str("; stopped early by a signal");
        }
        line
    }
}

static TICKS_IN_PROCESS: AtomicU64 = AtomicU64::new(0);

/// A name for this tick in the tool's holds and claims: host, process, and a count for ticks run
/// by one process.
fn owner_name() -> String {
    let host = hostname::get()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "localhost".into());
    let n = TICKS_IN_PROCESS.fetch_add(1, Ordering::Relaxed);
    format!(
        "{host}/{}/{}/{n}",
        std::process::id(),
        Utc::now().timestamp_millis()
    )
}

/// Renews a tick's claims on a thread of its own until dropped.
struct HeartbeatThread {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<thread::JoinHandle<()>>,
    /// Since when beats fail, and the last failure; none while they succeed.
    failing: Arc<std::sync::Mutex<Option<(Instant, String)>>>,
}

impl HeartbeatThread {
    fn start(mut heartbeat: Box<dyn Heartbeat>, lease: Duration) -> Self {
        let (stop, stopped) = mpsc::channel::<()>();
        let failing = Arc::new(std::sync::Mutex::new(None));
        let state = Arc::clone(&failing);
        let thread = thread::spawn(move || {
            while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(lease / 4) {
                let result = heartbeat.beat(Utc::now() + lease);
                let mut state = state.lock().expect("the heartbeat state is never poisoned");
                match result {
                    Ok(()) => *state = None,
                    Err(e) => {
                        tracing::warn!("cannot renew this tick's claims: {e}");
                        let since = state.as_ref().map_or_else(Instant::now, |(t, _)| *t);
                        *state = Some((since, e.to_string()));
                    }
                }
            }
        });
        HeartbeatThread {
            stop: Some(stop),
            thread: Some(thread),
            failing,
        }
    }

    /// Why the claims may be about to run out: the beats have failed for half a lease.
    /// Past that point another tick may soon take this tick's records, so it must not
    /// hand over any more.
    fn lapsing(&self, lease: Duration) -> Option<String> {
        let state = self
            .failing
            .lock()
            .expect("the heartbeat state is never poisoned");
        state
            .as_ref()
            .filter(|(since, _)| since.elapsed() >= lease / 2)
            .map(|(since, e)| {
                format!(
                    "claims not renewed for {} ({e}); stopped taking records before they run out",
                    duration::compact(Duration::from_secs(since.elapsed().as_secs().max(1)))
                )
            })
    }
}

impl Drop for HeartbeatThread {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Reads (or takes) a band a page at a time, newest first, each page after where the
/// last ended.
struct Pager<'q> {
    query: &'q BandQuery,
    cursor: Option<Cursor>,
    done: bool,
}

impl<'q> Pager<'q> {
    fn new(query: &'q BandQuery) -> Self {
        Pager {
            query,
            cursor: None,
            done: false,
        }
    }

    /// The next page of at most `want` records; none once the band is read to its end
    /// (a page shorter than asked for is the last).
    fn next(
        &mut self,
        store: &mut dyn Store,
        want: usize,
    ) -> Result<Option<Vec<Record>>, StoreError> {
        if self.done {
            return Ok(None);
        }
        let page = store.select(self.query, self.cursor.as_ref(), want)?;
        self.done = page.len() < want;
        let Some(last) = page.last() else {
            return Ok(None);
        };
        self.cursor = Some(Cursor::after(last));
        Ok(Some(page))
    }

    /// The next page taken for `owner` (see `Store::take`); none once the band is read
    /// to its end.
    fn take(
        &mut self,
        store: &mut dyn Store,
        owner: &str,
        want: usize,
        lease_until: DateTime<Utc>,
        wanted: &dyn Fn(&Record) -> bool,
    ) -> Result<Option<Page>, StoreError> {
        if self.done {
            return Ok(None);
        }
        let page = store.take(
            owner,
            self.query,
            self.cursor.as_ref(),
            want,
            lease_until,
            wanted,
        )?;
        self.done = page.read < want;
        if page.cursor.is_none() {
            return Ok(None);
        }
        self.cursor.clone_from(&page.cursor);
        Ok(Some(page))
    }
}

/// The running state of a tick: counts, marks not yet written.
#[derive(Default)]
struct Tally {
    selected: u64,
    succeeded: u64,
    failed: u64,
    skipped: u64,
    deferred: u64,
    /// Shares its statuses with the marks (see `Marks`).
    statuses: BTreeMap<Arc<str>, u64>,
    /// Handled, not yet written.
    marks: Vec<Mark>,
    stopped: bool,
}

/// Opens the store a schedule file names.
pub fn open_store(config: &crate::Config) -> Result<Box<dyn Store>, Error> {
    crate::store::open(&config.database, &config.table).map_err(Error::store(&config.database.url))
}

/// Runs one tick of a schedule file's tier: opens its store and its command handler,
/// then `process_backlog`. What `backlog run` and each tick of the daemon do.
pub fn run_tick(
    config: &crate::Config,
    opts: &TickOptions,
    on_event: &mut dyn FnMut(Event<'_>),
) -> Result<TickSummary, Error> {
    let mut store = open_store(config)?;
    let mut handler =
        crate::handler::from_config(&config.handler, &config.dir).map_err(|source| {
            Error::Handler {
                file: Some(config.path.display().to_string()),
                source,
            }
        })?;
    process_backlog(
        &config.schedule,
        &config.table,
        store.as_mut(),
        handler.as_mut(),
        opts,
        on_event,
    )
}

/// Runs one tick of the tier with `opts.window` over `store`, handing records to
/// `handler`, and returns what it did.
pub fn process_backlog(
    schedule: &Schedule,
    table: &TableConfig,
    store: &mut dyn Store,
    handler: &mut dyn Handler,
    opts: &TickOptions,
    on_event: &mut dyn FnMut(Event<'_>),
) -> Result<TickSummary, Error> {
    let started = Instant::now();
    let store_err = Error::store(store.describe());
    let tier = schedule.tier(opts.window);
    let band = schedule.band(opts.window);
    let limit = opts.limit.unwrap_or_else(|| schedule.limit(opts.window));
    let format = store.inspect().map_err(&store_err)?;
    // A spread tier takes only this tick's share of its band; a `[retry]` strategy
    // only the records whose delay has passed.
    let retry = table
        .retry
        .as_ref()
        .map(|r| {
            crate::backoff::catalog::build(&r.strategy, &r.params, 1.0)
                .map(|built| (r, built.strategy))
                .map_err(|e| Error::Usage(format!("retry: {e}")))
        })
        .transpose()?;
    let takes = |r: &Record| {
        tier.is_none_or(|(_, t)| t.takes(&r.id, opts.now))
            && retry
                .as_ref()
                .is_none_or(|(config, strategy)| retry_due(r, config, strategy.as_ref(), opts.now))
    };
    let span = band.span(opts.now);
    let query = BandQuery {
        from: format.encode(span.from),
        to: format.encode(span.to),
        to_inclusive: span.to_inclusive,
    };
    tracing::debug!(
        "tick of window {} over {band} ({} ≤ {} {} {}), {} holds {format}",
        duration::compact(opts.window),
        query.from,
        table.inserted_at,
        if span.to_inclusive { "≤" } else { "<" },
        query.to,
        table.inserted_at,
    );
    let mut summary = TickSummary {
        window: duration::compact(opts.window),
        tier: tier.map(|(n, _)| n),
        cadence: tier.map(|(_, t)| t.cadence.to_string()),
        bands: schedule.bands,
        band: BandSummary {
            younger: duration::compact(band.younger),
            older: duration::compact(band.older),
            from: query.from.to_string(),
            to: query.to.to_string(),
        },
        now: opts.now,
        database: store.describe(),
        table: table.name.clone(),
        inserted_at_format: format.setting_name().to_string(),
        inserted_at_format_detected: table.inserted_at_format
            == crate::timestamp::FormatSetting::Auto,
        dry_run: opts.dry_run,
        run_id: None,
        selected: 0,
        succeeded: 0,
        failed: 0,
        skipped: 0,
        deferred: 0,
        statuses: BTreeMap::new(),
        limit,
        limit_reached: false,
        stopped: false,
        seconds: 0.0,
    };

    if opts.dry_run {
        let mut pager = Pager::new(&query);
        while summary.selected < limit {
            let want = opts.page_size.min((limit - summary.selected) as usize);
            let Some(page) = pager.next(store, want).map_err(&store_err)? else {
                break;
            };
            for record in page.iter().filter(|r| takes(r)) {
                on_event(Event::WouldHandle { record });
                summary.selected += 1;
            }
            summary.deferred += page.iter().filter(|r| !takes(r)).count() as u64;
        }
        summary.limit_reached = summary.selected == limit;
        summary.seconds = started.elapsed().as_secs_f64();
        return Ok(summary);
    }

    store.ensure_own_tables().map_err(&store_err)?;
    let owner = owner_name();
    let run_id = store
        .begin_run(&RunStart {
            window: opts.window,
            tier: summary.tier,
            younger: band.younger,
            older: band.older,
            bands: match schedule.bands {
                BandMode::Disjoint => "disjoint",
                BandMode::Cumulative => "cumulative",
            },
            now: opts.now,
            owner: owner.clone(),
            lease: opts.lease,
        })
        .map_err(&store_err)?;
    summary.run_id = Some(run_id);
    let heartbeat = HeartbeatThread::start(
        store.heartbeat(&owner, run_id).map_err(&store_err)?,
        opts.lease,
    );

    let ctx = Context {
        table: &table.name,
        window: opts.window,
        age: None,
    };
    let mut tally = Tally::default();
    let result = tick_loop(
        table, store, handler, opts, &query, limit, &owner, ctx, &takes, &heartbeat, &mut tally,
        on_event,
    );

    // Whatever happened, write what was handled and let go of the rest.
    let mut cleanup = Ok(());
    if !tally.marks.is_empty() {
        cleanup = store.mark(&owner, &tally.marks).map_err(&store_err);
    }
    if let Err(e) = store.release(&owner) {
        tracing::warn!(
            "cannot release this tick's records (they are free again within {}): {e}",
            duration::compact(opts.lease)
        );
    }
    drop(heartbeat);
    let result = result.and(cleanup);
    let end = RunEnd {
        selected: tally.selected,
        succeeded: tally.succeeded,
        failed: tally.failed,
        skipped: tally.skipped,
        outcome: match (&result, tally.stopped) {
            (Err(_), _) => "failed",
            (Ok(()), true) => "stopped",
            (Ok(()), false) => "done",
        },
        error: result.as_ref().err().map(ToString::to_string),
    };
    let logged = store.finish_run(run_id, &end).map_err(&store_err);
    result?;
    logged?;

    summary.selected = tally.selected;
    summary.succeeded = tally.succeeded;
    summary.failed = tally.failed;
    summary.skipped = tally.skipped;
    summary.deferred = tally.deferred;
    summary.statuses = tally
        .statuses
        .into_iter()
        .map(|(status, n)| (status.to_string(), n))
        .collect();
    summary.stopped = tally.stopped;
    summary.limit_reached = tally.selected == limit;
    summary.seconds = started.elapsed().as_secs_f64();
    Ok(summary)
}

/// A batch handed to the handler: its records, and their results when the handler
/// gave them at once (a pipelined handler gives them on `receive`).
struct InFlight {
    records: Vec<Record>,
    results: Option<Vec<Handled>>,
}

/// How many batches a pipelined handler holds at once: one it works on, one waiting
/// in its pipe, so it never waits for the tick and the tick rarely waits for it.
const PIPELINE_DEPTH: usize = 2;

#[allow(clippy::too_many_arguments)]
fn tick_loop(
    table: &TableConfig,
    store: &mut dyn Store,
    handler: &mut dyn Handler,
    opts: &TickOptions,
    query: &BandQuery,
    limit: u64,
    owner: &str,
    ctx: Context<'_>,
    takes: &dyn Fn(&Record) -> bool,
    heartbeat: &HeartbeatThread,
    tally: &mut Tally,
    on_event: &mut dyn FnMut(Event<'_>),
) -> Result<(), Error> {
    let store_err = Error::store(store.describe());
    let handler_err = |source| Error::Handler { file: None, source };
    let mut pager = Pager::new(query);
    let mut marks = Marks {
        success: table.success.as_str().into(),
        error: table.error.as_str().into(),
        last_write: Instant::now(),
        group: opts.mark_group.unwrap_or_else(|| store.mark_group()).max(1),
    };
    // A per-record handler takes one record at a time, so a stop is seen between any
    // two; a batch handler takes its batch size at once.
    let batch = handler.batch_size().max(1);
    let depth = if handler.pipelined().is_some() {
        PIPELINE_DEPTH
    } else {
        1
    };
    // Taken and not yet handed over; handed over and not yet settled.
    let mut queue: VecDeque<Record> = VecDeque::new();
    let mut in_flight: VecDeque<InFlight> = VecDeque::new();
    let mut taken: u64 = 0;
    let mut band_read = false;
    // Why the tick hands over no more: the batches already out are still answered and
    // marked, then the tick ends with this error.
    let mut lapsed: Option<Error> = None;
    loop {
        // Hand over batches until `depth` are out, unless the tick is to stop.
        while in_flight.len() < depth && lapsed.is_none() {
            if opts.stop.load(Ordering::Relaxed) {
                tally.stopped = true;
                break;
            }
            while queue.len() < batch && !band_read && taken < limit {
                let want = opts.page_size.min((limit - taken) as usize);
                let page = pager
                    .take(store, owner, want, Utc::now() + opts.lease, takes)
                    .map_err(&store_err)?;
                let Some(page) = page else {
                    band_read = true;
                    break;
                };
                band_read = pager.done;
                tally.deferred += page.deferred;
                tally.skipped += page.skipped;
                taken += page.taken.len() as u64;
                queue.extend(page.taken);
            }
            if queue.is_empty() {
                break;
            }
            if let Some(problem) = heartbeat.lapsing(opts.lease) {
                lapsed = Some(store_err(StoreError::Database {
                    context: "renewing claims".into(),
                    source: problem.into(),
                }));
                break;
            }
            let context = |r: &Record| Context {
                age: r.age(opts.now).and_then(|a| a.to_std().ok()),
                ..ctx
            };
            if batch == 1 && depth == 1 {
                // One record at a time, handled and settled at once: no vectors.
                let record = queue.pop_front().expect("the queue is not empty");
                let handled = handler
                    .handle(&record, &context(&record))
                    .map_err(handler_err)?;
                marks
                    .settle(tally, &record, handled, store, owner, opts, on_event)
                    .map_err(&store_err)?;
                continue;
            }
            let records: Vec<Record> = queue.drain(..batch.min(queue.len())).collect();
            let refs: Vec<&Record> = records.iter().collect();
            let contexts: Vec<Context> = records.iter().map(context).collect();
            let results = match (handler.pipelined(), &refs[..]) {
                (Some(pipe), _) => {
                    pipe.send(&refs, &contexts).map_err(handler_err)?;
                    None
                }
                (None, [one]) => Some(vec![
                    handler.handle(one, &contexts[0]).map_err(handler_err)?,
                ]),
                (None, _) => Some(
                    handler
                        .handle_batch(&refs, &contexts)
                        .map_err(handler_err)?,
                ),
            };
            in_flight.push_back(InFlight { records, results });
        }
        // Settle the oldest batch; none out means the tick is done (or stopped).
        let Some(flight) = in_flight.pop_front() else {
            return lapsed.map_or(Ok(()), Err);
        };
        let results = match flight.results {
            Some(results) => results,
            None => handler
                .pipelined()
                .expect("only a pipelined handler leaves results to receive")
                .receive()
                .map_err(handler_err)?,
        };
        for (record, handled) in flight.records.iter().zip(results) {
            marks
                .settle(tally, record, handled, store, owner, opts, on_event)
                .map_err(&store_err)?;
        }
    }
}

/// Writes a tick's marks in groups: a group goes when it is full, or when it has
/// waited `mark_interval` since the last write.
struct Marks {
    /// Shared with the marks: a status is allocated once a tick, not once a record.
    success: Arc<str>,
    error: Arc<str>,
    last_write: Instant,
    /// Marks per transaction, at most.
    group: usize,
}

impl Marks {
    /// Counts a handled record and queues its mark, writing the group when due.
    #[allow(clippy::too_many_arguments)]
    fn settle(
        &mut self,
        tally: &mut Tally,
        record: &Record,
        handled: Handled,
        store: &mut dyn Store,
        owner: &str,
        opts: &TickOptions,
        on_event: &mut dyn FnMut(Event<'_>),
    ) -> Result<(), StoreError> {
        tally.selected += 1;
        let status = match &handled.outcome {
            Outcome::Success => {
                tally.succeeded += 1;
                Arc::clone(&self.success)
            }
            Outcome::Error => {
                tally.failed += 1;
                Arc::clone(&self.error)
            }
            Outcome::Status(s) => {
                tally.failed += 1;
                Arc::from(s.as_str())
            }
        };
        log_outcome(record, &handled, &status);
        on_event(Event::Handled {
            record,
            handled: &handled,
            status: &status,
        });
        *tally.statuses.entry(Arc::clone(&status)).or_default() += 1;
        tally.marks.push(Mark {
            at: opts.now,
            id: record.id.clone(),
            status,
        });
        if tally.marks.len() >= self.group || self.last_write.elapsed() >= opts.mark_interval {
            store.mark(owner, &tally.marks)?;
            tally.marks.clear();
            self.last_write = Instant::now();
        }
        Ok(())
    }
}

/// Whether a record's `[retry]` delay has passed: its attempt count picks the delay,
/// its `since` column says from when. A record never tried (count 0 or NULL, or no
/// readable time) is due; one its strategy gave up on never is.
fn retry_due(
    record: &Record,
    retry: &crate::config::RetryConfig,
    strategy: &dyn crate::backoff::Strategy,
    now: DateTime<Utc>,
) -> bool {
    use crate::backoff::{Delay, FAILURE};
    let column = |name: &str| record.columns.get_ignore_case(name);
    let count = column(&retry.count)
        .and_then(serde_json::Value::as_i64)
        .unwrap_or(0)
        .max(0) as usize;
    let since = column(&retry.since).and_then(|v| match v {
        serde_json::Value::Number(n) => n.as_i64().map(Scalar::Int),
        serde_json::Value::String(s) => Some(Scalar::Text(s.clone())),
        _ => None,
    });
    let Some(since) = since
        .as_ref()
        .and_then(crate::timestamp::read_any)
        .filter(|_| count > 0)
    else {
        return true;
    };
    // The record's own random stream, so a jittered delay is the same at every tick.
    let mut rng = fastrand::Rng::with_seed(crate::schedule::share(&record.id, u32::MAX));
    match strategy.delays(&vec![FAILURE; count], &mut rng).last() {
        Some(Delay::Wait(s)) => since + chrono::Duration::milliseconds((s * 1000.0) as i64) <= now,
        _ => false,
    }
}

fn log_outcome(record: &Record, handled: &Handled, status: &str) {
    if handled.outcome == Outcome::Success {
        tracing::debug!("record {}: {status} ({})", record.id, handled.detail);
    } else {
        tracing::debug!(
            "record {}: {status} ({}){}",
            record.id,
            handled.detail,
            tail_for_log(&handled.output)
        );
    }
    if !handled.output.is_empty() {
        tracing::trace!("record {} output:\n{}", record.id, handled.output);
    }
}

/// The last line of a failed handler's output, so `-v` shows why without `-vv`.
fn tail_for_log(output: &str) -> String {
    output
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .map(|l| format!(": {l}"))
        .unwrap_or_default()
}

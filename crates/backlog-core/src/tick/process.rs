//! `process_backlog`: one tick of one tier, from its band to its run-log row.
//!
//! It works out the band and what the tick wants of it, opens the run-log row, starts
//! the heartbeat and the lanes, runs the loop (`hand_out`), then, whatever happened,
//! writes the marks of what was handled, lets go of the rest and closes the row.

use std::time::Instant;

use super::begin::{Begun, begin, owner_name};
use super::hand_out::{Plan, hand_out};
use super::heartbeat::HeartbeatThread;
use super::lanes::Lanes;
use super::marks::{MarkPlan, Marks, log_unshown};
use super::options::{Event, TickOptions};
use super::summary::TickSummary;
use super::tally::Tally;
use super::trace::TickTrace;
use crate::config::TableConfig;
use crate::duration;
use crate::error::Error;
use crate::handler::{Context, Handler};
use crate::record::Record;
use crate::schedule::{BandMode, Schedule};
use crate::store::{BandQuery, RunStart, Store, StoreError};

/// Opens the store a schedule file names.
/// With the driver of its URL's scheme, which the program installed.
pub fn open_store(config: &crate::Config) -> Result<Box<dyn Store>, Error> {
    crate::store::open(&config.database, &config.table).map_err(Error::store(&config.database.url))
}

/// Runs one tick of the tier with `opts.window` over `store`, handing records to
/// `handler` (`opts.concurrency` at once), and returns what it did.
///
/// A record's failure is an outcome, counted in the summary, not an error: the error,
/// a [`crate::Error`], says the tick could not run (the database is unusable, the
/// handler cannot start). A tick the breaker or a lapsed hold stopped returns its
/// summary, which says so (`breaker`, `lapsed`). Every call below returns
/// `backlog_core::Error` or converts into it. A store is opened by the driver of its
/// database, which the program installs (`backlog_sqlite::install()`, …).
///
/// ```
/// use std::time::Duration;
///
/// use backlog_core::chrono::Utc;
/// use backlog_core::{Config, FnHandler, Outcome, Record, Scalar, TickOptions};
///
/// const SCHEDULE: &str = r#"
/// [database]
/// url = "orders.db"
/// [table]
/// name = "orders"
/// id = "id"
/// status = "state"
/// inserted_at = "created_at"
/// [handler]
/// command = ["./handler.sh"]
/// [[tier]]
/// window = "1d"
/// every = "5m"
/// "#;
///
/// fn main() -> Result<(), backlog_core::Error> {
///     // A SQLite backlog of ten records, and a schedule file beside it.
///     let dir = std::env::temp_dir().join(format!("backlog-doc-{}", std::process::id()));
///     # std::fs::create_dir_all(&dir).unwrap();
///     # let db = rusqlite::Connection::open(dir.join("orders.db")).unwrap();
///     # db.execute_batch("CREATE TABLE orders (id INTEGER PRIMARY KEY, state TEXT NOT NULL, created_at INTEGER NOT NULL)").unwrap();
///     # for id in 1..=10_i64 {
///     #     db.execute("INSERT INTO orders VALUES (?1, 'NEW', ?2)", (id, Utc::now().timestamp() - id * 600)).unwrap();
///     # }
///     backlog_sqlite::install();
///     let config = Config::parse(SCHEDULE, &dir.join("backlog.toml"))?;
///     let mut store = backlog_core::open_store(&config)?;
///     // Even ids succeed; the others stay pending, to be tried on a later tick.
///     let mut handler = FnHandler(|record: &Record| match record.id {
///         Scalar::Int(id) if id % 2 == 0 => Outcome::Success,
///         _ => Outcome::Error,
///     });
///     let day = Duration::from_secs(86_400);
///     let opts = TickOptions::for_config(&config, day, Utc::now());
///     let summary = backlog_core::process_backlog(
///         &config.schedule,
///         &config.table,
///         store.as_mut(),
///         &mut handler,
///         &opts,
///         &mut |_| {},
///     )?;
///     assert_eq!(summary.selected, summary.succeeded + summary.failed);
///     println!("{}", summary.line(&config.table));
///     # std::fs::remove_dir_all(&dir).ok();
///     Ok(())
/// }
/// ```
pub fn process_backlog(
    schedule: &Schedule,
    table: &TableConfig,
    store: &mut dyn Store,
    handler: &mut dyn Handler,
    opts: &TickOptions,
    on_event: &mut dyn FnMut(Event<'_>),
) -> Result<TickSummary, Error> {
    let started = Instant::now();
    // Every line of the tick names its tier.
    let _in_span = super::span::enter_tick_span(schedule, opts.window);
    let mut trace = TickTrace::start(schedule, &table.name, opts);
    let result = tick(schedule, table, store, handler, opts, on_event, &mut trace);
    let seconds = started.elapsed().as_secs_f64();
    let result = result.map(|mut summary| {
        summary.seconds = seconds;
        summary
    });
    trace.end(&result, seconds);
    result
}

/// `process_backlog` within the tick's span.
fn tick(
    schedule: &Schedule,
    table: &TableConfig,
    store: &mut dyn Store,
    handler: &mut dyn Handler,
    opts: &TickOptions,
    on_event: &mut dyn FnMut(Event<'_>),
    trace: &mut TickTrace,
) -> Result<TickSummary, Error> {
    let mut begun = begin(schedule, table, store, opts)?;
    // A person paused this tier (or every tier): every runner obeys, on every host,
    // and a dry run says so.
    begun.summary.paused = store
        .paused(opts.window)
        .map_err(Error::store(store.describe()))?;
    // A dry run of a paused tier lists what it would take once resumed, and says so.
    let summary = if begun.summary.paused.is_some() && !opts.dry_run {
        begun.summary
    } else if opts.dry_run {
        let mut summary = super::preview::preview(store, begun, opts, on_event)?;
        summary.given_up = super::give_up::would_give_up(schedule, table, store, opts)?;
        summary
    } else {
        let mut run = open_run(schedule, store, &begun.summary, opts)?;
        let (result, tally) = hand_out_and_mark(
            schedule, table, store, handler, &begun, &mut run, opts, on_event, trace,
        );
        // The tick's error comes first; then the run log's.
        let logged = close(table, store, &begun.query, &run, &result, &tally);
        if opts.count_answers
            && let Err(e) = store.add_answers(opts.window.as_secs(), &tally.answers)
        {
            // The metrics miss this tick's answers; the records are marked.
            tracing::warn!("cannot count this tick's answers in backlog_answers: {e}");
        }
        result?;
        logged?;
        let mut summary = begun.summary;
        summary.run_id = Some(run.id);
        // A tick that ended before its band did says what it left: the next start
        // takes it at once.
        if tally.stopped || tally.lapsed.is_some() {
            summary.left = super::left::pending_left(table, store, &begun.query);
        }
        tally.into_summary(&mut summary);
        summary.given_up = super::give_up::past_last_tier(schedule, table, store, opts)?;
        summary
    };
    Ok(summary)
}

/// A tick's run-log row, its name in the holds, and its heartbeat.
struct Run {
    id: i64,
    owner: String,
    heartbeat: HeartbeatThread,
}

/// Opens the tick's run-log row (the tool's tables made first) and starts the
/// heartbeat that renews its holds.
fn open_run(
    schedule: &Schedule,
    store: &mut dyn Store,
    summary: &TickSummary,
    opts: &TickOptions,
) -> Result<Run, Error> {
    let store_err = Error::store(store.describe());
    store.ensure_own_tables().map_err(&store_err)?;
    let owner = owner_name();
    let band = schedule.band(opts.window);
    let id = store
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
            history: opts.history.clone(),
        })
        .map_err(|e| store_err(refused_at_start(e)))?;
    let heartbeat =
        HeartbeatThread::start(store.heartbeat(&owner, id).map_err(&store_err)?, opts.lease);
    Ok(Run {
        id,
        owner,
        heartbeat,
    })
}

/// The run-log row is a tick's first write, before any record goes out (its first
/// page's holds come next, on the same connection; its first mark after the first
/// answer): a database that refuses it stops the tick with nothing handed out, and
/// the error says what to do.
fn refused_at_start(e: StoreError) -> StoreError {
    match e {
        StoreError::Database { context, source } => StoreError::Database {
            context,
            source: format!(
                "{source}; no record was handed out: let this user write to the database (on SQLite the file and its folder), with room on its disk, then run again"
            )
            .into(),
        },
        other => other,
    }
}

/// Hands the band's records out and marks what comes back; whatever happened, what
/// was handled is written and the holds are let go. Returns how the tick ended and its
/// counts (the run log takes both, even after an error).
#[allow(clippy::too_many_arguments)]
fn hand_out_and_mark(
    schedule: &Schedule,
    table: &TableConfig,
    store: &mut dyn Store,
    handler: &mut dyn Handler,
    begun: &Begun<'_>,
    run: &mut Run,
    opts: &TickOptions,
    on_event: &mut dyn FnMut(Event<'_>),
    trace: &mut TickTrace,
) -> (Result<(), Error>, Tally) {
    let store_err = Error::store(store.describe());
    // A record that fails is kept from every tick until the schedule's next try of it
    // (by the tick's clock): one try per slot, however many runners or overlapping
    // ticks. In cumulative bands that is the shortest tier's next slot, not the longer
    // tier's that failed it.
    // A tick that starts up to `DUE_SLACK` early (cron a moment ahead) counts for the
    // slot, as `--if-due` judges it, so the keep ends that much before the slot.
    let after_now = opts.now + chrono::Duration::milliseconds(1);
    let slack = crate::schedule::due_slack();
    let keep = |r: &Record| {
        let inserted = r.inserted_time?;
        let id = r.id.to_string();
        crate::schedule::next_attempt(schedule, inserted, Some(&id), after_now)
            .map(|(_, at)| (at - slack).max(after_now))
    };
    let mark_plan = MarkPlan {
        owner: &run.owner,
        now: opts.now,
        run_id: run.id,
        window: opts.window,
        tier: begun.summary.tier,
        history: opts.history.clone(),
    };
    let mut marks = Marks::new(
        table,
        mark_plan,
        opts.mark_group,
        store.mark_group(),
        opts.mark_interval,
        &keep,
    );
    // The run-log row (`open_run`) and the first page's holds are written on this
    // connection before any record goes out; the first mark proves the user's table
    // takes the tick's writes, with no more records out than the lanes hold.
    marks.start_small();
    let takes = |r: &Record| begun.wants.takes(r);
    // Where this tick begins in its band: the runners of a fleet spread over it.
    let start = super::place::start_place(store, begun, run.id, opts);
    // Records its pages will step over because other ticks hold them, on a backend
    // that counts them once, as the tick begins; there, it steps over what the other
    // runners of its tier have read too.
    let counted = count_held(store, run, begun, &mut marks.tally);
    let tracestate = trace.tracestate().map(str::to_owned);
    let plan = Plan {
        opts,
        query: &begun.query,
        start,
        limit: begun.limit,
        run_id: run.id,
        fleet: schedule
            .tiers
            .iter()
            .find(|t| t.window == opts.window)
            .filter(|_| counted)
            .map(|t| {
                t.cadence
                    .tick_number(opts.now + crate::schedule::due_slack())
            }),
        owner: &run.owner,
        ctx: Context {
            table: &table.name,
            window: opts.window,
            age: None,
            cancel: Some(run.heartbeat.cancel_flag()),
            traceparent: None,
            tracestate: tracestate.as_deref(),
        },
        takes: &takes,
        heartbeat: &run.heartbeat,
        format: &begun.format,
    };
    // The pool's workers live in this scope: they may borrow the handler, and all of
    // them are joined (their records answered) before the last marks are written. On
    // a server the marks go to a connection of their own once a group is due before
    // the end (`Marks::open_writer`). Whatever happened, what was handled is written
    // before the holds are let go (the heartbeat stops first, so that it does not find
    // the holds gone and call them lapsed).
    // A stop bounds the wait for the handlers in flight by `stop_grace` (`grace`).
    let (result, cleanup) = std::thread::scope(|scope| {
        let (handed_back, done) = std::sync::mpsc::channel::<()>();
        let heartbeat = &run.heartbeat;
        let span = tracing::Span::current();
        scope.spawn(move || {
            span.in_scope(|| super::grace::watch(&opts.stop, opts.stop_grace, heartbeat, &done))
        });
        let mut lanes = Lanes::new(handler, opts.concurrency, scope);
        let result = hand_out(&plan, store, &mut lanes, &mut marks, on_event, trace);
        drop(lanes);
        drop(handed_back);
        (result, marks.finish(store).map_err(&store_err))
    });
    // A mark refused for want of a hold is a lapse, noticed before or not: the tick
    // may have waited on a stalled connection all the while its holds ran out.
    if marks.taken_over() > 0 && marks.tally.lapsed.is_none() {
        marks.tally.lapsed = Some(run.heartbeat.lapsed_for(marks.taken_over()));
    }
    run.heartbeat.stop();
    let tally = marks.tally;
    let_go(store, run, opts, &tally, result.is_ok() && cleanup.is_ok());
    log_unshown(&tally);
    (result.and(cleanup), tally)
}

/// Counts, as the tick begins, the records its pages will step over because other
/// ticks hold them, on a backend that counts them once (`held_by_others`); returns
/// whether it did.
fn count_held(store: &mut dyn Store, run: &Run, begun: &Begun<'_>, tally: &mut Tally) -> bool {
    match store.held_by_others(&run.owner, &begun.query) {
        Ok(held) => {
            tally.skipped += held.unwrap_or(0);
            held.is_some()
        }
        Err(e) => {
            tracing::warn!("cannot count the records other ticks hold: {e}");
            false
        }
    }
}

/// Lets go of the records the tick holds still (taken and not handed out). A tick
/// that did not read its band to the end (`ok` false, or it stopped early) first
/// withdraws how far it read: the others must not step over those records as read
/// (`reach`), neither in its stretches nor in theirs that meet them (read while it
/// held them).
fn let_go(store: &mut dyn Store, run: &Run, opts: &TickOptions, tally: &Tally, ok: bool) {
    let done = ok
        && tally.handler_broken().is_none()
        && tally.lapsed.is_none()
        && tally.breaker.is_none()
        && !tally.stopped;
    if !done
        && let Err(e) = store.withdraw_reach(
            opts.window,
            (run.id, &run.owner),
            tally.withdrawal.as_deref(),
        )
    {
        tracing::warn!("cannot withdraw how far this tick has read: {e}");
    }
    if let Err(e) = store.release(&run.owner) {
        tracing::warn!(
            "cannot release this tick's records (they are free again within {}): {e}",
            duration::compact(opts.lease)
        );
    }
}

/// Closes the run-log row with the counts and the outcome; after a tick whose band
/// held nothing pending, says so if the file's statuses look misspelled.
fn close(
    table: &TableConfig,
    store: &mut dyn Store,
    query: &BandQuery,
    run: &Run,
    result: &Result<(), Error>,
    tally: &Tally,
) -> Result<(), Error> {
    store
        .finish_run(run.id, &tally.run_end(result))
        .map_err(Error::store(store.describe()))?;
    if result.is_ok() && tally.selected + tally.skipped + tally.deferred + tally.unreadable == 0 {
        super::near_statuses::warn_of_near_statuses(table, store, query);
    }
    Ok(())
}

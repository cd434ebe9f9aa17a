//! `process_backlog`: one tick of one tier, from its band to its run-log row.
//!
//! It works out the band and what the tick wants of it, opens the run-log row, starts
//! the heartbeat and the lanes, runs the loop (`hand_out`), then, whatever happened,
//! writes the marks of what was handled, lets go of the rest and closes the row.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use chrono::Utc;

use super::hand_out::{Plan, hand_out};
use super::heartbeat::HeartbeatThread;
use super::lanes::Lanes;
use super::marks::{MarkPlan, Marks, log_unshown};
use super::options::{Event, TickOptions};
use super::pager::Pager;
use super::summary::{BandSummary, TickSummary};
use super::tally::Tally;
use super::wanted::retry_due;
use crate::config::TableConfig;
use crate::duration;
use crate::error::Error;
use crate::handler::{Context, Handler};
use crate::record::Record;
use crate::schedule::{BandMode, Schedule};
use crate::store::{BandQuery, RunEnd, RunStart, Store};

static TICKS_IN_PROCESS: AtomicU64 = AtomicU64::new(0);

/// A name for this tick in the tool's holds and claims: host, process, and a count for ticks run
/// by one process.
pub(super) fn owner_name() -> String {
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
    // A dry run hands nothing over: it needs no handler, and a missing one is no reason
    // not to preview a tick.
    let mut handler: Box<dyn Handler> = if opts.dry_run {
        Box::new(crate::handler::FnHandler(|_: &Record| {
            unreachable!("a dry run hands no record over")
        }))
    } else {
        match crate::handler::from_config(&config.handler, &config.dir) {
            Ok(handler) => handler,
            Err(source) => {
                let e = Error::Handler {
                    file: Some(config.path.display().to_string()),
                    source,
                };
                super::record_failed_start(&config.path, opts.window, opts.now, &e);
                return Err(e);
            }
        }
    };
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
/// `handler` (`opts.concurrency` at once), and returns what it did.
///
/// A record's failure is an outcome, counted in the summary, not an error: the error,
/// a [`crate::Error`], says the tick could not run (the database is unusable, the
/// handler cannot start). A tick the breaker or a lapsed hold stopped returns its
/// summary, which says so (`breaker`, `lapsed`). Every call below returns
/// `backlog::Error` or converts into it.
///
/// ```
/// use std::time::Duration;
///
/// use backlog::chrono::Utc;
/// use backlog::{Config, FnHandler, Outcome, Record, Scalar, TickOptions};
///
/// fn main() -> Result<(), backlog::Error> {
///     // What `backlog init` writes: a schedule file and a SQLite backlog beside it.
///     let dir = std::env::temp_dir().join(format!("backlog-doc-{}", std::process::id()));
///     backlog::demo::write(&dir, true, Utc::now())?;
///     let config = Config::load(&dir.join("backlog.toml"))?;
///     let mut store = backlog::open_store(&config)?;
///     // Even ids succeed; the others stay pending, to be tried on a later tick.
///     let mut handler = FnHandler(|record: &Record| match record.id {
///         Scalar::Int(id) if id % 2 == 0 => Outcome::Success,
///         _ => Outcome::Error,
///     });
///     let day = Duration::from_secs(86_400);
///     let opts = TickOptions::for_config(&config, day, Utc::now());
///     let summary = backlog::process_backlog(
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
        take_tried: opts.retry_failed,
        clock: opts.now,
        wants_all: tier.is_none_or(|(_, t)| t.takes_all()) && retry.is_none(),
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
        lost: 0,
        statuses: BTreeMap::new(),
        limit,
        limit_reached: false,
        stopped: false,
        breaker: None,
        lapsed: None,
        handler_broken: None,
        unreadable: 0,
        unreadable_sample: None,
        other_offset: 0,
        other_offset_sample: None,
        concurrency: opts.concurrency.max(1),
        seconds: 0.0,
        paused: None,
    };

    // A person paused this tier (or every tier): every runner obeys, on every host.
    if !opts.dry_run {
        summary.paused = store.paused(opts.window).map_err(&store_err)?;
        if summary.paused.is_some() {
            summary.seconds = started.elapsed().as_secs_f64();
            return Ok(summary);
        }
    }

    if opts.dry_run {
        let mut unreadable = Tally::default();
        let mut pager = Pager::new(&query);
        while summary.selected < limit {
            let want = opts.page_size.min((limit - summary.selected) as usize);
            let Some(page) = pager.next(store, want).map_err(&store_err)? else {
                break;
            };
            for record in page.iter().filter(|r| takes(r)) {
                if unreadable.left_alone(record, &format) {
                    continue;
                }
                on_event(Event::WouldHandle { record });
                summary.selected += 1;
            }
            summary.deferred += page.iter().filter(|r| !takes(r)).count() as u64;
        }
        summary.unreadable = unreadable.unreadable;
        summary.unreadable_sample = unreadable.unreadable_sample;
        summary.other_offset = unreadable.other_offset;
        summary.other_offset_sample = unreadable.other_offset_sample;
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
            history: opts.history.clone(),
        })
        .map_err(&store_err)?;
    summary.run_id = Some(run_id);
    let heartbeat = HeartbeatThread::start(
        store.heartbeat(&owner, run_id).map_err(&store_err)?,
        opts.lease,
    );

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
        crate::explain::next_attempt(schedule, inserted, Some(&id), after_now)
            .map(|(_, at)| (at - slack).max(after_now))
    };
    let mark_plan = MarkPlan {
        owner: &owner,
        now: opts.now,
        run_id,
        window: opts.window,
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
    let plan = Plan {
        opts,
        query: &query,
        limit,
        owner: &owner,
        ctx: Context {
            table: &table.name,
            window: opts.window,
            age: None,
            cancel: Some(heartbeat.lapsed_flag()),
        },
        takes: &takes,
        heartbeat: &heartbeat,
        format: &format,
    };
    // Records its pages will step over because other ticks hold them, on a backend
    // that counts them once, as the tick begins.
    match store.held_by_others(&owner, &query) {
        Ok(held) => marks.tally.skipped += held.unwrap_or(0),
        Err(e) => tracing::warn!("cannot count the records other ticks hold: {e}"),
    }
    // The pool's workers live in this scope: they may borrow the handler, and all of
    // them are joined (their records answered) before the last marks are written. On
    // a server the marks go to a connection of their own once a group is due before
    // the end (`Marks::open_writer`). Whatever happened, what was handled is written
    // before the holds are let go (the heartbeat stops first, so that it does not find
    // the holds gone and call them lapsed).
    let (result, cleanup) = std::thread::scope(|scope| {
        let mut lanes = Lanes::new(handler, opts.concurrency, scope);
        let result = hand_out(&plan, store, &mut lanes, &mut marks, on_event);
        drop(lanes);
        (result, marks.finish(store).map_err(&store_err))
    });
    drop(heartbeat);
    if let Err(e) = store.release(&owner) {
        tracing::warn!(
            "cannot release this tick's records (they are free again within {}): {e}",
            duration::compact(opts.lease)
        );
    }
    let result = result.and(cleanup);
    let tally = marks.tally;
    log_unshown(&tally);
    let broken = tally.handler_broken();
    let end = RunEnd {
        selected: tally.selected,
        succeeded: tally.succeeded,
        failed: tally.failed,
        skipped: tally.skipped,
        lost: tally.lost,
        outcome: match (&result, &tally.lapsed, &tally.breaker, tally.stopped) {
            (Err(_), ..) => "failed",
            _ if broken.is_some() => "failed",
            (Ok(()), Some(_), ..) => "lapsed",
            (Ok(()), None, Some(_), _) => "tripped",
            (Ok(()), None, None, true) => "stopped",
            (Ok(()), None, None, false) => "done",
        },
        error: match &result {
            Err(e) => Some(e.to_string()),
            Ok(()) => broken
                .clone()
                .or_else(|| tally.lapsed.clone())
                .or_else(|| tally.breaker.clone()),
        },
    };
    let logged = store.finish_run(run_id, &end).map_err(&store_err);
    result?;
    logged?;
    if tally.selected + tally.skipped + tally.deferred + tally.unreadable == 0 {
        warn_of_near_statuses(table, store, &query);
    }

    summary.selected = tally.selected;
    summary.succeeded = tally.succeeded;
    summary.failed = tally.failed;
    summary.skipped = tally.skipped;
    summary.deferred = tally.deferred;
    summary.lost = tally.lost;
    summary.statuses = tally
        .statuses
        .into_iter()
        .map(|(status, n)| (status.to_string(), n))
        .collect();
    summary.stopped = tally.stopped;
    summary.breaker = tally.breaker;
    summary.lapsed = tally.lapsed;
    summary.handler_broken = broken;
    summary.unreadable = tally.unreadable;
    summary.unreadable_sample = tally.unreadable_sample;
    summary.other_offset = tally.other_offset;
    summary.other_offset_sample = tally.other_offset_sample;
    summary.limit_reached = tally.selected == limit;
    summary.seconds = started.elapsed().as_secs_f64();
    Ok(summary)
}

/// After a tick whose band held nothing pending: if a sample of the band holds
/// statuses that differ from a pending value only in case (`new` where the file says
/// `NEW`), the file likely names the wrong values, and the tick said nothing: say it,
/// once a tick. A sample of 1,000 records keeps this from costing a band's read.
fn warn_of_near_statuses(table: &TableConfig, store: &mut dyn Store, band: &BandQuery) {
    let range = crate::store::Range {
        from: Some(band.from.clone()),
        to: Some(band.to.clone()),
        to_inclusive: band.to_inclusive,
        sample: Some(1000),
        ..Default::default()
    };
    let Ok(counts) = store.count_by_status(&range) else {
        return;
    };
    let near: Vec<String> = counts
        .iter()
        .filter_map(|(status, n)| {
            let pending = table
                .pending
                .iter()
                .find(|p| p.eq_ignore_ascii_case(status) && *p != status)?;
            Some(format!("{n} {status:?} (the file says {pending:?})"))
        })
        .collect();
    if !near.is_empty() {
        tracing::warn!(
            "no record of this band is pending, yet a sample of it holds statuses that differ from a pending value only in case: {}; statuses are compared exactly: set table.pending to the table's own values (backlog doctor lists them)",
            near.join(", ")
        );
    }
}

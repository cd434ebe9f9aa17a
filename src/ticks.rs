//! A tier's tick as the command and the library run it: its store opened by the
//! driver of its URL, its handler made from the schedule file (or the program's own),
//! and the file's pings and alerts around it (the core's `process_backlog` does the
//! tick itself).

use chrono::{DateTime, Utc};

use backlog_core::handler::Handler;
use backlog_core::record::Record;
use backlog_core::store::Store;
use backlog_core::tick::{
    Event, TickOptions, TickSummary, enter_tick_span, open_store, process_backlog,
};
use backlog_core::{Config, Error};

/// The time the runners share now: the database server's where there is one (the
/// same for runners on hosts whose clocks disagree), this host's on SQLite.
pub fn shared_now(config: &Config, store: &mut dyn Store) -> Result<DateTime<Utc>, Error> {
    match config.database.url.is_server() {
        true => store.clock().map_err(Error::store(store.describe())),
        false => Ok(Utc::now()),
    }
}

/// Runs one tick of a schedule file's tier: opens its store and its handler (`own`, the
/// program's, or else the file's), then `process_backlog`. What each tick of the
/// daemon does.
pub fn run_tick(
    config: &Config,
    opts: &TickOptions,
    own: Option<&mut dyn Handler>,
    on_event: &mut dyn FnMut(Event<'_>),
) -> Result<TickSummary, Error> {
    let _in_span = enter_tick_span(&config.schedule, opts.window);
    let mut store = match open_store(config) {
        Ok(store) => store,
        Err(e) => {
            if !opts.dry_run {
                crate::alert::unreachable(config, opts.window, opts.now, &e);
            }
            return Err(e);
        }
    };
    run_tick_on(config, store.as_mut(), opts, own, on_event)
}

/// As `run_tick`, on the store the caller opened: `backlog run` opens one, and reads
/// the database's clock, `--if-due` and the metrics on it too. Pings and alerts as
/// the file's `[alert]` says (none for a dry run), once the run-log row is closed.
pub fn run_tick_on(
    config: &Config,
    store: &mut dyn Store,
    opts: &TickOptions,
    own: Option<&mut dyn Handler>,
    on_event: &mut dyn FnMut(Event<'_>),
) -> Result<TickSummary, Error> {
    // The handler's lines (a batch handler's end), the pings' and the alerts' name
    // the tier too.
    let _in_span = enter_tick_span(&config.schedule, opts.window);
    if opts.dry_run {
        return tick_on(config, store, opts, own, on_event, &mut false);
    }
    crate::alert::tick_starting(config, opts.window);
    let mut started = false;
    let result = tick_on(config, store, opts, own, on_event, &mut started);
    crate::alert::tick_ended(config, store, opts.window, opts.now, &result, started);
    result
}

/// `run_tick_on` without its pings and alerts; `started` is set once the handler
/// is made (an error before is a tick that could not start).
fn tick_on(
    config: &Config,
    store: &mut dyn Store,
    opts: &TickOptions,
    own: Option<&mut dyn Handler>,
    on_event: &mut dyn FnMut(Event<'_>),
    started: &mut bool,
) -> Result<TickSummary, Error> {
    if let Some(handler) = own {
        *started = true;
        return process_backlog(
            &config.schedule,
            &config.table,
            store,
            handler,
            opts,
            on_event,
        );
    }
    // A dry run hands nothing over: it needs no handler, and a missing one is no reason
    // not to preview a tick.
    let mut handler: Box<dyn Handler> = if opts.dry_run {
        Box::new(backlog_core::handler::FnHandler(|_: &Record| {
            unreachable!("a dry run hands no record over")
        }))
    } else {
        match backlog_core::handler::from_config(&config.handler, &config.dir, &config.table.name) {
            Ok(handler) => handler,
            Err(source) => {
                let e = Error::Handler {
                    file: Some(config.path.display().to_string()),
                    source,
                };
                crate::failed_start::record_failed_start_on(
                    store,
                    config,
                    opts.window,
                    opts.now,
                    &e,
                );
                return Err(e);
            }
        }
    };
    *started = true;
    process_backlog(
        &config.schedule,
        &config.table,
        store,
        handler.as_mut(),
        opts,
        on_event,
    )
}

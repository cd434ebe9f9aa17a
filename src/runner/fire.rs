//! One tick of the daemon on a thread of its own, and how it ended: what the daemon
//! does next (the next slot, a doubling pause after a database failure, or the rest
//! of the band at once after a tick that ended early).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::{Scope, ScopedJoinHandle};
use std::time::Duration;

use super::Handlers;
use super::clocks::Shared;
use backlog_core::Error;
use backlog_core::config::Config;
use backlog_core::store::StoreError;
use backlog_core::tick::TickOptions;

/// Whether an error is the database being out of reach, which waiting may cure.
pub(super) fn unreachable(e: &Error) -> bool {
    matches!(
        e,
        Error::Store {
            source: StoreError::Connect { .. },
            ..
        }
    )
}

/// The pause before the `n`th try again (from 1) of a tier whose tick failed on the
/// database: 5 s, doubling, at most 5 minutes.
pub(super) fn retry_pause(n: u32) -> Duration {
    Duration::from_secs(5 << n.saturating_sub(1).min(6)).min(Duration::from_secs(300))
}

/// How a tick of the daemon ended, for what the daemon does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ended {
    /// It ran (its records' outcomes whatever they were), or failed in a way a try
    /// again soon would not mend (the handler): the tier's next slot.
    Ran,
    /// It failed on the database: tried again after a pause that doubles.
    DatabaseFailed,
    /// It ended before its band did, not because the daemon stops (its holds lapsed):
    /// the rest of the band is taken again at once.
    Unfinished,
}

/// Starts one tick of `window` on a thread of its own in `scope`, at `shared`'s time,
/// with the handler `handlers` says; it returns how the tick ended.
pub(super) fn fire<'scope>(
    scope: &'scope Scope<'scope, '_>,
    handlers: Handlers<'scope>,
    config: &Config,
    window: Duration,
    shared: Shared,
    stop: &Arc<AtomicBool>,
) -> ScopedJoinHandle<'scope, Ended> {
    let config = config.clone();
    let stop = Arc::clone(stop);
    // The tick's span for the whole thread: its summary and the lines after it name
    // its tier too, and `process_backlog` enters no second one.
    let span = backlog_core::tick::tick_span(&config.schedule, window);
    scope.spawn(move || {
        let _in_span = span.enter();
        let mut opts = TickOptions::for_config(&config, window, shared.now());
        opts.stop = Arc::clone(&stop);
        match handlers.tick(&config, &opts) {
            Ok(s) => {
                // The fields are `cli::output::SUMMARY_FIELDS`, and the run-log row.
                tracing::info!(
                    window = %s.window,
                    tier = s.tier,
                    run_id = s.run_id,
                    selected = s.selected,
                    succeeded = s.succeeded,
                    failed = s.failed,
                    skipped = s.skipped,
                    deferred = s.deferred,
                    given_up = s.given_up,
                    seconds = s.seconds,
                    "{}",
                    s.line(&config.table)
                );
                if let Some(why) = &s.breaker {
                    tracing::warn!("the tick stopped after {why}");
                }
                if let Some(why) = &s.handler_broken {
                    tracing::error!("tick failed: {why}");
                }
                if let Some(why) = &s.lapsed {
                    tracing::warn!("the tick stopped: {why}");
                    return Ended::Unfinished;
                }
                // A stop the daemon did not ask for (a library's flag) is finished too.
                match s.stopped && !stop.load(Ordering::Relaxed) {
                    true => Ended::Unfinished,
                    false => Ended::Ran,
                }
            }
            Err(e) => {
                tracing::error!("tick failed: {e}");
                // A lost connection mid-tick, or a write refused, is a database error.
                match e {
                    Error::Store { .. } => Ended::DatabaseFailed,
                    _ => Ended::Ran,
                }
            }
        }
    })
}

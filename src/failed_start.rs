//! A tick that could not start (a bad edit of the schedule file, a handler that is
//! not executable) still leaves a row in the run log when the database can be
//! reached: `status`, `status --check` and the metrics then show why a tier went quiet,
//! instead of asking whether cron runs at all; and the file's `[alert]`, as far as
//! it reads, tells a person.

use std::path::Path;
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::alert::Route;
use backlog_core::Error;
use backlog_core::config::{Config, HistoryConfig};
use backlog_core::store::{RunEnd, RunStart, Store};
use backlog_core::tick::owner_name;

/// Records, as best it can, that a tick of `window` on the schedule file at `path`
/// could not start because of `error`: for a file that does not load, read as far as
/// its `[database]`, `[table]` and tier windows go. Only the file's and the handler's
/// faults are recorded: a database that cannot be reached has no run log to write
/// to, and a wrong command line names no tier. Says nothing when it cannot: the
/// error itself is what the caller reports.
pub fn record_failed_start(path: &Path, window: Duration, now: DateTime<Utc>, error: &Error) {
    // Standard input was read once, by the load that failed.
    if !matches!(error, Error::Config(_) | Error::Handler { .. })
        || backlog_core::config::is_stdin(path)
    {
        return;
    }
    // The file's `[history]` when it loads; otherwise nothing is pruned (an attempt is
    // kept "for ever" by this row), since how long to keep them is unknown.
    // Its `[alert]` too, as far as it reads: a bad edit at 3 a.m. reaches a person.
    let (database, table, windows, history, alert) = match Config::load(path) {
        Ok(config) => {
            let windows = config.schedule.tiers.iter().map(|t| t.window).collect();
            (
                config.database,
                config.table,
                windows,
                config.history,
                config.alert,
            )
        }
        Err(_) => match Config::database_of(path) {
            Some((database, table, windows)) => {
                let mut history = HistoryConfig::default();
                history.keep = backlog_core::duration::LONGEST;
                let alert = Config::alert_of(path).unwrap_or_default();
                (database, table, windows, history, alert)
            }
            None => return,
        },
    };
    // Only a window of the file: a typo would invent a tier.
    let Some(tier) = windows.iter().position(|w| *w == window) else {
        return;
    };
    let Ok(mut store) = backlog_core::store::open(&database, &table) else {
        return;
    };
    let start = failed_start(window, now, database.claim_lease, history);
    record(store.as_mut(), start, error);
    let dir = backlog_core::config::dir_of(path);
    let route = Route {
        alert: &alert,
        dir: &dir,
        database: &database,
        table: &table,
    };
    crate::alert::not_started(route, store.as_mut(), Some(tier + 1), window, now, error);
}

/// Records that a tick of a file that loaded could not start (its handler cannot be
/// made), on the store the tick opened.
pub(crate) fn record_failed_start_on(
    store: &mut dyn Store,
    config: &Config,
    window: Duration,
    now: DateTime<Utc>,
    error: &Error,
) {
    if config.schedule.tier(window).is_none() {
        return;
    }
    let start = failed_start(
        window,
        now,
        config.database.claim_lease,
        config.history.clone(),
    );
    record(store, start, error);
}

/// The run-log row of a tick that could not start.
fn failed_start(
    window: Duration,
    now: DateTime<Utc>,
    lease: Duration,
    history: HistoryConfig,
) -> RunStart {
    RunStart {
        window,
        tier: None,
        younger: Duration::ZERO,
        older: Duration::ZERO,
        bands: "not started",
        now,
        owner: owner_name(),
        lease,
        history,
    }
}

fn record(store: &mut dyn Store, start: RunStart, error: &Error) {
    let recorded = store
        .inspect()
        .and_then(|_| store.ensure_own_tables())
        .and_then(|()| store.begin_run(&start))
        .and_then(|run_id| {
            store.finish_run(
                run_id,
                &RunEnd {
                    outcome: "failed",
                    error: Some(format!("the tick could not start: {error}")),
                    ..RunEnd::default()
                },
            )
        });
    if let Err(e) = recorded {
        tracing::debug!("could not record the failed start in the run log: {e}");
    }
}

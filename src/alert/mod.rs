//! Alerts that reach a person: what `[alert]` sends when a tick fails, lapses, cannot
//! start or trips its breaker, or a tier is overdue, and the healthchecks.io pings of
//! every tick.
//!
//! An alert goes out after the tick's run-log row is closed, at most once per tier,
//! kind and `alert_every` across every runner (`backlog_alerts` keeps the last one
//! sent and counts those held back). An alert counts as sent only once a channel took
//! it: the claim of one that no channel took is given back, so the next tick's alert
//! of its tier and kind goes out rather than being held back by a failure. Delivering
//! never changes the tick's outcome or exit code: a channel that fails, or that a
//! variable not set leaves out, is a warning on every tick and in `status --check`
//! (`trouble`). A dry run sends nothing.

mod deliver;
mod event;
mod local;
mod resolved;
mod trouble;

use std::path::Path;
use std::time::Duration;

use chrono::{DateTime, Utc};

pub use event::{Event, Kind};
pub use trouble::check_findings;

use backlog_core::Error;
use backlog_core::config::{AlertConfig, Config, DatabaseConfig, TableConfig};
use backlog_core::store::{Claim, Store};
use backlog_core::tick::TickSummary;

/// Where the alerts of one schedule file go, and the database that deduplicates
/// them: a whole `Config`'s, or what a file that does not load still says.
#[derive(Debug, Clone, Copy)]
pub struct Route<'a> {
    /// The `[alert]` section.
    pub alert: &'a AlertConfig,
    /// The schedule file's folder, where a relative `command` is found and run.
    pub dir: &'a Path,
    /// The database `backlog_alerts` is in.
    pub database: &'a DatabaseConfig,
    /// The backlog table the alerts are about.
    pub table: &'a TableConfig,
}

impl<'a> Route<'a> {
    /// The route of a schedule file that loaded.
    pub fn of(config: &'a Config) -> Route<'a> {
        Route {
            alert: &config.alert,
            dir: &config.dir,
            database: &config.database,
            table: &config.table,
        }
    }

    /// Pings `URL/N` (`URL` for 0) of the tier `tier` (of `window`): how its tick
    /// ended, by its exit code. `URL` 0 is healthchecks.io's success: what a tier
    /// that failed hears when it ticks clean again.
    pub fn ping_end(&self, tier: Option<usize>, window: Duration, code: u8) {
        if let Some(url) = self.alert.ping_for(tier, window) {
            match code {
                0 => deliver::ping(&url, true),
                n => deliver::ping(&url.with_path_suffix(&format!("/{n}")), true),
            }
        }
    }
}

/// The tier of `window` in `config`'s schedule, if one has it.
fn tier_of(config: &Config, window: Duration) -> Option<usize> {
    config.schedule.tier(window).map(|(n, _)| n)
}

/// As a tick of `window` begins: warns of each key of `[alert]` a variable not set
/// leaves out, and pings its tier's `URL/start` (tried once: a lost start costs
/// healthchecks.io a duration, while waiting on a retry would keep every record of
/// the tick waiting).
pub fn tick_starting(config: &Config, window: Duration) {
    trouble::warn_unset(config);
    if let Some(url) = config.alert.ping_for(tier_of(config, window), window) {
        deliver::ping(&url.with_path_suffix("/start"), false);
    }
}

/// After a tick's run-log row is closed: pings its outcome (`URL`, or `URL/N` with
/// the exit code it ends with) and raises the alert it calls for, if any. `started`
/// says whether the tick got as far as its handler.
pub fn tick_ended(
    config: &Config,
    store: &mut dyn Store,
    window: Duration,
    now: DateTime<Utc>,
    result: &Result<TickSummary, Error>,
    started: bool,
) {
    trouble::keep_unset(config, store, now);
    let event = Event::of_tick(config, window, now, result, started);
    let route = Route::of(config);
    let code = event.as_ref().and_then(|e| e.exit_code).unwrap_or(0);
    route.ping_end(tier_of(config, window), window, code);
    match event {
        Some(event) => {
            raise(route, Some(&mut *store), window, now, event);
        }
        // A tick of a paused tier handled nothing: no news that it is well.
        None if result.as_ref().is_ok_and(|s| s.paused.is_none()) => {
            resolved::ticked_clean(config, store, window, now);
        }
        None => {}
    }
    if let Ok(summary) = result
        && let Some(event) = Event::of_given_up(config, window, now, summary)
    {
        raise(Route::of(config), Some(store), window, now, event);
    }
}

/// After a tick of a schedule file that does not load was recorded as not started:
/// pings its exit code and raises `tick_not_started` with what the file still says
/// (`tier`: the window's place among the file's tiers).
pub fn not_started(
    route: Route<'_>,
    store: &mut dyn Store,
    tier: Option<usize>,
    window: Duration,
    now: DateTime<Utc>,
    error: &Error,
) {
    let code = crate::exit_code::ExitCode::of(error) as u8;
    route.ping_end(tier, window, code);
    let mut event = Event::new(
        &route.table.name,
        tier,
        window,
        Kind::TickNotStarted,
        now,
        error.to_string(),
    );
    event.exit_code = Some(code);
    raise(route, Some(store), window, now, event);
}

/// A tick that could not start because its database cannot be reached (or would not
/// answer): pings its exit code and raises `tick_not_started`, held back on this host
/// alone (`backlog_alerts` is out of reach). Other errors say nothing: a tick that
/// began has alerted already, and a wrong command line names no tier.
pub fn unreachable(config: &Config, window: Duration, now: DateTime<Utc>, error: &Error) {
    if !matches!(error, Error::Store { .. }) {
        return;
    }
    // The tick's start, as far as it got.
    trouble::warn_unset(config);
    let route = Route::of(config);
    let code = crate::exit_code::ExitCode::of(error) as u8;
    route.ping_end(tier_of(config, window), window, code);
    let message = format!("the tick could not start: {error}");
    let mut event = Event::about(config, window, Kind::TickNotStarted, now, message);
    event.exit_code = Some(code);
    // Not the database again (a host that does not answer costs its connect timeout).
    let claimed = Err(error.to_string());
    send(route, claimed, None, window, now, event);
}

/// Sends `event` about the tier of `window`, unless another of its kind went out
/// less than `alert_every` before `now`; returns whether it was not held back (its
/// delivery was tried). Without the store's word (its database cannot be reached)
/// this host's files judge, and where they cannot the alert is sent: twice is better
/// than never.
pub fn raise(
    route: Route<'_>,
    store: Option<&mut dyn Store>,
    window: Duration,
    now: DateTime<Utc>,
    event: Event,
) -> bool {
    if !route.alert.sends() {
        return false;
    }
    let (kind, every) = (event.kind.name(), route.alert.every);
    let claim = |store: &mut dyn Store| store.claim_alert(window, kind, now, every);
    let mut claimed = Err(String::new());
    // The store that claimed: told again when no channel took the alert.
    let mut by: Option<&mut dyn Store> = None;
    if let Some(store) = store
        && let Ok(c) = claim(&mut *store)
    {
        claimed = Ok(c);
        by = Some(store);
    }
    // After a failed tick its connection may be gone: the claim takes a new one.
    let mut opened = None;
    if by.is_none() {
        claimed = match backlog_core::store::open(route.database, route.table) {
            Ok(store) => {
                let store = opened.insert(store).as_mut();
                let c = claim(&mut *store);
                by = Some(store);
                c.map_err(|e| e.to_string())
            }
            Err(e) => Err(e.to_string()),
        };
    }
    send(route, claimed, by, window, now, event)
}

/// Sends `event` as `claimed` allows (the database's word, through `by`, or why it
/// has none: this host's then); returns whether it was not held back. A claim whose
/// alert no channel took is given back.
fn send(
    route: Route<'_>,
    claimed: Result<Option<Claim>, String>,
    mut by: Option<&mut dyn Store>,
    window: Duration,
    now: DateTime<Utc>,
    mut event: Event,
) -> bool {
    let alert = route.alert;
    if !alert.sends() {
        return false;
    }
    let kind = event.kind.name();
    let mut host_file = None;
    let claim = match claimed {
        Ok(Some(Claim::HeldBack)) => {
            tracing::info!(
                "alert {kind} of the {} tier held back: one went out less than {} ago",
                event.window,
                backlog_core::duration::compact(alert.every)
            );
            return false;
        }
        Ok(claim) => claim,
        Err(e) => {
            tracing::debug!("alert {kind} deduplicated on this host alone: {e}");
            by = None;
            let url = route.database.url.to_string();
            match local::claim(&url, &route.table.name, window, kind, now, alert.every) {
                Some((Claim::HeldBack, _)) => {
                    tracing::info!(
                        "alert {kind} of the {} tier held back: one went out from this host less than {} ago",
                        event.window,
                        backlog_core::duration::compact(alert.every)
                    );
                    return false;
                }
                Some((claim, path)) => {
                    host_file = Some(path);
                    Some(claim)
                }
                None => {
                    tracing::warn!("alert {kind} sent without deduplication: {e}");
                    None
                }
            }
        }
    };
    if let Some(Claim::Send { held_back, .. }) = claim {
        event.held_back = held_back;
    }
    let delivered = deliver_event(route, by.as_deref_mut(), &event, now);
    if delivered && event.kind.opens() {
        // Its tier's next clean tick says `resolved`, whichever runner ticks.
        resolved::opened(route, by.as_deref_mut(), window, kind, now);
    }
    if !delivered && let Some(claim) = claim {
        // Not sent: the next alert of this tier and kind goes out, counting this one.
        tracing::info!(
            "alert {kind} of the {} tier was not delivered: the next tick's alert tries again",
            event.window
        );
        match (by, host_file) {
            (Some(store), _) => {
                if let Err(e) = store.release_alert(window, kind, now, claim) {
                    tracing::warn!("cannot give back the claim of alert {kind}: {e}");
                }
            }
            (None, Some(path)) => local::release(&path, now, claim),
            (None, None) => {}
        }
    }
    true
}

/// Sends `event` to every channel of `route`, noting in `by` (where the database
/// answers) how each delivery went; whether any channel took it.
fn deliver_event(
    route: Route<'_>,
    mut by: Option<&mut (dyn Store + '_)>,
    event: &Event,
    now: DateTime<Utc>,
) -> bool {
    let alert = route.alert;
    let json = event.json();
    let mut delivered = false;
    if let Some(url) = &alert.webhook {
        let ok = deliver::webhook(url, &json);
        trouble::keep_delivery(by.as_deref_mut(), "webhook", ok, now);
        delivered |= ok;
    }
    if let Some(command) = &alert.command {
        let ok = deliver::command(command, route.dir, &json, alert.command_timeout);
        trouble::keep_delivery(by, "command", ok, now);
        delivered |= ok;
    }
    delivered
}

/// Raises `tier_overdue` for the tier of `window`, late by `message` (the daemon's
/// check, `runner::overdue`), and pings `URL/fail` when it is sent.
pub fn tier_overdue(
    config: &Config,
    store: &mut dyn Store,
    window: Duration,
    now: DateTime<Utc>,
    message: String,
) {
    let event = Event::about(config, window, Kind::TierOverdue, now, message);
    if raise(Route::of(config), Some(store), window, now, event)
        && let Some(url) = config.alert.ping_for(tier_of(config, window), window)
    {
        deliver::ping(&url.with_path_suffix("/fail"), true);
    }
}

//! Alerts that reach a person: what `[alert]` sends when a tick fails, lapses, cannot
//! start or trips its breaker, or a tier is overdue, and the healthchecks.io pings of
//! every tick.
//!
//! An alert goes out after the tick's run-log row is closed, at most once per tier,
//! kind and `alert_every` across every runner (`backlog_alerts` keeps the last one
//! sent and counts those held back). Delivering is best effort: a command or a server
//! that fails is a warning, and never changes the tick's outcome or exit code. A dry
//! run sends nothing.

mod deliver;
mod event;
mod local;

use std::path::Path;
use std::time::Duration;

use chrono::{DateTime, Utc};

pub use event::{Event, Kind};

use crate::config::{AlertConfig, Config, DatabaseConfig, TableConfig};
use crate::error::Error;
use crate::store::{Claim, Store};
use crate::tick::TickSummary;

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

    /// Pings `URL/N` (`URL` for 0): how a tick ended, by its exit code.
    pub fn ping_end(&self, code: u8) {
        if let Some(url) = &self.alert.ping {
            match code {
                0 => deliver::ping(url),
                n => deliver::ping(&url.with_path_suffix(&format!("/{n}"))),
            }
        }
    }
}

/// Pings `URL/start` as a tick begins.
pub fn tick_starting(config: &Config) {
    if let Some(url) = &config.alert.ping {
        deliver::ping(&url.with_path_suffix("/start"));
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
    let event = Event::of_tick(config, window, now, result, started);
    let route = Route::of(config);
    route.ping_end(event.as_ref().and_then(|e| e.exit_code).unwrap_or(0));
    if let Some(event) = event {
        raise(route, Some(&mut *store), window, now, event);
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
    let code = error.exit_code() as u8;
    route.ping_end(code);
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
    let route = Route::of(config);
    let code = error.exit_code() as u8;
    route.ping_end(code);
    let message = format!("the tick could not start: {error}");
    let mut event = Event::about(config, window, Kind::TickNotStarted, now, message);
    event.exit_code = Some(code);
    // Not the database again (a host that does not answer costs its connect timeout).
    let claimed = Err(error.to_string());
    send(route, claimed, window, now, event);
}

/// Sends `event` about the tier of `window`, unless another of its kind went out
/// less than `alert_every` before `now`; returns whether it was sent. Without the
/// store's word (its database cannot be reached) this host's files judge, and where
/// they cannot the alert is sent: twice is better than never.
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
    // After a failed tick its connection may be gone: the claim takes a new one.
    let claimed = match store.map(&claim) {
        Some(Ok(c)) => Ok(c),
        _ => crate::store::open(route.database, route.table)
            .and_then(|mut store| claim(store.as_mut())),
    };
    send(
        route,
        claimed.map_err(|e| e.to_string()),
        window,
        now,
        event,
    )
}

/// Sends `event` as `claimed` allows (the database's word, or why it has none: this
/// host's then); returns whether it was sent.
fn send(
    route: Route<'_>,
    claimed: Result<Option<Claim>, String>,
    window: Duration,
    now: DateTime<Utc>,
    mut event: Event,
) -> bool {
    let alert = route.alert;
    if !alert.sends() {
        return false;
    }
    let kind = event.kind.name();
    match claimed {
        Ok(Some(Claim::HeldBack)) => {
            tracing::info!(
                "alert {kind} of the {} tier held back: one went out less than {} ago",
                event.window,
                crate::duration::compact(alert.every)
            );
            return false;
        }
        Ok(Some(Claim::Send { held_back })) => event.held_back = held_back,
        Ok(None) => {}
        Err(e) => {
            tracing::debug!("alert {kind} deduplicated on this host alone: {e}");
            let url = route.database.url.to_string();
            let local = local::claim(&url, &route.table.name, window, kind, now, alert.every);
            match local {
                Some(Claim::HeldBack) => {
                    tracing::info!(
                        "alert {kind} of the {} tier held back: one went out from this host less than {} ago",
                        event.window,
                        crate::duration::compact(alert.every)
                    );
                    return false;
                }
                Some(Claim::Send { held_back }) => event.held_back = held_back,
                None => tracing::warn!("alert {kind} sent without deduplication: {e}"),
            }
        }
    }
    let json = event.json();
    if let Some(url) = &alert.webhook {
        deliver::webhook(url, &json);
    }
    if let Some(command) = &alert.command {
        deliver::command(command, route.dir, &json);
    }
    true
}

/// For the daemon: raises `tier_overdue` for each tier `status` finds late at `now`
/// (a paused tier is not late, nor one of the windows `running`: a daemon started
/// after a gap ticks its late tiers at once), and pings `URL/fail` with each one sent.
pub fn check_overdue(
    config: &Config,
    store: &mut dyn Store,
    now: DateTime<Utc>,
    running: &[Duration],
) {
    // Late ticks are what healthchecks.io's own schedule sees: a file that only
    // pings leaves them to it.
    if !config.alert.sends() {
        return;
    }
    let tiers = match crate::status::tiers(config, store, now) {
        Ok(tiers) => tiers,
        Err(e) => {
            tracing::warn!("cannot check whether a tier is overdue: {e}");
            return;
        }
    };
    for (tier, window) in tiers
        .iter()
        .zip(config.schedule.tiers.iter().map(|t| t.window))
    {
        let (Some(secs), Some(due)) = (tier.overdue_seconds, tier.next_due) else {
            continue;
        };
        if running.contains(&window) {
            continue;
        }
        let message = format!(
            "tier {} ({} {}) was due at {}, {} ago; is its crontab line or daemon running?",
            tier.tier,
            tier.window,
            tier.cadence,
            crate::duration::instant(due),
            crate::duration::rough(Duration::from_secs(secs))
        );
        let event = Event::about(config, window, Kind::TierOverdue, now, message);
        if raise(Route::of(config), Some(store), window, now, event)
            && let Some(url) = &config.alert.ping
        {
            deliver::ping(&url.with_path_suffix("/fail"));
        }
    }
}

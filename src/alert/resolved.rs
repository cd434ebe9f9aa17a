//! `resolved`: what a person hears when a tier that alerted ticks clean again, so an
//! incident closes itself rather than waiting for someone to notice the silence.
//!
//! An alert that went out leaves its tier open (a row `open:KIND` of `backlog_alerts`,
//! or this host's file while the database could not be reached). The first clean tick
//! of the tier, on any runner, takes those marks (each taken once: of two runners
//! ticking clean at once, one sends) and sends one `resolved` event naming what it
//! resolves; the next clean tick finds nothing open and sends nothing. Kept in the
//! database, it survives a restart. A `resolved` no channel took puts the marks back:
//! the next clean tick tries again. The healthchecks-style ping needs none of this:
//! every clean tick pings success already.

use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};

use super::{Event, Kind, Route, deliver_event, local};
use backlog_core::config::Config;
use backlog_core::duration;
use backlog_core::store::Store;

/// Notes that an alert of `kind` about the tier of `window` went out at `now`: in
/// the database through `by`, or on this host where it has none.
pub(super) fn opened(
    route: Route<'_>,
    by: Option<&mut (dyn Store + '_)>,
    window: Duration,
    kind: &str,
    now: DateTime<Utc>,
) {
    let url = route.database.url.to_string();
    match by {
        Some(store) => {
            if let Err(e) = store.open_alert(window, kind, now) {
                tracing::warn!("cannot keep that alert {kind} went out, for its `resolved`: {e}");
                local::open(&url, &route.table.name, window, kind, now);
            }
        }
        None => local::open(&url, &route.table.name, window, kind, now),
    }
}

/// After a clean tick of the tier of `window` at `now`: sends `resolved` if the tier
/// alerted since its last clean tick.
pub(super) fn ticked_clean(
    config: &Config,
    store: &mut dyn Store,
    window: Duration,
    now: DateTime<Utc>,
) {
    let route = Route::of(config);
    if !route.alert.sends() {
        return;
    }
    let url = config.database.url.to_string();
    let mut open = store.take_open_alerts(window).unwrap_or_else(|e| {
        tracing::warn!("cannot read which alerts of the tier are open: {e}");
        Vec::new()
    });
    open.extend(local::take_open(&url, &config.table.name, window));
    if open.is_empty() {
        return;
    }
    open.sort();
    open.dedup_by(|a, b| a.0 == b.0);
    let since = open.iter().map(|(_, t)| *t).min().unwrap_or(now);
    let kinds: Vec<String> = open.iter().map(|(k, _)| k.clone()).collect();
    let ago = duration::rough((now - since).to_std().unwrap_or_default());
    let tier = config.schedule.tier(window).map(|(n, _)| n);
    let name = match tier {
        Some(n) => format!("tier {n} ({})", duration::compact(window)),
        None => format!("the {} run", duration::compact(window)),
    };
    let message = format!("{name} ticks clean again, {ago} after {}", kinds.join(", "));
    let mut event = Event::about(config, window, Kind::Resolved, now, message);
    event.resolves = kinds;
    event.since = Some(since.to_rfc3339_opts(SecondsFormat::Secs, true));
    if !deliver_event(route, Some(&mut *store), &event, now) {
        tracing::info!(
            "alert resolved of the {} tier was not delivered: the next clean tick tries again",
            event.window
        );
        for (kind, since) in &open {
            opened(route, Some(&mut *store), window, kind, *since);
        }
    }
}

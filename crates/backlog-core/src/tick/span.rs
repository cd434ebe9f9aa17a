//! The tracing span a tick's log lines are in: `tick{tier=2 window=7d}`, so the lines
//! of ticks that run at once (the daemon's tiers, a slow tick and the next) can be told
//! apart, in text as in JSON. The tick's own threads (lanes, heartbeat, mark writer)
//! enter it too.

use std::time::Duration;

use crate::duration;
use crate::schedule::Schedule;

/// The span of a tick of `window`, named for its tier (none for a window no tier has).
/// At ERROR level, so that it is on whenever any of its lines is logged (`backlog run`
/// logs warnings only).
pub fn tick_span(schedule: &Schedule, window: Duration) -> tracing::Span {
    let tier = schedule.tier(window).map(|(n, _)| n);
    tracing::error_span!("tick", tier, window = %duration::compact(window))
}

/// The span of a tier's lines outside its ticks (the daemon's: a slot skipped, a try
/// again after a failure), named as `tick_span` names it.
pub fn tier_span(schedule: &Schedule, window: Duration) -> tracing::Span {
    let tier = schedule.tier(window).map(|(n, _)| n);
    tracing::error_span!("tier", tier, window = %duration::compact(window))
}

/// Enters the span of a tick of `window` (`tick_span`), unless the caller is in a
/// tick's span already (the daemon enters one for a tick's whole thread, `backlog run`
/// for the tick with its handler, pings and alerts): one name a line, never two.
pub fn enter_tick_span(
    schedule: &Schedule,
    window: Duration,
) -> Option<tracing::span::EnteredSpan> {
    let in_tick = tracing::Span::current()
        .metadata()
        .is_some_and(|m| m.name() == "tick");
    (!in_tick).then(|| tick_span(schedule, window).entered())
}

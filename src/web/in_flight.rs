//! The in-flight page: what the ticks hold now. On PostgreSQL and MySQL a tick claims
//! each record it hands out (a row of `backlog_claims`), so the page lists records; on
//! SQLite a tick holds the span of inserted-at values it has read (a row of
//! `backlog_holds`), so the page lists spans, not records. Records kept from the ticks
//! are shown apart: those a person (or their handler) snoozed, with until when and by
//! whom, and the failures kept until their slot ends, each told by its newest attempt
//! (`operate::Kept`, as `show` tells it). Above them, the ticks running now on every
//! host (the fleet), with what each holds.

use axum::extract::State;
use axum::response::{Html, IntoResponse, Response};
use chrono::{DateTime, Utc};
use maud::{Markup, html};

use super::pages::{self, urlencode};
use super::reply::{SharedState, blocking};
use crate::error::Error;
use crate::operate::Kept;
use backlog_core::store::{AttemptQuery, ClaimRow, Holding, InFlight, Runner};

/// Rows of each kind a page shows, at most.
const SHOWN: usize = 500;

fn when(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M:%S UTC").to_string()
}

pub(super) async fn in_flight(State(shared): SharedState) -> Response {
    let now = Utc::now();
    let read = blocking(&shared, move |config| {
        let mut store = crate::operate::inspected(&config)?;
        let err = Error::store(store.describe());
        let runners = store
            .runners(config.database.claim_lease, now)
            .map_err(&err)?;
        let held = store.in_flight(now, SHOWN).map_err(&err)?;
        let kept = match &held {
            InFlight::Nothing => Vec::new(),
            InFlight::Claims { kept, .. } | InFlight::Spans { kept, .. } => kept.clone(),
        };
        // Why each is kept, from its newest attempt: one read a record, SHOWN at most.
        let mut why = Vec::with_capacity(kept.len());
        for k in kept {
            let newest = store
                .attempts(&AttemptQuery {
                    record_id: Some(k.record_id.clone()),
                    limit: 1,
                    successes: true,
                    ..AttemptQuery::default()
                })
                .map_err(&err)?;
            why.push((k, Kept::of(newest.first())));
        }
        Ok((held, why, runners))
    })
    .await;
    match read {
        Ok((held, kept, runners)) => {
            Html(page(&held, &kept, &runners, now).into_string()).into_response()
        }
        Err(page) => page,
    }
}

fn record_link(id: &str) -> Markup {
    html! { a href={ "/record?id=" (urlencode(id)) } { (id) } }
}

/// The records kept from the ticks: the snoozed ones, then the failures waiting for
/// their tier's next slot.
fn kept_tables(kept: &[(ClaimRow, Kept)]) -> Markup {
    let snoozed: Vec<_> = kept.iter().filter(|(_, k)| k.is_snooze()).collect();
    let failed: Vec<_> = kept.iter().filter(|(_, k)| !k.is_snooze()).collect();
    html! {
        h2 { "Snoozed" small { " kept from the ticks until the time asked" } }
        @if snoozed.is_empty() {
            p.muted.snoozed { "None." }
        } @else {
            table.snoozed {
                thead { tr { th { "record" } th { "snoozed until" } th { "by" } } }
                tbody { @for (row, why) in &snoozed { tr {
                    td { (record_link(&row.record_id)) }
                    td { (when(row.expires_at)) }
                    td { (why.describe().strip_prefix("snoozed by ").map_or_else(|| why.describe(), str::to_string)) }
                } } }
            }
        }
        h2 { "Failures kept from the ticks" small { " until their slot ends" } }
        @if failed.is_empty() {
            p.muted.kept { "None." }
        } @else {
            table.kept {
                thead { tr { th { "record" } th { "kept until" } } }
                tbody { @for (row, _) in &failed { tr { td { (record_link(&row.record_id)) } td { (when(row.expires_at)) } } } }
            }
        }
    }
}

/// The ticks running now, a row each.
fn runners_table(runners: &[Runner]) -> Markup {
    let holds = |r: &Runner| match &r.holds {
        None => "nothing".to_string(),
        Some(Holding::Records(n)) => pages::count(*n, "record", "records"),
        Some(Holding::Span { low, high }) => format!("{low} to {high}"),
    };
    html! {
        h2 { "Running now" }
        @if runners.is_empty() {
            p.muted.runners { "No tick is running." }
        } @else {
            table.runners {
                thead { tr { th { "host" } th { "pid" } th { "tier" } th { "since" } th { "holds" } th { "renewed" } } }
                tbody {
                    @for r in runners {
                        tr {
                            td { (r.host) }
                            td { (r.pid) }
                            td { (backlog_core::duration::tier_name(r.window_secs)) }
                            td { (when(r.since)) }
                            td { (holds(r)) }
                            td { (when(r.renewed)) }
                        }
                    }
                }
            }
        }
    }
}

fn page(
    held: &InFlight,
    kept: &[(ClaimRow, Kept)],
    runners: &[Runner],
    now: DateTime<Utc>,
) -> Markup {
    let body = html! {
        h1 { "In flight" }
        p.meta { "What the ticks hold now, as of " (when(now)) "; at most " (SHOWN) " rows of each kind." }
        (runners_table(runners))
        @match held {
            InFlight::Nothing => { p.muted { "Nothing: no tick has run on this table yet." } },
            InFlight::Claims { held, .. } => {
                p { "Each row is a record a tick claimed and is handing to its handler; the claim runs out at its end unless the tick's heartbeat renews it." }
                @if held.is_empty() {
                    p.muted.held { "No record is held now." }
                } @else {
                    table.held {
                        thead { tr { th { "record" } th { "tick" } th { "claimed" } th { "runs out" } } }
                        tbody {
                            @for c in held {
                                tr {
                                    td { (record_link(&c.record_id)) }
                                    td { code { (c.owner) } }
                                    td { (c.claimed_at.map(when).unwrap_or_default()) }
                                    td { (when(c.expires_at)) }
                                }
                            }
                        }
                    }
                }
                (kept_tables(kept))
            },
            InFlight::Spans { spans, .. } => {
                p { "SQLite holds spans, not records: a tick holds every pending record whose inserted-at value lies in its span, from the newest it read down to the oldest, until the span runs out (its heartbeat renews it)." }
                @if spans.is_empty() {
                    p.muted.held { "No span is held now." }
                } @else {
                    table.held {
                        thead { tr { th { "tick" } th { "inserted-at from" } th { "to" } th { "runs out" } } }
                        tbody {
                            @for s in spans {
                                tr {
                                    td { code { (s.owner) } }
                                    td { (s.low) }
                                    td { (s.high) }
                                    td { (when(s.expires_at)) }
                                }
                            }
                        }
                    }
                }
                (kept_tables(kept))
            },
        }
    };
    pages::layout("In flight", None, true, body)
}

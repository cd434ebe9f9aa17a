//! The in-flight page: what the ticks hold now. On PostgreSQL and MySQL a tick claims
//! each record it hands out (a row of `backlog_claims`), so the page lists records; on
//! SQLite a tick holds the span of inserted-at values it has read (a row of
//! `backlog_holds`), so the page lists spans, not records. Failures kept from the
//! ticks until their slot ends are shown apart, as "kept until". Above them, the
//! ticks running now on every host (the fleet), with what each holds.

use axum::extract::State;
use axum::response::{Html, IntoResponse, Response};
use chrono::{DateTime, Utc};
use maud::{Markup, html};

use super::pages::{self, urlencode};
use super::routes::{Shared_, blocking};
use crate::error::Error;
use crate::store::{ClaimRow, Holding, InFlight, Runner};

/// Rows of each kind a page shows, at most.
const SHOWN: usize = 500;

fn when(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M:%S UTC").to_string()
}

pub(super) async fn in_flight(State(shared): Shared_) -> Response {
    let now = Utc::now();
    let read = blocking(&shared, move |config| {
        let mut store = crate::operate::inspected(&config)?;
        let err = Error::store(store.describe());
        let runners = store
            .runners(config.database.claim_lease, now)
            .map_err(&err)?;
        Ok((store.in_flight(now, SHOWN).map_err(err)?, runners))
    })
    .await;
    match read {
        Ok((held, runners)) => Html(page(&held, &runners, now).into_string()).into_response(),
        Err(page) => page,
    }
}

fn record_link(id: &str) -> Markup {
    html! { a href={ "/record?id=" (urlencode(id)) } { (id) } }
}

fn kept_table(kept: &[ClaimRow]) -> Markup {
    html! {
        h2 { "Failures kept from the ticks" small { " until their slot ends" } }
        @if kept.is_empty() {
            p.muted { "None." }
        } @else {
            table.kept {
                thead { tr { th { "record" } th { "kept until" } } }
                tbody { @for k in kept { tr { td { (record_link(&k.record_id)) } td { (when(k.expires_at)) } } } }
            }
        }
    }
}

/// The ticks running now, a row each.
fn runners_table(runners: &[Runner]) -> Markup {
    let holds = |r: &Runner| match &r.holds {
        None => "nothing".to_string(),
        Some(Holding::Records(n)) => format!("{n} records"),
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
                            td { (crate::duration::tier_name(r.window_secs)) }
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

fn page(held: &InFlight, runners: &[Runner], now: DateTime<Utc>) -> Markup {
    let body = html! {
        h1 { "In flight" }
        p.meta { "What the ticks hold now, as of " (when(now)) "; at most " (SHOWN) " rows of each kind." }
        (runners_table(runners))
        @match held {
            InFlight::Nothing => { p.muted { "Nothing: no tick has run on this table yet." } },
            InFlight::Claims { held, kept } => {
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
                (kept_table(kept))
            },
            InFlight::Spans { spans, kept } => {
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
                (kept_table(kept))
            },
        }
    };
    pages::layout("In flight", None, true, body)
}

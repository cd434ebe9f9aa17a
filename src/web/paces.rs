//! The overview's adapted rates, with `rate = "auto"`: per tier (or `rate_group`) the
//! pace the fleet found in `backlog_paces`, whether it is still in slow start and when
//! it was last cut, within the file's bounds. With `rate_key` a tier has a pace per
//! counterpart, thousands perhaps: each tier shows the few its counterparts hold back
//! most (cut, slowest first, before those in slow start) and how many more, as
//! `backlog status` cuts them (`status::paces::by_tier`).

use std::time::Duration;

use maud::{Markup, html};

use super::data::Overview;
use backlog::status::paces::{self, AdaptedPace};
use backlog_core::duration;

/// The section, or nothing where the file has no `rate = "auto"`.
pub(super) fn section(o: &Overview) -> Markup {
    let Some(bounds) = &o.config.handler.auto_rate else {
        return html! {};
    };
    let key = o.config.handler.rate_key.as_deref();
    let paces = &o.status.paces;
    html! {
        h2 id="adapted-rates" { "Adapted rates" small { " rate = \"auto\"" } }
        p.meta {
            "Handler starts a second the fleet found from the counterpart's answers, between "
            (bounds.min) " and " (bounds.max) " (rate_min, rate_max)"
            @if let Some(key) = key {
                "; a pace per value of " code { (key) } " (rate_key), of which each tier shows the "
                (paces::SHOWN_PER_TIER) " its counterparts hold back most: those cut, slowest first, then those in slow start"
            }
            "."
        }
        @if paces.is_empty() {
            p.muted { "No pace yet: a tier's first tick starts one, in slow start." }
        } @else {
            table.paces {
                thead { tr {
                    th { "tier" }
                    @if key.is_some() { th { "counterpart" } }
                    th.num { "starts a second" }
                    th { "slow start" }
                    th { "last cut" }
                } }
                tbody {
                    @for tier in paces::by_tier(paces, paces::SHOWN_PER_TIER) {
                        @for p in &tier.slowest {
                            (row(o, p, key.is_some()))
                        }
                        @if tier.more > 0 {
                            tr.more { td colspan=(if key.is_some() { 5 } else { 4 }) { span.muted {
                                "and " (tier.more) " more of " (tier_label(o, tier.tier))
                                ", faster or in slow start (" code { "backlog status --json" } " lists each)"
                            } } }
                        }
                    }
                }
            }
        }
    }
}

/// A pace's row: its tier, its counterpart (with `rate_key`), its pace and state.
fn row(o: &Overview, p: &AdaptedPace, keyed: bool) -> Markup {
    html! {
        tr {
            td { (tier_label(o, &p.tier)) }
            @if keyed {
                td { @match p.key.as_deref() {
                    Some("") => { span.muted { "none (NULL)" } },
                    Some(k) => { code { (k) } },
                    None => { span.muted { "–" } },
                } }
            }
            td.num { (p.starts_a_second()) }
            td { @if p.slow_start { "yes" } @else { "no" } }
            td { @match p.cut_seconds_ago {
                Some(s) => { (duration::rough(Duration::from_secs(s))) " ago" },
                None => { span.muted { "never" } },
            } }
        }
    }
}

/// `tier 1 (1d)` for a tier of the schedule, `retries`, `group api`, or the window of
/// a tier the schedule no longer has.
fn tier_label(o: &Overview, tier: &str) -> String {
    match o.status.tiers.iter().find(|t| t.window == tier) {
        Some(t) => format!("tier {} ({tier})", t.tier),
        None if tier == "retry" => "retries".to_string(),
        None => tier.to_string(),
    }
}

//! The HTML of the dashboard, written with maud: every value is escaped as it is
//! written, so ids, statuses and a handler's output (which may hold `<script>`) show
//! as text. Each page is complete without JavaScript; `refresh.js` only swaps the
//! content of `<main>` for a fresh copy every few seconds.

use std::time::Duration;

use chrono::{DateTime, Utc};
use maud::{DOCTYPE, Markup, PreEscaped, html};

use super::data::Overview;
use crate::operate::RecordView;
use backlog_core::config::Labels;
use backlog_core::duration;
use backlog_core::store::Attempt;

const STYLE: &str = include_str!("style.css");

pub(crate) fn when(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M:%S UTC").to_string()
}

pub(crate) fn ago(t: DateTime<Utc>, now: DateTime<Utc>) -> String {
    match (now - t).to_std() {
        Ok(d) => format!("{} ago", duration::rough(d)),
        Err(_) => format!(
            "in {}",
            duration::rough((t - now).to_std().unwrap_or_default())
        ),
    }
}

pub(crate) use backlog_core::plural::count;

/// `text` cut to `most` characters (an ellipsis says so): an error in a list's cell,
/// whose whole text is on the record's page and in the cell's title.
pub(crate) fn cut(text: &str, most: usize) -> String {
    match text.char_indices().nth(most) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

/// `text` with its first letter a capital, to open a sentence.
pub(crate) fn capital(text: &str) -> String {
    let mut chars = text.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

/// A pause as the tiers' table says it beside a "paused" badge: `since … by …: why`
/// (`describe` starts with "paused", which the badge says already).
fn since(p: &backlog_core::store::Pause) -> String {
    let text = p.describe();
    text.strip_prefix("paused ")
        .map_or(text.clone(), str::to_string)
}

/// A status or outcome as a coloured badge.
pub(crate) fn badge(text: &str) -> Markup {
    let class = match text {
        "SUCCESS" | "success" | "done" => "ok",
        "error" | "ERROR" | "timeout" | "crash" | "failed" | "abandoned" | "lost" | "given_up" => {
            "bad"
        }
        "tripped" | "lapsed" | "stopped" | "mapped" | "paused" | "snoozed" => "warn",
        _ => "plain",
    };
    html! { span class={ "badge " (class) } { (text) } }
}

/// The frame of every page: the header with its search, a message, the content.
pub(crate) fn layout(title: &str, notice: Option<&str>, refresh: bool, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · backlog" }
                style { (PreEscaped(STYLE)) }
                @if refresh {
                    noscript { meta http-equiv="refresh" content="10"; }
                    script src="/assets/refresh.js" defer {}
                }
            }
            body {
                header {
                    a.brand href="/" { "backlog" }
                    nav {
                        a href="/" { "Overview" }
                        a href="/failures" { "Failures" }
                        a href="/records" { "Records" }
                        a href="/in-flight" { "In flight" }
                    }
                    form.search method="get" action="/record" {
                        input type="search" name="id" placeholder="record id" aria-label="record id" required;
                        button type="submit" { "Find" }
                    }
                }
                main id="content" data-refresh=(if refresh { "yes" } else { "no" }) {
                    @if let Some(notice) = notice {
                        p.notice role="status" { (notice) }
                    }
                    (body)
                }
            }
        }
    }
}

/// The page of an error: what went wrong, in one line, and a way back.
pub(crate) fn error(title: &str, message: &str) -> Markup {
    layout(
        title,
        None,
        false,
        html! {
            h1 { (title) }
            p.error { (message) }
            p { a href="/" { "Back to the overview" } }
        },
    )
}

pub(crate) fn csrf_field(csrf: &str) -> Markup {
    html! { input type="hidden" name="csrf" value=(csrf); }
}

/// The overview: tiers, records by band, the plots, the latest failures.
pub(crate) fn overview(
    o: &Overview,
    history: super::history::Selection,
    csrf: &str,
    notice: Option<&str>,
) -> Markup {
    let s = &o.status;
    let now = s.now;
    let failed_24h: u64 = s.failures_24h.values().sum();
    let pending: u64 = s
        .ages
        .iter()
        .flat_map(|row| {
            o.config
                .table
                .pending
                .iter()
                .filter_map(|p| row.counts.get(p))
        })
        .sum();
    let body = html! {
        h1 { (s.table) small { " in " (s.database) } }
        p.meta { "As of " (when(now)) ". " (o.config.schedule.tier_count()) " from " code { (o.config.path.display()) } "." }
        @if let Some(p) = &s.paused {
            // Said once, here, with the way out beside it (the tiers' rows say "every tier").
            div.warning.paused {
                "Every tier is " (p.describe()) "."
                form.inline method="post" action="/resume" {
                    (csrf_field(csrf))
                    input type="hidden" name="window" value="";
                    button type="submit" { "Resume every tier" }
                }
            }
        }
        @for t in s.tiers.iter().filter(|t| t.overdue_seconds.is_some()) {
            p.warning { "Tier " (t.tier) " (" (t.window) ") is overdue by "
                (duration::rough(Duration::from_secs(t.overdue_seconds.unwrap_or(0))))
                ": is its crontab line or daemon running?" }
        }
        section.cards {
            div.card { div.figure { (s.tiers.len()) } div.label { @if s.tiers.len() == 1 { "tier" } @else { "tiers" } } }
            div.card { div.figure { (pending) } div.label { @if pending == 1 { "pending record" } @else { "pending records" } } }
            div class=(if failed_24h > 0 { "card bad" } else { "card" }) {
                div.figure { (failed_24h) } div.label { "failed attempts, last 24 h" } }
            div.card { div.figure { (s.oldest_pending.as_ref().and_then(|p| p.age.clone()).unwrap_or_else(|| "–".into())) } div.label { "oldest pending" } }
        }
        h2 { "Tiers" }
        (tiers_table(o, csrf))
        (pause_form(s, csrf))
        (super::paces::section(o))
        h2 { "Records by age and status" }
        (ages_table(o))
        div.plots {
            figure { img src="/plots/ticks.svg" alt="records handled and failed per tick"; figcaption { "Records handled and failed per tick" } }
            figure { img src="/plots/backlog.svg" alt="pending records by age"; figcaption { "Pending records by age" } }
        }
        (super::history::section(&o.config, history))
        h2 { "Latest failures" a.more href="/failures" { "all failures →" } }
        (attempts_table(&o.failures, true, &o.status.labels))
    };
    layout(&s.table, notice, true, body)
}

/// Each tier's last slot (over every runner that ticked in it) and next, with its
/// pause and a button to resume it.
fn tiers_table(o: &Overview, csrf: &str) -> Markup {
    let (s, now) = (&o.status, o.status.now);
    html! {
    table {
        thead { tr { th { "tier" } th { "window" } th { "band" } th { "cadence" } th { "last slot" } th { "result" } th.num { "runners" } th.num { "handled" } th.num { "failed" } th { "took" } th { "next" } th { "" } } }
        tbody {
            @for t in &s.tiers {
                tr {
                    td { (t.tier) }
                    td { a href={ "/records?tier=" (urlencode(&t.window)) } { (t.window) } }
                    td { (band_of(o, t.tier)) }
                    td { (t.cadence) }
                    @if let Some(r) = &t.last_slot {
                        td title=(when(r.at)) { (ago(r.at, now)) }
                        td { (badge(&r.outcome)) @if let Some(e) = &r.error { div.detail { (e) } } }
                        td.num { (r.runners) }
                        td.num { (r.selected) }
                        td.num { (r.failed) }
                        td { (r.seconds().map(|s| format!("{s:.1} s")).unwrap_or_else(|| "–".into())) }
                    } @else {
                        td colspan="6" { span.muted { "never ticked" } }
                    }
                    // A pause of every tier is the banner's to say; a row says only that it holds.
                    td { @if s.paused.is_some() { (badge("paused")) div.detail { "with every tier" } }
                         @else if let Some(p) = &t.paused { (badge("paused")) div.detail { (since(p)) } }
                         @else if let Some(n) = t.next_due { (ago(n, now)) } @else { "–" } }
                    td {
                        @if t.paused.is_some() {
                            form method="post" action="/resume" {
                                (csrf_field(csrf))
                                input type="hidden" name="window" value=(t.window);
                                button type="submit" { "Resume" }
                            }
                        }
                    }
                }
            }
        }
    }
    }
}

/// The form that pauses a tier (or every tier), and resumes every tier.
fn pause_form(s: &backlog::status::Status, csrf: &str) -> Markup {
    html! {
    details.pause {
        summary { "Pause a tier" }
        form method="post" action="/pause" {
            (csrf_field(csrf))
            label { "Tier " select name="window" {
                option value="" { "every tier" }
                @for t in &s.tiers { option value=(t.window) { "tier " (t.tier) " (" (t.window) ")" } }
            } }
            label { "Reason " input type="text" name="reason" placeholder="partner API down" required; }
            label { "Meant to end " input type="text" name="until" placeholder="2h, or 2026-11-23T18:00:00Z"; }
            button type="submit" { "Pause" }
        }
        p.muted { "A pause is kept in the database: every runner obeys it until it is resumed (a paused tier's row has its Resume, a pause of every tier the banner above)." }
    }
    }
}

/// The records by age and status, each count a link to those records: a tier's row to
/// its band, the row of those older than every tier to them (where the last tier's
/// ticks leave what they give up on).
fn ages_table(o: &Overview) -> Markup {
    let s = &o.status;
    // The rows come youngest first: the future's (when it holds any), the tiers', then
    // the one older than every tier, always there.
    let older = s.ages.len().saturating_sub(1);
    let tier_of = |i: usize, row: &backlog::status::AgeRow| match row.tier {
        Some(n) => o
            .config
            .schedule
            .tiers
            .get(n - 1)
            .map(|t| duration::compact(t.window)),
        None if i == older => Some(super::records::OLDER.to_string()),
        None => None,
    };
    html! {
    table {
        thead { tr { th { "ages" } @for st in &s.statuses { th.num { (s.labels.of(st)) } } } }
        tbody {
            @for (i, row) in s.ages.iter().enumerate() {
                tr {
                    td { (row.label) @if let Some(n) = row.tier { span.muted { " tier " (n) } } }
                    @for st in &s.statuses {
                        @let n = row.counts.get(st).copied().unwrap_or(0);
                        @match tier_of(i, row) {
                            Some(t) => { td.num { a href={ "/records?tier=" (t) "&status=" (urlencode(st)) } { (n) } } },
                            None => { td.num { (n) } },
                        }
                    }
                }
            }
        }
    }
    }
}

/// The ages a tier's ticks take: `over 1d up to 7d` (`0 to 7d` for a first or, with
/// cumulative bands, every tier).
fn band_of(o: &Overview, tier: usize) -> String {
    let Some(t) = o.config.schedule.tiers.get(tier.saturating_sub(1)) else {
        return "–".into();
    };
    let band = o.config.schedule.band(t.window);
    if band.younger.is_zero() {
        format!("0 to {}", duration::compact(band.older))
    } else {
        format!(
            "over {} up to {}",
            duration::compact(band.younger),
            duration::compact(band.older)
        )
    }
}

/// Attempts, newest first; with `records`, each links to its record.
pub(crate) fn attempts_table(attempts: &[Attempt], records: bool, labels: &Labels) -> Markup {
    html! {
        @if attempts.is_empty() {
            p.muted { "None kept." }
        } @else {
            table.attempts {
                thead { tr { th { "started" } @if records { th { "record" } } th { "tier" } th { "outcome" } th { "status" } th { "detail" } th { "took" } } }
                tbody {
                    @for a in attempts {
                        tr {
                            td { (when(a.started)) }
                            @if records { td { a href={ "/record?id=" (urlencode(&a.record_id)) } { (a.record_id) } } }
                            td { (duration::tier_name(a.window_secs)) }
                            td { (badge(&a.outcome)) }
                            td { (labels.of(&a.status)) }
                            td { (a.detail)
                                @if !a.output.is_empty() {
                                    @if records {
                                        div.detail { (a.output.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or_default()) }
                                    } @else {
                                        pre { (a.output) }
                                    }
                                }
                            }
                            td { (duration::handler_time(a.took_ms)) }
                        }
                    }
                }
            }
        }
    }
}

/// A query value, percent-encoded.
pub(crate) fn urlencode(text: &str) -> String {
    percent_encoding::utf8_percent_encode(text, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// A record: its status, where it is in the schedule, its columns, its attempts.
pub(crate) fn record(
    view: &RecordView,
    labels: &Labels,
    now: DateTime<Utc>,
    csrf: &str,
    notice: Option<&str>,
) -> Markup {
    let r = &view.record;
    let id = r.id.to_string();
    let columns = serde_json::Value::Object(r.columns.for_people());
    let body = html! {
        h1 { "Record " (id) " " (badge(labels.of(&r.status))) }
        p.meta {
            "Inserted " (r.inserted_at().to_string())
            @if let Some(age) = view.age { ", " (duration::rough(age)) " old" }
            "."
        }
        @if view.pending {
            @match &view.next {
                Some(next) => {
                    p { @match next.in_tier { Some(n) => { "In tier " (n) "'s band; " }, None => { "In no band; " } }
                        @match (next.by_tier, next.at) {
                            (Some(n), Some(at)) => {
                                "tried next " (ago(at, now)) " (" (when(at)) "), by tier " (n)
                                @if let Some(note) = next.retry_note() { ", once " (note) }
                                "."
                            },
                            _ => { "never tried again: " (next.never_why()) "." },
                        }
                    }
                },
                None => {
                    @if r.inserted_time.is_some() {
                        p.warning { "Inserted after the clock's now (in the future): no tier takes it until it is not." }
                    } @else {
                        p.warning { "Its inserted-at value cannot be read: no tier takes it." }
                    }
                },
            }
            form method="post" action="/record/retry" {
                (csrf_field(csrf))
                input type="hidden" name="id" value=(id);
                button type="submit" { "Retry now" }
            }
        } @else {
            p.muted { "Not pending: no tier tries it again." }
        }
        @match &view.held {
            Some(h) => {
                @match &h.owner {
                    Some(owner) => { p { "Held now by the tick " code { (owner) } ", until " (when(h.until)) "." } },
                    // Why, from its newest attempt: a person's snooze says who.
                    None => { p.kept { (capital(&crate::operate::Kept::of(view.attempts.first()).describe()))
                        ": kept from the ticks until " (when(h.until)) "." } },
                }
            },
            None => { p.muted { "Held by no tick now." } },
        }
        h2 { "Columns" }
        table.columns {
            tbody {
                @if let Some(map) = columns.as_object() {
                    @for (k, v) in map {
                        tr { th { (k) } td { code { (match v { serde_json::Value::String(s) => s.clone(), other => other.to_string() }) } } }
                    }
                }
            }
        }
        h2 { "Attempts" small { " newest first" } }
        (attempts_table(&view.attempts, false, labels))
    };
    layout(&format!("Record {id}"), notice, true, body)
}

/// The page for a request without the token.
pub(crate) fn unauthorized() -> Markup {
    layout(
        "Token needed",
        None,
        false,
        html! {
            h1 { "This dashboard needs its token" }
            p { "Open " code { "/login?token=…" } " once with the token from the server's --token-file, or send it as " code { "Authorization: Bearer …" } "." }
        },
    )
}

//! The failures page (`/failures`): the failed attempts a filter picks (a tier, an
//! outcome, a text their error holds), a page at a time, with the bulk actions on
//! their records; and the same failures grouped by their error line
//! (`/failures/errors`), most frequent first, each group a link to its failures. A
//! filter by error text and the groups read the newest failures through
//! `--error-contains`'s own path, at most `operate::ATTEMPTS_READ` of them, and say so
//! when there were more: a page over a big table costs what a bounded read costs.

use axum::extract::{Query, State};
use axum::response::{Html, IntoResponse, Response};
use maud::{Markup, html};
use serde::Deserialize;

use super::actions::notice;
use super::data::{self, ErrorGroups, FailureFilter, Failures};
use super::pages::{self, attempts_table, count, layout, urlencode, when};
use super::reply::{SharedState, blocking};
use crate::operate::ATTEMPTS_READ;
use backlog_core::config::Labels;

/// The failures shown on a page, at most.
pub(super) const LISTED: usize = 200;

/// The error groups shown, at most (the most frequent).
pub(super) const GROUPS: usize = 50;

/// The outcomes of a failed try, as the attempts name them.
const FAILED: [&str; 6] = ["error", "timeout", "crash", "mapped", "stopped", "lost"];

#[derive(Deserialize)]
pub(super) struct FailuresQuery {
    #[serde(flatten)]
    filter: FailureFilter,
    done: Option<String>,
}

/// What the filter offers: the tiers' windows (`7d`), and whether the schedule gives
/// records up (`table.given_up`).
struct Choices {
    tiers: Vec<String>,
    given_up: Option<String>,
    labels: Labels,
}

fn choices(config: &backlog_core::config::Config) -> Choices {
    Choices {
        tiers: config.schedule.windows(),
        given_up: config.table.given_up.clone(),
        labels: config.table.labels.clone(),
    }
}

/// The address of the failures `filter` picks, on `page`, or (`to` = `/failures/errors`)
/// of their groups.
fn address(to: &str, filter: &FailureFilter, page: usize) -> String {
    format!(
        "{to}?tier={}&outcome={}&error_contains={}&page={page}",
        urlencode(&filter.tier),
        urlencode(&filter.outcome),
        urlencode(&filter.error_contains)
    )
}

pub(super) async fn failures(
    State(shared): SharedState,
    Query(q): Query<FailuresQuery>,
) -> Response {
    let filter = q.filter.clone();
    let result = blocking(&shared, move |config| {
        Ok((data::failures(&config, &filter, LISTED)?, choices(&config)))
    })
    .await;
    let (found, choices) = match result {
        Ok(read) => read,
        Err(page) => return page,
    };
    let f = &q.filter;
    let actions = super::bulk::forms(
        &[
            ("from", "failures"),
            ("tier", &f.tier),
            ("outcome", &f.outcome),
            ("error_contains", &f.error_contains),
            ("page", &f.page().to_string()),
        ],
        &format!(
            "the records of {} (every page, up to 10,000)",
            match found.total {
                1 => "this failure".to_string(),
                n => format!("these {n} failures"),
            }
        ),
        // The records of given-up attempts are given up on, unless retried since.
        if f.outcome.trim() == backlog_core::store::GIVEN_UP {
            super::bulk::Fit::GivenUp
        } else {
            super::bulk::Fit::Pending
        },
        choices.given_up.as_deref(),
        &shared.csrf,
    );
    let notice = notice(&shared, q.done.as_deref());
    Html(page(&found, f, &choices, actions, notice.as_deref()).into_string()).into_response()
}

/// The filter's form, on both pages: tier, outcome, error text.
fn filter_form(to: &str, filter: &FailureFilter, choices: &Choices) -> Markup {
    // A person's actions are no failure but are kept as attempts too: giving up (where
    // the schedule does, or the filter asks for it) and snoozing.
    let given_up = backlog_core::store::GIVEN_UP;
    let actions_kept: Vec<&str> = backlog_core::store::ACTIONS
        .into_iter()
        .filter(|a| *a != given_up || choices.given_up.is_some() || filter.outcome == given_up)
        .collect();
    let other = Some(filter.outcome.as_str())
        .filter(|o| !o.is_empty() && !FAILED.contains(o) && !actions_kept.contains(o));
    html! {
        form.filter method="get" action=(to) {
            label { "Tier " select name="tier" {
                option value="" selected[filter.tier.is_empty()] { "every tier" }
                @for t in &choices.tiers { option value=(t) selected[filter.tier == *t] { (t) } }
                option value="retry" selected[filter.tier == "retry"] { "retries" }
            } }
            label { "Outcome " select name="outcome" {
                option value="" selected[filter.outcome.is_empty()] { "any failure" }
                @for o in FAILED { option value=(o) selected[filter.outcome == o] { (o) } }
                optgroup label="actions, no failure" {
                    @for o in &actions_kept { option value=(o) selected[filter.outcome == *o] { (o) } }
                }
                @if let Some(o) = other { option value=(o) selected { (o) } }
            } }
            label { "Error holds "
                input type="search" name="error_contains" value=(filter.error_contains)
                    placeholder="connection refused" aria-label="error holds";
            }
            button type="submit" { "Filter" }
        }
    }
}

/// What a read bounded by `ATTEMPTS_READ` says of itself.
fn bounded_note(bounded: bool) -> Markup {
    html! {
        @if bounded {
            p.muted.bounded { "Only the newest " (ATTEMPTS_READ) " failures were read for this; older ones are kept but not counted here." }
        }
    }
}

/// The failures page: the filter, the attempts (a page of them, with their count and
/// links to the pages around), and `actions`, the bulk actions on their records.
fn page(
    found: &Failures,
    filter: &FailureFilter,
    choices: &Choices,
    actions: Markup,
    notice: Option<&str>,
) -> Markup {
    let attempts = &found.attempts;
    let page = filter.page();
    let pages = found.total.div_ceil(LISTED as u64);
    let first = (page as u64 - 1) * LISTED as u64 + 1;
    let link = |n: usize| address("/failures", filter, n);
    let body = html! {
        h1 { "Failures" }
        (filter_form("/failures", filter, choices))
        p.meta.listed {
            @if found.total == 0 {
                "No failures kept"
                @if !filter.error_contains.trim().is_empty() { " whose error holds “" (filter.error_contains.trim()) "”" }
                "."
            } @else if attempts.is_empty() {
                "None on page " (page) "; " (found.total) " in all."
            } @else {
                "Failures " (first) "–" (first + attempts.len() as u64 - 1) " of " (found.total) ", newest first."
            }
            @if page > 1 { " " a.prev href=(link(page - 1)) { "← newer" } }
            @if (page as u64) < pages { " " a.next href=(link(page + 1)) { "older →" } }
            " " a.groups href=(address("/failures/errors", filter, 1)) { "group by error →" }
        }
        (bounded_note(found.bounded))
        @if !attempts.is_empty() { (actions) }
        (attempts_table(attempts, true, &choices.labels))
    };
    layout("Failures", notice, true, body)
}

/// `/failures/errors`: the failures the filter picks, a row per error line, most
/// frequent first, each a link to its failures.
pub(super) async fn by_error(
    State(shared): SharedState,
    Query(q): Query<FailuresQuery>,
) -> Response {
    let filter = q.filter.clone();
    let result = blocking(&shared, move |config| {
        Ok((
            data::error_groups(&config, &filter, GROUPS)?,
            choices(&config),
        ))
    })
    .await;
    match result {
        Ok((groups, choices)) => {
            Html(groups_page(&groups, &q.filter, &choices).into_string()).into_response()
        }
        Err(page) => page,
    }
}

fn groups_page(g: &ErrorGroups, filter: &FailureFilter, choices: &Choices) -> Markup {
    let of_line = |line: &str| {
        address(
            "/failures",
            &FailureFilter {
                error_contains: line.to_string(),
                ..filter.clone()
            },
            1,
        )
    };
    let body = html! {
        h1 { "Failures by error" }
        (filter_form("/failures/errors", filter, choices))
        p.meta.listed {
            @if g.groups.is_empty() {
                "No failures kept."
            } @else {
                @if g.distinct > g.groups.len() {
                    "The " (g.groups.len()) " most frequent of " (g.distinct) " distinct errors"
                } @else {
                    (count(g.distinct as u64, "distinct error", "distinct errors"))
                }
                " in " (count(g.read, "failure", "failures")) ", by the last line the handler wrote (or the attempt's detail where it wrote nothing)."
            }
            " " a.list href=(address("/failures", filter, 1)) { "← the list" }
        }
        (bounded_note(g.bounded))
        @if !g.groups.is_empty() {
            table.errors {
                thead { tr { th { "error" } th.num { "failures" } th { "newest" } } }
                tbody {
                    @for group in &g.groups {
                        tr {
                            td.error { a href=(of_line(&group.line)) { (group.line) } }
                            td.num { (group.count) }
                            td { (when(group.newest)) }
                        }
                    }
                }
            }
        }
    };
    pages::layout("Failures by error", None, true, body)
}

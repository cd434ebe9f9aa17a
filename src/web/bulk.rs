//! Actions on many records at once (retry, snooze, give up) from a filter: the
//! failures page's (the records of the failures it picks, on every page) or the
//! records page's (a tier's records of a status). One path for the three, and for a
//! single record's retry: first a confirm page that names how many records the action
//! takes now and lists some, then, confirmed, a POST that acts on exactly the ids that
//! page listed, each checked again (a record no longer pending is left alone). At most
//! `MOST` records an action, so one click cannot hold the database for long.

use axum::extract::{Form, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use chrono::{DateTime, SecondsFormat, Utc};
use maud::{Markup, html};
use serde::Deserialize;

use super::actions::{csrf_ok, done, forged};
use super::data::FailureFilter;
use super::pages::{self, count, csrf_field, urlencode};
use super::reply::{SharedState, blocking, error_page, refused};
use super::{DEADLINE, Shared, input, records};
use crate::error::Error;
use crate::operate::{self, Selection};
use backlog_core::config::Config;

/// The most records one action takes.
pub(super) const MOST: usize = 10_000;

/// What a bulk action does.
#[derive(Debug, Clone)]
pub(super) enum Act {
    /// Hands each record to the handler now.
    Retry,
    /// Keeps each record pending, and from the ticks until then.
    Snooze(DateTime<Utc>),
    /// Gives each record the given-up status, with why.
    GiveUp(String),
}

impl Act {
    /// The word `plan` and the forms use.
    fn name(&self) -> &'static str {
        match self {
            Act::Retry => "retry",
            Act::Snooze(_) => "snooze",
            Act::GiveUp(_) => "give-up",
        }
    }

    fn verb(&self) -> &'static str {
        match self {
            Act::Retry => "Retry",
            Act::Snooze(_) => "Snooze",
            Act::GiveUp(_) => "Give up",
        }
    }

    /// The file's config as this action reads it: a retry takes given-up records too.
    fn config(&self, config: Config) -> Config {
        match self {
            Act::Retry => operate::for_retry(config),
            _ => config,
        }
    }

    /// Does it to `ids` (those still fit for it) as `by` (who acts, as
    /// `auth::person` names them), and says what it did in a line.
    fn run(&self, config: Config, ids: Vec<String>, by: &str) -> Result<String, Error> {
        let config = self.config(config);
        let mut store = operate::inspected(&config)?;
        let plan = operate::plan(&config, store.as_mut(), &Selection::Ids(ids), self.name())?;
        if plan.records.is_empty() {
            return Ok(format!("Nothing done: {}", refused_line(&plan.refused)));
        }
        let (now, stop) = (Utc::now(), Default::default());
        let records = plan.records;
        Ok(match self {
            Act::Retry => operate::run_retry(&config, store.as_mut(), records, now, stop)?.line(),
            Act::Snooze(until) => {
                let s = operate::snooze_by(
                    &config,
                    store.as_mut(),
                    records,
                    *until,
                    now,
                    &format!("{by} (dashboard)"),
                    stop,
                )?;
                format!(
                    "snoozed {} until {}{}",
                    count(s.failed, "record", "records"),
                    rfc3339(*until),
                    s.rest()
                )
            }
            Act::GiveUp(why) => {
                let s = operate::give_up(&config, store.as_mut(), records, why, now, stop)?;
                format!(
                    "gave up on {}{}",
                    count(s.failed, "record", "records"),
                    s.rest()
                )
            }
        })
    }
}

fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// The first few reasons a plan left ids out, and how many more.
fn refused_line(refused: &[String]) -> String {
    let mut line = refused
        .iter()
        .take(3)
        .cloned()
        .collect::<Vec<_>>()
        .join("; ");
    if refused.len() > 3 {
        line.push_str(&format!("; and {} more", refused.len() - 3));
    }
    line
}

/// Does `act` to `ids` now, as `by`. One that outlasts the deadline (a retry of slow
/// handlers) goes on; the page it leads to says so, and the attempts show each
/// record's result as it ends. The server's log says who did what (a retry's attempts
/// keep the handler's word, not the person's).
pub(super) async fn act_now(
    shared: &Shared,
    act: Act,
    ids: Vec<String>,
    by: String,
) -> Result<String, Response> {
    let schedule = shared.schedule.clone();
    let verb = act.verb();
    tracing::info!(
        "{by} (dashboard) asked to {} {}",
        verb.to_lowercase(),
        count(ids.len() as u64, "record", "records")
    );
    let job = tokio::task::spawn_blocking(move || act.run(Config::load(&schedule)?, ids, &by));
    match tokio::time::timeout(DEADLINE, job).await {
        Err(_) => Ok(format!(
            "{verb} is still running after {} s (a handler or the database is slow); each record's attempts show its result when it ends.",
            DEADLINE.as_secs()
        )),
        Ok(Err(_)) => Err(error_page(
            StatusCode::INTERNAL_SERVER_ERROR,
            "Something broke",
            "The action failed; the server's log says more.",
        )),
        Ok(Ok(Err(e))) => Err(refused(&e, &format!("Cannot {}", verb.to_lowercase()))),
        Ok(Ok(Ok(message))) => Ok(message),
    }
}

/// A bulk action's form, as the filter pages and the confirm page post it.
#[derive(Deserialize, Clone, Default)]
pub(super) struct BulkForm {
    /// `failures` or `records`: which page's filter picks the records.
    #[serde(default)]
    from: String,
    #[serde(default)]
    tier: String,
    #[serde(default)]
    outcome: String,
    #[serde(default)]
    status: String,
    #[serde(default)]
    error_contains: String,
    #[serde(default)]
    page: String,
    /// `retry`, `snooze` or `give-up`.
    #[serde(default)]
    action: String,
    /// A snooze's end: a span from now (`2h`) or an RFC 3339 time.
    #[serde(default)]
    until: String,
    /// Why records are given up.
    #[serde(default)]
    reason: String,
    #[serde(default)]
    csrf: String,
    /// Set by the confirm page: the ids it listed, comma-separated.
    #[serde(default)]
    ids: String,
    #[serde(default)]
    confirm: String,
}

impl BulkForm {
    fn failures(&self) -> FailureFilter {
        FailureFilter {
            tier: self.tier.clone(),
            outcome: self.outcome.clone(),
            error_contains: self.error_contains.clone(),
            page: self.page.clone(),
        }
    }

    /// The page the filter is on, to go back to.
    fn back(&self) -> String {
        match self.from.as_str() {
            "records" => format!(
                "/records?tier={}&status={}",
                urlencode(&self.tier),
                urlencode(&self.status)
            ),
            _ => format!(
                "/failures?tier={}&outcome={}&error_contains={}&page={}",
                urlencode(&self.tier),
                urlencode(&self.outcome),
                urlencode(&self.error_contains),
                self.failures().page()
            ),
        }
    }

    /// The action asked for, done by `by` (a give-up's reason names them).
    fn act(&self, config: &Config, by: &str) -> Result<Act, Error> {
        match self.action.as_str() {
            "" | "retry" => Ok(Act::Retry),
            "snooze" => input::snooze_until("Snooze until", &self.until).map(Act::Snooze),
            "give-up" if config.table.given_up.is_none() => Err(Error::Usage(format!(
                "{} sets no table.given_up: records cannot be given up",
                config.path.display()
            ))),
            "give-up" => Ok(Act::GiveUp(match self.reason.trim() {
                "" => format!("given up by {by} (dashboard)"),
                why => format!("{why} (by {by}, dashboard)"),
            })),
            other => Err(Error::Usage(format!(
                "Action: {other:?} is none of retry, snooze, give-up"
            ))),
        }
    }

    /// The ids the filter picks now, at most `MOST`.
    fn picked(&self, config: &Config) -> Result<Vec<String>, Error> {
        if self.from == "records" {
            let config = operate::for_retry(config.clone());
            let mut store = operate::inspected(&config)?;
            let ages = records::Ages::of(&config, &self.tier)?;
            let (query, _) = records::band(&config, store.as_mut(), ages, Utc::now())?;
            let statuses = records::statuses_of(&config, &self.status);
            let (found, _) =
                records::read(store.as_mut(), &query, &statuses, None, MOST, usize::MAX)?;
            return Ok(found.iter().map(|r| r.id.to_string()).collect());
        }
        super::data::failed_records(config, &self.failures(), MOST)
    }
}

/// `POST /bulk`: the confirm page, or, confirmed, the action.
pub(super) async fn bulk(
    State(shared): SharedState,
    headers: HeaderMap,
    Form(form): Form<BulkForm>,
) -> Response {
    if !csrf_ok(&shared, &form.csrf) {
        return forged();
    }
    let by = super::auth::person(&shared, &headers);
    let back = form.back();
    if form.confirm == "yes" {
        let ids: Vec<String> = form
            .ids
            .split(',')
            .filter(|id| !id.is_empty())
            .take(MOST)
            .map(String::from)
            .collect();
        let act = match blocking(&shared, {
            let (form, by) = (form.clone(), by.clone());
            move |config| form.act(&config, &by)
        })
        .await
        {
            Ok(act) => act,
            Err(page) => return page,
        };
        return match act_now(&shared, act, ids, by).await {
            Ok(message) => done(&shared, &back, &message),
            Err(page) => page,
        };
    }
    let asked = form.clone();
    let result = blocking(&shared, move |config| {
        let act = asked.act(&config, &by)?;
        let ids = asked.picked(&config)?;
        let config = act.config(config);
        let mut store = operate::inspected(&config)?;
        let plan = operate::plan(&config, store.as_mut(), &Selection::Ids(ids), act.name())?;
        let ids: Vec<String> = plan.records.iter().map(|r| r.id.to_string()).collect();
        Ok((act, ids, plan.refused.len()))
    })
    .await;
    match result {
        Ok((act, ids, refused)) => {
            Html(confirm(&act, &ids, refused, &form, &back, &shared.csrf).into_string())
                .into_response()
        }
        Err(page) => page,
    }
}

/// The confirm step: how many records the action takes, which (the first 50), and
/// the button that does it to exactly those.
fn confirm(
    act: &Act,
    ids: &[String],
    refused: usize,
    form: &BulkForm,
    back: &str,
    csrf: &str,
) -> Markup {
    let (until, what) = match act {
        Act::Retry => (String::new(), "Each is handed to the handler now, one at a time, through the same holds as a tick: a record a tick holds now is skipped.".to_string()),
        Act::Snooze(until) => (rfc3339(*until), format!("Each stays pending, and no tick takes it before {}.", rfc3339(*until))),
        Act::GiveUp(why) => (String::new(), format!("Each gets the given-up status and is never tried again unless retried; its attempt says: {why}.")),
    };
    let fit = match act {
        Act::Retry => "a retry takes pending and given-up records",
        _ => "a snooze or a give-up takes pending records only",
    };
    let n = ids.len() as u64;
    let title = match n {
        0 => format!("Nothing to {}", act.verb().to_lowercase()),
        n => format!("{} {}?", act.verb(), count(n, "record", "records")),
    };
    let body = html! {
        h1 { (title) }
        @if ids.is_empty() {
            p { @match refused {
                0 => { "The filter picks no records now; nothing was done." },
                1 => { "The one record the filter picks is not fit for it (" (fit) "); nothing was done." },
                _ => { "None of the " (refused) " records the filter picks is fit for it (" (fit) "); nothing was done." },
            } }
            p { a href=(back) { "Back" } }
        } @else {
            p { (what) }
        }
        @if refused > 0 && !ids.is_empty() { p.muted {
            @if refused == 1 { "1 more is no longer fit for it (not pending, or gone: " (fit) ") and is left alone." }
            @else { (refused) " more are no longer fit for it (not pending, or gone: " (fit) ") and are left alone." }
        } }
        @if ids.len() == MOST { p.warning { "At most " (MOST) " records an action: the filter may pick more." } }
        p.ids { @for id in ids.iter().take(50) { code { (id) } " " } @if ids.len() > 50 { "… and " (ids.len() - 50) " more" } }
        @if !ids.is_empty() {
            form method="post" action="/bulk" {
                (csrf_field(csrf))
                @for (name, value) in [("from", &form.from), ("tier", &form.tier), ("outcome", &form.outcome),
                        ("status", &form.status), ("error_contains", &form.error_contains), ("page", &form.page), ("action", &act.name().to_string()),
                        ("until", &until), ("reason", &form.reason)] {
                    input type="hidden" name=(name) value=(value);
                }
                input type="hidden" name="confirm" value="yes";
                input type="hidden" name="ids" value=(ids.join(","));
                button.danger type="submit" { (act.verb()) " " (count(n, "record", "records")) }
                " "
                a href=(back) { "Cancel" }
            }
        }
    };
    pages::layout(act.verb(), None, false, body)
}

/// What the records a filter picks are, for the actions that fit them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Fit {
    /// Pending (or of any status): a retry, a snooze and a give-up each take the
    /// pending ones.
    Pending,
    /// Given up on: only a retry takes them (and brings them back).
    GivenUp,
}

/// The bulk actions' forms under a filter: `hidden` says which filter, `what` the
/// records in words; a snooze and a give-up are offered only for records that may be
/// pending (`fit`), and giving up only where the schedule sets `given_up`.
pub(super) fn forms(
    hidden: &[(&str, &str)],
    what: &str,
    fit: Fit,
    given_up: Option<&str>,
    csrf: &str,
) -> Markup {
    let fields = html! {
        (csrf_field(csrf))
        @for (name, value) in hidden { input type="hidden" name=(name) value=(value); }
    };
    html! {
        div.bulk {
            span.muted { "On " (what) ": " }
            form method="post" action="/bulk" {
                (fields)
                input type="hidden" name="action" value="retry";
                button type="submit" { "Retry…" }
            }
            @if fit == Fit::GivenUp {
                span.muted { " Given up on: a retry brings them back (a snooze or a give-up takes pending records)." }
            }
            @if fit == Fit::Pending {
                form method="post" action="/bulk" {
                    (fields)
                    input type="hidden" name="action" value="snooze";
                    input type="text" name="until" placeholder="2h, or 2026-11-23T18:00:00Z" aria-label="snooze until" required;
                    button type="submit" { "Snooze…" }
                }
                @if let Some(status) = given_up {
                    form method="post" action="/bulk" {
                        (fields)
                        input type="hidden" name="action" value="give-up";
                        input type="text" name="reason" placeholder="why" aria-label="why give up";
                        button type="submit" { "Give up (" (status) ")…" }
                    }
                }
            }
        }
    }
}

//! The dashboard's actions: POSTs that carry the page's CSRF token, do what the
//! commands do (`retry`, `pause`, `resume`) through the same code, and answer with a
//! redirect (303) to the page that shows their result, with a notice that page says
//! once, so a reload never repeats one.

use axum::extract::{Form, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Redirect, Response};
use chrono::Utc;
use serde::Deserialize;

use super::data::{self, FailureFilter};
use super::routes::{LISTED, Shared_, blocking, error_page};
use super::{DEADLINE, Shared, auth, pages};
use crate::config::Config;
use crate::error::Error;
use crate::operate::{self, Selection};

/// An action's form refused for a missing or wrong CSRF token.
fn forged() -> Response {
    error_page(
        StatusCode::FORBIDDEN,
        "Refused",
        "This form is not from this dashboard (its CSRF token is missing or stale): reload the page and try again.",
    )
}

fn csrf_ok(shared: &Shared, given: &str) -> bool {
    auth::same(given, &shared.csrf)
}

/// A redirect to `to` with a message for the page that shows the result. The message
/// stays on the server, under a random key the address carries: a link made elsewhere
/// cannot put words of its own on the dashboard.
fn done(shared: &Shared, to: &str, message: &str) -> Response {
    let key = auth::new_secret();
    {
        let mut notices = shared.notices.lock().unwrap_or_else(|e| e.into_inner());
        if notices.len() >= NOTICES {
            notices.pop_front();
        }
        notices.push_back((key.clone(), message.to_string()));
    }
    let sep = if to.contains('?') { '&' } else { '?' };
    Redirect::to(&format!("{to}{sep}done={key}")).into_response()
}

/// The message an action left under `key`, if the server has it.
pub(super) fn notice(shared: &Shared, key: Option<&str>) -> Option<String> {
    let key = key?;
    let notices = shared.notices.lock().unwrap_or_else(|e| e.into_inner());
    notices
        .iter()
        .find(|(k, _)| auth::same(k, key))
        .map(|(_, m)| m.clone())
}

/// How many actions' messages the server keeps for their pages.
const NOTICES: usize = 100;

#[derive(Deserialize)]
pub(super) struct RetryRecord {
    id: String,
    #[serde(default)]
    csrf: String,
}

/// Retries records now: through the same call as `backlog retry`. A retry that
/// outlasts the deadline (slow handlers) goes on; the page it leads to says so, and
/// the attempts show each record's result as it ends.
async fn retry_now(shared: &Shared, ids: Vec<String>) -> Result<String, Response> {
    let schedule = shared.schedule.clone();
    let job = tokio::task::spawn_blocking(move || -> Result<String, Error> {
        let config = operate::for_retry(Config::load(&schedule)?);
        let mut store = operate::inspected(&config)?;
        let plan = operate::plan(&config, store.as_mut(), &Selection::Ids(ids), "retry")?;
        if plan.records.is_empty() {
            return Ok(format!("Not retried: {}", plan.refused.join("; ")));
        }
        let summary = operate::run_retry(
            &config,
            store.as_mut(),
            plan.records,
            Utc::now(),
            Default::default(),
        )?;
        Ok(summary.line())
    });
    match tokio::time::timeout(DEADLINE, job).await {
        Err(_) => Ok(format!(
            "The retry is still running after {} s (a handler is slow); each record's attempts show its result when it ends.",
            DEADLINE.as_secs()
        )),
        Ok(Err(_)) => Err(error_page(
            StatusCode::INTERNAL_SERVER_ERROR,
            "Something broke",
            "The retry failed; the server's log says more.",
        )),
        Ok(Ok(Err(e))) => Err(error_page(
            StatusCode::SERVICE_UNAVAILABLE,
            "Cannot retry",
            &e.to_string(),
        )),
        Ok(Ok(Ok(message))) => Ok(message),
    }
}

pub(super) async fn retry_record(
    State(shared): Shared_,
    Form(form): Form<RetryRecord>,
) -> Response {
    if !csrf_ok(&shared, &form.csrf) {
        return forged();
    }
    match retry_now(&shared, vec![form.id.clone()]).await {
        Ok(message) => done(
            &shared,
            &format!("/record?id={}", pages::urlencode(&form.id)),
            &message,
        ),
        Err(page) => page,
    }
}

#[derive(Deserialize)]
pub(super) struct RetryFailures {
    #[serde(flatten)]
    filter: FailureFilter,
    #[serde(default)]
    csrf: String,
    /// Set by the confirm page: the ids it listed, comma-separated.
    #[serde(default)]
    ids: String,
    #[serde(default)]
    confirm: String,
}

/// The retry of a filtered set: first a confirm page listing the records (still
/// pending) of the failures shown; then, confirmed, those records and no others.
pub(super) async fn retry_failures(
    State(shared): Shared_,
    Form(form): Form<RetryFailures>,
) -> Response {
    if !csrf_ok(&shared, &form.csrf) {
        return forged();
    }
    let back = format!(
        "/failures?tier={}&outcome={}&page={}",
        pages::urlencode(&form.filter.tier),
        pages::urlencode(&form.filter.outcome),
        form.filter.page()
    );
    if form.confirm == "yes" {
        let ids: Vec<String> = form
            .ids
            .split(',')
            .filter(|id| !id.is_empty())
            .take(LISTED)
            .map(String::from)
            .collect();
        return match retry_now(&shared, ids).await {
            Ok(message) => done(&shared, &back, &message),
            Err(page) => page,
        };
    }
    let filter = form.filter.clone();
    let result = blocking(&shared, move |config| {
        let mut ids: Vec<String> = data::failures(&config, &filter, LISTED)?
            .0
            .into_iter()
            .map(|a| a.record_id)
            .collect();
        ids.sort();
        ids.dedup();
        let config = operate::for_retry(config);
        let mut store = operate::inspected(&config)?;
        let plan = operate::plan(&config, store.as_mut(), &Selection::Ids(ids), "retry")?;
        let ids: Vec<String> = plan.records.iter().map(|r| r.id.to_string()).collect();
        Ok((ids, plan.refused.len()))
    })
    .await;
    match result {
        Ok((ids, refused)) => {
            Html(pages::confirm_retry(&ids, refused, &form.filter, &shared.csrf).into_string())
                .into_response()
        }
        Err(page) => page,
    }
}

#[derive(Deserialize)]
pub(super) struct PauseForm {
    #[serde(default)]
    window: String,
    #[serde(default)]
    reason: String,
    #[serde(default)]
    until: String,
    #[serde(default)]
    csrf: String,
}

/// A tier's window from a form: empty for every tier.
fn window_of(text: &str) -> Result<Option<std::time::Duration>, Error> {
    match text.trim() {
        "" => Ok(None),
        w => crate::duration::parse_span(w)
            .map(Some)
            .map_err(|e| Error::Usage(format!("tier {w:?}: {e}"))),
    }
}

pub(super) async fn pause(State(shared): Shared_, Form(form): Form<PauseForm>) -> Response {
    if !csrf_ok(&shared, &form.csrf) {
        return forged();
    }
    let result = blocking(&shared, move |config| {
        let until = match form.until.trim() {
            "" => None,
            text => Some(operate::parse_until(text).map_err(Error::Usage)?),
        };
        let mut store = operate::inspected(&config)?;
        let pause = operate::pause(
            &config,
            store.as_mut(),
            window_of(&form.window)?,
            until,
            Some(form.reason),
            format!("{} (dashboard)", operate::whoami()),
        )?;
        Ok(format!(
            "Paused {}: {}",
            operate::pause_target(&config, pause.window_secs),
            pause.describe()
        ))
    })
    .await;
    match result {
        Ok(message) => done(&shared, "/", &message),
        Err(page) => page,
    }
}

#[derive(Deserialize)]
pub(super) struct ResumeForm {
    #[serde(default)]
    window: String,
    #[serde(default)]
    csrf: String,
}

pub(super) async fn resume(State(shared): Shared_, Form(form): Form<ResumeForm>) -> Response {
    if !csrf_ok(&shared, &form.csrf) {
        return forged();
    }
    let result = blocking(&shared, move |config| {
        let mut store = operate::inspected(&config)?;
        let (lifted, _) = operate::resume(&config, store.as_mut(), window_of(&form.window)?)?;
        Ok(match lifted {
            0 => "Nothing was paused there.".to_string(),
            1 => "Lifted 1 pause.".to_string(),
            n => format!("Lifted {n} pauses."),
        })
    })
    .await;
    match result {
        Ok(message) => done(&shared, "/", &message),
        Err(page) => page,
    }
}

//! The dashboard's actions: POSTs that carry the page's CSRF token, do what the
//! commands do (`retry`, `pause`, `resume`; `bulk.rs` the actions on many records)
//! through the same code, and answer with a
//! redirect (303) to the page that shows their result, with a notice that page says
//! once, so a reload never repeats one.

use axum::extract::{Form, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;

use super::reply::{SharedState, blocking, error_page};
use super::{Shared, auth, input, pages};
use crate::operate;

/// An action's form refused for a missing or wrong CSRF token.
pub(super) fn forged() -> Response {
    error_page(
        StatusCode::FORBIDDEN,
        "Refused",
        "This form is not from this dashboard (its CSRF token is missing or stale): reload the page and try again.",
    )
}

pub(super) fn csrf_ok(shared: &Shared, given: &str) -> bool {
    auth::same(given, &shared.csrf)
}

/// A redirect to `to` with a message for the page that shows the result. The message
/// stays on the server, under a random key the address carries: a link made elsewhere
/// cannot put words of its own on the dashboard.
pub(super) fn done(shared: &Shared, to: &str, message: &str) -> Response {
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

pub(super) async fn retry_record(
    State(shared): SharedState,
    headers: HeaderMap,
    Form(form): Form<RetryRecord>,
) -> Response {
    if !csrf_ok(&shared, &form.csrf) {
        return forged();
    }
    let by = auth::person(&shared, &headers);
    match super::bulk::act_now(&shared, super::bulk::Act::Retry, vec![form.id.clone()], by).await {
        Ok(message) => done(
            &shared,
            &format!("/record?id={}", pages::urlencode(&form.id)),
            &message,
        ),
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

pub(super) async fn pause(
    State(shared): SharedState,
    headers: HeaderMap,
    Form(form): Form<PauseForm>,
) -> Response {
    if !csrf_ok(&shared, &form.csrf) {
        return forged();
    }
    let by = auth::person(&shared, &headers);
    let result = blocking(&shared, move |config| {
        let window = input::optional_tier(&config, "Tier", &form.window)?;
        let until = input::optional_until("Meant to end", &form.until)?;
        let mut store = operate::inspected(&config)?;
        let pause = operate::pause(
            &config,
            store.as_mut(),
            window,
            until,
            Some(form.reason),
            format!("{by} (dashboard)"),
        )?;
        let target = operate::pause_target(&config, pause.window_secs);
        tracing::info!("{} paused {target}", pause.by);
        // Since when, by whom and why are on the page it leads to (the banner of a
        // pause of every tier, a tier's row): said there once, not twice.
        Ok(format!("Paused {target}."))
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

pub(super) async fn resume(
    State(shared): SharedState,
    headers: HeaderMap,
    Form(form): Form<ResumeForm>,
) -> Response {
    if !csrf_ok(&shared, &form.csrf) {
        return forged();
    }
    // A pause lifted is no row to sign: the server's log says who lifted it.
    let by = auth::person(&shared, &headers);
    let result = blocking(&shared, move |config| {
        let window = input::optional_tier(&config, "Tier", &form.window)?;
        let mut store = operate::inspected(&config)?;
        let (lifted, _) = operate::resume(&config, store.as_mut(), window)?;
        tracing::info!(
            "{by} (dashboard) resumed {} ({lifted} lifted)",
            operate::pause_target(&config, window.map_or(0, |w| w.as_secs()))
        );
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

//! The dashboard's addresses and the guard in front of them: pages and pictures are
//! GETs that change nothing, read within a deadline; the actions, POSTs, are
//! `actions.rs`'s.

use std::sync::Arc;

use axum::extract::{Query, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use chrono::Utc;
use serde::Deserialize;

use super::actions::{self, notice};
use super::data;
use super::reply::{SharedState, blocking, error_page};
use super::{Shared, auth, pages, plots};
use crate::error::Error;
use crate::operate;
use backlog_core::config::Config;

pub(crate) fn router(shared: Arc<Shared>) -> axum::Router {
    axum::Router::new()
        .route("/", get(overview))
        .route("/failures", get(super::failures::failures))
        .route("/failures/errors", get(super::failures::by_error))
        .route("/record", get(record))
        .route("/record/retry", post(actions::retry_record))
        .route("/records", get(super::records::records))
        .route("/in-flight", get(super::in_flight::in_flight))
        .route("/bulk", post(super::bulk::bulk))
        .route("/pause", post(actions::pause))
        .route("/resume", post(actions::resume))
        .route("/plots/ticks.svg", get(plot_ticks))
        .route("/plots/backlog.svg", get(plot_backlog))
        .route(
            "/plots/history/{selection}/{chart}",
            get(super::history::plot),
        )
        .route("/assets/refresh.js", get(script))
        .route("/metrics", get(metrics))
        .route("/login", get(login))
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(Arc::clone(&shared), guard))
        // Added after the guard, so outside it: probes carry no token and use any name.
        .route("/healthz", get(super::health::alive))
        .route("/readyz", get(super::health::ready))
        .with_state(shared)
}

async fn not_found() -> Response {
    error_page(
        StatusCode::NOT_FOUND,
        "Not found",
        "There is no such page here.",
    )
}

/// Every request but `/login` carries the token when the server has one.
async fn guard(State(shared): SharedState, request: Request, next: Next) -> Response {
    if shared.token.is_none() && !auth::local_host(request.headers()) {
        return error_page(
            StatusCode::MISDIRECTED_REQUEST,
            "Refused",
            "Without a token this dashboard answers only to localhost, 127.0.0.1 or [::1]: another site may be pointing its own name at this machine. Listen with --token-file to serve it under another name.",
        );
    }
    if request.method() == axum::http::Method::POST && !auth::same_origin(request.headers()) {
        return error_page(
            StatusCode::FORBIDDEN,
            "Refused",
            "This form was posted from another site.",
        );
    }
    if let Some(token) = &shared.token
        && request.uri().path() != "/login"
        && !auth::carried(request.headers()).is_some_and(|t| auth::same(&t, token))
    {
        return (
            StatusCode::UNAUTHORIZED,
            Html(pages::unauthorized().into_string()),
        )
            .into_response();
    }
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        "nosniff".parse().expect("a header value"),
    );
    headers.insert(
        header::X_FRAME_OPTIONS,
        "DENY".parse().expect("a header value"),
    );
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self'; frame-ancestors 'none'"
            .parse()
            .expect("a header value"),
    );
    response
}

#[derive(Deserialize)]
struct Login {
    token: String,
}

/// Sets the token's cookie for a browser, then goes to the overview.
async fn login(State(shared): SharedState, Query(login): Query<Login>) -> Response {
    match &shared.token {
        Some(token) if auth::same(&login.token, token) => (
            StatusCode::SEE_OTHER,
            [
                (
                    header::SET_COOKIE,
                    format!(
                        "{}={}; Path=/; HttpOnly; SameSite=Strict",
                        auth::COOKIE,
                        login.token
                    ),
                ),
                (header::LOCATION, "/".to_string()),
            ],
        )
            .into_response(),
        Some(_) => (
            StatusCode::UNAUTHORIZED,
            Html(pages::unauthorized().into_string()),
        )
            .into_response(),
        None => Redirect::to("/").into_response(),
    }
}

#[derive(Deserialize, Default)]
struct Notice {
    done: Option<String>,
}

/// The overview's choice of history (`?history=all` or a tier's number).
#[derive(Deserialize)]
struct HistoryChoice {
    history: Option<String>,
}

async fn overview(
    State(shared): SharedState,
    Query(notice_of): Query<Notice>,
    Query(choice): Query<HistoryChoice>,
) -> Response {
    let csrf = shared.csrf.clone();
    match blocking(&shared, |config| data::overview(config, Utc::now())).await {
        Ok(o) => Html(
            pages::overview(
                &o,
                super::history::Selection::parse(choice.history.as_deref(), &o.config),
                &csrf,
                notice(&shared, notice_of.done.as_deref()).as_deref(),
            )
            .into_string(),
        )
        .into_response(),
        Err(page) => page,
    }
}

#[derive(Deserialize)]
struct RecordQuery {
    id: String,
    done: Option<String>,
}

async fn record(State(shared): SharedState, Query(q): Query<RecordQuery>) -> Response {
    let id = q.id.trim().to_string();
    if id.is_empty() {
        return error_page(
            StatusCode::BAD_REQUEST,
            "Check the form",
            "Record id is empty: type the id of a record, as the table's id column holds it.",
        );
    }
    let now = Utc::now();
    let result = blocking(&shared, move |config| {
        let mut store = operate::inspected(&config)?;
        // An id of the wrong type is a usage error, its page says why (400).
        let Some(record) = operate::find_record(store.as_mut(), &id)? else {
            return Ok(None);
        };
        let view = operate::view_of(&config, store.as_mut(), record, now, 50)?;
        Ok(Some((view, config.table.labels.clone())))
    })
    .await;
    match result {
        Ok(Some((view, labels))) => Html(
            pages::record(
                &view,
                &labels,
                now,
                &shared.csrf,
                notice(&shared, q.done.as_deref()).as_deref(),
            )
            .into_string(),
        )
        .into_response(),
        Ok(None) => error_page(
            StatusCode::NOT_FOUND,
            "No such record",
            &format!("The table has no record with id {}.", q.id.trim()),
        ),
        Err(page) => page,
    }
}

pub(super) fn svg(text: String) -> Response {
    (
        [
            (header::CONTENT_TYPE, "image/svg+xml"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        text,
    )
        .into_response()
}

async fn plot_ticks(State(shared): SharedState) -> Response {
    let result = blocking(&shared, |config| {
        let mut store = operate::inspected(&config)?;
        // A fleet's runners share a slot: the plot draws their sum, a point a slot.
        store
            .recent_runs(300)
            .map(|runs| backlog::status::slot::by_slot(&config.schedule, &runs))
            .map_err(Error::store(store.describe()))
    })
    .await;
    match result {
        Ok(runs) => svg(plots::ticks(&runs)),
        Err(page) => page,
    }
}

async fn plot_backlog(State(shared): SharedState) -> Response {
    let result = blocking(&shared, |config| {
        let mut store = operate::inspected(&config)?;
        let status = backlog::status::status(&config, store.as_mut(), Utc::now())
            .map_err(Error::store(store.describe()))?;
        Ok(plots::backlog(&status, &config.table.pending))
    })
    .await;
    match result {
        Ok(text) => svg(text),
        Err(page) => page,
    }
}

async fn script() -> Response {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        include_str!("refresh.js"),
    )
        .into_response()
}

/// One scrape: the metrics in the Prometheus text format, or a 500 with the reason in
/// one line of text (what a scraper logs), within the deadline.
pub(super) async fn metrics(State(shared): SharedState) -> Response {
    let schedule = shared.schedule.clone();
    let read = super::health::within_deadline("the metrics could not be read", move || {
        let config = Config::load(&schedule)?;
        let mut store = backlog_core::tick::open_store(&config)?;
        crate::metrics::collect(&config, store.as_mut(), Utc::now())
            .map(|s| s.render())
            .map_err(Error::store(&config.database.url))
    });
    match read.await {
        Ok(text) => ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response(),
        Err(why) => super::health::text(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("backlog: {why}\n"),
        ),
    }
}

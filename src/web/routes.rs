//! The dashboard's addresses: pages and pictures are GETs that change nothing; actions
//! are POSTs that carry the CSRF token and answer with a redirect (303) to the page that
//! shows their result, so a reload never repeats one.

use std::sync::Arc;

use axum::extract::{Form, Query, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use chrono::Utc;
use serde::Deserialize;

use super::data::{self, FailureFilter};
use super::{DEADLINE, Shared, auth, pages, plots};
use crate::config::Config;
use crate::error::Error;
use crate::operate::{self, Selection};

type Shared_ = State<Arc<Shared>>;

pub(crate) fn router(shared: Arc<Shared>) -> axum::Router {
    axum::Router::new()
        .route("/", get(overview))
        .route("/failures", get(failures))
        .route("/record", get(record))
        .route("/record/retry", post(retry_record))
        .route("/failures/retry", post(retry_failures))
        .route("/pause", post(pause))
        .route("/resume", post(resume))
        .route("/plots/ticks.svg", get(plot_ticks))
        .route("/plots/backlog.svg", get(plot_backlog))
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

/// A page that is an error, with its status code.
fn error_page(code: StatusCode, title: &str, message: &str) -> Response {
    (code, Html(pages::error(title, message).into_string())).into_response()
}

async fn not_found() -> Response {
    error_page(
        StatusCode::NOT_FOUND,
        "Not found",
        "There is no such page here.",
    )
}

/// Every request but `/login` carries the token when the server has one.
async fn guard(State(shared): Shared_, request: Request, next: Next) -> Response {
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
async fn login(State(shared): Shared_, Query(login): Query<Login>) -> Response {
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

/// Runs `work` on a blocking thread, one of a few at once, within the deadline; an
/// error or a late answer becomes an error page.
async fn blocking<T: Send + 'static>(
    shared: &Shared,
    work: impl FnOnce(Config) -> Result<T, Error> + Send + 'static,
) -> Result<T, Response> {
    let schedule = shared.schedule.clone();
    let readers = Arc::clone(&shared.readers);
    // The deadline counts the wait for a turn too; the turn is given back when the work
    // ends, not when the page gave up on it, so no more than a few read at once.
    let job = async move {
        let turn = readers.acquire_owned().await.ok();
        tokio::task::spawn_blocking(move || {
            let _turn = turn;
            work(Config::load(&schedule)?)
        })
        .await
    };
    match tokio::time::timeout(DEADLINE, job).await {
        Err(_) => Err(error_page(
            StatusCode::GATEWAY_TIMEOUT,
            "The database is slow",
            &format!(
                "It did not answer within {} s; try again in a moment.",
                DEADLINE.as_secs()
            ),
        )),
        Ok(Err(_)) => Err(error_page(
            StatusCode::INTERNAL_SERVER_ERROR,
            "Something broke",
            "Reading this page failed; the server's log says more.",
        )),
        Ok(Ok(Err(e))) => {
            let code = match e {
                Error::Usage(_) => StatusCode::BAD_REQUEST,
                _ => StatusCode::SERVICE_UNAVAILABLE,
            };
            Err(error_page(code, "Cannot read the backlog", &e.to_string()))
        }
        Ok(Ok(Ok(value))) => Ok(value),
    }
}

#[derive(Deserialize, Default)]
struct Notice {
    done: Option<String>,
}

async fn overview(State(shared): Shared_, Query(notice_of): Query<Notice>) -> Response {
    let csrf = shared.csrf.clone();
    match blocking(&shared, |config| data::overview(config, Utc::now())).await {
        Ok(o) => Html(
            pages::overview(
                &o,
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
struct FailuresQuery {
    #[serde(flatten)]
    filter: FailureFilter,
    done: Option<String>,
}

/// The failures shown on a page, at most.
const LISTED: usize = 200;

async fn failures(State(shared): Shared_, Query(q): Query<FailuresQuery>) -> Response {
    let filter = q.filter.clone();
    let result = blocking(&shared, move |config| {
        let tiers: Vec<String> = config
            .schedule
            .tiers
            .iter()
            .map(|t| crate::duration::compact(t.window))
            .collect();
        let labels = config.table.labels.clone();
        let (attempts, total) = data::failures(&config, &filter, LISTED)?;
        Ok((attempts, total, tiers, labels))
    })
    .await;
    match result {
        Ok((attempts, total, tiers, labels)) => Html(
            pages::failures(
                &attempts,
                pages::Listed {
                    total,
                    per_page: LISTED,
                },
                &labels,
                &q.filter,
                &tiers,
                &shared.csrf,
                notice(&shared, q.done.as_deref()).as_deref(),
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

async fn record(State(shared): Shared_, Query(q): Query<RecordQuery>) -> Response {
    let id = q.id.trim().to_string();
    let now = Utc::now();
    let result = blocking(&shared, move |config| {
        let mut store = operate::inspected(&config)?;
        let view = operate::record_view(&config, store.as_mut(), &id, now, 50)?;
        Ok((view, config.table.labels.clone()))
    })
    .await;
    match result {
        Ok((view, labels)) => Html(
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
        Err(page) if page.status() == StatusCode::BAD_REQUEST => error_page(
            StatusCode::NOT_FOUND,
            "No such record",
            &format!("The table has no record with id {}.", q.id.trim()),
        ),
        Err(page) => page,
    }
}

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
fn notice(shared: &Shared, key: Option<&str>) -> Option<String> {
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
struct RetryRecord {
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
        let config = Config::load(&schedule)?;
        let mut store = operate::inspected(&config)?;
        let plan = operate::plan_retry(&config, store.as_mut(), &Selection::Ids(ids))?;
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

async fn retry_record(State(shared): Shared_, Form(form): Form<RetryRecord>) -> Response {
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
struct RetryFailures {
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
async fn retry_failures(State(shared): Shared_, Form(form): Form<RetryFailures>) -> Response {
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
        let mut store = operate::inspected(&config)?;
        let plan = operate::plan_retry(&config, store.as_mut(), &Selection::Ids(ids))?;
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
struct PauseForm {
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

async fn pause(State(shared): Shared_, Form(form): Form<PauseForm>) -> Response {
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
struct ResumeForm {
    #[serde(default)]
    window: String,
    #[serde(default)]
    csrf: String,
}

async fn resume(State(shared): Shared_, Form(form): Form<ResumeForm>) -> Response {
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

fn svg(text: String) -> Response {
    (
        [
            (header::CONTENT_TYPE, "image/svg+xml"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        text,
    )
        .into_response()
}

async fn plot_ticks(State(shared): Shared_) -> Response {
    let result = blocking(&shared, |config| {
        let mut store = operate::inspected(&config)?;
        store
            .recent_runs(300)
            .map_err(Error::store(store.describe()))
    })
    .await;
    match result {
        Ok(runs) => svg(plots::ticks(&runs)),
        Err(page) => page,
    }
}

async fn plot_backlog(State(shared): Shared_) -> Response {
    let result = blocking(&shared, |config| {
        let mut store = operate::inspected(&config)?;
        let status = crate::status::status(&config, store.as_mut(), Utc::now())
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
pub(super) async fn metrics(State(shared): Shared_) -> Response {
    let schedule = shared.schedule.clone();
    let job = tokio::task::spawn_blocking(move || -> Result<String, Error> {
        let config = Config::load(&schedule)?;
        let mut store = crate::tick::open_store(&config)?;
        crate::metrics::collect(&config, store.as_mut(), Utc::now())
            .map(|s| s.render())
            .map_err(Error::store(&config.database.url))
    });
    let failed = |why: String| {
        (
            StatusCode::INTERNAL_SERVER_ERROR,
            [(header::CONTENT_TYPE, "text/plain")],
            format!("backlog: {why}\n"),
        )
            .into_response()
    };
    match tokio::time::timeout(DEADLINE, job).await {
        Ok(Ok(Ok(text))) => {
            ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
        }
        Ok(Ok(Err(e))) => failed(e.to_string()),
        Ok(Err(_)) => failed("the metrics could not be read".into()),
        Err(_) => failed(format!(
            "the database did not answer within {} s",
            DEADLINE.as_secs()
        )),
    }
}

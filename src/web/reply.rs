//! How the dashboard's handlers answer: the state they share, their reads on a blocking
//! thread within the deadline, and the pages of errors. Every page's module uses it;
//! it uses none of them.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};

use super::{DEADLINE, Shared, pages};
use crate::error::Error;
use backlog_core::config::Config;

/// The state a handler takes: `State(shared): SharedState`.
pub(super) type SharedState = State<Arc<Shared>>;

/// A page that is an error, with its status code.
pub(super) fn error_page(code: StatusCode, title: &str, message: &str) -> Response {
    (code, Html(pages::error(title, message).into_string())).into_response()
}

/// Runs `work` on a blocking thread, one of a few at once, within the deadline; an
/// error or a late answer becomes an error page.
pub(super) async fn blocking<T: Send + 'static>(
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
        Ok(Ok(Err(e))) => Err(refused(&e, "Cannot read the backlog")),
        Ok(Ok(Ok(value))) => Ok(value),
    }
}

/// The page of an error of a page or an action: a person's input that cannot be taken
/// (a usage error, which names the field and what to write: see `input.rs`) is a 400
/// that says so; anything else is the database's or the file's, titled `title`.
pub(super) fn refused(e: &Error, title: &str) -> Response {
    match e {
        Error::Usage(why) => error_page(StatusCode::BAD_REQUEST, "Check the form", why),
        _ => error_page(StatusCode::SERVICE_UNAVAILABLE, title, &e.to_string()),
    }
}

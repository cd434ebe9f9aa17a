//! `/healthz` and `/readyz`, for a service manager or an orchestrator's probes: the
//! process answers, and the backlog can be worked (the database answers and no tier's
//! last tick failed). They say nothing of a record, so they answer under any host name
//! and without the dashboard's token, as a probe sends neither.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::{DEADLINE, Shared};
use crate::error::Error;
use backlog_core::config::Config;

/// Runs `work` on a blocking thread within the deadline; an error is the line that
/// says why (its own; `broken` when the work itself broke down; or that the database
/// did not answer in time), for a plain-text answer to a machine (a probe, a scraper).
pub(super) async fn within_deadline<T: Send + 'static>(
    broken: &str,
    work: impl FnOnce() -> Result<T, Error> + Send + 'static,
) -> Result<T, String> {
    match tokio::time::timeout(DEADLINE, tokio::task::spawn_blocking(work)).await {
        Ok(Ok(result)) => result.map_err(|e| e.to_string()),
        Ok(Err(_)) => Err(broken.to_string()),
        Err(_) => Err(format!(
            "the database did not answer within {} s",
            DEADLINE.as_secs()
        )),
    }
}

pub(super) fn text(code: StatusCode, body: String) -> Response {
    (code, [(header::CONTENT_TYPE, "text/plain")], body).into_response()
}

/// `/healthz`: the process is alive and serving.
pub(super) async fn alive() -> Response {
    text(StatusCode::OK, "ok\n".into())
}

/// `/readyz`: 200 when the schedule file loads, the database answers, no tier's
/// last tick failed or was abandoned and no `critical_` threshold of `[check]` is
/// passed; 503 with the reason otherwise. A `warn_` threshold passed is said after
/// `ready`, still 200: a probe that restarts or unroutes a runner over a warning
/// would make it worse. A failed tick is named, not its error: that may quote a
/// handler's output about a record, and a probe has no token (`backlog status` and
/// the dashboard say why); a threshold's finding holds counts and ages only.
pub(super) async fn ready(State(shared): State<Arc<Shared>>) -> Response {
    let schedule = shared.schedule.clone();
    let checked = within_deadline(
        "the check could not run",
        move || -> Result<Result<Vec<String>, String>, Error> {
            let config = Config::load(&schedule)?;
            let mut store = backlog_core::tick::open_store(&config)?;
            let runs = store
                .last_runs()
                .map_err(Error::store(&config.database.url))?;
            let tier_of = |secs: u64| {
                config
                    .schedule
                    .tiers
                    .iter()
                    .position(|t| t.window.as_secs() == secs)
            };
            let failed = runs
                .iter()
                .filter(|r| matches!(r.outcome.as_str(), "failed" | "abandoned"))
                .find_map(|r| {
                    tier_of(r.window_secs).map(|i| {
                        format!(
                            "tier {}'s last tick {}; `backlog status` says why",
                            i + 1,
                            r.outcome,
                        )
                    })
                });
            if let Some(why) = failed {
                return Ok(Err(why));
            }
            thresholds(&config, store.as_mut())
        },
    );
    match checked.await {
        Ok(Ok(warnings)) if warnings.is_empty() => text(StatusCode::OK, "ready\n".into()),
        Ok(Ok(warnings)) => text(
            StatusCode::OK,
            format!("ready; warning: {}\n", warnings.join("; ")),
        ),
        Ok(Err(why)) | Err(why) => {
            text(StatusCode::SERVICE_UNAVAILABLE, format!("backlog: {why}\n"))
        }
    }
}

/// What the thresholds of `[check]` say, if the file sets any: the critical findings
/// as the reason not to be ready, else the warnings.
fn thresholds(
    config: &Config,
    store: &mut dyn backlog_core::store::Store,
) -> Result<Result<Vec<String>, String>, Error> {
    let thresholds = backlog::status::Thresholds::of(&config.check);
    if !thresholds.any() {
        return Ok(Ok(Vec::new()));
    }
    let now = store.clock().map_err(Error::store(store.describe()))?;
    let status =
        backlog::status::status(config, store, now).map_err(Error::store(&config.database.url))?;
    let found = backlog::status::judge(
        config,
        store,
        &status,
        &config.untried_statuses(),
        &thresholds,
    )
    .map_err(Error::store(&config.database.url))?;
    let of = |level| -> Vec<String> {
        found
            .iter()
            .filter(|(l, _)| *l == level)
            .map(|(_, text)| text.clone())
            .collect()
    };
    let critical = of(backlog::status::CheckLevel::Critical);
    Ok(match critical.is_empty() {
        true => Ok(of(backlog::status::CheckLevel::Warning)),
        false => Err(critical.join("; ")),
    })
}

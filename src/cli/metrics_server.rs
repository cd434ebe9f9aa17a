//! `backlog daemon --metrics ADDR`: serves `/metrics` (the Prometheus text format)
//! beside the daemon's ticks, on a thread of its own. Each scrape reads the database
//! afresh, through the schedule file as it is then (a reload changes what is served).

use std::net::SocketAddr;
use std::path::PathBuf;

use axum::http::{StatusCode, header};
use axum::response::IntoResponse;

use crate::config::Config;
use crate::error::Error;

/// Listens on `addr` now (so a busy port is the daemon's error, at once), then serves
/// from a thread of its own until the process ends.
pub fn start(addr: SocketAddr, schedule: PathBuf) -> Result<(), Error> {
    let listener = std::net::TcpListener::bind(addr)
        .and_then(|l| l.set_nonblocking(true).map(|()| l))
        .map_err(|source| Error::Io {
            context: format!("--metrics {addr}: cannot listen there"),
            source,
        })?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .map_err(|source| Error::Io {
            context: "cannot start the metrics server".into(),
            source,
        })?;
    tracing::info!("serving metrics at http://{addr}/metrics");
    std::thread::Builder::new()
        .name("metrics".into())
        .spawn(move || {
            runtime.block_on(async move {
                let listener = match tokio::net::TcpListener::from_std(listener) {
                    Ok(l) => l,
                    Err(e) => {
                        tracing::error!("the metrics server stopped: {e}");
                        return;
                    }
                };
                let app = axum::Router::new().route(
                    "/metrics",
                    axum::routing::get(move || scrape(schedule.clone())),
                );
                if let Err(e) = axum::serve(listener, app).await {
                    tracing::error!("the metrics server stopped: {e}");
                }
            });
        })
        .map_err(|source| Error::Io {
            context: "cannot start the metrics server".into(),
            source,
        })?;
    Ok(())
}

/// One scrape: the metrics, or a 500 with the reason in one line.
async fn scrape(schedule: PathBuf) -> impl IntoResponse {
    // The database calls block: a blocking thread, with a deadline, so a locked
    // database answers the scraper with an error instead of stalling every scrape.
    let job = tokio::task::spawn_blocking(move || {
        let config = Config::load(&schedule)?;
        let mut store = crate::tick::open_store(&config)?;
        crate::metrics::collect(&config, store.as_mut(), chrono::Utc::now())
            .map(|s| s.render())
            .map_err(Error::store(&config.database.url))
    });
    let result = match tokio::time::timeout(std::time::Duration::from_secs(15), job).await {
        Ok(joined) => joined.map_err(drop),
        Err(_) => Ok(Err(Error::Usage(
            "the database did not answer within 15 s".into(),
        ))),
    };
    match result {
        Ok(Ok(text)) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
            text,
        ),
        Ok(Err(e)) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            [(header::CONTENT_TYPE, "text/plain")],
            format!("backlog: {e}\n"),
        ),
        Err(_) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            [(header::CONTENT_TYPE, "text/plain")],
            "backlog: the metrics could not be read\n".to_string(),
        ),
    }
}

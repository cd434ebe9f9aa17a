//! The web dashboard: `backlog serve`, and `backlog daemon --http ADDR`; and the
//! daemon's `/metrics` alone (`--metrics ADDR`), served the same way.
//!
//! Server-rendered HTML (maud escapes everything it writes, so no value from the
//! database reaches a page raw), readable without JavaScript; one small script
//! refreshes the page's content every few seconds. Reads and actions go through the
//! same library calls as the commands (`status`, `show`, `retry`, `pause`,
//! `resume`). Every request reads the schedule file and the database afresh, on a
//! blocking thread, at most a few at once, each with a deadline: a slow database
//! gives an error page, never a hung server.
//!
//! Parts: `auth` (the token, the CSRF token, who acts), `data` (what a page reads),
//! `pages` (the HTML), `paces` (the overview's adapted rates), `failures` (the
//! failures page and its groups by error), `plots` (the SVGs), `routes` (the
//! handlers), `actions` (the POSTs), `bulk` (actions on many records, through a
//! confirm page), `records` (a tier's records by status, keyset-paged; `record_row`
//! what each row says), `in_flight` (what the ticks hold now), `input` (what a
//! person types into a form, read with a message that names its field).

mod actions;
mod auth;
mod bulk;
mod data;
mod failures;
mod health;
mod history;
mod in_flight;
mod input;
mod paces;
mod pages;
mod plots;
mod record_row;
mod records;
mod reply;
mod routes;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::error::Error;

pub use auth::{load_token, user_header};

/// How long a page may take to read the database before it is an error page.
const DEADLINE: Duration = Duration::from_secs(15);

/// How many requests read the database at once; the others wait their turn.
const READERS: usize = 4;

/// What every request shares.
pub(crate) struct Shared {
    pub(crate) schedule: PathBuf,
    /// The token every request must carry, when the server listens beyond loopback.
    pub(crate) token: Option<String>,
    /// The token every form carries, so another site cannot post to this one.
    pub(crate) csrf: String,
    pub(crate) readers: Arc<tokio::sync::Semaphore>,
    /// The header a reverse proxy names the person acting in (`--user-header`), kept
    /// only where the server trusts it: it has a token, or listens on loopback, so
    /// every request comes through the proxy (or from this machine).
    pub(crate) user_header: Option<axum::http::HeaderName>,
    /// The messages of the last actions, by the key their redirect carries.
    pub(crate) notices: std::sync::Mutex<std::collections::VecDeque<(String, String)>>,
}

/// Binds `addr` now (a busy port is the caller's error, at once). Listening beyond
/// loopback needs a token.
fn bind(addr: SocketAddr, token: &Option<String>) -> Result<std::net::TcpListener, Error> {
    if !addr.ip().is_loopback() && token.is_none() {
        return Err(Error::Usage(format!(
            "{addr} is not a loopback address: give --token-file FILE (or BACKLOG_TOKEN) so that only those who hold the token can read and act"
        )));
    }
    std::net::TcpListener::bind(addr)
        .and_then(|l| l.set_nonblocking(true).map(|()| l))
        .map_err(|source| Error::Io {
            context: format!("{addr}: cannot listen there"),
            source,
        })
}

/// The address `listener` is bound to: `addr` with the port the system gave where it
/// asked for any (`:0`).
fn bound(listener: &std::net::TcpListener, addr: SocketAddr) -> SocketAddr {
    listener.local_addr().unwrap_or(addr)
}

fn runtime() -> Result<tokio::runtime::Runtime, Error> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(READERS * 2)
        .enable_io()
        .enable_time()
        .build()
        .map_err(|source| Error::Io {
            context: "cannot start the web server".into(),
            source,
        })
}

async fn serve_on(listener: std::net::TcpListener, shared: Arc<Shared>) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::from_std(listener)?;
    axum::serve(listener, routes::router(shared)).await
}

/// Who may act, and how they are named: the token every request carries, if any, and
/// the header a reverse proxy names the person in (`--user-header`).
#[derive(Debug, Clone, Default)]
pub struct Access {
    pub token: Option<String>,
    pub user_header: Option<axum::http::HeaderName>,
}

fn shared(schedule: PathBuf, access: Access, addr: SocketAddr) -> Arc<Shared> {
    // A header anyone could set is no name: trusted behind a token, or on loopback.
    let trusted = access.token.is_some() || addr.ip().is_loopback();
    if access.user_header.is_some() && !trusted {
        tracing::warn!("--user-header is ignored: {addr} is not loopback and no token is set");
    }
    Arc::new(Shared {
        schedule,
        token: access.token,
        user_header: access.user_header.filter(|_| trusted),
        csrf: auth::new_secret(),
        readers: Arc::new(tokio::sync::Semaphore::new(READERS)),
        notices: Default::default(),
    })
}

/// `backlog serve`: serves the dashboard until the process is stopped, once
/// `listening` has said where (the command line says it on stdout).
pub fn serve(
    schedule: PathBuf,
    addr: SocketAddr,
    access: Access,
    listening: impl FnOnce(SocketAddr) -> Result<(), Error>,
) -> Result<(), Error> {
    let listener = bind(addr, &access.token)?;
    let runtime = runtime()?;
    // The port bound, where `addr` asked for any (`:0`).
    listening(bound(&listener, addr))?;
    runtime
        .block_on(serve_on(listener, shared(schedule, access, addr)))
        .map_err(|source| Error::Io {
            context: "the web server stopped".into(),
            source,
        })
}

/// `backlog daemon --http`: serves the dashboard from a thread of its own, beside the
/// daemon's ticks.
pub fn start(schedule: PathBuf, addr: SocketAddr, access: Access) -> Result<(), Error> {
    let listener = bind(addr, &access.token)?;
    tracing::info!(
        "serving the dashboard at http://{}/",
        bound(&listener, addr)
    );
    in_background(
        "the dashboard",
        listener,
        routes::router(shared(schedule, access, addr)),
    )
}

/// `backlog daemon --metrics`: serves `/metrics` alone, from a thread of its own. It
/// shows counts, statuses, tier windows and the table's name, never a record or a
/// password, so it needs no token and answers under any host name a scraper uses.
pub fn start_metrics(schedule: PathBuf, addr: SocketAddr) -> Result<(), Error> {
    let listener = std::net::TcpListener::bind(addr)
        .and_then(|l| l.set_nonblocking(true).map(|()| l))
        .map_err(|source| Error::Io {
            context: format!("--metrics {addr}: cannot listen there"),
            source,
        })?;
    tracing::info!(
        "serving metrics at http://{}/metrics",
        bound(&listener, addr)
    );
    let app = axum::Router::new()
        .route("/metrics", axum::routing::get(routes::metrics))
        .route("/healthz", axum::routing::get(health::alive))
        .route("/readyz", axum::routing::get(health::ready))
        .with_state(shared(schedule, Access::default(), addr));
    in_background("the metrics server", listener, app)
}

/// Serves `app` on `listener` from a thread of its own until the process ends.
fn in_background(
    what: &'static str,
    listener: std::net::TcpListener,
    app: axum::Router,
) -> Result<(), Error> {
    let runtime = runtime()?;
    std::thread::Builder::new()
        .name("web".into())
        .spawn(move || {
            let served = runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener)?;
                axum::serve(listener, app).await
            });
            if let Err(e) = served {
                tracing::error!("{what} stopped: {e}");
            }
        })
        .map_err(|source| Error::Io {
            context: format!("cannot start {what}"),
            source,
        })?;
    Ok(())
}

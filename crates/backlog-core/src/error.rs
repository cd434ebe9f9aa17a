//! The core's error: what can stop a tick, or the loading of a schedule file, from
//! doing what it was asked. Each kind is a variant a caller can match on; the
//! `backlog` command maps them to its exit codes (its own error wraps this one), so
//! a crontab wrapper can tell "the schedule file is wrong" from "the database is gone".

use crate::config::ConfigError;
use crate::handler::HandlerError;
use crate::store::StoreError;

/// Everything that can stop `backlog` from doing what it was asked.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The schedule file is missing or invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The database, the table, its columns or the tool's own tables are not usable, or a
    /// statement on them failed.
    #[error("{}: {source}", database)]
    Store {
        /// The database it happened in, as messages show it (never with its password).
        database: String,
        /// What went wrong there.
        source: StoreError,
    },
    /// The handler could not be built or could not run.
    #[error("{}{source}", file.as_ref().map(|f| format!("{f}: ")).unwrap_or_default())]
    Handler {
        /// The schedule file the handler came from, when there is one.
        file: Option<String>,
        /// What kept it from running.
        source: HandlerError,
    },
    /// The breaker stopped a tick: the handler failed `handler.stop_after_failures`
    /// times in a row (this tick's, or its tier's runners' together), or the tier's
    /// breaker was open. The tick ran and marked what it handled; the rest waits.
    #[error("the tick stopped after {0}")]
    Tripped(String),
    /// A tick ran, but stopped because its hold on its records lapsed: it was paused
    /// (SIGSTOP, a frozen VM, a write lock held by another process) past its lease; or
    /// was about to, its heartbeat unable to run for half of it.
    #[error("the tick stopped: {0}")]
    Lapsed(String),
    /// A tick ran, but a signal (SIGTERM, SIGINT) stopped it before its band was done:
    /// what it handled is marked, and its tier is unfinished until the next start
    /// takes the rest.
    #[error("the tick stopped: {0}")]
    Stopped(String),
    /// A command-line value that does not make sense.
    #[error("{0}")]
    Usage(String),
}

impl Error {
    /// Wraps a store error with the database it came from: `.map_err(Error::store(url))`.
    /// Kept in a variable, it serves every call on one store: `.map_err(&store_err)`.
    pub fn store(database: impl ToString) -> impl Fn(StoreError) -> Error {
        let database = database.to_string();
        move |source| Error::Store {
            database: database.clone(),
            source,
        }
    }

    /// A handler that could not run, outside any schedule file's naming of it.
    pub fn handler(source: crate::handler::HandlerError) -> Error {
        Error::Handler { file: None, source }
    }
}

//! The library's error, and the exit code each kind of error gets.
//!
//! Exit codes are decided here and nowhere else, so a crontab wrapper or a monitoring
//! check can tell "the schedule file is wrong" from "the database is gone" without
//! parsing messages. A tick that ran is success (0) whatever its records did: a record
//! failing is the backlog's normal business, not the tool's failure.
//!
//! The command's own failures (its crontab, `doctor`'s and `status --check`'s verdicts)
//! are variants here too, so that every command's error goes through the one
//! `Error::exit_code`; they exist only with the `cli` feature, and no function of the
//! library returns them.

use crate::config::ConfigError;
#[cfg(feature = "cli")]
use crate::crontab::CrontabError;
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
    /// The crontab could not be read or written, or its backlog block is broken
    /// (`backlog crontab`; the `cli` feature only).
    #[cfg(feature = "cli")]
    #[error(transparent)]
    Crontab(#[from] CrontabError),
    /// `backlog doctor` found problems (it printed them; the `cli` feature only).
    #[cfg(feature = "cli")]
    #[error("{0} of the checks failed")]
    Unhealthy(usize),
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
    /// `status --check` found the backlog in trouble (it printed why on stdout; the
    /// `cli` feature only).
    #[cfg(feature = "cli")]
    #[error("the check found the backlog {0:?}")]
    Check(crate::status::CheckLevel),
    /// A file or a socket failed outside the database: writing the demo, reading the
    /// dashboard's token file, binding its port…
    #[error("{context}: {source}")]
    Io {
        /// What the tool was doing, with the path or address.
        context: String,
        /// The system's error.
        source: std::io::Error,
    },
}

/// The process exit codes of `backlog`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
#[non_exhaustive]
pub enum ExitCode {
    /// The command did what it was asked (a tick ran, whatever its records' outcomes).
    Success = 0,
    /// Something unexpected: an I/O error, a bug. From `status --check`: WARNING.
    Failure = 1,
    /// The command line is wrong (clap uses 2 as well). From `status --check`:
    /// CRITICAL.
    Usage = 2,
    /// The schedule file is missing or invalid.
    Schedule = 3,
    /// The database, the table, a column or the inserted-at values are not usable.
    Database = 4,
    /// The handler cannot be started.
    Handler = 5,
    /// The crontab cannot be read or written, or its backlog block is broken.
    Crontab = 6,
    /// A tick ran, but its breaker stopped it (`handler.stop_after_failures` failures
    /// in a row, or the tier's breaker open): the counterpart is likely down.
    Tripped = 7,
    /// A tick ran, but its hold on its records lapsed, or was about to with no renewal
    /// in sight, and it stopped handing them out: it was paused past
    /// `database.claim_lease`, or its heartbeat could not run for half of it.
    Lapsed = 8,
    /// A tick ran, but a signal stopped it before its band was done (a deploy, a
    /// person's Ctrl-C): what it handled is marked, and the next start takes the rest.
    Stopped = 9,
}

impl Error {
    /// Wraps a store error with the database it came from: `.map_err(Error::store(url))`.
    /// Kept in a variable, it serves every call on one store: `.map_err(&store_err)`.
    pub(crate) fn store(database: impl ToString) -> impl Fn(StoreError) -> Error {
        let database = database.to_string();
        move |source| Error::Store {
            database: database.clone(),
            source,
        }
    }

    /// A handler that could not run, outside any schedule file's naming of it.
    pub(crate) fn handler(source: crate::handler::HandlerError) -> Error {
        Error::Handler { file: None, source }
    }

    /// The exit code `backlog` ends with for this error (see `ExitCode`).
    pub fn exit_code(&self) -> ExitCode {
        match self {
            Error::Config(_) => ExitCode::Schedule,
            Error::Store { .. } => ExitCode::Database,
            Error::Handler { .. } => ExitCode::Handler,
            #[cfg(feature = "cli")]
            Error::Crontab(_) => ExitCode::Crontab,
            Error::Usage(_) => ExitCode::Usage,
            // The monitoring-plugin convention: 1 warning, 2 critical.
            #[cfg(feature = "cli")]
            Error::Check(crate::status::CheckLevel::Critical) => ExitCode::Usage,
            #[cfg(feature = "cli")]
            Error::Check(_) => ExitCode::Failure,
            #[cfg(feature = "cli")]
            Error::Unhealthy(_) => ExitCode::Failure,
            Error::Tripped(_) => ExitCode::Tripped,
            Error::Lapsed(_) => ExitCode::Lapsed,
            Error::Stopped(_) => ExitCode::Stopped,
            Error::Io { .. } => ExitCode::Failure,
        }
    }
}

impl From<ExitCode> for std::process::ExitCode {
    fn from(code: ExitCode) -> Self {
        std::process::ExitCode::from(code as u8)
    }
}

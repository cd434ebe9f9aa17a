//! The command's error, and the exit code each kind of error gets.
//!
//! Exit codes are decided here and nowhere else, so a crontab wrapper or a monitoring
//! check can tell "the schedule file is wrong" from "the database is gone" without
//! parsing messages. A tick that ran is success (0) whatever its records did: a record
//! failing is the backlog's normal business, not the tool's failure. The core's errors
//! (the schedule file, the store, the handler, a tick stopped) come through
//! [`Error::Core`]; the command's own failures (its crontab, `doctor`'s and
//! `status --check`'s verdicts, its command line, its files and sockets) are variants
//! of their own.

use backlog_core::store::StoreError;

use crate::crontab::CrontabError;

/// Everything that can stop `backlog` from doing what it was asked.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The schedule file, the database, the handler, or a tick that stopped early.
    #[error(transparent)]
    Core(#[from] backlog_core::Error),
    /// The crontab could not be read or written, or its backlog block is broken.
    #[error(transparent)]
    Crontab(#[from] CrontabError),
    /// `backlog doctor` found problems (it printed them).
    #[error("{0} of the checks failed")]
    Unhealthy(usize),
    /// `status --check` found the backlog in trouble (it printed why on stdout).
    #[error("the check found the backlog {0:?}")]
    Check(crate::status::CheckLevel),
    /// A command-line value that does not make sense.
    #[error("{0}")]
    Usage(String),
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

impl From<backlog_core::config::ConfigError> for Error {
    fn from(e: backlog_core::config::ConfigError) -> Error {
        Error::Core(e.into())
    }
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

impl ExitCode {
    /// The exit code of a core error: what a tick's failure ends the command with, and
    /// what an alert about it reports.
    pub fn of(e: &backlog_core::Error) -> ExitCode {
        use backlog_core::Error as Core;
        match e {
            Core::Config(_) => ExitCode::Schedule,
            Core::Store { .. } => ExitCode::Database,
            Core::Handler { .. } => ExitCode::Handler,
            Core::Usage(_) => ExitCode::Usage,
            Core::Tripped(_) => ExitCode::Tripped,
            Core::Lapsed(_) => ExitCode::Lapsed,
            Core::Stopped(_) => ExitCode::Stopped,
            _ => ExitCode::Failure,
        }
    }
}

impl Error {
    /// Wraps a store error with the database it came from: `.map_err(Error::store(url))`.
    pub fn store(database: impl ToString) -> impl Fn(StoreError) -> Error {
        let store = backlog_core::Error::store(database);
        move |source| Error::Core(store(source))
    }

    /// The core's error in it, if it is one.
    pub fn core(&self) -> Option<&backlog_core::Error> {
        match self {
            Error::Core(e) => Some(e),
            _ => None,
        }
    }

    /// The exit code `backlog` ends with for this error (see `ExitCode`).
    pub fn exit_code(&self) -> ExitCode {
        match self {
            Error::Core(e) => ExitCode::of(e),
            Error::Usage(_) => ExitCode::Usage,
            Error::Crontab(_) => ExitCode::Crontab,
            // The monitoring-plugin convention: 1 warning, 2 critical.
            Error::Check(crate::status::CheckLevel::Critical) => ExitCode::Usage,
            Error::Check(_) => ExitCode::Failure,
            Error::Unhealthy(_) => ExitCode::Failure,
            Error::Io { .. } => ExitCode::Failure,
        }
    }
}

impl From<ExitCode> for std::process::ExitCode {
    fn from(code: ExitCode) -> Self {
        std::process::ExitCode::from(code as u8)
    }
}

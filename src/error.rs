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
pub use backlog::exit_code::ExitCode;

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
    Check(backlog::status::CheckLevel),
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
            // The monitoring-plugin convention: 1 warning, 2 critical, 3 unknown.
            Error::Check(backlog::status::CheckLevel::Critical) => ExitCode::Usage,
            Error::Check(backlog::status::CheckLevel::Unknown) => ExitCode::Schedule,
            Error::Check(_) => ExitCode::Failure,
            Error::Unhealthy(_) => ExitCode::Failure,
            Error::Io { .. } => ExitCode::Failure,
        }
    }
}

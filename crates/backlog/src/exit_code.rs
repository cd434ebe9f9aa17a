//! The exit codes of `backlog`, decided here and nowhere else: what a crontab
//! wrapper or a monitoring check reads instead of parsing messages. The command's
//! errors map to them (`Error::exit_code`); a tick's, which an alert reports too,
//! through [`ExitCode::of`].

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
            // The core's error is `#[non_exhaustive]`: a kind it adds later is a
            // failure until it is given a code of its own here (and in docs/cli.md).
            _ => ExitCode::Failure,
        }
    }
}

impl From<ExitCode> for std::process::ExitCode {
    fn from(code: ExitCode) -> Self {
        std::process::ExitCode::from(code as u8)
    }
}

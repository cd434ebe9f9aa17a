//! The exit codes of `backlog`, decided here and nowhere else: what a crontab
//! wrapper or a monitoring check reads instead of parsing messages. The command's
//! errors map to them (`Error::exit_code`); a tick's, which an alert reports too,
//! through [`ExitCode::of`]. What each means, as docs/cli.md says it, is here too
//! ([`ExitCode::meaning`]), so the man pages' EXIT STATUS cannot list another set.

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

/// The exit code of a command ended at once by a second SIGINT or SIGTERM (128 + 2, as
/// a shell reports a Ctrl-C): the handlers' process groups are killed, nothing more is
/// marked. Not an [`ExitCode`]: it is the signal handler's `_exit`, not an error's.
pub const SECOND_SIGNAL: u8 = 130;

impl ExitCode {
    /// Every code, in order: what the man pages list.
    pub const ALL: [ExitCode; 10] = [
        ExitCode::Success,
        ExitCode::Failure,
        ExitCode::Usage,
        ExitCode::Schedule,
        ExitCode::Database,
        ExitCode::Handler,
        ExitCode::Crontab,
        ExitCode::Tripped,
        ExitCode::Lapsed,
        ExitCode::Stopped,
    ];

    /// What the code tells the caller, as docs/cli.md lists it, for a person reading
    /// the man page.
    pub fn meaning(self) -> &'static str {
        match self {
            ExitCode::Success => {
                "The command did what it was asked: a tick ran, whatever its records' outcomes. From status --check: OK."
            }
            ExitCode::Failure => {
                "Anything else: an I/O error, a bug; from doctor: a check failed; from status --check: WARNING."
            }
            ExitCode::Usage => {
                "Bad command line (also a crontab --install whose lines would miss a variable cron does not give them). From status --check: CRITICAL."
            }
            ExitCode::Schedule => {
                "The schedule file is missing or invalid. From status --check: UNKNOWN, as is a command line it cannot run, or a schedule file that does not match its table (see 4)."
            }
            ExitCode::Database => {
                "The database, the table, a column or the inserted-at values are not usable, or the database refused the tick's writes; explain and crontab exit so too on a table or column the file names that is not there (a database they cannot reach is a warning: they say what they can). From status --check: UNKNOWN (3) when the table or a column the file names is not there, or the inserted-at values do not match the file; CRITICAL (2) when the database cannot be reached or read."
            }
            ExitCode::Handler => {
                "The handler cannot be started, or it ran but could not do anything (every record it was given failed with exit 126 or 127, as a wrapper whose command is missing does)."
            }
            ExitCode::Crontab => "The crontab cannot be read, written or understood.",
            ExitCode::Tripped => {
                "The tick ran, but its breaker stopped it (handler.stop_after_failures failures in a row among the tier's runners, or the breaker was open when it began): the counterpart is likely down. The summary is printed first."
            }
            ExitCode::Lapsed => {
                "The tick ran, but stopped because its hold on its records lapsed, or was about to with no renewal in sight (it was paused past database.claim_lease, or it or its heartbeat could not run for half of it). The summary is printed first."
            }
            ExitCode::Stopped => {
                "The tick ran, but a signal (SIGTERM, SIGINT) stopped it before its band was done: what it handled is marked, and the next start takes the rest. The summary is printed first."
            }
        }
    }
}

/// What [`SECOND_SIGNAL`] tells the caller, for the man page.
pub const SECOND_SIGNAL_MEANING: &str = "A second SIGINT or SIGTERM ended it at once: every handler's process group is killed and nothing more is marked (the records it held are pending again after database.claim_lease).";

impl From<ExitCode> for std::process::ExitCode {
    fn from(code: ExitCode) -> Self {
        std::process::ExitCode::from(code as u8)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/cli.md, the reference of the exit codes, names every code the man pages
    /// list, as `N`: a code added here and not there (or the reverse, for the numbers
    /// this type knows) fails.
    #[test]
    fn docs_cli_md_names_every_code() {
        let docs = include_str!("../docs/cli.md");
        let section = docs
            .split("## Exit codes")
            .nth(1)
            .and_then(|rest| rest.split("\n## ").next())
            .expect("docs/cli.md has an Exit codes section");
        for code in ExitCode::ALL
            .map(|c| c as u8)
            .into_iter()
            .chain([SECOND_SIGNAL])
        {
            assert!(
                section.contains(&format!("`{code}`")),
                "docs/cli.md lacks `{code}`"
            );
        }
        for (i, code) in ExitCode::ALL.iter().enumerate() {
            assert_eq!(*code as usize, i, "ALL is in order, with no gap");
        }
    }
}

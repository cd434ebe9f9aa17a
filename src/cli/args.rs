//! The command tree: what a user types, as clap parses it, and the few value parsers
//! that make a bad value one clear line (`--window`, `--limit`, `--now`).

use std::path::PathBuf;
use std::time::Duration;

use chrono::{DateTime, Utc};
use clap::{Args, Parser, Subcommand};

use super::backoff;
use super::output::{LogFormat, print_json_error};
use backlog_core::duration;
use backlog_core::duration::DurationError;

/// The `backlog` command line, as clap parses it (its `about` is set on the command).
#[derive(Debug, Parser)]
#[command(
    name = "backlog",
    version,
    about = "Works through a database backlog on a progressive schedule"
)]
pub struct Cli {
    /// The subcommand asked for.
    #[command(subcommand)]
    pub command: Command,
}

/// `-v`, on the commands that log what they do (`run`, `daemon`): the others print
/// their result and log only warnings, so it is not offered there.
#[derive(Debug, Clone, Copy, Args)]
pub struct Verbosity {
    /// Log more: -v each record's outcome, -vv handlers' output too.
    #[arg(short, long, action = clap::ArgAction::Count)]
    pub verbose: u8,
}

/// The subcommands, one per thing a person (or cron) asks of the tool.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Write a schedule file, a demo SQLite backlog and a demo handler into DIR.
    Init(InitArgs),
    /// Run one tick of one tier, then exit: what a crontab line runs.
    Run(RunArgs),
    /// Print one crontab line per tier, or install them in your crontab.
    Crontab(CrontabArgs),
    /// Fire every tier on its cadence until SIGTERM, for hosts without cron.
    Daemon(DaemonArgs),
    /// What the schedule means: bands, tries per record, when a record is tried next.
    Explain(ExplainArgs),
    /// Where the backlog stands: records by status and band, each tier's last tick.
    Status(StatusArgs),
    /// Check a schedule file against its database: table, columns, values, index, handler.
    Doctor(DoctorArgs),
    /// Retry strategies: their delays, and how many retries fit a timeout.
    #[command(subcommand)]
    Backoff(backoff::BackoffCommand),
    /// One record: its columns, band, next try, hold, and its attempts.
    Show(super::ShowArgs),
    /// Hand records to the handler now (by id, or pending ones by status and age).
    Retry(super::RetryArgs),
    /// Keep records from the ticks until a time (by id, or pending ones by status and age).
    Snooze(super::SnoozeArgs),
    /// Give up on records: mark them with table.given_up (by id, or pending ones by status and age).
    GiveUp(super::GiveUpArgs),
    /// Pause a tier (or every tier) on every runner, until `backlog resume`.
    Pause(super::PauseArgs),
    /// Lift a pause.
    Resume(super::ResumeArgs),
    /// Serve the web dashboard: tiers, bands, failures, records; retry, snooze, give up, pause, resume.
    Serve(ServeArgs),
    /// Print shell completions: `source <(backlog completions bash)`.
    Completions(CompletionsArgs),
    /// Print a man page (roff): `backlog man | man -l -`, `backlog man backlog.toml`.
    Man(ManArgs),
}

/// The options of `backlog explain`.
#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// The schedule file, - for standard input [default: the first of ./backlog.toml,
    /// $XDG_CONFIG_HOME/backlog/backlog.toml, /etc/backlog/backlog.toml]
    #[arg(long, short, env = "BACKLOG_SCHEDULE", value_name = "FILE")]
    pub schedule: Option<PathBuf>,
    /// Say when a record of this age is tried next, like 3d.
    #[arg(long, value_parser = duration::parse_span, conflicts_with = "id")]
    pub age: Option<Duration>,
    /// Say when this record is tried next (reads its inserted-at value).
    #[arg(long)]
    pub id: Option<String>,
    /// Pin the clock (RFC 3339) [default: now].
    #[arg(long, value_parser = parse_now)]
    pub now: Option<DateTime<Utc>>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// The options of `backlog doctor`.
#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// The schedule file, - for standard input [default: the first of ./backlog.toml,
    /// $XDG_CONFIG_HOME/backlog/backlog.toml, /etc/backlog/backlog.toml]
    #[arg(long, short, env = "BACKLOG_SCHEDULE", value_name = "FILE")]
    pub schedule: Option<PathBuf>,
    /// Print the checks as JSON.
    #[arg(long)]
    pub json: bool,
    /// Print each check in full: the band query's whole plan, not only the node that
    /// reads the table.
    #[arg(short, long)]
    pub verbose: bool,
}

/// The options of `backlog status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The schedule file, - for standard input [default: the first of ./backlog.toml,
    /// $XDG_CONFIG_HOME/backlog/backlog.toml, /etc/backlog/backlog.toml]
    #[arg(long, short, env = "BACKLOG_SCHEDULE", value_name = "FILE")]
    pub schedule: Option<PathBuf>,
    /// Pin the clock (RFC 3339) [default: now].
    #[arg(long, value_parser = parse_now)]
    pub now: Option<DateTime<Utc>>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// One line for a monitoring system, and its exit code: 0 OK, 1 WARNING,
    /// 2 CRITICAL (a tier overdue, its last tick failed, a pause past its end…).
    #[arg(long)]
    pub check: bool,
    /// With --check: warn past this many failed attempts in the last 24 hours.
    #[arg(long, value_name = "N", requires = "check")]
    pub warn_failures: Option<u64>,
    /// With --check: critical past this many failed attempts in the last 24 hours.
    #[arg(long, value_name = "N", requires = "check")]
    pub critical_failures: Option<u64>,
    /// With --check: warn once a record never tried has waited longer than AGE for
    /// its first try (overrides check.warn_waiting).
    #[arg(long, value_name = "AGE", requires = "check", value_parser = parse_waiting)]
    pub warn_waiting: Option<Duration>,
    /// With --check: critical once a record never tried has waited longer than AGE
    /// (overrides check.critical_waiting).
    #[arg(long, value_name = "AGE", requires = "check", value_parser = parse_waiting)]
    pub critical_waiting: Option<Duration>,
    /// With --check: warn past N pending records in the tiers' bands (overrides
    /// check.warn_pending).
    #[arg(long, value_name = "N", requires = "check")]
    pub warn_pending: Option<u64>,
    /// With --check: critical past N pending records in the tiers' bands (overrides
    /// check.critical_pending).
    #[arg(long, value_name = "N", requires = "check")]
    pub critical_pending: Option<u64>,
}

/// The options of `backlog daemon`.
#[derive(Debug, Args)]
pub struct DaemonArgs {
    /// The schedule file; a change to it, or SIGHUP, reloads it [default: the first
    /// of ./backlog.toml, $XDG_CONFIG_HOME/backlog/backlog.toml, /etc/backlog/backlog.toml]
    #[arg(long, short, env = "BACKLOG_SCHEDULE", value_name = "FILE")]
    pub schedule: Option<PathBuf>,
    /// How much it logs (`-v`, `-vv`).
    #[command(flatten)]
    pub verbosity: Verbosity,
    /// How log lines are written: text, or json for log collectors.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Seed of the jitter's random delays [default: from the clock].
    #[arg(long)]
    pub seed: Option<u64>,
    /// Serve the metrics (Prometheus text format) at http://ADDR/metrics, like
    /// 127.0.0.1:9464.
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<std::net::SocketAddr>,
    /// Serve the web dashboard too, like 127.0.0.1:8080 (see `backlog serve`).
    #[arg(long, value_name = "ADDR")]
    pub http: Option<std::net::SocketAddr>,
    /// The dashboard's token, on the file's first line [default: $BACKLOG_TOKEN];
    /// needed to listen beyond loopback.
    #[arg(long, value_name = "FILE", requires = "http")]
    pub token_file: Option<PathBuf>,
    /// The header a reverse proxy names the person in, like X-Forwarded-User: an
    /// action records that name (see `backlog serve`).
    #[arg(long, value_name = "NAME", requires = "http")]
    pub user_header: Option<String>,
}

/// The options of `backlog serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The schedule file; it is read afresh for every page [default: the first
    /// of ./backlog.toml, $XDG_CONFIG_HOME/backlog/backlog.toml, /etc/backlog/backlog.toml]
    #[arg(long, short, env = "BACKLOG_SCHEDULE", value_name = "FILE")]
    pub schedule: Option<PathBuf>,
    /// Where to listen (port 0: any free one, and the line printed says which).
    /// Beyond loopback a token is needed (--token-file).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8080")]
    pub listen: std::net::SocketAddr,
    /// The token every request must carry, on the file's first line
    /// [default: $BACKLOG_TOKEN]: a browser opens /login?token=… once.
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// The header a reverse proxy names the person in, like X-Forwarded-User: a
    /// retry, snooze, give-up or pause records that name. Trusted only with a token or
    /// on loopback (where every request comes through the proxy or from this
    /// machine); a request without it is recorded as the server's user.
    #[arg(long, value_name = "NAME")]
    pub user_header: Option<String>,
}

/// The options of `backlog completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: Shell,
}

/// The shells offered: those whose completion scripts the tests load (bash) or that
/// clap_complete writes for the usual places (zsh's `$fpath`, fish's completions folder).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
}

/// The options of `backlog man`.
#[derive(Debug, Args)]
pub struct ManArgs {
    /// The command whose page to print, like `run` or `backoff delays`, or
    /// `backlog.toml` for the schedule file's format [default: the page of backlog
    /// itself].
    pub command: Vec<String>,
}

/// clap's message on one line (for JSON, or a log file): its paragraphs (the error,
/// which clap may write over several lines, a list of the arguments missing; its
/// `tip:`) joined by `; `, without the usage and the pointer to `--help` that a person
/// reads on a terminal.
fn one_line(text: &str) -> String {
    let paragraphs: Vec<String> = text
        .split("\n\n")
        .map(|p| p.lines().map(str::trim).collect::<Vec<_>>().join(" "))
        .map(|p| p.trim().to_string())
        .filter(|p| {
            !p.is_empty() && !p.starts_with("Usage:") && !p.starts_with("For more information")
        })
        .collect();
    let message = paragraphs.join("; ");
    message
        .strip_prefix("error: ")
        .map(String::from)
        .unwrap_or(message)
}

impl Cli {
    /// The command line, parsed; a bad one ends the process with clap's message and
    /// exit code 2, and, when it asked for `--json`, the same as a JSON error on stdout.
    pub fn parse_or_exit() -> Cli {
        Cli::try_parse().unwrap_or_else(|e| {
            let asked = |flag: &str| {
                std::env::args()
                    .skip(1)
                    .take_while(|a| a != "--")
                    .any(|a| a == flag)
            };
            // A monitoring system reads 2 from `status --check` as CRITICAL: a command
            // line it cannot run is UNKNOWN (3) to it.
            let code = if e.use_stderr() && asked("--check") {
                3
            } else {
                e.exit_code()
            };
            if e.use_stderr() && asked("--json") {
                let text = e.render().to_string();
                let message = one_line(&text);
                print_json_error(&message, code);
            } else if code == 3 {
                // The check's one line on stdout, which a monitoring system shows.
                let message = one_line(&e.render().to_string());
                let _ = super::output::print(&format!("BACKLOG UNKNOWN: {message}\n"));
            }
            if e.use_stderr() && super::output::stderr_is_a_file() {
                // A crontab line's log file: one line with its time, as a log line.
                let message = one_line(&e.render().to_string());
                eprintln!("{} ERROR backlog: {message}", super::output::log_time());
                std::process::exit(code);
            }
            if code != e.exit_code() {
                let _ = e.print();
                std::process::exit(code);
            }
            e.exit()
        })
    }

    /// Whether the command was asked for JSON (`--json`), so its failure is JSON too.
    pub fn json(&self) -> bool {
        match &self.command {
            Command::Run(args) => args.json,
            Command::Explain(args) => args.json,
            Command::Status(args) => args.json,
            Command::Doctor(args) => args.json,
            Command::Crontab(args) => args.json,
            Command::Backoff(command) => command.json(),
            Command::Show(args) => args.json,
            Command::Retry(args) => args.act.json,
            Command::Snooze(args) => args.act.json,
            Command::GiveUp(args) => args.act.json,
            Command::Pause(args) => args.json,
            Command::Resume(args) => args.json,
            Command::Init(args) => args.json,
            Command::Daemon(_) | Command::Serve(_) | Command::Completions(_) | Command::Man(_) => {
                false
            }
        }
    }

    /// The log level and format the command calls for: the daemon logs each tick by
    /// default, the dashboard each action; other commands only warnings, unless `-v`.
    pub fn logging(&self) -> (tracing::Level, LogFormat) {
        let (base, verbose, format) = match &self.command {
            Command::Daemon(args) => (1, args.verbosity.verbose, args.log_format),
            // The dashboard's log says who took each action.
            Command::Serve(_) => (1, 0, LogFormat::Text),
            Command::Run(args) => (0, args.verbosity.verbose, args.log_format),
            Command::Retry(args) => (0, args.act.verbosity.verbose, LogFormat::Text),
            Command::Snooze(args) => (0, args.act.verbosity.verbose, LogFormat::Text),
            Command::GiveUp(args) => (0, args.act.verbosity.verbose, LogFormat::Text),
            _ => (0, 0, LogFormat::Text),
        };
        let level = match (base, verbose) {
            (0, 0) => tracing::Level::WARN,
            (_, 0) => tracing::Level::INFO,
            (_, 1) => tracing::Level::DEBUG,
            _ => tracing::Level::TRACE,
        };
        (level, format)
    }
}

/// The options of `backlog crontab`.
#[derive(Debug, Args)]
pub struct CrontabArgs {
    /// The schedule file [default: the first of ./backlog.toml,
    /// $XDG_CONFIG_HOME/backlog/backlog.toml, /etc/backlog/backlog.toml]
    #[arg(long, short, env = "BACKLOG_SCHEDULE", value_name = "FILE")]
    pub schedule: Option<PathBuf>,
    /// Where the lines append their output [default: backlog.log beside the schedule file].
    #[arg(long)]
    pub log: Option<PathBuf>,
    /// The backlog binary the lines run [default: this one].
    #[arg(long)]
    pub binary: Option<PathBuf>,
    /// Put the lines in the crontab, replacing this schedule file's earlier block.
    #[arg(long, conflicts_with = "uninstall")]
    pub install: bool,
    /// Remove this schedule file's block from the crontab.
    #[arg(long)]
    pub uninstall: bool,
    /// Whose crontab (passed to `crontab -u`; needs root).
    #[arg(long)]
    pub user: Option<String>,
    /// Write NAME=value (this shell's value) into the block: a variable the lines need
    /// that cron would not give them (the schedule file's ${NAME}, BACKLOG_DATABASE_URL).
    #[arg(long, value_name = "NAME", conflicts_with = "uninstall")]
    pub env: Vec<String>,
    /// Print JSON: the block, or what was installed or removed.
    #[arg(long)]
    pub json: bool,
}

/// The options of `backlog init`.
#[derive(Debug, Args)]
pub struct InitArgs {
    /// The folder to write into (created if missing).
    #[arg(default_value = ".")]
    pub dir: PathBuf,
    /// Overwrite the files if they exist.
    #[arg(long)]
    pub force: bool,
    /// Age the demo records from this instant (RFC 3339) [default: now].
    #[arg(long, value_parser = parse_now, conflicts_with = "database")]
    pub now: Option<DateTime<Utc>>,
    /// Propose a schedule file for your table instead of the demo: the database's URL
    /// or SQLite path (read only, never written).
    #[arg(long, value_name = "URL", requires = "table")]
    pub database: Option<String>,
    /// The table to read (with --database): its primary key is the id, its columns and
    /// values say which are the status and the inserted-at time.
    #[arg(long, value_name = "NAME", requires = "database")]
    pub table: Option<String>,
    /// The id column, instead of the primary key.
    #[arg(long, value_name = "COLUMN", requires = "table")]
    pub id: Option<String>,
    /// The status column, instead of the one guessed.
    #[arg(long, value_name = "COLUMN", requires = "table")]
    pub status: Option<String>,
    /// The inserted-at column, instead of the one guessed.
    #[arg(long, value_name = "COLUMN", requires = "table")]
    pub inserted_at: Option<String>,
    /// The handler: a program and its arguments (as a shell splits them), relative to
    /// the schedule file's folder [default: a ./handler.sh for you to write].
    #[arg(
        long,
        value_name = "COMMAND",
        requires = "table",
        conflicts_with = "url"
    )]
    pub command: Option<String>,
    /// The statuses a record waits in (comma-separated), instead of those guessed from
    /// the status column's values.
    #[arg(long, value_name = "STATUS", value_delimiter = ',', requires = "table")]
    pub pending: Vec<String>,
    /// The status a record gets when its handler succeeds, instead of the one guessed.
    #[arg(long, value_name = "STATUS", requires = "table")]
    pub success: Option<String>,
    /// The status a record gets when its handler fails, instead of the one guessed.
    #[arg(long, value_name = "STATUS", requires = "table")]
    pub error: Option<String>,
    /// Call this URL for each record (the built-in HTTP handler) instead of a program.
    #[arg(long, value_name = "URL", requires = "table")]
    pub url: Option<String>,
    /// Print the proposed file instead of writing it (what was guessed goes to stderr).
    #[arg(long, requires = "table")]
    pub dry_run: bool,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// The options of `backlog run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The window of the tier to run, like 1d or 7d.
    #[arg(long, short, value_parser = parse_window)]
    pub window: Duration,
    /// The schedule file, - for standard input [default: the first of ./backlog.toml,
    /// $XDG_CONFIG_HOME/backlog/backlog.toml, /etc/backlog/backlog.toml]
    #[arg(long, short, env = "BACKLOG_SCHEDULE", value_name = "FILE")]
    pub schedule: Option<PathBuf>,
    /// Pin the clock (RFC 3339, like 2026-11-21T08:30:00Z) to reproduce a tick
    /// [default: now].
    #[arg(long, value_parser = parse_now)]
    pub now: Option<DateTime<Utc>>,
    /// List what the tick would hand over; claim, run and change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
    /// How much it logs (`-v`, `-vv`).
    #[command(flatten)]
    pub verbosity: Verbosity,
    /// How log lines are written: text, or json for log collectors.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Hand over at most this many records (overrides the tier's limit).
    #[arg(long, value_parser = count::<u64>(backlog_core::config::MAX_LIMIT, "records", ""))]
    pub limit: Option<u64>,
    /// Exit at once unless the tier's cadence says a tick is due, judged by its last
    /// tick in the run log (for cadences cron cannot state; `backlog crontab` adds it).
    #[arg(long)]
    pub if_due: bool,
    /// Run a window no tier of the file has, over ages 0 to it, once (otherwise such
    /// a window is refused: a typo would run a band nobody scheduled).
    #[arg(long)]
    pub ad_hoc: bool,
    /// After the tick, write the backlog's metrics (Prometheus text format) to this
    /// file, atomically: for node_exporter's textfile collector.
    #[arg(long, value_name = "PATH")]
    pub metrics_file: Option<PathBuf>,
    /// Hand over records that failed earlier in this tier's slot too. A failure is
    /// otherwise kept from every tick until the slot ends, so a failing counterpart
    /// sees one try per slot, whatever the number of runners.
    #[arg(long)]
    pub retry_failed: bool,
}

fn parse_window(text: &str) -> Result<Duration, DurationError> {
    backlog_core::config::SPAN.parse(text)
}

/// A count the command line takes is out of its range, or no number.
#[derive(Debug, thiserror::Error)]
#[error("use a number of {unit} from 1 to {max}{note}")]
pub(crate) struct CountError {
    unit: &'static str,
    max: u64,
    note: &'static str,
}

/// A parser of a count from 1 to `max` of `unit`, `note` after the range in its error.
pub(crate) fn count<T: TryFrom<u64>>(
    max: u64,
    unit: &'static str,
    note: &'static str,
) -> impl Fn(&str) -> Result<T, CountError> + Clone + Send + Sync + 'static {
    move |text| {
        text.trim()
            .parse::<u64>()
            .ok()
            .filter(|n| (1..=max).contains(n))
            .and_then(|n| T::try_from(n).ok())
            .ok_or(CountError { unit, max, note })
    }
}

/// An age of `--warn-waiting` and `--critical-waiting`: as `check.warn_waiting`.
fn parse_waiting(text: &str) -> Result<Duration, DurationError> {
    backlog_core::config::CHECK_WAITING.parse(text)
}

pub(crate) use crate::operate::parse_time as parse_now;

/// What every action on chosen records takes besides its own options.
#[derive(Debug, Args)]
pub struct ActArgs {
    /// The schedule file, - for standard input [default: the first of ./backlog.toml,
    /// $XDG_CONFIG_HOME/backlog/backlog.toml, /etc/backlog/backlog.toml]
    #[arg(long, short, env = "BACKLOG_SCHEDULE", value_name = "FILE")]
    pub schedule: Option<PathBuf>,
    /// List the records it would take; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Pin the clock (RFC 3339) for ages, --older-than and --for [default: now].
    #[arg(long, value_parser = parse_now)]
    pub now: Option<DateTime<Utc>>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// How much it logs (`-v`, `-vv`).
    #[command(flatten)]
    pub verbosity: Verbosity,
}

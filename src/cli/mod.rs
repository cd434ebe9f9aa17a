//! The command tree (clap) and what each command does with the library.
//!
//! Commands print results on stdout and nothing else; logs, progress and errors go to
//! stderr, so `backlog run --json | jq` and a crontab line's log file both stay clean.
//! With `--json`, stdout holds one JSON object whatever happens: the result, or, when
//! the command failed before it had one, `{"error": …, "exit_code": …}` (the error's
//! line still goes to stderr, for a person reading along).

use std::io::IsTerminal as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use chrono::{DateTime, Utc};
use clap::{Args, Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};

mod backoff;

pub use backoff::{BackoffCommand, backoff_budget, backoff_delays, backoff_plot, backoff_simulate};

use crate::config::Config;
use crate::duration;
use crate::error::Error;
use crate::tick::{Event, TickOptions, open_store, run_tick};
use crate::{crontab, demo, store};

#[derive(Debug, Parser)]
#[command(
    name = "backlog",
    version,
    about = "Works through a database backlog on a progressive schedule"
)]
pub struct Cli {
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
}

#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// The schedule file.
    #[arg(long, short, env = "BACKLOG_SCHEDULE", default_value = "backlog.toml")]
    pub schedule: PathBuf,
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

#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// The schedule file.
    #[arg(long, short, env = "BACKLOG_SCHEDULE", default_value = "backlog.toml")]
    pub schedule: PathBuf,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The schedule file.
    #[arg(long, short, env = "BACKLOG_SCHEDULE", default_value = "backlog.toml")]
    pub schedule: PathBuf,
    /// Pin the clock (RFC 3339) [default: now].
    #[arg(long, value_parser = parse_now)]
    pub now: Option<DateTime<Utc>>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct DaemonArgs {
    /// The schedule file; a change to it, or SIGHUP, reloads it.
    #[arg(long, short, env = "BACKLOG_SCHEDULE", default_value = "backlog.toml")]
    pub schedule: PathBuf,
    #[command(flatten)]
    pub verbosity: Verbosity,
    /// How log lines are written: text, or json for log collectors.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Seed of the jitter's random delays [default: from the clock].
    #[arg(long)]
    pub seed: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

impl Cli {
    /// The command line, parsed; a bad one ends the process with clap's message and
    /// exit code 2, and, when it asked for `--json`, the same as a JSON error on stdout.
    pub fn parse_or_exit() -> Cli {
        Cli::try_parse().unwrap_or_else(|e| {
            let asked_json = std::env::args()
                .skip(1)
                .take_while(|a| a != "--")
                .any(|a| a == "--json");
            if e.use_stderr() && asked_json {
                let text = e.render().to_string();
                let line = text.lines().next().unwrap_or_default();
                let message = line.strip_prefix("error: ").unwrap_or(line);
                print_json_error(message, e.exit_code());
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
            Command::Backoff(command) => command.json(),
            Command::Init(_) | Command::Crontab(_) | Command::Daemon(_) | Command::Doctor(_) => {
                false
            }
        }
    }

    /// The log level and format the command calls for: the daemon logs each tick by
    /// default; other commands only warnings, unless `-v`.
    pub fn logging(&self) -> (tracing::Level, LogFormat) {
        let (base, verbose, format) = match &self.command {
            Command::Daemon(args) => (1, args.verbosity.verbose, args.log_format),
            Command::Run(args) => (0, args.verbosity.verbose, LogFormat::Text),
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

#[derive(Debug, Args)]
pub struct CrontabArgs {
    /// The schedule file.
    #[arg(long, short, env = "BACKLOG_SCHEDULE", default_value = "backlog.toml")]
    pub schedule: PathBuf,
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
}

#[derive(Debug, Args)]
pub struct InitArgs {
    /// The folder to write into (created if missing).
    #[arg(default_value = ".")]
    pub dir: PathBuf,
    /// Overwrite the demo files if they exist.
    #[arg(long)]
    pub force: bool,
    /// Age the demo records from this instant (RFC 3339) [default: now].
    #[arg(long, value_parser = parse_now)]
    pub now: Option<DateTime<Utc>>,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The window of the tier to run, like 1d or 7d.
    #[arg(long, short, value_parser = parse_window)]
    pub window: Duration,
    /// The schedule file.
    #[arg(long, short, env = "BACKLOG_SCHEDULE", default_value = "backlog.toml")]
    pub schedule: PathBuf,
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
    #[command(flatten)]
    pub verbosity: Verbosity,
    /// Hand over at most this many records (overrides the tier's limit).
    #[arg(long, value_parser = parse_limit)]
    pub limit: Option<u64>,
    /// Exit at once unless the tier's cadence says a tick is due, judged by its last
    /// tick in the run log (for cadences cron cannot state; `backlog crontab` adds it).
    #[arg(long)]
    pub if_due: bool,
    /// Run a window no tier of the file has, over ages 0 to it, once (otherwise such
    /// a window is refused: a typo would run a band nobody scheduled).
    #[arg(long)]
    pub ad_hoc: bool,
    /// Hand over records that failed earlier in this tier's slot too. A failure is
    /// otherwise kept from every tick until the slot ends, so a failing counterpart
    /// sees one try per slot, whatever the number of runners.
    #[arg(long)]
    pub retry_failed: bool,
}

fn parse_window(text: &str) -> Result<Duration, String> {
    match crate::config::SPAN.parse(text) {
        Err(e) if e.starts_with("must") => Err(format!("a window {e}")),
        result => result,
    }
}

fn parse_limit(text: &str) -> Result<u64, String> {
    use crate::config::MAX_LIMIT;
    text.trim()
        .parse::<u64>()
        .ok()
        .filter(|n| (1..=MAX_LIMIT).contains(n))
        .ok_or_else(|| format!("use a number of records from 1 to {MAX_LIMIT}"))
}

pub(crate) fn parse_now(text: &str) -> Result<DateTime<Utc>, String> {
    DateTime::parse_from_rfc3339(text)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| {
            format!("{text:?} is not an RFC 3339 time ({e}); write it like 2026-11-21T08:30:00Z")
        })
}

/// Sends logs to stderr: this tool's at `level`, its libraries' (the PostgreSQL
/// client logs every statement at debug) only from warnings up.
pub fn init_logging(level: tracing::Level, format: LogFormat) {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let ours = tracing_subscriber::filter::Targets::new()
        .with_target("backlog", level)
        .with_default(tracing::Level::WARN);
    let builder = tracing_subscriber::fmt()
        .with_writer(|| LogWriter)
        // Its own complaint about a failed write would go to stderr through
        // `eprintln!`, which panics when stderr is a closed pipe.
        .log_internal_errors(false)
        .with_max_level(level)
        .with_target(false)
        .with_ansi(std::io::stderr().is_terminal());
    match format {
        LogFormat::Text => builder.finish().with(ours).init(),
        LogFormat::Json => builder.json().finish().with(ours).init(),
    }
}

/// Set once stderr's reader has gone away: logs stop there, the work goes on.
static STDERR_GONE: AtomicBool = AtomicBool::new(false);

/// Stderr for logs. A write that fails (a closed pipe: `backlog run -v 2>&1 | head
/// -1`; a full disk under a crontab line's log file) is dropped, never an error that
/// could end a tick before its marks and run log are written; after a broken pipe,
/// nothing more is written.
struct LogWriter;

impl std::io::Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if !STDERR_GONE.load(Ordering::Relaxed)
            && let Err(e) = std::io::stderr().write_all(buf)
            && e.kind() == std::io::ErrorKind::BrokenPipe
        {
            STDERR_GONE.store(true, Ordering::Relaxed);
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let _ = std::io::stderr().flush();
        Ok(())
    }
}

/// Writes the line that says why a command failed to stderr, if anyone still reads
/// it: the exit code says it too. With `json`, the error is also a JSON object on
/// stdout, unless the command already printed its result there (a tick that ran and
/// was stopped by its breaker: its summary says so).
pub fn report(error: &Error, json: bool) {
    use std::io::Write as _;
    if json && !STDOUT_USED.load(Ordering::Relaxed) {
        print_json_error(&error.to_string(), error.exit_code() as i32);
    }
    if !STDERR_GONE.load(Ordering::Relaxed) {
        // An error of several problems (a crontab check) says each on its own line.
        let text: String = error
            .to_string()
            .lines()
            .map(|line| format!("backlog: {line}\n"))
            .collect();
        let _ = std::io::stderr().lock().write_all(text.as_bytes());
    }
}

/// `backlog daemon`.
pub fn daemon(args: &DaemonArgs) -> Result<(), Error> {
    crate::handler::adopt_orphans();
    let signals = crate::runner::Signals {
        stop: stop_on_signals()?,
        reload: Default::default(),
    };
    signal_hook::flag::register(signal_hook::consts::SIGHUP, Arc::clone(&signals.reload)).map_err(
        |source| Error::Io {
            context: "cannot install signal handlers".into(),
            source,
        },
    )?;
    let seed = args.seed.unwrap_or_else(|| {
        Utc::now().timestamp_nanos_opt().unwrap_or_default() as u64 ^ u64::from(std::process::id())
    });
    crate::runner::run_daemon(&args.schedule, &signals, seed)
}

/// `backlog init`.
pub fn init(args: &InitArgs) -> Result<(), Error> {
    let written = demo::write(&args.dir, args.force, args.now.unwrap_or_else(Utc::now))?;
    let mut text: String = written.iter().map(|line| format!("{line}\n")).collect();
    text.push_str(&format!(
        "next: backlog run --window 7d --schedule {}\n",
        args.dir.join(demo::SCHEDULE_FILE).display()
    ));
    print(&text)
}

/// `backlog run`.
pub fn run(args: &RunArgs) -> Result<(), Error> {
    // This process's only children are its handlers: it may reap their orphans.
    crate::handler::adopt_orphans();
    let config = Config::load(&args.schedule)?;
    // `--if-due` refuses such a window itself, `--ad-hoc` or not: no cadence is due.
    if config.schedule.tier(args.window).is_none() && !args.ad_hoc && !args.if_due {
        return Err(Error::Usage(format!(
            "--window {window} is no tier's window in {} (its windows: {}); give one of them, or add --ad-hoc to run ages 0 to {window} once",
            config.path.display(),
            windows(&config),
            window = duration::compact(args.window),
        )));
    }
    let mut opts = TickOptions::for_config(&config, args.window, args.now.unwrap_or_else(Utc::now));
    if args.if_due {
        let mut store = open_store(&config)?;
        if !due(&config, args, store.as_mut(), opts.now)? {
            return Ok(());
        }
    }
    opts.limit = args.limit;
    opts.dry_run = args.dry_run;
    opts.retry_failed = args.retry_failed;
    opts.stop = stop_on_signals()?;

    let show_progress = std::io::stderr().is_terminal()
        && args.verbosity.verbose == 0
        && !args.json
        && !args.dry_run;
    let progress = if show_progress {
        ProgressBar::new_spinner()
    } else {
        ProgressBar::hidden()
    };
    progress.set_style(
        ProgressStyle::with_template("{spinner} {pos} records handled ({per_sec}) {msg}")
            .expect("a valid template"),
    );
    let mut listed = Vec::new();
    let now = opts.now;
    let summary = run_tick(&config, &opts, &mut |event| match event {
        Event::Handled { status, .. } => {
            progress.inc(1);
            progress.set_message(format!("last: {status}"));
        }
        Event::WouldHandle { record } => listed.push(listing(record, now)),
    })?;
    progress.finish_and_clear();

    let failure = match (&summary.lapsed, &summary.breaker) {
        (Some(why), _) => Some(Error::Lapsed(why.clone())),
        (None, Some(why)) => Some(Error::Tripped(why.clone())),
        (None, None) => None,
    };
    let mut text = String::new();
    if args.json {
        let mut value = serde_json::to_value(&summary).expect("a summary always serialises");
        if args.dry_run {
            value["would_handle"] = serde_json::Value::Array(listed);
        }
        // The one object on stdout says it failed, as an error object would.
        if let Some(e) = &failure {
            value["error"] = e.to_string().into();
            value["exit_code"] = (e.exit_code() as i32).into();
        }
        text.push_str(&format!("{value}\n"));
    } else {
        for r in &listed {
            let field = |k: &str| {
                r[k].as_str()
                    .map(String::from)
                    .unwrap_or_else(|| r[k].to_string())
            };
            text.push_str(&format!(
                "{}\t{}\tage {}\t{}\n",
                field("id"),
                field("inserted_at"),
                field("age"),
                field("status")
            ));
        }
        text.push_str(&format!("{}\n", summary.line(&config.table)));
    }
    print(&text)?;
    failure.map_or(Ok(()), Err)
}

/// A record as a dry run lists it.
fn listing(record: &crate::Record, now: DateTime<Utc>) -> serde_json::Value {
    let age = record.age(now).and_then(|a| a.to_std().ok());
    serde_json::json!({
        "id": record.id,
        "inserted_at": record.inserted_at().to_string(),
        "age": age.map(|a| humantime::format_duration(Duration::from_secs(a.as_secs())).to_string()),
        "status": &*record.status,
    })
}

/// The windows of the file's tiers, as a list for a message: `1d, 7d, 14d`.
fn windows(config: &Config) -> String {
    let windows: Vec<String> = config
        .schedule
        .tiers
        .iter()
        .map(|t| duration::compact(t.window))
        .collect();
    windows.join(", ")
}

/// For `--if-due`: whether the tier is due, printing why not when it is not.
fn due(
    config: &Config,
    args: &RunArgs,
    store: &mut dyn store::Store,
    now: DateTime<Utc>,
) -> Result<bool, Error> {
    let window = duration::compact(args.window);
    let Some((n, tier)) = config.schedule.tier(args.window) else {
        return Err(Error::Usage(format!(
            "--if-due needs the window of a tier; {window} is none of {}'s ({})",
            config.path.display(),
            windows(config)
        )));
    };
    let last = store
        .last_tick(args.window)
        .map_err(Error::store(store.describe()))?;
    if tier.cadence.is_due(last, now) {
        return Ok(true);
    }
    let last = last.expect("a tier that never ran is due");
    let next = tier.cadence.next_due(last);
    let show = |t: DateTime<Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let text = if args.json {
        serde_json::json!({"window": window, "tier": n, "due": false, "last_tick": show(last), "next_due": next.map(show)}).to_string()
    } else {
        format!(
            "tier {n} ({window} {}): not due, last tick at {}, next due at {}",
            tier.cadence,
            show(last),
            next.map(show).unwrap_or_else(|| "never".into())
        )
    };
    print(&(text + "\n"))?;
    Ok(false)
}

/// `backlog crontab`.
pub fn crontab(args: &CrontabArgs) -> Result<(), Error> {
    let config = Config::load(&args.schedule)?;
    let absolute = |p: &std::path::Path| {
        std::path::absolute(p).map_err(|source| Error::Io {
            context: format!("cannot resolve {}", p.display()),
            source,
        })
    };
    // The real path, links resolved: a file reached through a symlink is the same
    // file, with the same block.
    let schedule = std::fs::canonicalize(&args.schedule).or_else(|_| absolute(&args.schedule))?;
    let binary = match &args.binary {
        Some(b) => absolute(b)?,
        None => std::env::current_exe().map_err(|source| Error::Io {
            context: "cannot find this program's path".into(),
            source,
        })?,
    };
    let log = absolute(
        args.log
            .as_deref()
            .unwrap_or(&config.dir.join("backlog.log")),
    )?;
    let target = crontab::Target {
        binary,
        schedule: schedule.clone(),
        log,
    };
    let block = crontab::render(&config, &target)?;
    let whose = args
        .user
        .as_deref()
        .map_or("your crontab".to_string(), |u| {
            format!("the crontab of {u}")
        });
    if args.install {
        // Before anything is written: a block cron cannot run fails unseen.
        crontab::check(&target, &config, &crontab::owner(args.user.as_deref())?)?;
        let current = crontab::read(args.user.as_deref())?;
        crontab::write(
            args.user.as_deref(),
            &crontab::install(&current, &block, &schedule)?,
        )?;
        print(&format!(
            "installed {} of {} in {whose}
",
            config.schedule.tier_count(),
            schedule.display()
        ))
    } else if args.uninstall {
        crontab::owner(args.user.as_deref())?;
        let current = crontab::read(args.user.as_deref())?;
        let (text, removed) = crontab::uninstall(&current, &schedule)?;
        if !removed {
            return print(&format!(
                "{whose} has no block for {}; nothing to remove\n",
                schedule.display()
            ));
        }
        crontab::write(args.user.as_deref(), &text)?;
        print(&format!(
            "removed the block of {} from {whose}\n",
            schedule.display()
        ))
    } else {
        print(&block)
    }
}

/// `backlog explain`.
pub fn explain(args: &ExplainArgs) -> Result<(), Error> {
    let config = Config::load(&args.schedule)?;
    let now = args.now.unwrap_or_else(Utc::now);
    let plan = crate::explain::explain(&config.schedule);
    let age = match (&args.age, &args.id) {
        (Some(age), _) => Some(*age),
        (None, Some(id)) => {
            let mut store = open_store(&config)?;
            let err = Error::store(store.describe());
            store.inspect().map_err(&err)?;
            let record = store.find(id).map_err(&err)?.ok_or_else(|| {
                Error::Usage(format!(
                    "table {} has no record with {} = {id}",
                    config.table.name, config.table.id
                ))
            })?;
            if !config.table.is_pending(&record.status) {
                let status = &*record.status;
                return print(&if args.json {
                    let value = serde_json::json!({"id": id, "status": status, "pending": false, "next_try": null});
                    format!("{value}\n")
                } else {
                    format!("record {id} is {status}, not pending: no tier tries it\n")
                });
            }
            Some(
                record
                    .age(now)
                    .and_then(|a| a.to_std().ok())
                    .unwrap_or_default(),
            )
        }
        (None, None) => None,
    };
    let next = age.map(|a| crate::explain::next_try(&config.schedule, a, now));
    if args.json {
        let mut value = serde_json::to_value(&plan).expect("an explanation serialises");
        let handler = &config.handler;
        value["handler"] = serde_json::json!({
            "command": handler.command,
            "mode": handler.mode,
            "concurrency": handler.concurrency,
            "rate": handler.rate.map(|r| r.to_string()),
            "timeout": crate::duration::compact(handler.timeout),
            "stop_after_failures": handler.stop_after_failures,
        });
        if let Some(next) = &next {
            value["next_try"] = serde_json::to_value(next).expect("a next try serialises");
        }
        return print(&format!("{value}\n"));
    }
    let mut text = plan.render(&config.path.display().to_string());
    text.push_str(&format!(
        "Handler: {}.\n",
        crate::handler::describe(&config.handler)
    ));
    if let Some(next) = next {
        let subject = match &args.id {
            Some(id) => format!("Record {id} ({} old)", next.age),
            None => format!("A record {} old", next.age),
        };
        let band = next.in_tier.map_or("is in no band".to_string(), |n| {
            format!("is in tier {n}'s band")
        });
        let when = match (next.by_tier, next.at) {
            (Some(n), Some(at)) => {
                let wait = (at - now).to_std().unwrap_or_default();
                format!(
                    "it is tried next at {} (in {}), by tier {n}",
                    at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                    duration::rough(wait)
                )
            }
            _ => "it is never tried again".to_string(),
        };
        text.push_str(&format!("\n{subject} {band}; {when}.\n"));
    }
    print(&text)
}

/// `backlog doctor`.
pub fn doctor(args: &DoctorArgs) -> Result<(), Error> {
    let checks = crate::doctor::doctor(&args.schedule);
    let text: String = checks
        .iter()
        .map(|c| format!("{} {}\n", if c.ok { "ok  " } else { "FAIL" }, c.message))
        .collect();
    print(&text)?;
    match checks.iter().filter(|c| !c.ok).count() {
        0 => Ok(()),
        n => Err(Error::Unhealthy(n)),
    }
}

/// `backlog status`.
pub fn status(args: &StatusArgs) -> Result<(), Error> {
    let config = Config::load(&args.schedule)?;
    let mut store = open_store(&config)?;
    let now = args.now.unwrap_or_else(Utc::now);
    let status = crate::status::status(&config, store.as_mut(), now)
        .map_err(Error::store(&config.database.url))?;
    if args.json {
        print(&format!(
            "{}\n",
            serde_json::to_value(&status).expect("a status serialises")
        ))
    } else {
        print(&status.render())
    }
}

/// `{"error": "…", "exit_code": N}` and a newline on stdout.
fn print_json_error(message: &str, exit_code: i32) {
    let value = serde_json::json!({"error": message, "exit_code": exit_code});
    let _ = print(&format!("{value}\n"));
}

/// Set once a command printed something on stdout.
static STDOUT_USED: AtomicBool = AtomicBool::new(false);

/// Writes command output to stdout. A reader that went away (`backlog run --dry-run |
/// head`) is not an error, as with any Unix tool.
pub(crate) fn print(text: &str) -> Result<(), Error> {
    use std::io::Write as _;
    STDOUT_USED.store(true, Ordering::Relaxed);
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(Error::Io {
            context: "cannot write to stdout".into(),
            source: e,
        }),
        _ => Ok(()),
    }
}

/// SIGINT and SIGTERM ask the tick to stop taking records; a second one kills every
/// live handler's process group and ends the process at once with 130, marking
/// nothing more (its claims expire after one lease).
fn stop_on_signals() -> Result<Arc<AtomicBool>, Error> {
    let stop = Arc::new(AtomicBool::new(false));
    let io = |source| Error::Io {
        context: "cannot install signal handlers".into(),
        source,
    };
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        let asked = Arc::clone(&stop);
        // SAFETY: the action is async-signal-safe: an atomic load, kill(2) through
        // `kill_live_groups`, and _exit(2). It is registered before the flag, so the
        // first signal finds the flag unset and only sets it.
        unsafe {
            signal_hook::low_level::register(signal, move || {
                if asked.load(std::sync::atomic::Ordering::SeqCst) {
                    crate::handler::kill_live_groups();
                    signal_hook::low_level::exit(130);
                }
            })
        }
        .map_err(io)?;
        signal_hook::flag::register(signal, Arc::clone(&stop)).map_err(io)?;
    }
    Ok(stop)
}

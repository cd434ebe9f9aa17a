//! The command tree (clap) and what each command does with the library.
//!
//! Commands print results on stdout and nothing else; logs, progress and errors go to
//! stderr, so `backlog run --json | jq` and a crontab line's log file both stay clean.
//! With `--json`, stdout holds one JSON object whatever happens: the result, or, when
//! the command failed before it had one, `{"error": …, "exit_code": …}` (the error's
//! line still goes to stderr, for a person reading along).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use chrono::Utc;

mod act;
mod args;
mod backoff;
mod completions;
mod crontab;
mod man_page;
mod operate;
mod output;
mod run;
mod show;

pub use act::{GiveUpArgs, SnoozeArgs, give_up, snooze};
pub(crate) use args::parse_now;
pub use args::{
    Cli, Command, CrontabArgs, DaemonArgs, DoctorArgs, ExplainArgs, InitArgs, RunArgs, ServeArgs,
    StatusArgs,
};
pub use backoff::{BackoffCommand, backoff_budget, backoff_delays, backoff_plot, backoff_simulate};
pub use completions::completions;
pub use crontab::crontab;
pub use man_page::man;
pub use operate::{PauseArgs, ResumeArgs, RetryArgs, pause, resume, retry};
pub(crate) use output::print;
pub use output::{LogFormat, init_logging, report};
pub use run::run;
pub use show::{ShowArgs, show};

use crate::demo;
use crate::error::Error;
use backlog_core::config::Config;
use backlog_core::duration;
use backlog_core::tick::open_store;

/// The schedule file a command reads: the one `--schedule` names (`-`: standard
/// input), or the first of the places it is looked for.
fn schedule_file(given: &Option<PathBuf>) -> Result<PathBuf, Error> {
    Ok(backlog_core::config::find_schedule(given.as_deref())?)
}

/// The same, for a command that reads the file again later (`why`): standard input,
/// read once, is refused.
fn schedule_to_reread(given: &Option<PathBuf>, why: &str) -> Result<PathBuf, Error> {
    let path = schedule_file(given)?;
    if backlog_core::config::is_stdin(&path) {
        return Err(Error::Usage(format!(
            "--schedule -: {why}, and standard input can be read only once; give the schedule's file"
        )));
    }
    Ok(path)
}

/// Checks the table a schedule file names, for a command whose work needs no database
/// (`explain`, `crontab`): a file that does not match its table fails as a tick would
/// fail on it, before the lines are installed that would; a database it cannot reach is
/// one WARN line, and the command goes on with what it can say.
pub(crate) fn table_checked(config: &Config) -> Result<(), Error> {
    match crate::operate::inspected(config) {
        Ok(_) => Ok(()),
        Err(Error::Core(backlog_core::Error::Store { database, source }))
            if !source.is_file_mismatch() =>
        {
            tracing::warn!(
                "the table was not checked against the schedule file: {database}: {source}"
            );
            Ok(())
        }
        Err(e) => Err(e),
    }
}

/// `backlog daemon`.
pub fn daemon(args: &DaemonArgs) -> Result<(), Error> {
    let schedule = schedule_to_reread(
        &args.schedule,
        "the daemon reads it again on a change and on SIGHUP",
    )?;
    backlog_core::handler::adopt_orphans();
    let signals = backlog::runner::Signals {
        stop: stop_on_signals()?,
        reload: Default::default(),
        program_stop: None,
    };
    signal_hook::flag::register(signal_hook::consts::SIGHUP, Arc::clone(&signals.reload)).map_err(
        |source| Error::Io {
            context: "cannot install signal handlers".into(),
            source,
        },
    )?;
    if let Some(addr) = args.metrics {
        crate::web::start_metrics(schedule.clone(), addr)?;
    }
    if let Some(addr) = args.http {
        let access = crate::web::Access {
            token: crate::web::load_token(args.token_file.as_deref())?,
            user_header: crate::web::user_header(args.user_header.as_deref())?,
        };
        crate::web::start(schedule.clone(), addr, access)?;
    }
    let seed = args.seed.unwrap_or_else(|| {
        Utc::now().timestamp_nanos_opt().unwrap_or_default() as u64 ^ u64::from(std::process::id())
    });
    let handlers = backlog::runner::Handlers::File;
    Ok(backlog::runner::run_daemon(
        &schedule, &signals, handlers, seed,
    )?)
}

/// `backlog serve`.
pub fn serve(args: &ServeArgs) -> Result<(), Error> {
    let schedule = schedule_to_reread(
        &args.schedule,
        "the dashboard reads it again for every page",
    )?;
    // Fails now on a file that does not load, rather than on the first page.
    Config::load(&schedule)?;
    let access = crate::web::Access {
        token: crate::web::load_token(args.token_file.as_deref())?,
        user_header: crate::web::user_header(args.user_header.as_deref())?,
    };
    // Said on stdout, as a command's result: where to point the browser.
    crate::web::serve(schedule, args.listen, access, |addr| {
        print(&format!("serving the dashboard at http://{addr}/\n"))
    })
}

/// `backlog init`.
pub fn init(args: &InitArgs) -> Result<(), Error> {
    if let (Some(database), Some(table)) = (&args.database, &args.table) {
        return init_from_table(args, database, table);
    }
    let written = demo::write(&args.dir, args.force, args.now.unwrap_or_else(Utc::now))?;
    let next = format!(
        "{} run --window 7d --schedule {}",
        invoked_as(),
        args.dir.join(demo::SCHEDULE_FILE).display()
    );
    if args.json {
        let value = serde_json::json!({"written": written, "next": next});
        return print(&format!("{value}\n"));
    }
    let mut text: String = written.iter().map(|line| format!("{line}\n")).collect();
    text.push_str(&format!("next: {next}\n"));
    print(&text)
}

/// `backlog init --database URL --table NAME`: a schedule file proposed from the table.
fn init_from_table(args: &InitArgs, database: &str, table: &str) -> Result<(), Error> {
    // `backlog.toml`, not `./backlog.toml`, where no folder was given.
    let file = match args.dir.as_os_str() == "." {
        true => PathBuf::from(demo::SCHEDULE_FILE),
        false => args.dir.join(demo::SCHEDULE_FILE),
    };
    if let Some(set) = backlog_core::config::url_from_environment()
        && set.trim() != database.trim()
    {
        return Err(Error::Usage(
            "BACKLOG_DATABASE_URL is set and would replace the file's URL; unset it, or give init the same URL with --database".into(),
        ));
    }
    if !args.dry_run && !args.force && file.exists() {
        return Err(Error::Usage(format!(
            "{} exists; pass --force to overwrite it, or --dry-run to print the proposal",
            file.display()
        )));
    }
    let proposal = crate::proposal::propose(&crate::proposal::Request {
        database,
        table,
        id: args.id.as_deref(),
        status: args.status.as_deref(),
        inserted_at: args.inserted_at.as_deref(),
        command: args.command.as_deref(),
        url: args.url.as_deref(),
        pending: &args.pending,
        success: args.success.as_deref(),
        error: args.error.as_deref(),
        file: &file,
    })?;
    let mut said: Vec<String> = vec![format!(
        "read table {} ({})",
        proposal.table.name,
        backlog_core::plural::count(proposal.table.records, "record", "records")
    )];
    said.extend(proposal.guessed.iter().map(|g| format!("  {g}")));
    if let Some(index) = &proposal.create_index {
        said.push(format!(
            "  no index serves the band query, so every tick would read the whole table; create one before the first tick:\n      {index}"
        ));
    }
    said.push(
        "  change any of these in the file's [table], or pass --id, --status or --inserted-at"
            .to_string(),
    );
    let handler_missing = args.command.is_none() && args.url.is_none();
    let next = format!(
        "{}{} doctor --schedule {}",
        if handler_missing {
            "write ./handler.sh beside the file (or set [handler] command or url in it), then "
        } else {
            ""
        },
        invoked_as(),
        file.display()
    );
    if args.dry_run && args.json {
        let mut value = serde_json::to_value(&proposal).expect("a proposal serialises");
        value["file"] = proposal.text.clone().into();
        value["written"] = serde_json::json!([]);
        return print(&format!("{value}\n"));
    }
    if args.dry_run {
        // The file on stdout, to redirect; what was guessed on stderr, for the person.
        eprint!(
            "{}",
            said.iter().map(|l| format!("{l}\n")).collect::<String>()
        );
        return print(&proposal.text);
    }
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir).map_err(|source| Error::Io {
            context: format!("cannot create {}", dir.display()),
            source,
        })?;
    }
    // Beside it first, then renamed: a full disk leaves the file there was, whole.
    crate::metrics::write_file(&file, &proposal.text).map_err(|source| Error::Io {
        context: format!("cannot write {}", file.display()),
        source,
    })?;
    let wrote = format!(
        "wrote {} (the default progressive schedule over table {})",
        file.display(),
        proposal.table.name
    );
    if args.json {
        let mut value = serde_json::to_value(&proposal).expect("a proposal serialises");
        value["written"] = serde_json::json!([file.display().to_string()]);
        value["next"] = next.into();
        return print(&format!("{value}\n"));
    }
    said.push(wrote);
    said.push(format!("next: {next}"));
    print(&said.iter().map(|l| format!("{l}\n")).collect::<String>())
}

/// How a person runs this binary again from here: `backlog` when that is what `PATH`
/// finds, else its path (`target/debug/backlog` after `cargo run`, which puts nothing
/// on `PATH`), relative to the current folder when it lies below it.
fn invoked_as() -> String {
    let Ok(exe) = std::env::current_exe().and_then(std::fs::canonicalize) else {
        return "backlog".into();
    };
    let on_path = std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path)
            .any(|dir| std::fs::canonicalize(dir.join("backlog")).is_ok_and(|p| p == exe))
    });
    if on_path {
        return "backlog".into();
    }
    let here = std::env::current_dir().and_then(std::fs::canonicalize);
    match here.as_ref().map(|here| exe.strip_prefix(here)) {
        Ok(Ok(below)) => below.display().to_string(),
        _ => exe.display().to_string(),
    }
}

/// `backlog explain`.
pub fn explain(args: &ExplainArgs) -> Result<(), Error> {
    let config = Config::load(&schedule_file(&args.schedule)?)?;
    // Which file was read, and whether the environment replaced its database.
    let file = match &args.schedule {
        _ if backlog_core::config::is_stdin(&config.path) => "<stdin>".to_string(),
        Some(_) => config.path.display().to_string(),
        None => format!("{} (found; no --schedule given)", config.path.display()),
    };
    let url_variable = config.database.url_variable;
    let now = args.now.unwrap_or_else(Utc::now);
    let mut plan = backlog::explain::explain(&config.schedule);
    let curve = backlog_core::curve::Curve::of(&config.table)?;
    if let (Some(curve), Some(retry)) = (&curve, &config.table.retry) {
        plan.retry = Some(backlog::explain::retry_tries(
            &config.schedule,
            curve,
            &retry.strategy,
        ));
    }
    // A record's next try is the one `show` and the dashboard give, `[retry]` and
    // spread included: what a tick would do.
    let next = match (&args.age, &args.id) {
        (Some(age), _) => {
            table_checked(&config)?;
            Some(backlog::explain::next_try(&config.schedule, *age, now))
        }
        (None, Some(id)) => {
            let mut store = crate::operate::inspected(&config)?;
            let view = crate::operate::record_view(&config, store.as_mut(), id, now, 0)?;
            if !view.pending {
                let status = &*view.record.status;
                return print(&if args.json {
                    let value = serde_json::json!({"id": id, "status": status, "pending": false, "next_try": null});
                    format!("{value}\n")
                } else {
                    format!("record {id} is {status}, not pending: no tier tries it\n")
                });
            }
            view.next
        }
        (None, None) => {
            table_checked(&config)?;
            None
        }
    };
    if args.json {
        let mut value = serde_json::to_value(&plan).expect("an explanation serialises");
        value["schedule"] = file.into();
        value["database"] = serde_json::json!({
            "url": config.database.url.to_string(),
            "from_environment": url_variable,
        });
        let handler = &config.handler;
        value["handler"] = serde_json::json!({
            "command": handler.command,
            "mode": handler.mode,
            "concurrency": handler.concurrency,
            "rate": handler.rate.map(|r| r.to_string()),
            "rate_key": handler.rate_key,
            "timeout": backlog_core::duration::compact(handler.timeout),
            "stop_after_failures": handler.stop_after_failures,
        });
        if let Some(next) = &next {
            value["next_try"] = serde_json::to_value(next).expect("a next try serialises");
        }
        return print(&format!("{value}\n"));
    }
    let mut text = plan.render(&file);
    if let Some(variable) = url_variable {
        text.push_str(&format!(
            "Database: {} (from {variable}, in place of the file's database.url).\n",
            config.database.url
        ));
    }
    text.push_str(&format!(
        "Handler: {}.\n",
        backlog_core::handler::describe(&config.handler)
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
                    backlog_core::duration::instant(at),
                    duration::rough(wait)
                )
            }
            _ => "it is never tried again".to_string(),
        };
        let note = next
            .retry_note()
            .map(|n| format!(" ({n})"))
            .unwrap_or_default();
        text.push_str(&format!("\n{subject} {band}; {when}{note}.\n"));
    }
    print(&text)
}

/// `backlog doctor`. Failing checks exit 1, after the checks are printed (with
/// `--json`, the one object carries them and the error).
pub fn doctor(args: &DoctorArgs) -> Result<(), Error> {
    let checks = crate::doctor::doctor(&schedule_file(&args.schedule)?, args.verbose);
    let failure = match checks.iter().filter(|c| !c.ok).count() {
        0 => None,
        n => Some(Error::Unhealthy(n)),
    };
    let text = if args.json {
        let mut value = serde_json::json!({"ok": failure.is_none(), "checks": checks});
        with_error(&mut value, failure.as_ref());
        format!("{value}\n")
    } else {
        checks
            .iter()
            .map(|c| format!("{} {}\n", if c.ok { "ok  " } else { "FAIL" }, c.message))
            .collect()
    };
    print(&text)?;
    failure.map_or(Ok(()), Err)
}

/// Adds a command's failure to the one JSON object it prints, as an error object
/// would say it.
pub(super) fn with_error(value: &mut serde_json::Value, failure: Option<&Error>) {
    if let Some(e) = failure {
        value["error"] = e.to_string().into();
        value["exit_code"] = (e.exit_code() as i32).into();
    }
}

/// `backlog status`. With `--check`, a file that cannot be found or read is still one
/// line on stdout, `BACKLOG UNKNOWN: …` (exit 3): a monitoring system shows stdout,
/// and "no output" tells the person on call nothing.
pub fn status(args: &StatusArgs) -> Result<(), Error> {
    let result = status_of(args);
    if let Err(e) = &result
        && args.check
        && e.exit_code() == backlog::exit_code::ExitCode::Schedule
        && !matches!(e, Error::Check(_))
    {
        let first = e.to_string();
        let first = first.lines().next().unwrap_or_default();
        let check = backlog::status::Check::unknown(first.to_string());
        print_check(&check, "", args.json, Some(e))?;
    }
    result
}

/// A check's line on stdout, or with `--json` its object: `{"level", "findings",
/// "line"}`, and the error's `error` and `exit_code` when the check could not run.
fn print_check(
    check: &backlog::status::Check,
    table: &str,
    json: bool,
    failure: Option<&Error>,
) -> Result<(), Error> {
    let line = match table {
        "" => check.line_without_table(),
        table => check.line(table),
    };
    print(&if json {
        let mut value = serde_json::to_value(check).expect("a check serialises");
        value["line"] = line.into();
        with_error(&mut value, failure);
        format!("{value}\n")
    } else {
        format!("{line}\n")
    })
}

fn status_of(args: &StatusArgs) -> Result<(), Error> {
    let config = Config::load(&schedule_file(&args.schedule)?)?;
    let read = open_store(&config)
        .map_err(Error::from)
        .and_then(|mut store| {
            let now = match args.now {
                Some(now) => now,
                None => store.clock().map_err(Error::store(store.describe()))?,
            };
            let status = backlog::status::status(&config, store.as_mut(), now)
                .map_err(Error::store(&config.database.url))?;
            Ok((store, now, status))
        });
    if args.check {
        let thresholds = thresholds(&config, args);
        // A waiting threshold a flag set, with no status to read it by: the file's
        // `table.pending` is to change (exit 3, UNKNOWN), said before the database is
        // asked.
        let untried = match (args.warn_waiting, args.critical_waiting) {
            (None, None) => Ok(config.untried_statuses()),
            (Some(_), _) => config.untried_or_why("--warn-waiting"),
            (None, Some(_)) => config.untried_or_why("--critical-waiting"),
        }
        .map_err(|e| Error::Core(e.into()))?;
        let check = read.and_then(|(mut store, now, status)| {
            let found =
                backlog::status::judge(&config, store.as_mut(), &status, &untried, &thresholds)
                    .map_err(Error::store(&config.database.url))?;
            backlog::status::check(&status)
                .with(found)
                .with_alert_channels(store.as_mut(), now)
                .map_err(Error::store(&config.database.url))
        });
        let check = match check {
            Ok(check) => check,
            // A monitoring system knows 0 to 3: a file that does not match its table
            // cannot be judged (UNKNOWN, as a wrong file is); a backlog whose database
            // cannot be read is not being worked, which is critical. The line names it.
            Err(Error::Core(e @ backlog_core::Error::Store { .. })) => {
                let mismatch = matches!(&e, backlog_core::Error::Store { source, .. } if source.is_file_mismatch());
                match mismatch {
                    true => backlog::status::Check::unknown(e.to_string()),
                    false => backlog::status::Check::critical(e.to_string()),
                }
            }
            Err(e) => return Err(e),
        };
        print_check(&check, &config.table.name, args.json, None)?;
        return match check.level {
            backlog::status::CheckLevel::Ok => Ok(()),
            level => Err(Error::Check(level)),
        };
    }
    let (mut store, now, status) = read?;
    if args.json {
        let mut value = serde_json::to_value(&status).expect("a status serialises");
        let history = backlog::status::history::history(&config, store.as_mut(), now)
            .map_err(Error::store(&config.database.url))?;
        value["history"] = serde_json::to_value(&history).expect("a history serialises");
        print(&format!("{value}\n"))
    } else {
        print(&status.render())
    }
}

/// The thresholds of `status --check`: the schedule file's `[check]`, each key
/// overridden by its flag.
fn thresholds(config: &Config, args: &StatusArgs) -> backlog::status::Thresholds {
    let file = backlog::status::Thresholds::of(&config.check);
    backlog::status::Thresholds {
        warn_failures: args.warn_failures.or(file.warn_failures),
        critical_failures: args.critical_failures.or(file.critical_failures),
        warn_waiting: args.warn_waiting.or(file.warn_waiting),
        critical_waiting: args.critical_waiting.or(file.critical_waiting),
        warn_pending: args.warn_pending.or(file.warn_pending),
        critical_pending: args.critical_pending.or(file.critical_pending),
    }
}

/// SIGINT and SIGTERM ask the tick to stop taking records; a second one kills every
/// live handler's process group and ends the process at once with 130
/// (`exit_code::SECOND_SIGNAL`), marking nothing more (its claims expire after one
/// lease).
pub(super) fn stop_on_signals() -> Result<Arc<AtomicBool>, Error> {
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
                    backlog_core::handler::kill_live_groups();
                    signal_hook::low_level::exit(backlog::exit_code::SECOND_SIGNAL.into());
                }
            })
        }
        .map_err(io)?;
        signal_hook::flag::register(signal, Arc::clone(&stop)).map_err(io)?;
    }
    Ok(stop)
}

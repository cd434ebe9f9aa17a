//! `backlog run`: one tick of one tier, as a crontab line runs it. The schedule file
//! is read once and one store, opened when first needed, serves the database's clock,
//! `--if-due`, the tick, a failed start and the metrics.

use std::io::IsTerminal as _;

use chrono::{DateTime, Utc};

use super::{LogFormat, RunArgs, print, stop_on_signals, with_error};
use crate::error::Error;
use backlog::ticks::run_tick_on;
use backlog_core::config::Config;
use backlog_core::duration;
use backlog_core::store;
use backlog_core::tick::{Event, TickOptions, open_store};

/// `backlog run`: the schedule file read once, and one store (opened when first
/// needed) for the database's clock, `--if-due`, the tick and the metrics.
pub fn run(args: &RunArgs) -> Result<(), Error> {
    // This process's only children are its handlers: it may reap their orphans.
    backlog_core::handler::adopt_orphans();
    let schedule = super::schedule_file(&args.schedule)?;
    // A key of `[alert]` a variable not set leaves out is a warning of the tick, which
    // runs (`alert::tick_starting`): a missing token never stops the work.
    let config = match Config::load(&schedule) {
        Ok(config) => config,
        // A file that does not load: the tick did not start (a handler that cannot be
        // started is recorded by the tick itself).
        Err(e) => {
            let e = backlog_core::Error::from(e);
            if !args.dry_run {
                let now = args.now.unwrap_or_else(Utc::now);
                backlog::failed_start::record_failed_start(&schedule, args.window, now, &e);
            }
            return Err(e.into());
        }
    };
    let mut store = None;
    let result = run_tier(args, &config, &mut store);
    if let Some(path) = &args.metrics_file
        && !args.dry_run
    {
        // After a failed tick its connection may be gone: the metrics take a new one.
        if result.is_err() {
            store = None;
        }
        let written = write_metrics(&config, &mut store, path);
        if let Err(e) = written {
            // The tick's own outcome comes first; a tick that went well fails on it.
            if result.is_ok() {
                return Err(e);
            }
            tracing::warn!("{e}");
        }
    }
    result
}

/// The store of `backlog run`, opened the first time it is asked for.
fn store_of<'s>(
    store: &'s mut Option<Box<dyn store::Store>>,
    config: &Config,
) -> Result<&'s mut dyn store::Store, Error> {
    if store.is_none() {
        *store = Some(open_store(config)?);
    }
    Ok(store.as_deref_mut().expect("opened above"))
}

/// Opens the store and reads the clock every runner shares (the database server's, on
/// a server, unless pinned: bands, the run log and `--if-due` agree across hosts);
/// the tick's options, or `None` when `--if-due` finds the tier not due.
fn reach(
    args: &RunArgs,
    config: &Config,
    store: &mut Option<Box<dyn store::Store>>,
) -> Result<Option<TickOptions>, Error> {
    let store = store_of(store, config)?;
    let now = match args.now {
        Some(now) => now,
        None => backlog::ticks::shared_now(config, store)?,
    };
    let opts = TickOptions::for_config(config, args.window, now);
    if args.if_due && !due(config, args, store, opts.now)? {
        return Ok(None);
    }
    Ok(Some(opts))
}

/// Writes the metrics of the schedule file's backlog to `path`, atomically.
fn write_metrics(
    config: &Config,
    store: &mut Option<Box<dyn store::Store>>,
    path: &std::path::Path,
) -> Result<(), Error> {
    let store = store_of(store, config)?;
    let text = crate::metrics::collect(config, store, Utc::now())
        .map_err(Error::store(&config.database.url))?
        .render();
    crate::metrics::write_file(path, &text).map_err(|source| Error::Io {
        context: format!("--metrics-file {}: cannot write it", path.display()),
        source,
    })
}

fn run_tier(
    args: &RunArgs,
    config: &Config,
    store: &mut Option<Box<dyn store::Store>>,
) -> Result<(), Error> {
    // `--if-due` refuses such a window itself, `--ad-hoc` or not: no cadence is due.
    if config.schedule.tier(args.window).is_none() && !args.ad_hoc && !args.if_due {
        return Err(Error::Usage(format!(
            "--window {window} is no tier's window in {} (its windows: {}{}); give one of them, or add --ad-hoc to run ages 0 to {window} once",
            config.path.display(),
            windows(config),
            config.schedule.did_you_mean_window(args.window),
            window = duration::compact(args.window),
        )));
    }
    let mut opts = match reach(args, config, store) {
        Ok(Some(opts)) => opts,
        Ok(None) => return Ok(()),
        Err(e) => {
            if let (false, Some(core)) = (args.dry_run, e.core()) {
                let now = args.now.unwrap_or_else(Utc::now);
                backlog::alert::unreachable(config, args.window, now, core);
            }
            return Err(e);
        }
    };
    opts.limit = args.limit;
    opts.dry_run = args.dry_run;
    opts.retry_failed = args.retry_failed;
    opts.stop = stop_on_signals()?;

    let show_progress = std::io::stderr().is_terminal()
        && args.verbosity.verbose == 0
        && args.log_format == LogFormat::Text
        && !args.json
        && !args.dry_run;
    let mut progress = super::output::Spinner::new(show_progress);
    let mut listed = Vec::new();
    let now = opts.now;
    let store = store_of(store, config)?;
    let summary = run_tick_on(config, store, &opts, None, &mut |event| match event {
        Event::Handled { status, .. } => progress.handled(status),
        Event::WouldHandle { record } => listed.push(listing(record, now)),
        _ => {}
    })?;
    drop(progress);

    let failure = summary.failure(&config.path).map(Error::from);
    let mut text = String::new();
    if args.json {
        let mut value = serde_json::to_value(&summary).expect("a summary always serialises");
        if args.dry_run {
            value["would_handle"] = serde_json::Value::Array(listed);
        }
        // The one object on stdout says it failed, as an error object would.
        with_error(&mut value, failure.as_ref());
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
        let line = format!("{}\n", summary.line(&config.table));
        if args.dry_run {
            // The list is data (`cut -f1 | backlog retry -`): its summary goes aside.
            super::output::eprint_line(line, args.log_format);
        } else {
            text.push_str(&super::output::summary_as_log_line(
                line,
                &summary,
                args.log_format,
            ));
        }
    }
    print(&text)?;
    failure.map_or(Ok(()), Err)
}

/// A record as a dry run lists it.
fn listing(record: &backlog_core::Record, now: DateTime<Utc>) -> serde_json::Value {
    let age = record.age(now).and_then(|a| a.to_std().ok());
    serde_json::json!({
        "id": record.id,
        "inserted_at": record.inserted_at().to_string(),
        "age": age.map(duration::rough),
        "status": &*record.status,
    })
}

/// The windows of the file's tiers, as a list for a message: `1d, 7d, 14d`.
fn windows(config: &Config) -> String {
    config.schedule.windows().join(", ")
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
    let store_err = Error::store(store.describe());
    // A tick of the tier that ended before its band did (a signal, a lapse, a
    // failure, a kill) leaves the tier due now: this tick takes the rest.
    let unfinished = store
        .unfinished_runs(config.database.claim_lease)
        .map_err(&store_err)?;
    if let Some(run) = unfinished
        .iter()
        .find(|r| r.window_secs == args.window.as_secs())
    {
        // Said before the tick's summary (not in JSON, whose stdout is one object).
        if !args.json {
            let text = format!(
                "tier {n} ({window} {}): its tick of {} ended early ({}); taking the rest of its band now\n",
                tier.cadence,
                backlog_core::duration::instant(run.clock),
                run.outcome
            );
            print(&super::output::as_log_lines(text, args.log_format))?;
        }
        return Ok(true);
    }
    let last = store.last_tick(args.window).map_err(&store_err)?;
    if tier.cadence.is_due(last, now) {
        return Ok(true);
    }
    let last = last.expect("a tier that never ran is due");
    let next = tier.cadence.next_due(last);
    let show = backlog_core::duration::instant;
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
    let text = if args.json {
        text + "\n"
    } else {
        super::output::as_log_lines(text + "\n", args.log_format)
    };
    print(&text)?;
    Ok(false)
}

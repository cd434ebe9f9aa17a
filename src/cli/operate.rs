//! The commands a person on call uses: `show` (why is this record still ERROR?),
//! `retry` (try it now), `pause` and `resume` (stop a tier while a counterpart is
//! down). Each goes through the library, with the tick's guarantees.

use std::path::PathBuf;
use std::time::Duration;

use chrono::{DateTime, Utc};
use clap::Args;

use super::args::{Verbosity, parse_now};
use super::output::print;
use crate::config::Config;
use crate::duration;
use crate::error::Error;
use crate::store::{AttemptQuery, Pause, Store};
use crate::tick::{TickOptions, open_store};

#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The record's id, as its table holds it.
    pub id: String,
    /// The schedule file.
    #[arg(long, short, env = "BACKLOG_SCHEDULE", default_value = "backlog.toml")]
    pub schedule: PathBuf,
    /// How many of its attempts to list, newest first.
    #[arg(long, default_value_t = 20)]
    pub attempts: usize,
    /// Pin the clock (RFC 3339) [default: now].
    #[arg(long, value_parser = parse_now)]
    pub now: Option<DateTime<Utc>>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct RetryArgs {
    /// The ids of the records to hand over now.
    #[arg(required_unless_present = "status")]
    pub ids: Vec<String>,
    /// Or the pending records of this status (with --older-than and --limit).
    #[arg(long, conflicts_with = "ids")]
    pub status: Option<String>,
    /// With --status: only records older than this, like 2d.
    #[arg(long, value_parser = duration::parse_span, requires = "status")]
    pub older_than: Option<Duration>,
    /// With --status: at most this many records, oldest first.
    #[arg(long, default_value_t = 100, requires = "status")]
    pub limit: usize,
    /// The schedule file.
    #[arg(long, short, env = "BACKLOG_SCHEDULE", default_value = "backlog.toml")]
    pub schedule: PathBuf,
    /// List the records it would hand over; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Pin the clock (RFC 3339) for ages and --older-than [default: now].
    #[arg(long, value_parser = parse_now)]
    pub now: Option<DateTime<Utc>>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub verbosity: Verbosity,
}

#[derive(Debug, Args)]
pub struct PauseArgs {
    /// The tier to pause, by its window [default: every tier].
    #[arg(long, short, value_parser = duration::parse_span)]
    pub window: Option<Duration>,
    /// When the pause is meant to end: a time (RFC 3339) or a span from now (2h).
    /// It lasts until `backlog resume` all the same; past it, `status --check` warns.
    #[arg(long, value_parser = parse_until)]
    pub until: Option<DateTime<Utc>>,
    /// Why, for whoever reads `status` next.
    #[arg(long)]
    pub reason: Option<String>,
    /// The schedule file.
    #[arg(long, short, env = "BACKLOG_SCHEDULE", default_value = "backlog.toml")]
    pub schedule: PathBuf,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ResumeArgs {
    /// The tier to resume, by its window [default: every pause of the table].
    #[arg(long, short, value_parser = duration::parse_span)]
    pub window: Option<Duration>,
    /// The schedule file.
    #[arg(long, short, env = "BACKLOG_SCHEDULE", default_value = "backlog.toml")]
    pub schedule: PathBuf,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

fn parse_until(text: &str) -> Result<DateTime<Utc>, String> {
    if let Ok(span) = duration::parse_span(text) {
        return chrono::Duration::from_std(span)
            .ok()
            .and_then(|span| Utc::now().checked_add_signed(span))
            .ok_or_else(|| format!("{text:?} is too far ahead"));
    }
    parse_now(text).map_err(|_| {
        format!("{text:?} is neither a time nor a span; write 2026-11-21T18:00:00Z or 2h")
    })
}

fn show_time(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// A store ready for reading records: opened and its table inspected.
fn inspected(config: &Config) -> Result<Box<dyn Store>, Error> {
    let mut store = open_store(config)?;
    store.inspect().map_err(Error::store(store.describe()))?;
    Ok(store)
}

/// The window of a tier of the file, or a usage error listing them.
fn tier_window(config: &Config, window: Duration) -> Result<u64, Error> {
    if config.schedule.tier(window).is_some() {
        return Ok(window.as_secs());
    }
    let windows: Vec<String> = config
        .schedule
        .tiers
        .iter()
        .map(|t| duration::compact(t.window))
        .collect();
    Err(Error::Usage(format!(
        "--window {} is no tier's window in {} (its windows: {})",
        duration::compact(window),
        config.path.display(),
        windows.join(", ")
    )))
}

/// `backlog show`.
pub fn show(args: &ShowArgs) -> Result<(), Error> {
    let config = Config::load(&args.schedule)?;
    let mut store = inspected(&config)?;
    let store_err = Error::store(store.describe());
    let now = args.now.unwrap_or_else(Utc::now);
    let record = store.find(&args.id).map_err(&store_err)?.ok_or_else(|| {
        Error::Usage(format!(
            "table {} has no record with {} = {}",
            config.table.name, config.table.id, args.id
        ))
    })?;
    let age = record.age(now).and_then(|a| a.to_std().ok());
    let pending = config.table.is_pending(&record.status);
    let held = store.holder(&record).map_err(&store_err)?;
    // A failure kept from the ticks is tried at the first slot after the keep ends.
    let from = match &held {
        Some(h) if h.owner.is_none() => (h.until + crate::schedule::due_slack()).max(now),
        _ => now,
    };
    let next = age.filter(|_| pending).map(|a| {
        let later = (from - now).to_std().unwrap_or_default();
        crate::explain::next_try(&config.schedule, a + later, from)
    });

    let attempts = store
        .attempts(&AttemptQuery {
            record_id: Some(record.id.to_string()),
            limit: args.attempts,
            successes: true,
            ..AttemptQuery::default()
        })
        .map_err(&store_err)?;
    if args.json {
        let value = serde_json::json!({
            "id": record.id,
            "status": &*record.status,
            "pending": pending,
            "inserted_at": record.inserted_at().to_string(),
            "age": age.map(duration::rough),
            "age_seconds": age.map(|a| a.as_secs()),
            "columns": serde_json::to_value(&record.columns).unwrap_or_default(),
            "next_try": next,
            "held": held,
            "attempts": attempts,
        });
        return print(&format!("{value}\n"));
    }
    let mut text = format!(
        "record {} of {}: {}, inserted {}{}\n",
        record.id,
        config.table.name,
        record.status,
        record.inserted_at(),
        age.map(|a| format!(", {} old", duration::rough(a)))
            .unwrap_or_default()
    );
    text.push_str(&format!(
        "columns: {}\n",
        serde_json::to_value(&record.columns).unwrap_or_default()
    ));
    match (&next, pending) {
        (_, false) => text.push_str("not pending: no tier tries it again\n"),
        (Some(next), true) => {
            let band = next
                .in_tier
                .map_or("in no band".to_string(), |n| format!("in tier {n}'s band"));
            match (next.by_tier, next.at) {
                (Some(n), Some(at)) => text.push_str(&format!(
                    "{band}; tried next at {} (in {}), by tier {n}\n",
                    show_time(at),
                    duration::rough((at - now).to_std().unwrap_or_default())
                )),
                _ => text.push_str(&format!(
                    "{band}; never tried again (older than the last window)\n"
                )),
            }
        }
        (None, true) => text.push_str("its inserted-at value cannot be read: no tier takes it\n"),
    }
    match &held {
        Some(h) => match &h.owner {
            Some(owner) => text.push_str(&format!(
                "held now by the tick {owner}, until {}\n",
                show_time(h.until)
            )),
            None => text.push_str(&format!(
                "failed in its tier's slot: kept from the ticks until {} (`backlog retry {}` tries it now)\n",
                show_time(h.until),
                record.id
            )),
        },
        None => text.push_str("held by no tick now\n"),
    }
    if attempts.is_empty() {
        text.push_str(
            "no attempts kept (the history keeps failures; [history] in the schedule file)\n",
        );
    } else {
        text.push_str(&format!("attempts, newest first ({}):\n", attempts.len()));
    }
    for a in &attempts {
        let tier = match a.window_secs {
            0 => "retry".to_string(),
            w => duration::compact(Duration::from_secs(w)),
        };
        text.push_str(&format!(
            "  {}  {:<7} {:<8} {} ({}), took {}, run {}\n",
            show_time(a.started),
            tier,
            a.outcome,
            a.status,
            a.detail,
            match a.took_ms {
                ms @ 0..1000 => format!("{ms}ms"),
                ms => duration::rough(Duration::from_millis(ms)),
            },
            a.run_id
        ));
        for line in a.output.lines().filter(|l| !l.trim().is_empty()) {
            text.push_str(&format!("      | {line}\n"));
        }
    }
    print(&text)
}

/// `backlog retry`.
pub fn retry(args: &RetryArgs) -> Result<(), Error> {
    crate::handler::adopt_orphans();
    let config = Config::load(&args.schedule)?;
    let mut store = inspected(&config)?;
    let store_err = Error::store(store.describe());
    let now = args.now.unwrap_or_else(Utc::now);
    let mut records = Vec::new();
    let mut refused = Vec::new();
    if let Some(status) = &args.status {
        if !config.table.is_pending(status) {
            return Err(Error::Usage(format!(
                "--status {status:?} is not one of table.pending ({}): a retry takes pending records only",
                config.table.pending.join(", ")
            )));
        }
        let before = args
            .older_than
            .and_then(|d| chrono::Duration::from_std(d).ok())
            .and_then(|d| now.checked_sub_signed(d))
            .unwrap_or(now);
        records = store
            .oldest_of(std::slice::from_ref(status), Some(before), args.limit)
            .map_err(&store_err)?;
    } else {
        for id in &args.ids {
            match store.find(id).map_err(&store_err)? {
                None => refused.push(format!("{id}: no such record")),
                Some(r) if !config.table.is_pending(&r.status) => refused.push(format!(
                    "{id}: {} is not pending (a retry takes records of {})",
                    r.status,
                    config.table.pending.join(", ")
                )),
                Some(r) => records.push(r),
            }
        }
    }
    for why in &refused {
        tracing::warn!("not retried: {why}");
    }
    if args.dry_run {
        let ids: Vec<String> = records.iter().map(|r| r.id.to_string()).collect();
        return print(&if args.json {
            format!(
                "{}\n",
                serde_json::json!({"would_retry": ids, "refused": refused})
            )
        } else {
            let mut text: String = records
                .iter()
                .map(|r| format!("{}\t{}\t{}\n", r.id, r.inserted_at(), r.status))
                .collect();
            text.push_str(&format!("dry run: would hand over {} records\n", ids.len()));
            text
        });
    }
    if records.is_empty() {
        return Err(Error::Usage(format!(
            "nothing to retry{}",
            if refused.is_empty() {
                String::new()
            } else {
                format!(": {}", refused.join("; "))
            }
        )));
    }
    let mut handler =
        crate::handler::from_config(&config.handler, &config.dir).map_err(|source| {
            Error::Handler {
                file: Some(config.path.display().to_string()),
                source,
            }
        })?;
    let mut opts = TickOptions::for_config(&config, Duration::ZERO, now);
    opts.stop = super::stop_on_signals()?;
    let summary = crate::tick::retry_records(
        &config.table,
        store.as_mut(),
        handler.as_mut(),
        records,
        &opts,
        &mut |_| {},
    )?;
    if args.json {
        let mut value = serde_json::to_value(&summary).expect("a summary serialises");
        value["refused"] = refused.into();
        return print(&format!("{value}\n"));
    }
    let mut line = format!(
        "retried {} {}: succeeded {}, failed {}",
        summary.selected,
        if summary.selected == 1 {
            "record"
        } else {
            "records"
        },
        summary.succeeded,
        summary.failed
    );
    if summary.skipped > 0 {
        line.push_str(&format!(
            ", skipped {} (no longer pending, or held by a tick now)",
            summary.skipped
        ));
    }
    if summary.lost > 0 {
        line.push_str(&format!(
            ", lost {} (the hold lapsed; not marked)",
            summary.lost
        ));
    }
    if let Some(why) = &summary.stopped {
        line.push_str(&format!("; stopped early: {why}"));
    }
    print(&format!("{line}; run {}\n", summary.run_id))
}

/// Who is pausing: user@host.
fn whoami() -> String {
    let user = crate::account::Account::current()
        .map(|a| a.name)
        .unwrap_or_else(|_| "unknown".into());
    let host = hostname::get()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "localhost".into());
    format!("{user}@{host}")
}

/// `backlog pause`.
pub fn pause(args: &PauseArgs) -> Result<(), Error> {
    let config = Config::load(&args.schedule)?;
    let window_secs = args
        .window
        .map(|w| tier_window(&config, w))
        .transpose()?
        .unwrap_or(0);
    let pause = Pause {
        window_secs,
        since: Utc::now(),
        until: args.until,
        reason: args.reason.clone(),
        by: whoami(),
    };
    let mut store = inspected(&config)?;
    store
        .pause(&pause)
        .map_err(Error::store(store.describe()))?;
    if args.json {
        return print(&format!("{}\n", serde_json::json!({"pause": pause})));
    }
    let what = match config.schedule.tier(Duration::from_secs(window_secs)) {
        Some((n, tier)) if window_secs > 0 => {
            format!("tier {n} ({})", duration::compact(tier.window))
        }
        _ => "every tier".to_string(),
    };
    print(&format!(
        "{what} of {}: {}; its ticks exit 0 without running until `backlog resume{}`\n",
        config.table.name,
        pause.describe(),
        args.window
            .map(|w| format!(" --window {}", duration::compact(w)))
            .unwrap_or_default()
    ))
}

/// `backlog resume`.
pub fn resume(args: &ResumeArgs) -> Result<(), Error> {
    let config = Config::load(&args.schedule)?;
    let window_secs = args.window.map(|w| tier_window(&config, w)).transpose()?;
    let mut store = inspected(&config)?;
    let store_err = Error::store(store.describe());
    let before = store.pauses().map_err(&store_err)?;
    let lifted = store.resume(window_secs).map_err(&store_err)?;
    let still: Vec<Pause> = store.pauses().map_err(&store_err)?;
    if args.json {
        return print(&format!(
            "{}\n",
            serde_json::json!({"lifted": lifted, "still_paused": still})
        ));
    }
    let mut text = match (lifted, window_secs) {
        (0, Some(_)) if before.iter().any(|p| p.window_secs == 0) => String::new(),
        (0, _) => format!("{}: nothing was paused\n", config.table.name),
        (n, _) => format!(
            "{}: lifted {n} {}\n",
            config.table.name,
            if n == 1 { "pause" } else { "pauses" }
        ),
    };
    for p in &still {
        text.push_str(&format!(
            "still paused: {}, {}; `backlog resume{}` lifts it\n",
            p.what(),
            p.describe(),
            match p.window_secs {
                0 => String::new(),
                w => format!(" --window {}", duration::compact(Duration::from_secs(w))),
            }
        ));
    }
    print(&text)
}

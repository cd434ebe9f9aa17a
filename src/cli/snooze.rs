//! `backlog snooze`: records a person keeps from the ticks until a time (a counterpart
//! that said "not before 14:00", a customer who asked to wait). Each stays pending with
//! its status as it is; `backlog retry` takes it at once all the same.

use std::path::PathBuf;
use std::time::Duration;

use chrono::{DateTime, Utc};
use clap::Args;

use super::args::{Verbosity, parse_now};
use super::operate::SelectArgs;
use super::output::print;
use crate::config::Config;
use crate::duration;
use crate::error::Error;
use crate::operate::{RetryPlan, inspected};

/// The options of `backlog snooze`.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("when").required(true).args(["span", "until"])))]
pub struct SnoozeArgs {
    /// The records to snooze.
    #[command(flatten)]
    pub select: SelectArgs,
    /// For how long, from now: 2h, 30m, 1d.
    #[arg(long = "for", value_parser = duration::parse_span, value_name = "SPAN")]
    pub span: Option<Duration>,
    /// Or until when: an RFC 3339 time (2026-11-26T14:00:00Z).
    #[arg(long, value_parser = parse_now, value_name = "TIME")]
    pub until: Option<DateTime<Utc>>,
    /// The schedule file, - for standard input [default: the first of ./backlog.toml,
    /// $XDG_CONFIG_HOME/backlog/backlog.toml, /etc/backlog/backlog.toml]
    #[arg(long, short, env = "BACKLOG_SCHEDULE", value_name = "FILE")]
    pub schedule: Option<PathBuf>,
    /// List the records it would snooze; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Pin the clock (RFC 3339) for --for, ages and --older-than [default: now].
    #[arg(long, value_parser = parse_now)]
    pub now: Option<DateTime<Utc>>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// How much it logs (`-v`, `-vv`).
    #[command(flatten)]
    pub verbosity: Verbosity,
}

/// `backlog snooze`.
pub fn snooze(args: &SnoozeArgs) -> Result<(), Error> {
    let config = Config::load(&super::schedule_file(&args.schedule)?)?;
    let now = args.now.unwrap_or_else(Utc::now);
    let until = match (args.until, args.span) {
        (Some(until), _) => until,
        (None, Some(span)) => chrono::Duration::from_std(span)
            .ok()
            .and_then(|span| now.checked_add_signed(span))
            .ok_or_else(|| {
                Error::Usage(format!("--for {}: too far ahead", duration::compact(span)))
            })?,
        (None, None) => return Err(Error::Usage("give --for SPAN or --until TIME".into())),
    };
    if until <= now {
        return Err(Error::Usage(format!(
            "--until {} is not after now ({}); give a later time, or --for a span",
            duration::instant(until),
            duration::instant(now)
        )));
    }
    let mut store = inspected(&config)?;
    let selection = args.select.selection(now, &args.schedule)?;
    let RetryPlan { records, refused } =
        crate::operate::plan(&config, store.as_mut(), &selection, "snooze")?;
    super::operate::warn_refused("not snoozed", &refused);
    let until_text = until.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    if args.dry_run {
        let ids: Vec<String> = records.iter().map(|r| r.id.to_string()).collect();
        return print(&if args.json {
            format!(
                "{}\n",
                serde_json::json!({"would_snooze": ids, "until": until_text, "refused": refused})
            )
        } else {
            format!(
                "dry run: would snooze {} records until {until_text}: {}\n",
                ids.len(),
                ids.join(", ")
            )
        });
    }
    let records = super::operate::some_to("snooze", records, &refused)?;
    let summary = crate::operate::snooze(
        &config,
        store.as_mut(),
        records,
        until,
        now,
        super::stop_on_signals()?,
    )?;
    if args.json {
        let mut value = super::operate::with_refused(&summary, refused);
        value["until"] = until_text.into();
        return print(&format!("{value}\n"));
    }
    print(&format!(
        "snoozed {} {} of {} until {until_text}: no tick takes {} before then (`backlog retry` does){}\n",
        summary.failed,
        if summary.failed == 1 {
            "record"
        } else {
            "records"
        },
        config.table.name,
        if summary.failed == 1 { "it" } else { "them" },
        summary.rest()
    ))
}

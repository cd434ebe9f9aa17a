//! A person's actions on chosen records, beside `retry`: `backlog snooze` keeps them
//! from the ticks until a time (a counterpart that said "not before 14:00"), `backlog
//! give-up` gives up on them (`table.given_up`). Each record stays as it is but for
//! that; `backlog retry` takes it at once all the same.

use std::time::Duration;

use chrono::{DateTime, Utc};
use clap::Args;

use super::args::{ActArgs, parse_now};
use super::operate::{SelectArgs, dry_list, some_to, warn_more, warn_refused, with_refused};
use super::output::print;
use crate::error::Error;
use crate::operate::{RetryPlan, inspected};
use backlog_core::config::Config;
use backlog_core::duration;
use backlog_core::record::Record;
use backlog_core::store::Store;
use backlog_core::tick::RetrySummary;

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
    /// Why, kept in each record's attempt (`show` says it).
    #[arg(long)]
    pub reason: Option<String>,
    #[command(flatten)]
    pub act: ActArgs,
}

/// The options of `backlog give-up`.
#[derive(Debug, Args)]
pub struct GiveUpArgs {
    /// The records to give up on.
    #[command(flatten)]
    pub select: SelectArgs,
    /// Why, kept in each record's attempt.
    #[arg(long)]
    pub reason: Option<String>,
    #[command(flatten)]
    pub act: ActArgs,
}

/// One action: its name in messages and what it does to the planned records.
struct Action<'a> {
    /// `snooze`, `give up`.
    verb: &'a str,
    /// `snooze`, `give-up`.
    noun: &'a str,
    /// `not snoozed`, `not given up on`.
    refused: &'a str,
    /// `snoozed`, `given up`.
    done: &'a str,
    /// Said after the count of records: ` until …: no tick takes …`.
    after: &'a dyn Fn(u64) -> String,
    /// Added to the JSON.
    json: serde_json::Value,
    run: &'a Run<'a>,
}

/// What an action does to the records it planned.
type Run<'a> = dyn Fn(&Config, &mut dyn Store, Vec<Record>) -> Result<RetrySummary, Error> + 'a;

/// `backlog snooze`.
pub fn snooze(args: &SnoozeArgs) -> Result<(), Error> {
    let config = Config::load(&super::schedule_file(&args.act.schedule)?)?;
    let now = args.act.now.unwrap_or_else(Utc::now);
    let refused = |until| crate::operate::snooze_refused(now, until);
    let until = match (args.until, args.span) {
        (Some(until), _) => match refused(until) {
            None => until,
            Some(why) if until <= now => {
                return Err(Error::Usage(format!(
                    "--until {} {why} ({}); give a later time, or --for a span",
                    duration::instant(until),
                    duration::instant(now)
                )));
            }
            Some(why) => {
                return Err(Error::Usage(format!(
                    "--until {} {why}; snooze for at most 366d, or give the records up",
                    duration::instant(until)
                )));
            }
        },
        (None, Some(span)) => {
            let span_text = duration::compact(span);
            let until = chrono::Duration::from_std(span)
                .ok()
                .and_then(|span| now.checked_add_signed(span));
            match until.map(|until| (until, refused(until))) {
                Some((until, None)) => until,
                _ if span.is_zero() => {
                    return Err(Error::Usage(
                        "--for 0s snoozes nothing; give a span like 30m, 2h or 1d".into(),
                    ));
                }
                _ => {
                    return Err(Error::Usage(format!(
                        "--for {span_text} is more than a year; snooze for at most 366d, or give the records up"
                    )));
                }
            }
        }
        (None, None) => return Err(Error::Usage("give --for SPAN or --until TIME".into())),
    };
    let by = match &args.reason {
        Some(reason) if !reason.trim().is_empty() => {
            format!("{}: {}", crate::operate::whoami(), reason.trim())
        }
        _ => crate::operate::whoami(),
    };
    let until_text = until.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let stop = super::stop_on_signals()?;
    act(
        &config,
        &args.select,
        &args.act,
        now,
        Action {
            verb: "snooze",
            noun: "snooze",
            refused: "not snoozed",
            done: "snoozed",
            after: &|n| {
                format!(
                    " until {until_text}: no tick takes {} before then (`backlog retry` does)",
                    if n == 1 { "it" } else { "them" }
                )
            },
            json: serde_json::json!({"until": until_text}),
            run: &|config, store, records| {
                crate::operate::snooze_by(config, store, records, until, now, &by, stop.clone())
            },
        },
    )
}

/// `backlog give-up`.
pub fn give_up(args: &GiveUpArgs) -> Result<(), Error> {
    let config = Config::load(&super::schedule_file(&args.act.schedule)?)?;
    let Some(given_up) = config.table.given_up.clone() else {
        return Err(Error::Usage(format!(
            "{} sets no table.given_up; name the status of a record given up on there, like given_up = \"DEAD\"",
            config.path.display()
        )));
    };
    let now = args.act.now.unwrap_or_else(Utc::now);
    let why = match &args.reason {
        Some(reason) if !reason.trim().is_empty() => {
            format!("given up by {}: {reason}", crate::operate::whoami())
        }
        _ => format!("given up by {}", crate::operate::whoami()),
    };
    let label = config.table.label(&given_up).to_string();
    let stop = super::stop_on_signals()?;
    act(
        &config,
        &args.select,
        &args.act,
        now,
        Action {
            verb: "give up",
            noun: "give-up",
            refused: "not given up on",
            done: "gave up on",
            after: &|_| format!(": now {label} (`backlog retry` brings them back)"),
            json: serde_json::json!({"status": given_up}),
            run: &|config, store, records| {
                crate::operate::give_up(config, store, records, &why, now, stop.clone())
            },
        },
    )
}

/// Plans the selected records, lists them on a dry run, else runs the action and
/// prints what it did.
fn act(
    config: &Config,
    select: &SelectArgs,
    args: &ActArgs,
    now: DateTime<Utc>,
    action: Action<'_>,
) -> Result<(), Error> {
    let mut store = inspected(config)?;
    let selection = select.selection(now, &args.schedule)?;
    let RetryPlan {
        records,
        refused,
        more_than,
    } = crate::operate::plan(config, store.as_mut(), &selection, action.noun)?;
    warn_refused(action.refused, &refused);
    warn_more(action.noun, more_than);
    if args.dry_run {
        let ids: Vec<String> = records.iter().map(|r| r.id.to_string()).collect();
        return print(&if args.json {
            let mut value =
                serde_json::json!({"would": action.verb, "ids": ids, "refused": refused});
            merge(&mut value, action.json);
            format!("{value}\n")
        } else {
            dry_list(config, &records, action.verb)
        });
    }
    let records = some_to(action.verb, records, &refused)?;
    let summary = (action.run)(config, store.as_mut(), records)?;
    if args.json {
        let mut value = with_refused(&summary, refused);
        merge(&mut value, action.json);
        return print(&format!("{value}\n"));
    }
    let n = summary.failed;
    print(&format!(
        "{} {n} {} of {}{}{}\n",
        action.done,
        if n == 1 { "record" } else { "records" },
        config.table.name,
        (action.after)(n),
        summary.rest()
    ))
}

/// Adds the keys of `extra` to `value`.
fn merge(value: &mut serde_json::Value, extra: serde_json::Value) {
    if let (Some(value), serde_json::Value::Object(extra)) = (value.as_object_mut(), extra) {
        value.extend(extra);
    }
}

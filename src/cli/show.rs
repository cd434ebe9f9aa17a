//! `backlog show`: one record as a person on call reads it (why is it still ERROR?):
//! its columns, its next try, who holds it, and its attempts.

use std::path::PathBuf;

use chrono::{DateTime, Utc};
use clap::Args;

use super::args::parse_now;
use super::output::print;
use crate::error::Error;
use crate::operate::{RecordView, inspected};
use backlog_core::config::Config;
use backlog_core::duration;

/// The options of `backlog show`.
#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The record's id, as its table holds it.
    pub id: String,
    /// The schedule file, - for standard input [default: the first of ./backlog.toml,
    /// $XDG_CONFIG_HOME/backlog/backlog.toml, /etc/backlog/backlog.toml]
    #[arg(long, short, env = "BACKLOG_SCHEDULE", value_name = "FILE")]
    pub schedule: Option<PathBuf>,
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

/// `backlog show`.
pub fn show(args: &ShowArgs) -> Result<(), Error> {
    let config = Config::load(&super::schedule_file(&args.schedule)?)?;
    let mut store = inspected(&config)?;
    let now = args.now.unwrap_or_else(Utc::now);
    let view = crate::operate::record_view(&config, store.as_mut(), &args.id, now, args.attempts)?;
    let RecordView {
        record,
        age,
        attempts,
        ..
    } = &view;
    if args.json {
        return print(&format!("{}\n", view.to_json()));
    }
    let mut text = format!(
        "record {} of {}: {}, inserted {}{}\n",
        record.id,
        config.table.name,
        config.table.label(&record.status),
        record.inserted_at(),
        age.map(|a| format!(", {} old", duration::rough(a)))
            .unwrap_or_default()
    );
    text.push_str(&format!(
        "columns: {}\n",
        serde_json::Value::Object(record.columns.for_people())
    ));
    text.push_str(&next_try(&view, &config.table, now));
    text.push_str(&holder(&view));
    if attempts.is_empty() {
        text.push_str(
            "no attempts kept (the history keeps failures; [history] in the schedule file)\n",
        );
    } else {
        text.push_str(&format!("attempts, newest first ({}):\n", attempts.len()));
    }
    for a in attempts {
        text.push_str(&format!(
            "  {}  {:<7} {:<8} {} ({}), took {}, run {}\n",
            duration::instant(a.started),
            // Window 0 is a person's action, or the tool's giving up.
            match (a.window_secs, a.outcome.as_str()) {
                (0, backlog_core::store::SNOOZED) => "snooze".to_string(),
                (0, backlog_core::store::GIVEN_UP) => "give-up".to_string(),
                (w, _) => duration::tier_name(w),
            },
            a.outcome,
            config.table.label(&a.status),
            a.detail,
            duration::handler_time(a.took_ms),
            a.run_id
        ));
        for line in a.output.lines().filter(|l| !l.trim().is_empty()) {
            text.push_str(&format!("      | {line}\n"));
        }
    }
    print(&text)
}

/// `show`'s line on when the record is tried next, if ever.
fn next_try(
    view: &RecordView,
    table: &backlog_core::config::TableConfig,
    now: DateTime<Utc>,
) -> String {
    let RecordView {
        record,
        pending,
        next,
        ..
    } = view;
    match (next, pending) {
        (_, false) if table.given_up.as_deref() == Some(&*record.status) => format!(
            "given up: no tier tries it again; `backlog retry {}` brings it back\n",
            record.id
        ),
        (_, false) => "not pending: no tier tries it again\n".into(),
        (Some(next), true) => {
            let band = next
                .in_tier
                .map_or("in no band".to_string(), |n| format!("in tier {n}'s band"));
            match (next.by_tier, next.at) {
                (Some(n), Some(at)) => format!(
                    "{band}; tried next at {} (in {}), by tier {n}{}\n",
                    duration::instant(at),
                    duration::rough((at - now).to_std().unwrap_or_default()),
                    next.retry_note()
                        .map(|note| format!(", once {note}"))
                        .unwrap_or_default()
                ),
                _ => {
                    // Past the last tier, the last tier's tick gives it up.
                    let given_up = match (&table.given_up, next.in_tier) {
                        (Some(status), None) => {
                            format!("; the last tier's next tick gives it up ({status})")
                        }
                        _ => String::new(),
                    };
                    format!(
                        "{band}; never tried again ({}){given_up}\n",
                        next.never_why()
                    )
                }
            }
        }
        (None, true) if record.inserted_time.is_some() => {
            "inserted after the clock's now (in the future): no tier takes it until it is not\n"
                .into()
        }
        (None, true) => "its inserted-at value cannot be read: no tier takes it\n".into(),
    }
}

/// `show`'s line on who holds the record now, and why.
fn holder(view: &RecordView) -> String {
    let RecordView {
        record,
        held,
        attempts,
        ..
    } = view;
    match held {
        Some(h) => match &h.owner {
            Some(owner) => format!(
                "held now by the tick {owner}, until {}\n",
                duration::instant(h.until)
            ),
            None => format!(
                "{}: kept from the ticks until {} (`backlog retry {}` tries it now)\n",
                // A snooze's attempt says who asked and why: the handler, or a person.
                crate::operate::Kept::of(attempts.first()).describe(),
                duration::instant(h.until),
                record.id
            ),
        },
        None => "held by no tick now\n".into(),
    }
}

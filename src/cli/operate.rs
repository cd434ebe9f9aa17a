//! The commands a person on call uses besides `show`: `retry` (try it now), `pause`
//! and `resume` (stop a tier while a counterpart is down), and the picking of records
//! every action shares. Each goes through the library, with the tick's guarantees.

use std::path::PathBuf;
use std::time::Duration;

use chrono::{DateTime, Utc};
use clap::Args;

use super::output::print;
use crate::error::Error;
use crate::operate::{Filter, RetryPlan, Selection, inspected};
use backlog_core::config::Config;
use backlog_core::duration;
use backlog_core::record::Record;
use backlog_core::tick::RetrySummary;

/// Which records a person's action takes: ids, or the pending records a filter picks.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("filter").multiple(true).args(["status", "tier", "outcome", "error_contains"])))]
pub struct SelectArgs {
    /// The ids of the records; `-` reads them from standard input (one or more a
    /// line, separated by blanks or commas).
    #[arg(required_unless_present = "filter", conflicts_with = "filter")]
    pub ids: Vec<String>,
    /// Or the pending records of this status.
    #[arg(long)]
    pub status: Option<String>,
    /// Or the pending records in this tier's band now, by its window (7d).
    #[arg(long, value_parser = duration::parse_span, value_name = "WINDOW")]
    pub tier: Option<Duration>,
    /// Or the pending records with a failed attempt of this outcome (error, timeout,
    /// crash, mapped…).
    #[arg(long)]
    pub outcome: Option<String>,
    /// Or the pending records with a failed attempt whose detail or output holds this
    /// text, in any case.
    #[arg(long, value_name = "TEXT")]
    pub error_contains: Option<String>,
    /// With a filter: only records older than this, like 2d.
    #[arg(long, value_parser = duration::parse_span, requires = "filter")]
    pub older_than: Option<Duration>,
    /// With a filter: at most this many records (oldest first, or a tier's newest
    /// first, or those of the newest attempts).
    #[arg(long, default_value_t = 100, requires = "filter")]
    pub limit: usize,
}

impl SelectArgs {
    /// The selection, ages and bands placed at `now`; ids of standard input read (`-`).
    pub fn selection(
        &self,
        now: DateTime<Utc>,
        schedule: &Option<PathBuf>,
    ) -> Result<Selection, Error> {
        if !self.ids.is_empty() {
            return Ok(Selection::Ids(ids_of(&self.ids, schedule)?));
        }
        if self.limit == 0 || self.limit > MAX_IDS {
            return Err(Error::Usage(format!(
                "--limit {} is out of range; give 1 to {MAX_IDS} records",
                self.limit
            )));
        }
        let mut filter = Filter::new(self.limit, now);
        filter.status = self.status.clone();
        filter.tier = self.tier;
        filter.before = self
            .older_than
            .and_then(|d| chrono::Duration::from_std(d).ok())
            .and_then(|d| now.checked_sub_signed(d));
        filter.outcome = self.outcome.clone();
        filter.error_contains = self.error_contains.clone().filter(|t| !t.is_empty());
        Ok(Selection::Filter(filter))
    }
}

/// The options of `backlog retry`.
#[derive(Debug, Args)]
pub struct RetryArgs {
    /// The records to hand over now.
    #[command(flatten)]
    pub select: SelectArgs,
    #[command(flatten)]
    pub act: super::args::ActArgs,
}

/// The options of `backlog pause`.
#[derive(Debug, Args)]
pub struct PauseArgs {
    /// The tier to pause, by its window [default: every tier].
    #[arg(long, short, value_parser = duration::parse_span)]
    pub window: Option<Duration>,
    /// When the pause is meant to end: a time (RFC 3339) or a span from now (2h).
    /// It lasts until `backlog resume` all the same; past it, `status --check` warns.
    #[arg(long, value_parser = crate::operate::parse_until)]
    pub until: Option<DateTime<Utc>>,
    /// Why, for whoever reads `status` next.
    #[arg(long)]
    pub reason: Option<String>,
    /// The schedule file, - for standard input [default: the first of ./backlog.toml,
    /// $XDG_CONFIG_HOME/backlog/backlog.toml, /etc/backlog/backlog.toml]
    #[arg(long, short, env = "BACKLOG_SCHEDULE", value_name = "FILE")]
    pub schedule: Option<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// The options of `backlog resume`.
#[derive(Debug, Args)]
pub struct ResumeArgs {
    /// The tier to resume, by its window [default: every pause of the table].
    #[arg(long, short, value_parser = duration::parse_span)]
    pub window: Option<Duration>,
    /// The schedule file, - for standard input [default: the first of ./backlog.toml,
    /// $XDG_CONFIG_HOME/backlog/backlog.toml, /etc/backlog/backlog.toml]
    #[arg(long, short, env = "BACKLOG_SCHEDULE", value_name = "FILE")]
    pub schedule: Option<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// The most ids one action takes (given, or read from `-`): an action on more is a
/// tick's job.
const MAX_IDS: usize = 10_000;

/// The ids given, those of standard input in place of `-` (which the schedule file
/// cannot be read from too).
fn ids_of(given: &[String], schedule: &Option<PathBuf>) -> Result<Vec<String>, Error> {
    if !given.iter().any(|id| id == "-") {
        return at_most(given.to_vec());
    }
    if schedule
        .as_deref()
        .is_some_and(backlog_core::config::is_stdin)
    {
        return Err(Error::Usage(
            "ids from standard input (-) and --schedule - cannot both read it; give the schedule's file".into(),
        ));
    }
    let mut text = String::new();
    std::io::Read::read_to_string(&mut std::io::stdin(), &mut text).map_err(|source| {
        Error::Io {
            context: "cannot read the ids from standard input".into(),
            source,
        }
    })?;
    let mut ids: Vec<String> = given.iter().filter(|id| *id != "-").cloned().collect();
    ids.extend(
        text.split(|c: char| c.is_whitespace() || c == ',')
            .filter(|id| !id.is_empty())
            .map(String::from),
    );
    if ids.is_empty() {
        return Err(Error::Usage(
            "no ids on standard input; give one or more, a line or blanks apart".into(),
        ));
    }
    at_most(ids)
}

/// `ids`, unless there are more than [`MAX_IDS`].
fn at_most(ids: Vec<String>) -> Result<Vec<String>, Error> {
    if ids.len() > MAX_IDS {
        return Err(Error::Usage(format!(
            "{} ids given, more than the {MAX_IDS} one action takes; give them in parts, or let the ticks take them",
            ids.len()
        )));
    }
    Ok(ids)
}

/// `backlog retry`.
pub fn retry(args: &RetryArgs) -> Result<(), Error> {
    backlog_core::handler::adopt_orphans();
    let config =
        crate::operate::for_retry(Config::load(&super::schedule_file(&args.act.schedule)?)?);
    let mut store = inspected(&config)?;
    let now = args.act.now.unwrap_or_else(Utc::now);
    let selection = args.select.selection(now, &args.act.schedule)?;
    let RetryPlan {
        records,
        refused,
        more_than,
    } = crate::operate::plan(&config, store.as_mut(), &selection, "retry")?;
    warn_refused("not retried", &refused);
    warn_more("retry", more_than);
    if args.act.dry_run {
        let ids: Vec<String> = records.iter().map(|r| r.id.to_string()).collect();
        return print(&if args.act.json {
            format!(
                "{}\n",
                serde_json::json!({"would_retry": ids, "refused": refused})
            )
        } else {
            dry_list(&config, &records, "hand over")
        });
    }
    let records = some_to("retry", records, &refused)?;
    let summary = crate::operate::run_retry(
        &config,
        store.as_mut(),
        records,
        now,
        super::stop_on_signals()?,
    )?;
    if args.act.json {
        return print(&format!("{}\n", with_refused(&summary, refused)));
    }
    print(&format!("{}\n", summary.line()))
}

/// A dry run's records, a line each (`id`, inserted-at, status) for `cut -f1` to pipe
/// to another action; its summary (`dry run: would snooze 2 records`) goes to stderr,
/// so that no count is read as an id.
pub(super) fn dry_list(config: &Config, records: &[Record], verb: &str) -> String {
    let n = records.len();
    let what = match n {
        0 => "no record".to_string(),
        1 => "1 record".to_string(),
        n => format!("{n} records"),
    };
    super::output::eprint_line(
        format!("dry run: would {verb} {what}\n"),
        super::LogFormat::Text,
    );
    records
        .iter()
        .map(|r| {
            let status = config.table.label(&r.status);
            format!("{}\t{}\t{status}\n", r.id, r.inserted_at())
        })
        .collect()
}

/// Says that more records match a filter than its `--limit` let the action take.
pub(super) fn warn_more(action: &str, more_than: Option<usize>) {
    if let Some(limit) = more_than {
        tracing::warn!(
            "more records match than --limit {limit}: this {action} takes the first {limit}; raise --limit (at most {MAX_IDS}) to take more at once"
        );
    }
}

/// Logs each record an action leaves out, and why.
pub(super) fn warn_refused(what: &str, refused: &[String]) {
    for why in refused {
        tracing::warn!("{what}: {why}");
    }
}

/// The records of a plan, or a usage error naming why none is left to `action`.
pub(super) fn some_to(
    action: &str,
    records: Vec<Record>,
    refused: &[String],
) -> Result<Vec<Record>, Error> {
    if !records.is_empty() {
        return Ok(records);
    }
    Err(Error::Usage(format!(
        "nothing to {action}{}",
        if refused.is_empty() {
            String::new()
        } else {
            format!(": {}", refused.join("; "))
        }
    )))
}

/// An action's summary as `--json` prints it, with the ids it left out and why.
pub(super) fn with_refused(summary: &RetrySummary, refused: Vec<String>) -> serde_json::Value {
    let mut value = serde_json::to_value(summary).expect("a summary serialises");
    value["refused"] = refused.into();
    value
}

/// `backlog pause`.
pub fn pause(args: &PauseArgs) -> Result<(), Error> {
    let config = Config::load(&super::schedule_file(&args.schedule)?)?;
    let mut store = inspected(&config)?;
    let pause = crate::operate::pause(
        &config,
        store.as_mut(),
        args.window,
        args.until,
        args.reason.clone(),
        crate::operate::whoami(),
    )?;
    if args.json {
        return print(&format!("{}\n", serde_json::json!({"pause": pause})));
    }
    print(&format!(
        "{} of {}: {}; its ticks exit 0 without running until `backlog resume{}`\n",
        crate::operate::pause_target(&config, pause.window_secs),
        config.table.name,
        pause.describe(),
        args.window
            .map(|w| format!(" --window {}", duration::compact(w)))
            .unwrap_or_default()
    ))
}

/// `backlog resume`.
pub fn resume(args: &ResumeArgs) -> Result<(), Error> {
    let config = Config::load(&super::schedule_file(&args.schedule)?)?;
    let mut store = inspected(&config)?;
    let before = store.pauses().map_err(Error::store(store.describe()))?;
    let (lifted, still) = crate::operate::resume(&config, store.as_mut(), args.window)?;
    let window_secs = args.window.map(|w| w.as_secs());
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

//! `backlog backoff`'s subcommands and their arguments, as the command line takes them.

use std::path::PathBuf;
use std::time::Duration;

use chrono::{DateTime, Utc};
use clap::{Args, Subcommand};

use crate::cli::args::count;
use crate::cli::parse_now;
use backlog_core::duration;

/// The `backlog backoff` subcommands: retry strategies looked at outside any table.
#[derive(Debug, Subcommand)]
pub enum BackoffCommand {
    /// One delay per outcome (0 failure, 1 success), -1 for give up.
    Delays(DelaysArgs),
    /// How many retries fit in a timeout, or how long a number of retries waits.
    Budget(BudgetArgs),
    /// Records hit an outage: calls, time to success and peak load, per strategy.
    Simulate(SimulateArgs),
    /// An SVG of when retries land, and the load they make, per strategy.
    Plot(PlotArgs),
}

impl BackoffCommand {
    /// Whether the command prints JSON (`--json`).
    pub fn json(&self) -> bool {
        match self {
            BackoffCommand::Delays(args) => args.json,
            BackoffCommand::Budget(args) => args.json,
            BackoffCommand::Simulate(args) => args.json,
            BackoffCommand::Plot(_) => false,
        }
    }
}

/// What `plot` and `simulate` compare.
#[derive(Debug, Args)]
pub struct Contenders {
    /// A strategy, as "name param=value …" (repeatable), like
    /// "exponential initial=1 max=1h" [default: a few common ones].
    #[arg(long = "strategy")]
    pub strategies: Vec<String>,
    /// A schedule file, tried on its tiers' ticks (repeatable).
    #[arg(long = "schedule")]
    pub schedules: Vec<PathBuf>,
}

impl Contenders {
    /// The strategies given, or `defaults` when neither a strategy nor a schedule is.
    pub(super) fn strategies_or(&self, defaults: &[&str]) -> Vec<String> {
        if self.strategies.is_empty() && self.schedules.is_empty() {
            defaults.iter().map(|d| d.to_string()).collect()
        } else {
            self.strategies.clone()
        }
    }
}

#[derive(Debug, Args)]
pub struct PlotArgs {
    #[command(flatten)]
    pub contenders: Contenders,
    /// How many jobs fail at the same moment (up to 1000: each retry is a dot).
    #[arg(long, default_value_t = 100, value_parser = count::<usize>(1000, "jobs", " (each retry is a dot)"))]
    pub records: usize,
    /// How far the time axis goes (up to 400d).
    #[arg(long, value_parser = parse_plot_horizon, default_value = "24h")]
    pub horizon: Duration,
    /// Put the time axis on a linear scale counted in this unit [default: ticks in
    /// human units (1m, 1h, 1d), on a log scale when the span is wide].
    #[arg(long, value_enum)]
    pub unit: Option<Unit>,
    /// Seed of every random draw.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// The SVG file to write.
    #[arg(long, short, default_value = "backoff.svg")]
    pub out: PathBuf,
}

#[derive(Debug, Args)]
pub struct SimulateArgs {
    #[command(flatten)]
    pub contenders: Contenders,
    /// How many records hit the outage (up to 1000000).
    #[arg(long, default_value_t = 1000, value_parser = count::<usize>(MAX_RECORDS, "records", ""))]
    pub records: usize,
    /// How long the outage lasts: 2h, or a range to draw it from: 30m..4h.
    #[arg(long, default_value = "2h")]
    pub outage: String,
    /// Spread the records' first failures over this.
    #[arg(long, value_parser = duration::parse_span, default_value = "0s")]
    pub arrival: Duration,
    /// A record not through after this counts as never.
    #[arg(long, value_parser = duration::parse_span, default_value = "400d")]
    pub horizon: Duration,
    /// Seed of every random draw.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    #[command(flatten)]
    pub capacity: CapacityArgs,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `simulate --capacity`: paces of handler starts against a counterpart that refuses
/// calls beyond its capacity, over one tick (not retry strategies over an outage).
#[derive(Debug, Args)]
pub struct CapacityArgs {
    /// A counterpart that takes this many calls and refuses the rest (429): 40/s, or
    /// 80/s@60s from 60 s into the tick (repeatable); compares paces of handler starts.
    #[arg(long = "capacity", value_parser = parse_capacity,
          conflicts_with_all = ["strategies", "schedules", "outage", "arrival", "horizon"])]
    pub capacity: Vec<(Duration, f64)>,
    /// With --capacity: a fixed pace to compare, like 38/s (repeatable) [default: 95 %
    /// of the first capacity].
    #[arg(long = "rate", requires = "capacity", value_parser = parse_rate)]
    pub rates: Vec<f64>,
    /// With --capacity: handlers at once across the fleet (runners × concurrency).
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u16).range(1..))]
    pub lanes: u16,
    /// With --capacity: how long each call takes, answered or refused.
    #[arg(long, value_parser = duration::parse_span, default_value = "100ms")]
    pub latency: Duration,
    /// With --capacity: refusals in a row that stop the tick (the breaker); 0 for none.
    #[arg(long, default_value_t = 10)]
    pub stop_after: usize,
}

/// `40/s`, or `80/s@60s`: a capacity, and from when in the tick.
fn parse_capacity(text: &str) -> Result<(Duration, f64), String> {
    let (rate, from) = match text.split_once('@') {
        Some((rate, from)) => (
            rate,
            duration::parse_span(from.trim()).map_err(|e| e.to_string())?,
        ),
        None => (text, Duration::ZERO),
    };
    Ok((from, parse_rate(rate).map_err(|e| e.to_string())?))
}

/// A rate as `[handler] rate` writes it, in starts a second.
fn parse_rate(text: &str) -> Result<f64, backlog_core::rate::RateError> {
    backlog_core::rate::Rate::parse(text.trim()).map(|r| r.per_second())
}

#[derive(Debug, Args)]
pub struct StrategyArgs {
    /// constant, exponential, httpx, fibonacci, arctan, sidekiq, buckets, lild, limd, mild, mimd, or progressive (with --schedule).
    pub strategy: String,
    /// A parameter as name=value, repeatable: -p initial=3 -p failure=2.
    #[arg(short = 'p', long = "param")]
    pub params: Vec<String>,
    /// The unit of delays, in parameters and output.
    #[arg(long, value_enum, default_value_t = Unit::S)]
    pub unit: Unit,
    /// Give up once this many attempts were made.
    #[arg(long)]
    pub max_attempts: Option<usize>,
    /// Give up once the waits add up to more than this, like 1h.
    #[arg(long, value_parser = duration::parse_span)]
    pub max_total: Option<Duration>,
    /// Spread each delay uniformly over [d(1−j), d(1+j)], like 0.1.
    #[arg(long)]
    pub jitter: Option<f64>,
    /// Seed of the random draws (jitter, Sidekiq, buckets).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Unit {
    S,
    M,
    H,
    D,
}

impl Unit {
    pub(super) fn seconds(self) -> f64 {
        match self {
            Unit::S => 1.0,
            Unit::M => 60.0,
            Unit::H => 3600.0,
            Unit::D => 86_400.0,
        }
    }

    pub(super) fn name(self) -> &'static str {
        match self {
            Unit::S => "s",
            Unit::M => "m",
            Unit::H => "h",
            Unit::D => "d",
        }
    }
}

#[derive(Debug, Args)]
pub struct DelaysArgs {
    #[command(flatten)]
    pub strategy: StrategyArgs,
    /// The outcomes, 0 (failure) or 1 (success) [default: ten failures].
    pub outcomes: Vec<String>,
    /// Shorten each delay by how late the attempt before it came (needs outcomes with
    /// times: 0@2026-11-21T10:00:00Z or 0@600 in seconds).
    #[arg(long)]
    pub subtract_waited: bool,
    /// For `progressive`: the schedule file whose ticks try the record.
    #[arg(long)]
    pub schedule: Option<PathBuf>,
    /// For `progressive`: when the record was inserted (RFC 3339) [default: now].
    #[arg(long, value_parser = parse_now)]
    pub inserted: Option<DateTime<Utc>>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct BudgetArgs {
    #[command(flatten)]
    pub strategy: StrategyArgs,
    /// Count the retries that fit in this, like 30s.
    #[arg(long, value_parser = duration::parse_span, required_unless_present = "retries", conflicts_with = "retries")]
    pub timeout: Option<Duration>,
    /// Add up the waits of this many retries instead.
    #[arg(long)]
    pub retries: Option<usize>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// The most records `plot` and `simulate` follow: each is kept in memory.
const MAX_RECORDS: u64 = 1_000_000;

fn parse_plot_horizon(text: &str) -> Result<Duration, duration::DurationError> {
    duration::Range::positive(Duration::from_secs(400 * 86_400)).parse(text)
}

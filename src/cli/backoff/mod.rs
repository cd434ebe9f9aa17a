//! `backlog backoff`: the retry-strategy toolkit's commands (their arguments: `args`).

use std::time::Duration;

use chrono::Utc;

use super::{parse_now, print};
use crate::error::Error;
use backlog_core::config::Config;
use backlog_core::duration;
use backlog_core::plural::count;

mod args;
mod budget;
mod capacity;
mod counterpart;
mod simulation;

pub use args::{
    BackoffCommand, BudgetArgs, DelaysArgs, PlotArgs, SimulateArgs, StrategyArgs, Unit,
};

/// A strategy from the command line, with its limits; the closed form only when no
/// limit changes the curve.
fn strategy_of(args: &StrategyArgs) -> Result<backlog_core::backoff::catalog::Built, Error> {
    let built =
        backlog_core::backoff::catalog::build(&args.strategy, &args.params, args.unit.seconds())
            .map_err(usage)?;
    with_limits(built, args)
}

/// Wraps a strategy in the limits the command line asks for.
fn with_limits(
    mut built: backlog_core::backoff::catalog::Built,
    args: &StrategyArgs,
) -> Result<backlog_core::backoff::catalog::Built, Error> {
    use backlog_core::backoff::{Limited, catalog};
    if args.max_attempts.is_some() || args.max_total.is_some() || args.jitter.is_some() {
        if let Some(j) = args.jitter.filter(|j| !(0.0..=1.0).contains(j)) {
            return Err(Error::Usage(format!(
                "--jitter {j}: use a factor from 0 to 1, like 0.1"
            )));
        }
        let mut limited = Limited::new(built.strategy);
        limited.max_attempts = args.max_attempts;
        limited.max_total = args.max_total.map(|d| d.as_secs_f64());
        limited.jitter = args.jitter;
        built = catalog::Built {
            strategy: Box::new(limited),
            closed_form: None,
        };
    }
    Ok(built)
}

/// A number of the chosen unit as people write it: `3`, `0.5`, `61.035`.
fn number(seconds: f64, unit: Unit) -> String {
    let v = seconds / unit.seconds();
    let text = format!("{v:.3}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Outcomes as typed: 0 for a failure, 1 for a success, optionally `@` a time (RFC 3339,
/// or seconds); ten failures when none. The times, in seconds from the first, when given.
fn parse_outcomes(texts: &[String]) -> Result<(Vec<bool>, Option<Vec<f64>>), Error> {
    if texts.is_empty() {
        return Ok((vec![false; 10], None));
    }
    let mut outcomes = Vec::new();
    let mut times = Vec::new();
    for text in texts {
        let (o, at) = match text.split_once('@') {
            Some((o, at)) => (o, Some(at)),
            None => (text.as_str(), None),
        };
        outcomes.push(match o {
            "0" => false,
            "1" => true,
            other => {
                return Err(Error::Usage(format!(
                    "outcome {other:?}: write 0 for a failure, 1 for a success"
                )));
            }
        });
        if let Some(at) = at {
            let seconds = match at.parse::<f64>() {
                Ok(s) => s,
                Err(_) => {
                    parse_now(at)
                        .map_err(|e| Error::Usage(e.to_string()))?
                        .timestamp_millis() as f64
                        / 1000.0
                }
            };
            times.push(seconds);
        }
    }
    match times.len() {
        0 => Ok((outcomes, None)),
        n if n == outcomes.len() => {
            let first = times[0];
            Ok((outcomes, Some(times.iter().map(|t| t - first).collect())))
        }
        _ => Err(Error::Usage(
            "give every outcome a time (0@…), or none".into(),
        )),
    }
}

/// `backlog backoff delays`.
pub fn backoff_delays(args: &DelaysArgs) -> Result<(), Error> {
    let config = match (&args.schedule, args.strategy.strategy.as_str()) {
        (Some(path), "progressive") => Some(Config::load(path)?),
        (None, "progressive") => {
            return Err(Error::Usage(
                "progressive: give the schedule file with --schedule FILE".into(),
            ));
        }
        (Some(_), other) => {
            return Err(Error::Usage(format!(
                "--schedule goes with the progressive strategy, not {other}"
            )));
        }
        (None, _) => None,
    };
    let built = match &config {
        Some(config) => {
            if !args.strategy.params.is_empty() {
                return Err(Error::Usage(
                    "progressive: takes no -p parameters; its tiers are in the schedule file"
                        .into(),
                ));
            }
            let progressive = backlog_core::backoff::Progressive {
                schedule: &config.schedule,
                inserted: args.inserted.unwrap_or_else(Utc::now),
                id: "1".into(),
            };
            // The strategy borrows the schedule: take its delays here.
            use backlog_core::backoff::Strategy as _;
            let delays = progressive.delays(
                &parse_outcomes(&args.outcomes)?.0,
                &mut fastrand::Rng::with_seed(args.strategy.seed),
            );
            let fixed = backlog_core::backoff::Fixed(delays);
            backlog_core::backoff::catalog::Built {
                strategy: Box::new(fixed),
                closed_form: None,
            }
        }
        None => strategy_of(&args.strategy)?,
    };
    let (outcomes, times) = parse_outcomes(&args.outcomes)?;
    let mut rng = fastrand::Rng::with_seed(args.strategy.seed);
    let mut delays = built.strategy.delays(&outcomes, &mut rng);
    match (&times, args.subtract_waited) {
        (Some(times), true) => delays = backlog_core::backoff::subtract_waited(&delays, times),
        (None, true) => return Err(Error::Usage("--subtract-waited needs outcomes with times: 0@2026-11-21T10:00:00Z, or 0@600 in seconds".into())),
        _ => {}
    }
    let shown: Vec<String> = delays
        .iter()
        .map(|d| {
            d.seconds()
                .map_or("-1".into(), |s| number(s, args.strategy.unit))
        })
        .collect();
    if args.json {
        let values: Vec<serde_json::Value> = shown
            .iter()
            .map(|s| match (s.parse::<i64>(), s.parse::<f64>()) {
                (Ok(i), _) => serde_json::Value::from(i),
                (_, Ok(f)) => serde_json::Value::from(f),
                _ => serde_json::Value::Null,
            })
            .collect();
        let outcomes: Vec<u8> = outcomes.iter().map(|o| u8::from(*o)).collect();
        let value = serde_json::json!({"strategy": args.strategy.strategy, "unit": args.strategy.unit.name(), "outcomes": outcomes, "delays": values});
        return print(&format!("{value}\n"));
    }
    print(&(shown.join("\n") + "\n"))
}

/// `backlog backoff budget`.
pub fn backoff_budget(args: &BudgetArgs) -> Result<(), Error> {
    let built = strategy_of(&args.strategy)?;
    let mut rng = fastrand::Rng::with_seed(args.strategy.seed);
    let timeout = args.timeout.map(|t| t.as_secs_f64());
    let b = budget::budget(built.strategy.as_ref(), timeout, args.retries, &mut rng);
    let unit = args.strategy.unit;
    let closed = timeout.and_then(|t| built.closed_form.as_ref().map(|f| f(t)));
    if args.json {
        let mut value = serde_json::to_value(&b).expect("a budget serialises");
        if let Some((n, formula)) = &closed {
            value["closed_form"] = serde_json::json!({"retries": n, "formula": formula});
        }
        return print(&format!("{value}\n"));
    }
    let name = &args.strategy.strategy;
    let mut text = match timeout {
        Some(t) if b.unbounded => format!(
            "{name}: more than {} retries fit in {}{} (its delays are zero or nearly)\n",
            b.retries,
            number(t, unit),
            unit.name()
        ),
        Some(t) => format!(
            "{name}: {} in {}{}, waiting {}{} in all{}\n",
            count(b.retries, "retry fits", "retries fit"),
            number(t, unit),
            unit.name(),
            number(b.total, unit),
            unit.name(),
            if b.gave_up { " (then it gives up)" } else { "" }
        ),
        None => format!(
            "{name}: {} {}{} in all{}\n",
            count(b.retries, "retry waits", "retries wait"),
            number(b.total, unit),
            unit.name(),
            if b.gave_up {
                " (it gave up before)"
            } else {
                ""
            }
        ),
    };
    if let Some((n, formula)) = closed {
        text.push_str(&format!("closed form: {formula} = {n}\n"));
    }
    print(&text)
}

/// A strategy written as one argument, `"name param=value …"`, as `--strategy` takes it.
fn strategy_spec(spec: &str) -> Result<backlog_core::backoff::catalog::Built, Error> {
    let mut words = spec.split_whitespace();
    let name = words.next().ok_or_else(|| {
        Error::Usage("--strategy \"\": give a name, like \"exponential initial=1\"".into())
    })?;
    let params: Vec<String> = words.map(String::from).collect();
    backlog_core::backoff::catalog::build(name, &params, 1.0).map_err(usage)
}

/// `backlog backoff plot`.
pub fn backoff_plot(args: &PlotArgs) -> Result<(), Error> {
    use crate::plot::backoff::{Panel, plot};
    use simulation::{Contender, retry_times};
    let specs = args.contenders.strategies_or(&[
        "constant delay=30m",
        "exponential initial=1m",
        "sidekiq",
        "buckets",
    ]);
    let horizon = args.horizon.as_secs_f64();
    let mut panels = Vec::new();
    for spec in &specs {
        let built = strategy_spec(spec)?;
        let retries = retry_times(
            &Contender::Strategy(built.strategy.as_ref()),
            args.records,
            horizon,
            args.seed,
        );
        panels.push(Panel {
            title: spec.clone(),
            retries,
        });
    }
    for path in &args.contenders.schedules {
        let config = Config::load(path)?;
        let retries = retry_times(
            &Contender::Schedule(&config.schedule, None),
            args.records,
            horizon,
            args.seed,
        );
        panels.push(Panel {
            title: path.display().to_string(),
            retries,
        });
    }
    let unit = args.unit.map(|u| (u.seconds(), u.name()));
    plot(&args.out, &panels, horizon, unit).map_err(Error::Usage)?;
    let dots: usize = panels.iter().flat_map(|p| &p.retries).map(Vec::len).sum();
    print(&format!(
        "wrote {} ({}, {}, {})\n",
        args.out.display(),
        count(panels.len(), "strategy", "strategies"),
        count(args.records, "job", "jobs"),
        count(dots, "retry", "retries")
    ))
}

/// `backlog backoff simulate`.
pub fn backoff_simulate(args: &SimulateArgs) -> Result<(), Error> {
    use simulation::{Contender, Scenario, simulate};
    if !args.capacity.capacity.is_empty() {
        return capacity::simulate_paces(args);
    }
    let mut rng = fastrand::Rng::with_seed(args.seed);
    let outage = outage_of(&args.outage, &mut rng)?;
    let scenario = Scenario {
        records: args.records,
        outage,
        arrival: args.arrival.as_secs_f64(),
        horizon: args.horizon.as_secs_f64(),
        seed: args.seed,
    };
    let specs = args.contenders.strategies_or(&[
        "exponential initial=1 max=1h",
        "sidekiq",
        "buckets",
        "constant delay=5m",
    ]);
    let mut reports = Vec::new();
    for spec in &specs {
        let built = strategy_spec(spec)?;
        reports.push(simulate(
            spec,
            &Contender::Strategy(built.strategy.as_ref()),
            &scenario,
        ));
    }
    for path in &args.contenders.schedules {
        let config = Config::load(path)?;
        let (name, breaker) = breaker_of(&config, path);
        reports.push(simulate(
            &name,
            &Contender::Schedule(&config.schedule, breaker),
            &scenario,
        ));
    }
    if args.json {
        let value = serde_json::json!({"records": args.records, "outage_seconds": outage, "seed": args.seed, "contenders": reports});
        return print(&format!("{value}\n"));
    }
    let span = |s: Option<f64>| {
        s.map_or("-".to_string(), |s| {
            duration::rough(Duration::from_secs_f64(s.max(0.0)))
        })
    };
    let width = reports
        .iter()
        .map(|r| r.name.len())
        .max()
        .unwrap_or(9)
        .max(9);
    let mut text = format!(
        "{}, an outage of {}, first failures {}, seed {}\n\n{:<width$}  {:>12}  {:>9}  {:>9}  {:>9}  {:>7}  {:>5}  {:>8}\n",
        count(args.records, "record", "records"),
        duration::rough(Duration::from_secs_f64(outage)),
        if args.arrival.is_zero() {
            "all at once".to_string()
        } else {
            format!("over {}", duration::rough(args.arrival))
        },
        args.seed,
        "contender",
        "calls/record",
        "p50",
        "p99",
        "max",
        "gave up",
        "never",
        "peak/min"
    );
    for r in &reports {
        text.push_str(&format!(
            "{:<width$}  {:>12.1}  {:>9}  {:>9}  {:>9}  {:>7}  {:>5}  {:>8}\n",
            r.name,
            r.calls_per_record,
            span(r.p50),
            span(r.p99),
            span(r.max),
            r.gave_up,
            r.never,
            r.peak_calls_per_minute
        ));
    }
    text.push_str("\np50, p99, max: from the end of the outage to a record's success. peak/min: the most calls in one minute.\n");
    print(&text)
}

/// `--outage`: a span, or a range of spans (`5m..2h`) from which one is drawn.
fn outage_of(spec: &str, rng: &mut fastrand::Rng) -> Result<f64, Error> {
    match spec.split_once("..") {
        Some((low, high)) => {
            let (low, high) = (
                duration::parse_span(low).map_err(usage)?,
                duration::parse_span(high).map_err(usage)?,
            );
            if high < low {
                return Err(Error::Usage(format!(
                    "--outage {}: the range must go from short to long",
                    spec
                )));
            }
            Ok(low.as_secs_f64() + (high - low).as_secs_f64() * rng.f64())
        }
        None => Ok(duration::parse_span(spec).map_err(usage)?.as_secs_f64()),
    }
}

/// A schedule file's name as a contender, and its breaker, which comes with it: a
/// down counterpart gets that many calls, then one a cool-down.
fn breaker_of(config: &Config, path: &std::path::Path) -> (String, Option<(u32, f64)>) {
    let cooldown = config.handler.breaker_cooldown;
    let breaker = config
        .handler
        .stop_after_failures
        .map(|k| (k, cooldown.as_secs_f64()));
    let name = match breaker {
        Some((k, _)) => format!(
            "{} (stop after {k}, cool-down {})",
            path.display(),
            duration::compact(cooldown)
        ),
        None => path.display().to_string(),
    };
    (name, breaker)
}

/// A command line's value that cannot be taken (a span, a strategy), as a usage error.
fn usage(e: impl std::fmt::Display) -> Error {
    Error::Usage(e.to_string())
}

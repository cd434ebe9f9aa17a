//! The `backlog` command: parse the command line, run one command, map its error to
//! an exit code. The commands live in `cli`; the tick, the schedule and the store's
//! protocol in the core crate, each database in a crate of its own.

use std::process::ExitCode;

use cli::{Cli, Command};

mod account;
mod cli;
mod crontab;
mod demo;
mod doctor;
mod error;
mod metrics;
mod operate;
mod plot;
mod proposal;
mod telemetry;
mod web;

fn main() -> ExitCode {
    backlog_sqlite::install();
    backlog_postgres::install();
    backlog_mysql::install();
    let cli = Cli::parse_or_exit();
    let (level, format) = cli.logging();
    cli::init_logging(level, format);
    // The commands that tick export their spans and metrics where an `OTEL_*` variable
    // asks; a one-off's tick is the child of the caller's `TRACEPARENT` (the daemon's
    // each start a trace of their own), and `retry` hands that on to its handlers.
    let exports = matches!(cli.command, Command::Run(_) | Command::Daemon(_));
    let telemetry = exports.then(telemetry::start).flatten();
    let caller = matches!(cli.command, Command::Run(_) | Command::Retry(_))
        .then(|| telemetry::caller().attach());
    let result = match &cli.command {
        Command::Init(args) => cli::init(args),
        Command::Run(args) => cli::run(args),
        Command::Crontab(args) => cli::crontab(args),
        Command::Daemon(args) => cli::daemon(args),
        Command::Explain(args) => cli::explain(args),
        Command::Status(args) => cli::status(args),
        Command::Doctor(args) => cli::doctor(args),
        Command::Backoff(cli::BackoffCommand::Delays(args)) => cli::backoff_delays(args),
        Command::Backoff(cli::BackoffCommand::Budget(args)) => cli::backoff_budget(args),
        Command::Backoff(cli::BackoffCommand::Simulate(args)) => cli::backoff_simulate(args),
        Command::Backoff(cli::BackoffCommand::Plot(args)) => cli::backoff_plot(args),
        Command::Show(args) => cli::show(args),
        Command::Retry(args) => cli::retry(args),
        Command::Snooze(args) => cli::snooze(args),
        Command::GiveUp(args) => cli::give_up(args),
        Command::Pause(args) => cli::pause(args),
        Command::Resume(args) => cli::resume(args),
        Command::Serve(args) => cli::serve(args),
        Command::Completions(args) => cli::completions(args),
        Command::Man(args) => cli::man(args),
    };
    drop(caller);
    if let Some(telemetry) = telemetry {
        telemetry.finish();
    }
    match result {
        Ok(()) => error::ExitCode::Success.into(),
        Err(e) => {
            cli::report(&e, cli.json());
            e.exit_code().into()
        }
    }
}

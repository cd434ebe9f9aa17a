//! What is done with a record: one trait, one file per kind of handler.
//!
//! A handler returns an `Outcome` for every record it was given, whatever the record
//! did to it (a failure, a crash, a hang are outcomes, not errors). It returns an
//! error only when it cannot run at all, such as a program that cannot be started;
//! then the tick stops and leaves the record unmarked, because nothing was tried.

mod batch;
mod batch_output;
mod batch_process;
mod batch_sent;
mod bounded_lines;
mod child;
mod closure;
mod command;
mod group;
mod http;
mod once;
mod proc_stat;
mod registry;
pub use registry::folder as host_folder;
mod signal;
mod snooze;
mod subreaper;
mod tree;
mod watchdog;

use std::borrow::Cow;
use std::time::Duration;

pub use batch::BatchHandler;
pub use closure::FnHandler;
pub use command::CommandHandler;
pub use group::kill_live_groups;
pub use http::{HttpHandler, is_public, reach};
pub use once::run_once;
pub use snooze::LONGEST_SNOOZE;
pub use snooze::SNOOZE_EXIT;
pub use snooze::{Snooze, SnoozeError};
pub use subreaper::adopt_orphans;

use crate::record::Record;

/// The outcome of an attempt that was no try but a person's `backlog snooze` (an
/// [`Ending::Snoozed`]), as the attempts keep it.
pub const SNOOZED: &str = "snoozed";

/// The outcome of an attempt that was no try but the record given up on (past the last
/// tier, by a person, or after `table.give_up_after` failures: an [`Ending::GivenUp`]).
pub const GIVEN_UP: &str = "given_up";

/// What became of a record: what a handler answers, and the status the tick writes.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Outcome {
    /// Mark it with the success status.
    Success,
    /// Mark it with the error status (it stays pending, to be tried again).
    Error,
    /// Mark it with this status (an exit code mapped in `handler.exit_codes`). It
    /// counts as what the status is: the success status is a success, the error
    /// status an error, any other a failure (docs/handler.md says how each is kept).
    Status(String),
}

/// An outcome and what the handler said on the way: what [`Handler::handle`] returns
/// for a record. `backlog show` and the run log keep the detail and the output.
/// Built with [`Handled::new`] and its `with_…` methods, so that a field added later
/// breaks no handler.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Handled {
    /// The status the record gets.
    pub outcome: Outcome,
    /// A short account: `exit 0`, `exit 3`, `killed by signal 11`, `timed out after 30s`.
    /// Usually a fixed text, which costs no allocation per record.
    pub detail: Cow<'static, str>,
    /// The end of what the handler wrote (stdout, then stderr), bounded.
    pub output: String,
    /// The exit code, or the code of a batch handler's answer; none for a closure, a
    /// signal or a timeout.
    pub code: Option<i64>,
    /// How the work on the record ended.
    pub ending: Ending,
    /// The record's own time, where the handler knows it better than the tick, which
    /// times what it handed over as a whole: a batch's record, from its line in to its
    /// answer out. None: the tick's time is the record's.
    pub took: Option<std::time::Duration>,
    /// When the record may be tried again, where the handler said (a failure only):
    /// no tick takes it before then (see [`Snooze`]).
    pub snooze: Option<Snooze>,
}

/// How a handler's work on a record ended, beyond the status it earned: what the
/// attempts keep and the breaker and the logs tell apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Ending {
    /// The handler answered: an exit code, a batch answer, a closure's return.
    Answered,
    /// It ran past `handler.timeout` and was killed.
    TimedOut,
    /// It died without an answer: killed by this signal (if one), or its batch process
    /// ended before answering.
    Crashed(Option<i32>),
    /// The tick stopped it: its hold on the record lapsed, or a stop's
    /// `handler.stop_grace` ran out.
    Stopped,
    /// Not handed to the handler: a person snoozed it (`backlog snooze`).
    Snoozed,
    /// Not handed to the handler: given up on, past the last tier or by a person.
    GivenUp,
    /// The handler answered that the record's work is not done yet (a poll whose
    /// `handler.done_when` is not met): it keeps its status, to be asked again on
    /// schedule, and counts as neither a success nor a failure.
    NotYet,
}

impl Handled {
    /// An answered outcome with its detail and no output.
    pub fn new(outcome: Outcome, detail: impl Into<Cow<'static, str>>) -> Self {
        Handled {
            outcome,
            detail: detail.into(),
            output: String::new(),
            code: None,
            ending: Ending::Answered,
            took: None,
            snooze: None,
        }
    }

    /// The same, with the code the handler answered.
    pub fn with_code(mut self, code: i64) -> Self {
        self.code = Some(code);
        self
    }

    /// The same, ended otherwise than by an answer.
    pub fn ended(mut self, ending: Ending) -> Self {
        self.ending = ending;
        self
    }

    /// The same, with what the handler said (a message, the tail of its output).
    pub fn with_output(mut self, output: impl Into<String>) -> Self {
        self.output = output.into();
        self
    }

    /// The same, not to be tried again before `snooze` ends (ignored on a success).
    pub fn snoozed(mut self, snooze: Snooze) -> Self {
        self.snooze = Some(snooze);
        self
    }

    /// What the attempts call this ending: `success`, `error`, `mapped` (a status from
    /// `handler.exit_codes`), `not_yet` (a poll not done), `timeout`, `crash`,
    /// `stopped`, or an action that was no try: `snoozed` (a person's `backlog
    /// snooze`), `given_up`.
    pub fn kind(&self) -> &'static str {
        match (self.ending, &self.outcome) {
            (Ending::TimedOut, _) => "timeout",
            (Ending::Crashed(_), _) => "crash",
            (Ending::Stopped, _) => "stopped",
            (Ending::Snoozed, _) => SNOOZED,
            (Ending::GivenUp, _) => GIVEN_UP,
            (Ending::NotYet, _) => "not_yet",
            (Ending::Answered, Outcome::Success) => "success",
            (Ending::Answered, Outcome::Error) => "error",
            (Ending::Answered, Outcome::Status(_)) => "mapped",
        }
    }
}

/// Where a record is in the schedule when it is handed over: the second argument of
/// [`Handler::handle`]. A closure in an [`FnHandler`] does not see it.
///
/// A handler that works long on a record should look at `cancel` now and then and
/// give up (answer [`Outcome::Error`]) once it is set.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct Context<'a> {
    /// The table the record is in, as the schedule file names it.
    pub table: &'a str,
    /// The window of the tick's tier.
    pub window: Duration,
    /// The record's age at the tick's `now`, if its inserted-at value could be read.
    pub age: Option<Duration>,
    /// Set when the tick's hold on its records lapsed (it was paused past its lease):
    /// another tick may have this record now, so a handler still working on it should
    /// stop. A command handler's process group is then stopped as at its timeout; the
    /// batch handler does not look at it (its batch runs to its answers or its
    /// timeout, and their marks are not written, the hold being gone).
    pub cancel: Option<&'a std::sync::atomic::AtomicBool>,
    /// The span of this record's call, for the handler to carry on the trace (W3C
    /// `traceparent`): a command's `TRACEPARENT`, a batch line's `traceparent`, an HTTP
    /// call's header. None when no trace is kept or passed on.
    pub traceparent: Option<crate::trace_context::TraceParent>,
    /// The trace's vendor state (`tracestate`), passed on as it came to the tick.
    pub tracestate: Option<&'a str>,
}

impl<'a> Context<'a> {
    /// The context of a record of `table` in a tick of `window`: its age unknown, no
    /// cancel flag (change those fields after). For a handler's own tests: the tick
    /// builds the real ones.
    pub fn new(table: &'a str, window: Duration) -> Context<'a> {
        Context {
            table,
            window,
            age: None,
            cancel: None,
            traceparent: None,
            tracestate: None,
        }
    }
}

/// A handler could not run at all.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HandlerError {
    /// `handler.command`'s program is not there, or not executable: looked for beside
    /// the schedule file when its name has a `/`, in `PATH` otherwise.
    #[error("handler.command: {0}")]
    NotFound(String),
    /// The program was found but the system would not start it (permissions, a bad
    /// interpreter line, too many processes).
    #[error("handler.command: cannot start {program}: {source}")]
    Spawn {
        /// The program, as resolved.
        program: String,
        /// Why the system refused.
        source: std::io::Error,
    },
    /// A handler in Rust panicked: its record was not answered, and the tick stops.
    #[error("the handler panicked: {0}")]
    Panicked(String),
    /// The handler ran, but could not do anything: every record it was given failed
    /// with exit 126 or 127 (a wrapper whose command is missing or not executable).
    #[error("{0}")]
    CannotRun(String),
    /// A handler cannot be set up: a URL handler's `handler.ca_file` cannot be read (the
    /// message names the key), a program's handler gives no worker for a tick.
    #[error("{0}")]
    Setup(String),
}

/// The handler a schedule file's `[handler]` section describes.
///
/// A batch handler's process starts with its first batch and ends when the handler is
/// dropped (with `concurrency` above 1, each worker's at the end of each tick): its
/// stdin is closed, and it has `handler.stop_grace` to exit on its own before SIGTERM
/// and SIGKILL. The ticks `backlog` runs build one per tick; a caller of
/// [`crate::process_backlog`] that keeps one for several ticks keeps its process too.
pub fn from_config(
    config: &crate::config::HandlerConfig,
    dir: &std::path::Path,
    table: &str,
) -> Result<Box<dyn Handler>, HandlerError> {
    if config.http.is_some() {
        return Ok(Box::new(HttpHandler::new(config, table)?));
    }
    Ok(match config.mode {
        crate::config::HandlerMode::PerRecord => Box::new(CommandHandler::new(config, dir)?),
        crate::config::HandlerMode::Batch => Box::new(BatchHandler::new(config, dir)?),
    })
}

/// How a schedule file's handler runs, in one sentence, as `explain` and `doctor` say
/// it: `./notify.sh, one process per record, 8 at once, at most 20/s, timeout 30s`.
pub fn describe(config: &crate::config::HandlerConfig) -> String {
    let mut parts = match &config.http {
        Some(http) => {
            let mut call = vec![format!(
                "{} {}, one call per record",
                http.method, http.url_text
            )];
            let mut answers = vec![match &http.done_when {
                Some(done) => {
                    let values: Vec<String> = done.values.iter().map(|v| v.to_string()).collect();
                    format!(
                        "2xx with {} in {} success, any other 2xx not yet",
                        done.pointer,
                        values.join(" or ")
                    )
                }
                None => "2xx success".to_string(),
            }];
            answers.extend(http.statuses.iter().map(|(c, s)| format!("{c} {s}")));
            answers.push("any other error".into());
            call.push(answers.join(", "));
            if http.signing_key.is_some() {
                call.push("signed (Standard Webhooks)".into());
            }
            call
        }
        None => vec![
            config.command.join(" "),
            match config.mode {
                crate::config::HandlerMode::PerRecord => "one process per record".to_string(),
                crate::config::HandlerMode::Batch => {
                    let records = crate::plural::count(config.batch_size, "record", "records");
                    format!("batch mode, {records} a batch")
                }
            },
        ],
    };
    parts.push(match (config.concurrency, config.mode) {
        (1, crate::config::HandlerMode::Batch) => "one process".into(),
        (1, _) => "one at a time (concurrency 1)".into(),
        (n, crate::config::HandlerMode::Batch) => format!("{n} processes at once"),
        (n, _) => format!("{n} at once"),
    });
    match (config.rate, &config.rate_key) {
        (Some(rate), Some(key)) => parts.push(format!("at most {rate} starts for each {key}")),
        (Some(rate), None) => parts.push(format!("at most {rate} starts")),
        _ => {}
    }
    if let Some(auto) = &config.auto_rate {
        let each = config
            .rate_key
            .as_ref()
            .map_or(String::new(), |key| format!(" for each {key}"));
        let mut signals: Vec<String> = auto
            .overload_codes
            .iter()
            .map(|c| match config.http {
                Some(_) => format!("HTTP {c}"),
                None => format!("exit {c}"),
            })
            .collect();
        signals.extend(
            auto.target_latency
                .map(|t| format!("calls past {}", crate::duration::compact(t))),
        );
        let slower = match signals.len() {
            0 => String::new(),
            _ => format!(", slower on {}", signals.join(", ")),
        };
        parts.push(format!(
            "starts at a pace adapted to the counterpart{each}, {} to {}{slower}",
            auto.min, auto.max
        ));
    }
    parts.push(format!(
        "timeout {}",
        crate::duration::compact(config.timeout)
    ));
    if let Some(k) = config.stop_after_failures {
        parts.push(format!(
            "a tick stops after {} in a row",
            crate::plural::count(k, "failure", "failures")
        ));
    }
    parts.join(", ")
}

/// Takes records one at a time and says what became of each.
///
/// [`FnHandler`] makes one of a closure; a type of its own implements `handle` and, to
/// run with `concurrency` above 1, `worker`.
pub trait Handler {
    /// Handles one record. An `Err` stops the tick and leaves the record unmarked: it
    /// means the handler could not run at all, not that the record failed (that is
    /// `Ok` with [`Outcome::Error`]).
    fn handle(&mut self, record: &Record, ctx: &Context<'_>) -> Result<Handled, HandlerError>;

    /// How many records the tick hands over at once (1: one at a time).
    fn batch_size(&self) -> usize {
        1
    }

    /// Handles several records, returning one result per record in the same order.
    fn handle_batch(
        &mut self,
        records: &[&Record],
        contexts: &[Context<'_>],
    ) -> Result<Vec<Handled>, HandlerError> {
        records
            .iter()
            .zip(contexts)
            .map(|(r, c)| self.handle(r, c))
            .collect()
    }

    /// The handler's pipelined side, if it has one: the tick then sends the next batch
    /// before it waits for the answers to the one before.
    fn pipelined(&mut self) -> Option<&mut dyn Pipelined> {
        None
    }

    /// Another handler that does the same work beside this one, on a thread of its own,
    /// for a tick with `concurrency` above 1: a command handler's copy, a batch
    /// handler's own process, a closure shared by reference. None: this handler can
    /// only take one record (or batch) at a time.
    fn worker(&self) -> Option<Box<dyn Handler + Send + '_>> {
        None
    }
}

/// A handler that works beside the tick (a batch process): batches are sent without
/// waiting, and their answers received later, oldest batch first.
pub trait Pipelined {
    /// Hands a batch over and returns without waiting for its answers.
    fn send(&mut self, records: &[&Record], contexts: &[Context<'_>]) -> Result<(), HandlerError>;

    /// The answers to the oldest batch sent and not yet received, one per record, in
    /// the batch's order.
    fn receive(&mut self) -> Result<Vec<Handled>, HandlerError>;
}

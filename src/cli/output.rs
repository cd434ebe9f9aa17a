//! Where a command's words go: results on stdout, logs and the error line on stderr,
//! and neither a closed pipe nor a full disk ends a tick. With `--json`, stdout holds
//! one JSON object whatever happens.

use std::io::IsTerminal as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use indicatif::{ProgressBar, ProgressStyle};

use crate::error::Error;

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// Sends logs to stderr: this tool's at `level`, its libraries' (the PostgreSQL
/// client logs every statement at debug) only from warnings up. Each line starts with
/// its time (UTC); colours only on a terminal, and not when `NO_COLOR` is set
/// (no-color.org).
pub fn init_logging(level: tracing::Level, format: LogFormat) {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let _ = LOG_FORMAT.set(format);
    let ours = tracing_subscriber::filter::Targets::new()
        .with_target("backlog", level)
        .with_default(tracing::Level::WARN);
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    let builder = tracing_subscriber::fmt()
        .with_writer(|| LogWriter)
        // Its own complaint about a failed write would go to stderr through
        // `eprintln!`, which panics when stderr is a closed pipe.
        .log_internal_errors(false)
        .with_max_level(level)
        .with_target(false)
        .with_ansi(std::io::stderr().is_terminal() && !no_color);
    match format {
        LogFormat::Text => builder.fmt_fields(TextFields).finish().with(ours).init(),
        // The tick's span (`tick{tier=2 window=7d}`) as `span`; not the list of
        // spans, which holds that one only.
        LogFormat::Json => builder
            .json()
            .with_span_list(false)
            .finish()
            .with(ours)
            .init(),
    }
}

/// Fields a JSON log line carries for a collector to filter on, which a text line
/// already says in its words (`record 203: ERROR (exit 1)`, a tick's summary) or in
/// its span's (`tick{tier=2 window=7d}: …`).
const JSON_ONLY: [&str; 12] = [
    "window",
    "record",
    "tier",
    "outcome",
    "status",
    "selected",
    "succeeded",
    "failed",
    "skipped",
    "deferred",
    "given_up",
    "seconds",
];

/// The fields of a tick's summary as a JSON log line carries them (besides its
/// message), so a collector sums `succeeded` without reading words; the daemon's
/// tick line (`runner/fire.rs`) logs the same names.
pub(crate) const SUMMARY_FIELDS: [&str; 9] = [
    "window",
    "tier",
    "selected",
    "succeeded",
    "failed",
    "skipped",
    "deferred",
    "given_up",
    "seconds",
];

/// The fields of a text log line: its message, then `name=value` for the others but
/// `JSON_ONLY`; a span's (which has no message) all of them, `tick{tier=2 window=7d}`.
struct TextFields;

impl<'w> tracing_subscriber::fmt::FormatFields<'w> for TextFields {
    fn format_fields<R: tracing_subscriber::field::RecordFields>(
        &self,
        mut writer: tracing_subscriber::fmt::format::Writer<'w>,
        fields: R,
    ) -> std::fmt::Result {
        let mut probe = HasMessage(false);
        fields.record(&mut probe);
        let mut visitor = TextVisitor {
            writer: &mut writer,
            result: Ok(()),
            first: true,
            event: probe.0,
        };
        fields.record(&mut visitor);
        visitor.result
    }
}

/// Whether the fields have a message: an event's, not a span's.
struct HasMessage(bool);

impl tracing::field::Visit for HasMessage {
    fn record_debug(&mut self, field: &tracing::field::Field, _: &dyn std::fmt::Debug) {
        self.0 |= field.name() == "message";
    }
}

struct TextVisitor<'a, 'w> {
    writer: &'a mut tracing_subscriber::fmt::format::Writer<'w>,
    result: std::fmt::Result,
    first: bool,
    event: bool,
}

impl tracing::field::Visit for TextVisitor<'_, '_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if self.result.is_err() || (self.event && JSON_ONLY.contains(&field.name())) {
            return;
        }
        let space = if self.first { "" } else { " " };
        self.first = false;
        self.result = match field.name() {
            "message" => write!(self.writer, "{space}{value:?}"),
            name => write!(self.writer, "{space}{name}={value:?}"),
        };
    }
}

/// The log format `init_logging` set up, for the error line: with JSON logs it is a
/// log line too, so every line on stderr parses.
static LOG_FORMAT: std::sync::OnceLock<LogFormat> = std::sync::OnceLock::new();

/// Whether stderr is a file (a crontab line's `>> backlog.log 2>&1`): there the error
/// line needs the time a log line has, or nobody can tell when a tick failed. A
/// terminal shows it as it happens; a pipe's reader (journald, docker) stamps lines
/// itself, and a script reading `backlog: …` keeps the line it knows.
pub(super) fn stderr_is_a_file() -> bool {
    is_a_file(std::io::stderr())
}

/// Whether `stream` writes to a regular file.
fn is_a_file(stream: impl std::os::fd::AsFd) -> bool {
    stream
        .as_fd()
        .try_clone_to_owned()
        .and_then(|fd| std::fs::File::from(fd).metadata())
        .is_ok_and(|m| m.is_file())
}

/// A tick's result lines as stdout should get them: in a file (a crontab line's `>>
/// backlog.log 2>&1`, which the log lines share), each is written as a log line of
/// `format` is (its time and `INFO` first, or a JSON object as `--log-format json`
/// writes them), so every line of that file says when it was written and reads as
/// the others do; elsewhere as they are.
pub(super) fn as_log_lines(text: String, format: LogFormat) -> String {
    logged_if(is_a_file(std::io::stdout()), text, format)
}

/// A tick's summary line as stdout should get it: `as_log_lines`, whose JSON log line
/// (in a file, with `--log-format json`) also carries the summary's `SUMMARY_FIELDS`.
pub(super) fn summary_as_log_line(
    line: String,
    summary: &backlog_core::tick::TickSummary,
    format: LogFormat,
) -> String {
    if format != LogFormat::Json || !is_a_file(std::io::stdout()) {
        return as_log_lines(line, format);
    }
    let value = serde_json::to_value(summary).expect("a summary always serialises");
    let mut fields = serde_json::Map::new();
    fields.insert("message".into(), line.trim_end().into());
    for name in SUMMARY_FIELDS {
        if let Some(v) = value.get(name).filter(|v| !v.is_null()) {
            fields.insert(name.into(), v.clone());
        }
    }
    json_info_line(&log_time(), fields)
}

/// An INFO log line as `--log-format json` writes it, of `fields` (its message among
/// them), at `now`.
fn json_info_line(now: &str, fields: serde_json::Map<String, serde_json::Value>) -> String {
    let entry = serde_json::json!({"timestamp": now, "level": "INFO", "fields": fields});
    format!("{entry}\n")
}

/// A line about a command's result that is not its data (a dry run's summary beside
/// its list of ids) on stderr, as a log line there is in a file.
pub(super) fn eprint_line(line: String, format: LogFormat) {
    use std::io::Write as _;
    let text = logged_if(stderr_is_a_file(), line, format);
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

/// The time now as a text log line starts with (tracing's: UTC, microseconds).
pub(super) fn log_time() -> String {
    chrono::Utc::now()
        .format("%Y-%m-%dT%H:%M:%S%.6fZ")
        .to_string()
}

/// `text`, its lines as log lines of `format` when `logged`.
fn logged_if(logged: bool, text: String, format: LogFormat) -> String {
    if !logged {
        return text;
    }
    let now = log_time();
    text.lines()
        .map(|l| match format {
            LogFormat::Text => format!("{now}  INFO {l}\n"),
            LogFormat::Json => {
                let mut fields = serde_json::Map::new();
                fields.insert("message".into(), l.into());
                json_info_line(&now, fields)
            }
        })
        .collect()
}

/// The spinner `backlog run` draws on a terminal while a tick runs, for the log lines
/// to step around.
static SPINNER: Mutex<Option<ProgressBar>> = Mutex::new(None);

/// `backlog run`'s progress line on stderr: `⠉ 2 records handled (132.2/s) last:
/// SUCCESS`, drawn only when `shown` (indicatif draws it at most 20 times a second). Log lines clear it and have it drawn again after
/// them; it is cleared for good when dropped, on every way out of the tick (an error
/// line must not land on its line either).
pub(super) struct Spinner {
    bar: ProgressBar,
    started: std::time::Instant,
    handled: u64,
}

impl Spinner {
    pub(super) fn new(shown: bool) -> Spinner {
        let started = std::time::Instant::now();
        if !shown {
            return Spinner {
                bar: ProgressBar::hidden(),
                started,
                handled: 0,
            };
        }
        // The words are ours (indicatif's `{per_sec}` prints four decimals, and its
        // `{pos}` knows no singular).
        let bar = ProgressBar::new_spinner()
            .with_style(ProgressStyle::with_template("{spinner} {msg}").expect("a valid template"));
        *SPINNER.lock().unwrap_or_else(|e| e.into_inner()) = Some(bar.clone());
        Spinner {
            bar,
            started,
            handled: 0,
        }
    }

    /// One more record handled, and its status.
    pub(super) fn handled(&mut self, status: &str) {
        self.handled += 1;
        let seconds = self.started.elapsed().as_secs_f64().max(1e-3);
        let records = if self.handled == 1 {
            "record"
        } else {
            "records"
        };
        self.bar.set_message(format!(
            "{} {records} handled ({:.1}/s) last: {status}",
            self.handled,
            self.handled as f64 / seconds
        ));
        self.bar.tick();
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        SPINNER.lock().unwrap_or_else(|e| e.into_inner()).take();
        self.bar.finish_and_clear();
    }
}

/// Set once stderr's reader has gone away: logs stop there, the work goes on.
static STDERR_GONE: AtomicBool = AtomicBool::new(false);

/// Stderr for logs. A write that fails (a closed pipe: `backlog run -v 2>&1 | head
/// -1`; a full disk under a crontab line's log file) is dropped, never an error that
/// could end a tick before its marks and run log are written; after a broken pipe,
/// nothing more is written.
struct LogWriter;

impl std::io::Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let write = || {
            if !STDERR_GONE.load(Ordering::Relaxed)
                && let Err(e) = std::io::stderr().write_all(buf)
                && e.kind() == std::io::ErrorKind::BrokenPipe
            {
                STDERR_GONE.store(true, Ordering::Relaxed);
            }
        };
        // tracing's fmt layer hands over a whole line at once: the spinner is cleared
        // before it and drawn again after, so no line starts on the spinner's.
        let spinner = SPINNER.lock().unwrap_or_else(|e| e.into_inner()).clone();
        match spinner {
            Some(bar) => bar.suspend(write),
            None => write(),
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let _ = std::io::stderr().flush();
        Ok(())
    }
}

/// Writes the line that says why a command failed to stderr, if anyone still reads
/// it: the exit code says it too. With `json`, the error is also a JSON object on
/// stdout, unless the command already printed its result there (a tick that ran and
/// was stopped by its breaker: its summary says so).
///
/// On stderr it is `backlog: …`, one line per problem (a crontab check can find
/// several); in a file, each such line is a log line with its time; with
/// `--log-format json`, one JSON log line with the message and the exit code.
pub fn report(error: &Error, json: bool) {
    use std::io::Write as _;
    // Its line is the check's result, already on stdout.
    if matches!(error, Error::Check(_)) {
        return;
    }
    let exit_code = error.exit_code() as i32;
    if json && !STDOUT_USED.load(Ordering::Relaxed) {
        print_json_error(&error.to_string(), exit_code);
    }
    if STDERR_GONE.load(Ordering::Relaxed) {
        return;
    }
    let message = error.to_string();
    match LOG_FORMAT.get() {
        Some(LogFormat::Json) => tracing::error!(exit_code, "{message}"),
        Some(LogFormat::Text) if stderr_is_a_file() => {
            for line in message.lines() {
                tracing::error!("backlog: {line}");
            }
        }
        _ => {
            let text: String = message
                .lines()
                .map(|line| format!("backlog: {line}\n"))
                .collect();
            let _ = std::io::stderr().lock().write_all(text.as_bytes());
        }
    }
}

/// `{"error": "…", "exit_code": N}` and a newline on stdout.
pub(super) fn print_json_error(message: &str, exit_code: i32) {
    let value = serde_json::json!({"error": message, "exit_code": exit_code});
    let _ = print(&format!("{value}\n"));
}

/// Set once a command printed something on stdout.
static STDOUT_USED: AtomicBool = AtomicBool::new(false);

/// Writes command output to stdout. A reader that went away (`backlog run --dry-run |
/// head`) is not an error, as with any Unix tool.
pub(crate) fn print(text: &str) -> Result<(), Error> {
    use std::io::Write as _;
    STDOUT_USED.store(true, Ordering::Relaxed);
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(Error::Io {
            context: "cannot write to stdout".into(),
            source: e,
        }),
        _ => Ok(()),
    }
}

//! The `[handler]` section: what runs for a record, how many at once and how fast,
//! and when a tick stops calling it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

use super::KeyError;
use super::http::{HttpConfig, OVERLOAD_STATUSES, RawHttp};
use super::ranges::{BREAKER_COOLDOWN, HANDLER_TIMEOUT, MAX_BATCH_SIZE, STOP_GRACE, span};
use crate::rate::Rate;

/// How the handler command runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize, Default)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum HandlerMode {
    /// One process per record: the record on stdin, its outcome the exit code.
    #[default]
    PerRecord,
    /// One long-lived process: records as JSON lines on stdin, one answer line per
    /// record on stdout (docs/handler.md, "Batch mode", has the protocol).
    Batch,
}

/// The `[handler]` section, resolved.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct HandlerConfig {
    /// The program and its arguments, as written (the program is resolved when the
    /// handler is built, so that loading a file never fails on a missing program);
    /// empty where the handler is a URL.
    pub command: Vec<String>,
    /// `handler.url` and the keys of an HTTP call per record, where the handler is
    /// one (`command` is then empty).
    pub http: Option<HttpConfig>,
    /// One process per record, or one long-lived process for many.
    pub mode: HandlerMode,
    /// Records handed to a batch handler at once.
    pub batch_size: usize,
    /// How long one record's handler may run before it is killed and the record gets the
    /// error status (batch mode: from when the tick waits for the batch's answers).
    pub timeout: Duration,
    /// How long a tick that was asked to stop (SIGTERM, SIGINT, a lapse) lets the
    /// handlers it started finish before it ends them, and how long a batch handler
    /// whose input ended gets to exit on its own: a deploy waits at most this, never a
    /// long `timeout`.
    pub stop_grace: Duration,
    /// Records in their handlers at once within one tick (batch mode: processes).
    pub concurrency: usize,
    /// `handler.concurrency_per_key`: the most of them for one counterpart (a
    /// `rate_key` value, or the host of a URL a record gives).
    pub concurrency_per_key: Option<usize>,
    /// Handler starts per unit of time, spaced evenly, for every runner of a table
    /// and tier together; none for as fast as they go (or where `auto_rate` finds it).
    pub rate: Option<Rate>,
    /// `rate = "auto"`: the rate found from the counterpart's answers, within these
    /// bounds, shared by the fleet as `rate` is (see `crate::pace`).
    pub auto_rate: Option<AutoRate>,
    /// The name of one rate that tiers and tables calling the same counterpart share.
    pub rate_group: Option<String>,
    /// A column of the table naming each record's counterpart: every value of it gets
    /// a rate of its own (`handler.rate` each), so that one slow counterpart does not
    /// hold the others' records back.
    pub rate_key: Option<String>,
    /// Failures in a row after which a tick stops handing out records (the breaker).
    pub stop_after_failures: Option<u32>,
    /// How long every runner of a tier stops once its breaker tripped, before one of
    /// them tries a record again.
    pub breaker_cooldown: Duration,
    /// Variables added to the handler's environment, over those it inherits (`PATH` here
    /// is also where the program is looked up).
    pub env: BTreeMap<String, String>,
    /// Exit codes that set a status of their own instead of the error status.
    pub exit_codes: BTreeMap<i32, String>,
}

impl HandlerConfig {
    /// A handler running `command` with what the file's keys default to: one process
    /// per record, one record at a time, a 30 s timeout, no rate and no breaker (a
    /// batch of 100 records, in batch mode). Change its fields to set others.
    pub fn new(command: Vec<String>) -> Self {
        HandlerConfig {
            command,
            http: None,
            mode: HandlerMode::PerRecord,
            batch_size: DEFAULT_BATCH_SIZE,
            timeout: DEFAULT_TIMEOUT,
            stop_grace: DEFAULT_STOP_GRACE,
            concurrency: 1,
            concurrency_per_key: None,
            rate: None,
            auto_rate: None,
            rate_group: None,
            rate_key: None,
            stop_after_failures: None,
            breaker_cooldown: DEFAULT_BREAKER_COOLDOWN,
            env: BTreeMap::new(),
            exit_codes: BTreeMap::new(),
        }
    }
}

/// `rate = "auto"`: its bounds (the pace never falls below `min`, so a counterpart
/// that refuses everything is still asked now and then, nor rises above `max`) and
/// the answers that say the counterpart is overloaded, beyond the ones every adapted
/// pace reads (a `retry_after` answer, exit 75, a timeout).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct AutoRate {
    /// `handler.rate_min`, by default one a minute.
    pub min: Rate,
    /// `handler.rate_max`, by default 500 a second.
    pub max: Rate,
    /// `handler.overload`: exit codes, or a batch handler's answer codes; a status
    /// listed there stands for the codes `handler.exit_codes` maps to it (the code is
    /// what both a process and a batch answer carry, whatever the status becomes).
    pub overload_codes: BTreeSet<i64>,
    /// `handler.target_latency`: a handler that took longer says the counterpart is
    /// overloaded, whatever it answered.
    pub target_latency: Option<Duration>,
}

impl AutoRate {
    /// What `rate = "auto"` has when the file gives no other key: 1/m to 500/s, and
    /// no overload signals beyond the ones every adapted pace reads.
    pub fn new() -> Self {
        AutoRate {
            min: Rate::parse(DEFAULT_RATE_MIN).expect("a rate"),
            max: Rate::parse(DEFAULT_RATE_MAX).expect("a rate"),
            overload_codes: BTreeSet::new(),
            target_latency: None,
        }
    }
}

impl Default for AutoRate {
    fn default() -> Self {
        AutoRate::new()
    }
}

/// `handler.rate_min` when the file gives none.
const DEFAULT_RATE_MIN: &str = "1/m";

/// `handler.rate_max` when the file gives none.
const DEFAULT_RATE_MAX: &str = "500/s";

/// `handler.batch_size` when the file gives none.
const DEFAULT_BATCH_SIZE: usize = 100;

/// `handler.breaker_cooldown` when the file gives none.
const DEFAULT_BREAKER_COOLDOWN: Duration = Duration::from_secs(60);

/// `handler.stop_grace` when the file gives none: what systemd's own stop waits
/// (`DefaultTimeoutStopSec`) less time to write the marks.
pub const DEFAULT_STOP_GRACE: Duration = Duration::from_secs(30);

/// `handler.timeout` when the file gives none.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// The most records a tick has in their handlers at once: each is a thread (and a
/// process for a command handler), and more than this is better served by more runners.
pub const MAX_CONCURRENCY: usize = 1024;

/// The longest name of a `handler.rate_group` (it is a key of `backlog_rates`).
const MAX_RATE_GROUP: usize = 100;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawHandler {
    command: Option<Vec<String>>,
    url: Option<String>,
    method: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    body: Option<String>,
    connect_timeout: Option<String>,
    #[serde(default)]
    statuses: BTreeMap<String, String>,
    ca_file: Option<String>,
    allow_private: Option<bool>,
    follow_redirects: Option<i64>,
    sign: Option<String>,
    secret: Option<String>,
    done_when: Option<super::http::RawDoneWhen>,
    #[serde(default)]
    mode: HandlerMode,
    batch_size: Option<usize>,
    timeout: Option<String>,
    stop_grace: Option<String>,
    concurrency: Option<i64>,
    concurrency_per_key: Option<i64>,
    rate: Option<String>,
    rate_min: Option<String>,
    rate_max: Option<String>,
    overload: Option<Vec<toml::Value>>,
    target_latency: Option<String>,
    rate_group: Option<String>,
    rate_key: Option<String>,
    stop_after_failures: Option<i64>,
    breaker_cooldown: Option<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    #[serde(default)]
    exit_codes: BTreeMap<String, String>,
}

/// Validates `[handler]`; `program`: the program that loads the file brings its own
/// handler (the `backlog` library), so the section need not name one.
pub(super) fn resolve(
    mut raw: RawHandler,
    dir: &Path,
    program: bool,
) -> Result<HandlerConfig, KeyError> {
    let (command, http) = match (raw.command.take(), raw.url.take()) {
        (Some(_), Some(_)) => {
            return Err(
                "handler.url and handler.command both name the handler; keep one: url for an HTTP call per record, command for a program".into(),
            );
        }
        (None, None) if program => {
            if let Some(key) = http_keys(&raw).first() {
                return Err(KeyError::new(format!(
                    "handler.{key} is a key of a URL handler, but the program brings its own handler; leave {key} out"
                )));
            }
            (Vec::new(), None)
        }
        (None, None) => {
            return Err(
                "[handler] names no handler; give url (an HTTP call per record, like url = \"https://hooks.example.com/orders/{id}\") or command (a program, like command = [\"./handler.sh\"])".into(),
            );
        }
        (Some(command), None) => {
            if command.first().is_none_or(|p| p.trim().is_empty()) {
                return Err(
                    "handler.command is empty; give the program and its arguments, like [\"./handler.sh\"]"
                        .into(),
                );
            }
            if let Some(key) = http_keys(&raw).first() {
                return Err(KeyError::new(format!(
                    "handler.{key} is a key of a URL handler, but the handler is a command; leave {key} out, or give handler.url instead of handler.command"
                )));
            }
            (command, None)
        }
        (None, Some(url)) => {
            let refused = [
                (
                    "mode",
                    raw.mode == HandlerMode::Batch,
                    "calls are made one per record",
                ),
                ("env", !raw.env.is_empty(), "no process is started"),
                (
                    "exit_codes",
                    !raw.exit_codes.is_empty(),
                    "answers have status codes; map them with statuses, like statuses = { 410 = \"GONE\" }",
                ),
                (
                    "batch_size",
                    raw.batch_size.is_some(),
                    "calls are made one per record",
                ),
            ];
            if let Some((key, _, why)) = refused.iter().find(|(_, given, _)| *given) {
                return Err(KeyError::new(format!(
                    "handler.{key} is a key of a command handler, but the handler is a URL: {why}; leave {key} out"
                )));
            }
            let raw_http = RawHttp {
                url,
                method: raw.method.take(),
                headers: std::mem::take(&mut raw.headers),
                body: raw.body.take(),
                connect_timeout: raw.connect_timeout.take(),
                statuses: std::mem::take(&mut raw.statuses),
                ca_file: raw.ca_file.take(),
                allow_private: raw.allow_private,
                follow_redirects: raw.follow_redirects,
                sign: raw.sign.take(),
                secret: raw.secret.take(),
                done_when: raw.done_when.take(),
            };
            (Vec::new(), Some(super::http::resolve(raw_http, dir)?))
        }
    };
    let timeout = match &raw.timeout {
        Some(t) => span("handler.timeout", t, HANDLER_TIMEOUT)?,
        None => DEFAULT_TIMEOUT,
    };
    let stop_grace = match &raw.stop_grace {
        Some(g) => span("handler.stop_grace", g, STOP_GRACE)?,
        None => DEFAULT_STOP_GRACE,
    };
    // A call in flight cannot be cut short as a process can be killed: it ends by its
    // timeout, so a stop waits at most the grace only if the timeout is within it.
    if http.is_some() && timeout > stop_grace {
        return Err(KeyError::new(format!(
            "handler.timeout ({}) is longer than handler.stop_grace ({}): a stop waits for the calls in flight, which end by their timeout; give a timeout of at most the grace, or a longer stop_grace",
            crate::duration::compact(timeout),
            crate::duration::compact(stop_grace)
        )));
    }
    let mut exit_codes = BTreeMap::new();
    for (code, status) in &raw.exit_codes {
        let n: i32 = code
            .parse()
            .ok()
            .filter(|n| (1..=255).contains(n))
            .ok_or_else(|| {
                format!(
                    "handler.exit_codes: {code:?} is not an exit code; use numbers from 1 to 255"
                )
            })?;
        exit_codes.insert(n, status.clone());
    }
    let (rate, auto_rate) = rates(&raw, &exit_codes, http.as_ref(), timeout)?;
    if let Some(n) = raw.batch_size.filter(|n| !(1..=MAX_BATCH_SIZE).contains(n)) {
        return Err(KeyError::new(format!(
            "handler.batch_size: {n} is out of range; use 1 to {MAX_BATCH_SIZE} records a batch"
        )));
    }
    let concurrency = match raw.concurrency {
        None => 1,
        Some(n) if (1..=MAX_CONCURRENCY as i64).contains(&n) => n as usize,
        Some(n) => {
            return Err(KeyError::new(format!(
                "handler.concurrency: {n} is out of range; use 1 (one record at a time, the default) to {MAX_CONCURRENCY}"
            )));
        }
    };
    let concurrency_per_key = match raw.concurrency_per_key {
        None => None,
        Some(n) if (1..=concurrency as i64).contains(&n) => {
            let counterpart =
                raw.rate_key.is_some() || http.as_ref().is_some_and(|h| h.host_from_record);
            if !counterpart {
                return Err(KeyError::new(format!(
                    "handler.concurrency_per_key = {n} caps the calls in flight to one counterpart, but nothing says a record's counterpart; name its column with rate_key = \"merchant_id\", or take the URL's host from the record (url = \"{{endpoint}}\")"
                )));
            }
            Some(n as usize)
        }
        Some(n) => {
            return Err(KeyError::new(format!(
                "handler.concurrency_per_key: {n} is out of range; use 1 to handler.concurrency ({concurrency})"
            )));
        }
    };
    let paced = rate.is_some() || auto_rate.is_some();
    if let Some(group) = &raw.rate_group {
        if !paced {
            return Err(KeyError::new(format!(
                "handler.rate_group = {group:?} names a shared rate, but handler.rate is not set; give the rate too, like rate = \"20/s\""
            )));
        }
        if group.trim().is_empty() || group.chars().count() > MAX_RATE_GROUP {
            return Err(KeyError::new(format!(
                "handler.rate_group: {group:?} is not a name; use 1 to {MAX_RATE_GROUP} characters, like \"payments-api\""
            )));
        }
    }
    if let Some(key) = &raw.rate_key {
        if !paced && raw.stop_after_failures.is_none() {
            return Err(KeyError::new(format!(
                "handler.rate_key = {key:?} gives each value of that column a rate and a breaker, but neither handler.rate nor handler.stop_after_failures is set; give one, like rate = \"20/s\" or stop_after_failures = 5"
            )));
        }
        if key.trim().is_empty() {
            return Err(
                "handler.rate_key is empty; name the column that says which counterpart a record is for, like rate_key = \"merchant_id\"".into(),
            );
        }
    }
    let stop_after_failures = match raw.stop_after_failures {
        None => None,
        Some(n) if (1..=i64::from(u32::MAX)).contains(&n) => Some(n as u32),
        Some(n) => {
            return Err(KeyError::new(format!(
                "handler.stop_after_failures: {n} is out of range; use a number of failures in a row from 1 to {}, or leave it out to never stop",
                u32::MAX
            )));
        }
    };
    let breaker_cooldown = match raw.breaker_cooldown {
        Some(c) if stop_after_failures.is_none() => {
            return Err(KeyError::new(format!(
                "handler.breaker_cooldown = {c:?} needs handler.stop_after_failures, the failures in a row that trip the breaker; give it too, like stop_after_failures = 5"
            )));
        }
        Some(c) => span("handler.breaker_cooldown", &c, BREAKER_COOLDOWN)?,
        None => DEFAULT_BREAKER_COOLDOWN,
    };
    Ok(HandlerConfig {
        command,
        http,
        mode: raw.mode,
        batch_size: raw.batch_size.unwrap_or(DEFAULT_BATCH_SIZE),
        timeout,
        stop_grace,
        concurrency,
        concurrency_per_key,
        rate,
        auto_rate,
        rate_group: raw.rate_group,
        rate_key: raw.rate_key,
        stop_after_failures,
        breaker_cooldown,
        env: raw.env,
        exit_codes,
    })
}

/// The keys only a URL handler reads that `raw` gives.
fn http_keys(raw: &RawHandler) -> Vec<&'static str> {
    [
        ("method", raw.method.is_some()),
        ("headers", !raw.headers.is_empty()),
        ("body", raw.body.is_some()),
        ("connect_timeout", raw.connect_timeout.is_some()),
        ("statuses", !raw.statuses.is_empty()),
        ("ca_file", raw.ca_file.is_some()),
        ("allow_private", raw.allow_private.is_some()),
        ("follow_redirects", raw.follow_redirects.is_some()),
        ("sign", raw.sign.is_some()),
        ("secret", raw.secret.is_some()),
        ("done_when", raw.done_when.is_some()),
    ]
    .into_iter()
    .filter_map(|(key, given)| given.then_some(key))
    .collect()
}

/// `handler.rate`: a fixed rate, or `"auto"` and the keys only `"auto"` takes (its
/// bounds `rate_min` and `rate_max`, and its signals `overload` and `target_latency`).
fn rates(
    raw: &RawHandler,
    exit_codes: &BTreeMap<i32, String>,
    http: Option<&HttpConfig>,
    timeout: Duration,
) -> Result<(Option<Rate>, Option<AutoRate>), KeyError> {
    let bound = |key: &str, text: &Option<String>, default: &str| {
        Rate::parse(text.as_deref().unwrap_or(default)).map_err(|e| format!("handler.{key}: {e}"))
    };
    if raw.rate.as_deref().map(str::trim) != Some("auto") {
        for (key, text) in [("rate_min", &raw.rate_min), ("rate_max", &raw.rate_max)] {
            if let Some(text) = text {
                return Err(KeyError::new(format!(
                    "handler.{key} = {text:?} bounds an adaptive rate, but handler.rate is not \"auto\"; set rate = \"auto\", or leave {key} out"
                )));
            }
        }
        let signals = [
            ("overload", raw.overload.is_some()),
            ("target_latency", raw.target_latency.is_some()),
        ];
        if let Some((key, _)) = signals.iter().find(|(_, given)| *given) {
            return Err(KeyError::new(format!(
                "handler.{key} tells an adaptive rate when to slow down, but handler.rate is not \"auto\"; set rate = \"auto\", or leave {key} out"
            )));
        }
        let rate = raw
            .rate
            .as_deref()
            .map(|r| Rate::parse(r).map_err(|e| format!("handler.rate: {e}")))
            .transpose()?;
        return Ok((rate, None));
    }
    let min = bound("rate_min", &raw.rate_min, DEFAULT_RATE_MIN)?;
    let max = bound("rate_max", &raw.rate_max, DEFAULT_RATE_MAX)?;
    if min.per_second() >= max.per_second() {
        return Err(KeyError::new(format!(
            "handler.rate_min = \"{min}\" is not below handler.rate_max = \"{max}\"; the adaptive rate moves between them, so give a smaller rate_min or a larger rate_max"
        )));
    }
    let mut overload_codes = overload(raw, exit_codes, http)?;
    if http.is_some() {
        overload_codes.extend(OVERLOAD_STATUSES.map(i64::from));
    }
    let target_latency = match &raw.target_latency {
        None => None,
        Some(text) => {
            let latency = span("handler.target_latency", text, HANDLER_TIMEOUT)?;
            if latency >= timeout {
                return Err(KeyError::new(format!(
                    "handler.target_latency = {text:?} is not below handler.timeout ({}): a handler that slow is killed, which slows the pace already; give a shorter target_latency",
                    crate::duration::compact(timeout)
                )));
            }
            Some(latency)
        }
    };
    Ok((
        None,
        Some(AutoRate {
            min,
            max,
            overload_codes,
            target_latency,
        }),
    ))
}

/// `handler.overload`: the exit codes (a batch handler's answer codes) that say the
/// counterpart is overloaded, a status standing for the codes mapped to it. A number
/// that no handler can answer, or a status no exit code gives, would never match: it
/// is refused rather than ignored.
fn overload(
    raw: &RawHandler,
    exit_codes: &BTreeMap<i32, String>,
    http: Option<&HttpConfig>,
) -> Result<BTreeSet<i64>, KeyError> {
    let mut codes = BTreeSet::new();
    // A URL handler's codes are its answers', and its statuses come from `statuses`.
    let mapped: BTreeMap<i64, &String> = match http {
        Some(http) => http
            .statuses
            .iter()
            .map(|(c, s)| (i64::from(*c), s))
            .collect(),
        None => exit_codes.iter().map(|(c, s)| (i64::from(*c), s)).collect(),
    };
    for value in raw.overload.iter().flatten() {
        match value {
            toml::Value::Integer(n) if http.is_some() && !(100..=599).contains(n) => {
                return Err(KeyError::new(format!(
                    "handler.overload: {n} is not an HTTP status code; list answer codes from 100 to 599, like overload = [420] (408, 429 and 503 are read already)"
                )));
            }
            toml::Value::Integer(0) => {
                return Err(
                    "handler.overload: 0 is a success, not an overload; list the exit codes that mean the counterpart is overloaded, like overload = [69]".into(),
                );
            }
            toml::Value::Integer(n)
                if http.is_none()
                    && raw.mode == HandlerMode::PerRecord
                    && !(1..=255).contains(n) =>
            {
                return Err(KeyError::new(format!(
                    "handler.overload: {n} is not an exit code; a process exits with 1 to 255 (a batch handler's answers, mode = \"batch\", may give other codes)"
                )));
            }
            toml::Value::Integer(n) => {
                codes.insert(*n);
            }
            toml::Value::String(status) => {
                let before = codes.len();
                codes.extend(
                    mapped
                        .iter()
                        .filter(|(_, s)| **s == status)
                        .map(|(c, _)| *c),
                );
                if codes.len() > before {
                    continue;
                }
                return Err(KeyError::new(format!(
                    "handler.overload: {status:?} is a status no exit code gives; map a code to it in handler.exit_codes, like exit_codes = {{ 69 = {status:?} }}, or list the code itself"
                )));
            }
            other => {
                return Err(KeyError::new(format!(
                    "handler.overload: {other} is neither an exit code nor a status; list numbers and names, like overload = [69, \"THROTTLED\"]"
                )));
            }
        }
    }
    Ok(codes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn handler(keys: &str) -> Result<HandlerConfig, String> {
        let raw: RawHandler =
            toml::from_str(&format!("command = [\"./h\"]\n{keys}")).map_err(|e| e.to_string())?;
        resolve(raw, Path::new("/srv"), false).map_err(|e| e.message)
    }

    fn url_handler(keys: &str) -> Result<HandlerConfig, String> {
        let raw: RawHandler =
            toml::from_str(&format!("url = \"https://h.example/{{id}}\"\n{keys}"))
                .map_err(|e| e.to_string())?;
        resolve(raw, Path::new("/srv"), false).map_err(|e| e.message)
    }

    #[test]
    fn a_url_handlers_overloads_are_answer_codes_with_408_429_and_503_always() {
        let c = url_handler("rate = \"auto\"").unwrap();
        assert_eq!(
            c.auto_rate.unwrap().overload_codes,
            BTreeSet::from([408, 429, 503])
        );
        let c = url_handler(
            "rate = \"auto\"\noverload = [420, \"THROTTLED\"]\nstatuses = { 509 = \"THROTTLED\" }",
        )
        .unwrap();
        assert_eq!(
            c.auto_rate.unwrap().overload_codes,
            BTreeSet::from([408, 420, 429, 503, 509])
        );
        assert_eq!(
            url_handler("rate = \"auto\"\noverload = [75]").unwrap_err(),
            "handler.overload: 75 is not an HTTP status code; list answer codes from 100 to 599, like overload = [420] (408, 429 and 503 are read already)"
        );
        assert!(url_handler("").unwrap().auto_rate.is_none());
    }

    #[test]
    fn a_url_handlers_timeout_is_within_the_stop_grace() {
        assert_eq!(
            url_handler("timeout = \"60s\"").unwrap_err(),
            "handler.timeout (1m) is longer than handler.stop_grace (30s): a stop waits for the calls in flight, which end by their timeout; give a timeout of at most the grace, or a longer stop_grace"
        );
        assert!(url_handler("timeout = \"60s\"\nstop_grace = \"1m\"").is_ok());
        // A process is killed at the grace's end: a command's timeout may be longer.
        assert!(handler("timeout = \"60s\"").is_ok());
    }

    #[test]
    fn overload_takes_codes_and_the_statuses_exit_codes_give() {
        let c = handler(
            "rate = \"auto\"\noverload = [69, \"THROTTLED\"]\ntarget_latency = \"2s\"\nexit_codes = { 70 = \"THROTTLED\" }",
        )
        .unwrap();
        let auto = c.auto_rate.expect("auto");
        assert_eq!(
            auto.overload_codes,
            BTreeSet::from([69, 70]),
            "THROTTLED's code"
        );
        assert_eq!(auto.target_latency, Some(Duration::from_secs(2)));
        let batch = handler("mode = \"batch\"\nrate = \"auto\"\noverload = [429, 503]").unwrap();
        assert_eq!(
            batch.auto_rate.unwrap().overload_codes,
            BTreeSet::from([429, 503])
        );
    }

    #[test]
    fn overload_and_target_latency_name_what_is_wrong() {
        for (keys, message) in [
            (
                "overload = [69]",
                "handler.overload tells an adaptive rate when to slow down, but handler.rate is not \"auto\"; set rate = \"auto\", or leave overload out",
            ),
            (
                "rate = \"20/s\"\ntarget_latency = \"1s\"",
                "handler.target_latency tells an adaptive rate when to slow down, but handler.rate is not \"auto\"; set rate = \"auto\", or leave target_latency out",
            ),
            (
                "rate = \"auto\"\noverload = [0]",
                "handler.overload: 0 is a success, not an overload; list the exit codes that mean the counterpart is overloaded, like overload = [69]",
            ),
            (
                "rate = \"auto\"\noverload = [429]",
                "handler.overload: 429 is not an exit code; a process exits with 1 to 255 (a batch handler's answers, mode = \"batch\", may give other codes)",
            ),
            (
                "rate = \"auto\"\noverload = [\"THROTTLED\"]",
                "handler.overload: \"THROTTLED\" is a status no exit code gives; map a code to it in handler.exit_codes, like exit_codes = { 69 = \"THROTTLED\" }, or list the code itself",
            ),
            (
                "rate = \"auto\"\noverload = [1.5]",
                "handler.overload: 1.5 is neither an exit code nor a status; list numbers and names, like overload = [69, \"THROTTLED\"]",
            ),
            (
                "rate = \"auto\"\ntarget_latency = \"30s\"",
                "handler.target_latency = \"30s\" is not below handler.timeout (30s): a handler that slow is killed, which slows the pace already; give a shorter target_latency",
            ),
            (
                "rate = \"auto\"\ntarget_latency = \"soon\"",
                "handler.target_latency: ",
            ),
        ] {
            let err = handler(keys).unwrap_err();
            assert!(err.starts_with(message), "{keys}: {err}");
        }
    }

    #[test]
    fn auto_takes_its_bounds_or_the_defaults() {
        let c = handler("rate = \"auto\"").unwrap();
        assert_eq!(c.rate, None, "no fixed rate");
        let auto = c.auto_rate.expect("auto");
        assert_eq!(auto.min.per_second(), 1.0 / 60.0);
        assert_eq!(auto.max.per_second(), 500.0);
        let c = handler("rate = \"auto\"\nrate_min = \"2/s\"\nrate_max = \"40/s\"").unwrap();
        let auto = c.auto_rate.expect("auto");
        assert_eq!((auto.min.per_second(), auto.max.per_second()), (2.0, 40.0));
        // A group and a key work with auto as with a fixed rate.
        let c = handler("rate = \"auto\"\nrate_group = \"api\"\nrate_key = \"merchant\"").unwrap();
        assert_eq!(c.rate_group.as_deref(), Some("api"));
        assert_eq!(c.rate_key.as_deref(), Some("merchant"));
        assert!(handler("rate = \"20/s\"").unwrap().auto_rate.is_none());
    }

    #[test]
    fn bad_bounds_name_the_key_and_the_fix() {
        let cases = [
            (
                "rate = \"20/s\"\nrate_max = \"40/s\"",
                "handler.rate_max = \"40/s\" bounds an adaptive rate, but handler.rate is not \"auto\"; set rate = \"auto\", or leave rate_max out",
            ),
            (
                "rate_min = \"1/s\"",
                "handler.rate_min = \"1/s\" bounds an adaptive rate, but handler.rate is not \"auto\"; set rate = \"auto\", or leave rate_min out",
            ),
            (
                "rate = \"auto\"\nrate_min = \"40/s\"\nrate_max = \"40/s\"",
                "handler.rate_min = \"40/s\" is not below handler.rate_max = \"40/s\"; the adaptive rate moves between them, so give a smaller rate_min or a larger rate_max",
            ),
            (
                "rate = \"auto\"\nrate_max = \"fast\"",
                "handler.rate_max: \"fast\" is not a rate; write starts per second, minute or hour, like \"20/s\", \"100/m\" or \"3/h\"",
            ),
            (
                "rate = \"auto\"\nrate_min = \"0/s\"",
                "handler.rate_min: \"0/s\": \"0\" is not a positive number; write starts per second, minute or hour, like \"20/s\", \"100/m\" or \"3/h\"",
            ),
        ];
        for (keys, message) in cases {
            assert_eq!(handler(keys).unwrap_err(), message, "{keys}");
        }
    }
}

//! Delivering an alert or a ping: a command with the event on its stdin, a webhook
//! POST, a healthchecks-style GET. Each try has a timeout; a failure that may pass in a
//! second (a refused connection, an HTTP 5xx, 408 or 429, a command that exited
//! non-zero) is tried again after a short backoff, up to [`TRIES`] tries, so a blip
//! costs no alert while a dead channel costs a tick seconds, not minutes: a try that
//! timed out, or an answer that will not change (HTTP 404), is not tried again within
//! the tick. A delivery that failed is a WARN line that names where it went (never a
//! password or a query: [`AlertUrl`]'s shown form), never an error of the tick.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use backlog_core::backoff::Exponential;
use backlog_core::config::AlertUrl;

/// How long a webhook POST or a ping may take, connection included.
pub const HTTP_TIMEOUT: Duration = Duration::from_secs(10);
/// Tries of one delivery within a tick, the first included.
pub const TRIES: u32 = 3;

/// The waits between tries: 1 s, then 2 s (the project's exponential backoff, capped
/// so that three refusals cost a tick 3 s in all).
fn backoff() -> Exponential {
    Exponential::classic(1.0, 2.0, 2.0)
}

/// Why a try failed, and whether another try within the tick may do better.
#[derive(Debug)]
struct Failure {
    why: String,
    passing: bool,
}

impl Failure {
    fn passing(why: String) -> Failure {
        Failure { why, passing: true }
    }

    fn lasting(why: String) -> Failure {
        Failure {
            why,
            passing: false,
        }
    }
}

/// Tries `once` up to [`TRIES`] times while its failure may pass, waiting the
/// backoff's delays between tries; the last failure, with how many tries it took.
fn with_retries(mut once: impl FnMut() -> Result<(), Failure>) -> Result<(), String> {
    let backoff = backoff();
    let mut tries = 0;
    loop {
        tries += 1;
        match once() {
            Ok(()) => return Ok(()),
            Err(f) if !f.passing || tries >= TRIES => {
                return Err(match tries {
                    1 => f.why,
                    n => format!("{} ({n} tries)", f.why),
                });
            }
            Err(_) => std::thread::sleep(Duration::from_secs_f64(backoff.base(tries))),
        }
    }
}

/// Runs `command` (relative paths against `dir`, the schedule file's folder) with
/// `json` on its stdin, in a process group of its own that is ended after `timeout`;
/// whether it was delivered (a WARN line says why not).
pub fn command(command: &[String], dir: &Path, json: &str, timeout: Duration) -> bool {
    let shown = &command[0];
    match with_retries(|| run_command(command, dir, json, timeout)) {
        Ok(()) => true,
        Err(why) => {
            tracing::warn!("alert command {shown}: {why}");
            false
        }
    }
}

fn run_command(
    command: &[String],
    dir: &Path,
    json: &str,
    timeout: Duration,
) -> Result<(), Failure> {
    let program = Path::new(&command[0]);
    // As the handler's: `./notify.sh` is beside the schedule file, wherever cron runs.
    let program = if program.components().count() > 1 && program.is_relative() {
        backlog_core::config::beside(dir, program)
    } else {
        program.to_path_buf()
    };
    let mut cmd = Command::new(&program);
    cmd.args(&command[1..]).current_dir(dir);
    let input = format!("{json}\n");
    let finished = backlog_core::handler::run_once(&mut cmd, input.as_bytes(), timeout)
        .map_err(|e| Failure::lasting(format!("cannot start it: {e}")))?;
    // What it wrote, on the same line: the reason it gives, for the log.
    let said = match finished.output.lines().last() {
        Some(last) => format!(": {last}"),
        None => String::new(),
    };
    if finished.timed_out {
        return Err(Failure::lasting(format!(
            "its process group was ended after {} (alert.command_timeout){said}",
            backlog_core::duration::compact(timeout)
        )));
    }
    match finished.status {
        s if s.success() => Ok(()),
        s => Err(Failure::passing(format!("it ended with {s}{said}"))),
    }
}

/// POSTs `json` to `url`; whether it was delivered (a WARN line says why not).
pub fn webhook(url: &AlertUrl, json: &str) -> bool {
    match with_retries(|| http(url, Some(json))) {
        Ok(()) => true,
        Err(why) => {
            tracing::warn!("alert webhook {url}: {why}");
            false
        }
    }
}

/// GETs `url`: a ping, tried again as an alert is where `retry` says.
pub fn ping(url: &AlertUrl, retry: bool) {
    let sent = match retry {
        true => with_retries(|| http(url, None)),
        false => http(url, None).map_err(|f| f.why),
    };
    if let Err(why) = sent {
        tracing::warn!("ping {url}: {why}");
    }
}

/// A request, with `body` a POST of JSON, else a GET; a status of 400 and over is a
/// failure. The error never holds the whole URL.
fn http(url: &AlertUrl, body: Option<&str>) -> Result<(), Failure> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(HTTP_TIMEOUT))
        .http_status_as_error(true)
        .build()
        .into();
    let sent = match body {
        Some(body) => agent
            .post(url.as_str())
            .header("Content-Type", "application/json")
            .send(body),
        None => agent.get(url.as_str()).call(),
    };
    sent.map(drop).map_err(|e| match e {
        ureq::Error::StatusCode(code) => {
            let why = format!("the server answered HTTP {code}");
            match code {
                408 | 429 | 500.. => Failure::passing(why),
                _ => Failure::lasting(why),
            }
        }
        ureq::Error::Timeout(_) => Failure::lasting(format!(
            "no answer within {}",
            backlog_core::duration::compact(HTTP_TIMEOUT)
        )),
        e => Failure::passing(e.to_string().replace(url.as_str(), &url.to_string())),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_passing_failure_is_tried_again_a_lasting_one_not() {
        let mut tries = 0;
        let ok = with_retries(|| {
            tries += 1;
            match tries {
                1 => Err(Failure::passing("refused".into())),
                _ => Ok(()),
            }
        });
        assert_eq!((ok, tries), (Ok(()), 2));
        let mut tries = 0;
        let lasting = with_retries(|| {
            tries += 1;
            Err(Failure::lasting("HTTP 404".into()))
        });
        assert_eq!((lasting, tries), (Err("HTTP 404".to_string()), 1));
    }

    #[test]
    fn the_waits_between_tries_are_short() {
        let b = backoff();
        let waits: Vec<f64> = (1..TRIES).map(|n| b.base(n)).collect();
        assert_eq!(waits, [1.0, 2.0]);
    }
}

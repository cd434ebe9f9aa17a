//! Delivering an alert or a ping: a command with the event on its stdin, a webhook
//! POST, a healthchecks-style GET. Each has a timeout, and a failure is a WARN line
//! that names where it went (never a password or a query: [`AlertUrl`]'s shown form),
//! never an error of the tick.

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::config::AlertUrl;

/// How long an alert command may run before it is killed.
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a webhook POST or a ping may take, connection included.
pub const HTTP_TIMEOUT: Duration = Duration::from_secs(10);

/// Runs `command` (relative paths against `dir`, the schedule file's folder) with
/// `json` on its stdin; kills it after [`COMMAND_TIMEOUT`].
pub fn command(command: &[String], dir: &Path, json: &str) {
    let shown = &command[0];
    if let Err(why) = run_command(command, dir, json) {
        tracing::warn!("alert command {shown}: {why}");
    }
}

fn run_command(command: &[String], dir: &Path, json: &str) -> Result<(), String> {
    let program = Path::new(&command[0]);
    // As the handler's: `./notify.sh` is beside the schedule file, wherever cron runs.
    let program = if program.components().count() > 1 && program.is_relative() {
        dir.join(program)
    } else {
        program.to_path_buf()
    };
    let mut child = Command::new(&program)
        .args(&command[1..])
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start it: {e}"))?;
    if let Some(mut stdin) = child.stdin.take() {
        // A command that reads nothing closes its stdin: not its failure.
        let _ = stdin
            .write_all(json.as_bytes())
            .and_then(|()| stdin.write_all(b"\n"));
    }
    let started = Instant::now();
    loop {
        match child.try_wait().map_err(|e| e.to_string())? {
            Some(status) if status.success() => return Ok(()),
            Some(status) => return Err(format!("it ended with {status}")),
            None if started.elapsed() > COMMAND_TIMEOUT => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "killed after {}",
                    crate::duration::compact(COMMAND_TIMEOUT)
                ));
            }
            None => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// POSTs `json` to `url`.
pub fn webhook(url: &AlertUrl, json: &str) {
    if let Err(why) = http(url, Some(json)) {
        tracing::warn!("alert webhook {url}: {why}");
    }
}

/// GETs `url`: a ping.
pub fn ping(url: &AlertUrl) {
    if let Err(why) = http(url, None) {
        tracing::warn!("ping {url}: {why}");
    }
}

/// A request, with `body` a POST of JSON, else a GET; a status of 400 and over is a
/// failure. The error never holds the whole URL.
#[cfg(feature = "cli")]
fn http(url: &AlertUrl, body: Option<&str>) -> Result<(), String> {
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
        ureq::Error::StatusCode(code) => format!("the server answered HTTP {code}"),
        ureq::Error::Timeout(_) => format!(
            "no answer within {}",
            crate::duration::compact(HTTP_TIMEOUT)
        ),
        e => e.to_string().replace(url.as_str(), &url.to_string()),
    })
}

/// A library built without the `cli` feature has no HTTP client.
#[cfg(not(feature = "cli"))]
fn http(_url: &AlertUrl, _body: Option<&str>) -> Result<(), String> {
    Err("this build of backlog has no HTTP client (the cargo feature cli)".into())
}

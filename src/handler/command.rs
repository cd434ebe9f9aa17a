//! A command as the handler: one process per record.
//!
//! The record reaches the process as JSON on stdin and as environment variables, never
//! on its command line, so no record data is ever parsed by a shell. Each process runs
//! in a process group of its own: at the timeout the whole group gets SIGTERM, then
//! SIGKILL after a grace, so a handler that forked (`sh -c 'curl …'`) cannot leave a
//! grandchild running; after a normal exit, whatever is left in the group is killed too,
//! as systemd does with a unit's control group.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use super::{Context, Handled, Handler, HandlerError, Outcome};
use crate::config::HandlerConfig;
use crate::duration;
use crate::record::Record;

/// How much of a handler's output is kept, from the end.
const OUTPUT_TAIL: usize = 4096;
/// How long a handler has between SIGTERM and SIGKILL.
const KILL_GRACE: Duration = Duration::from_secs(2);
/// How long the output is waited for once the handler exited.
const OUTPUT_GRACE: Duration = Duration::from_secs(1);

/// Runs a program per record.
#[derive(Debug, Clone)]
pub struct CommandHandler {
    program: PathBuf,
    args: Vec<String>,
    dir: PathBuf,
    timeout: Duration,
    env: BTreeMap<String, String>,
    exit_codes: BTreeMap<i32, String>,
}

impl CommandHandler {
    /// Builds the handler of a schedule file whose folder is `dir`. The program must be
    /// found now: a program with a `/` is taken relative to `dir`, any other is looked up
    /// in `PATH`. The handler runs in `dir`.
    pub fn new(config: &HandlerConfig, dir: &Path) -> Result<Self, HandlerError> {
        let (program, args) = config
            .command
            .split_first()
            .expect("config checked the command is not empty");
        let program = resolve(program, dir, std::env::var_os("PATH"))?;
        Ok(CommandHandler {
            program,
            args: args.to_vec(),
            dir: dir.to_path_buf(),
            timeout: config.timeout,
            env: config.env.clone(),
            exit_codes: config.exit_codes.clone(),
        })
    }

    fn outcome(&self, status: ExitStatus) -> Handled {
        match (status.code(), status.signal()) {
            (Some(0), _) => Handled::new(Outcome::Success, "exit 0"),
            (Some(code), _) => match self.exit_codes.get(&code) {
                Some(s) => Handled::new(Outcome::Status(s.clone()), format!("exit {code}")),
                None => Handled::new(Outcome::Error, format!("exit {code}")),
            },
            (None, Some(sig)) => Handled::new(Outcome::Error, format!("killed by signal {sig}")),
            (None, None) => Handled::new(Outcome::Error, "ended without a status"),
        }
    }
}

fn executable(path: &Path) -> bool {
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

pub(super) fn resolve(
    program: &str,
    dir: &Path,
    path_var: Option<OsString>,
) -> Result<PathBuf, HandlerError> {
    if program.contains('/') {
        let path = dir.join(program);
        return match path.metadata() {
            Err(_) => Err(HandlerError::NotFound(format!(
                "{program:?} not found (looked for {})",
                path.display()
            ))),
            Ok(_) if !executable(&path) => Err(HandlerError::NotFound(format!(
                "{} is not an executable file (chmod +x it, or run it through an interpreter: [\"sh\", {program:?}])",
                path.display()
            ))),
            Ok(_) => Ok(path),
        };
    }
    let found = path_var
        .iter()
        .flat_map(std::env::split_paths)
        .map(|d| d.join(program))
        .find(|p| executable(p));
    found.ok_or_else(|| {
        HandlerError::NotFound(format!(
            "{program:?} not found in PATH (cron's PATH is /usr/bin:/bin; give an absolute path, or ./{program} for a file beside the schedule file)"
        ))
    })
}

/// Keeps the last `OUTPUT_TAIL` bytes of a stream, reading it to the end so the
/// writer never blocks on a full pipe.
fn read_tail(mut r: impl Read) -> (Vec<u8>, usize) {
    let mut kept = Vec::new();
    let mut total = 0;
    let mut buf = [0u8; 8192];
    loop {
        match r.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                total += n;
                kept.extend_from_slice(&buf[..n]);
                if kept.len() > 2 * OUTPUT_TAIL {
                    kept.drain(..kept.len() - OUTPUT_TAIL);
                }
            }
        }
    }
    if kept.len() > OUTPUT_TAIL {
        kept.drain(..kept.len() - OUTPUT_TAIL);
    }
    (kept, total)
}

/// Runs the command in a process group of its own (so a timeout can kill what it
/// forked) that dies with the tick.
pub(super) fn own_group_dying_with_us(cmd: &mut Command) {
    cmd.process_group(0);
    let tick_pid = std::process::id();
    // SAFETY: between fork and exec only async-signal-safe calls (prctl, getppid).
    // A tick killed with SIGKILL takes its handler with it, so the handler cannot still
    // be running when the claim expires and another tick takes the record.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::getppid() as u32 != tick_pid {
                return Err(std::io::Error::other(
                    "the tick ended before its handler started",
                ));
            }
            Ok(())
        });
    }
}

pub(super) fn signal_group(pgid: u32, signal: libc::c_int) {
    // SAFETY: kill(2) with a negative pid signals a process group; it has no memory
    // effects, and an ESRCH (the group is gone) is the expected, harmless answer.
    unsafe {
        libc::kill(-(pgid as libc::pid_t), signal);
    }
}

impl Handler for CommandHandler {
    fn handle(&mut self, record: &Record, ctx: &Context<'_>) -> Result<Handled, HandlerError> {
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.args)
            .current_dir(&self.dir)
            .envs(&self.env)
            .env("BACKLOG_RECORD_ID", record.id.to_string())
            .env("BACKLOG_TABLE", ctx.table)
            .env("BACKLOG_TIER_WINDOW", duration::compact(ctx.window))
            .env(
                "BACKLOG_TIER_WINDOW_SECONDS",
                ctx.window.as_secs().to_string(),
            )
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        own_group_dying_with_us(&mut cmd);
        match ctx.age {
            Some(age) => cmd.env("BACKLOG_RECORD_AGE_SECONDS", age.as_secs().to_string()),
            None => cmd.env_remove("BACKLOG_RECORD_AGE_SECONDS"),
        };
        let mut child = cmd.spawn().map_err(|source| HandlerError::Spawn {
            program: self.program.display().to_string(),
            source,
        })?;
        let pgid = child.id();

        let json = record.to_json();
        let mut stdin = child.stdin.take().expect("stdin is piped");
        // A handler that does not read its stdin gets EPIPE on our side: not an error.
        thread::spawn(move || {
            let _ = stdin.write_all(json.as_bytes());
        });
        let (out_tx, out_rx) = mpsc::channel();
        for (n, stream) in [
            (
                0,
                child
                    .stdout
                    .take()
                    .map(|s| Box::new(s) as Box<dyn Read + Send>),
            ),
            (
                1,
                child
                    .stderr
                    .take()
                    .map(|s| Box::new(s) as Box<dyn Read + Send>),
            ),
        ] {
            let tx = out_tx.clone();
            let stream = stream.expect("output is piped");
            thread::spawn(move || {
                let _ = tx.send((n, read_tail(stream)));
            });
        }
        drop(out_tx);
        let (done_tx, done_rx) = mpsc::channel();
        thread::spawn(move || {
            let _ = done_tx.send(child.wait());
        });

        let mut handled = match done_rx.recv_timeout(self.timeout) {
            Ok(status) => self.outcome(status.map_err(|source| HandlerError::Spawn {
                program: self.program.display().to_string(),
                source,
            })?),
            Err(_) => {
                signal_group(pgid, libc::SIGTERM);
                if done_rx.recv_timeout(KILL_GRACE).is_err() {
                    signal_group(pgid, libc::SIGKILL);
                    let _ = done_rx.recv();
                }
                Handled::new(
                    Outcome::Error,
                    format!(
                        "timed out after {}, killed",
                        duration::compact(self.timeout)
                    ),
                )
            }
        };
        // Whatever the handler left behind in its group goes with it.
        signal_group(pgid, libc::SIGKILL);

        let mut streams: [Option<(Vec<u8>, usize)>; 2] = [None, None];
        let deadline = std::time::Instant::now() + OUTPUT_GRACE;
        while streams.iter().any(Option::is_none) {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match out_rx.recv_timeout(left) {
                Ok((n, tail)) => streams[n] = Some(tail),
                Err(_) => break,
            }
        }
        let mut output = String::new();
        for (name, stream) in ["stdout", "stderr"].iter().zip(streams) {
            match stream {
                Some((bytes, _)) if bytes.is_empty() => {}
                Some((bytes, total)) => {
                    let cut = if total > bytes.len() {
                        format!(" (last {} of {total} bytes)", bytes.len())
                    } else {
                        String::new()
                    };
                    output.push_str(&format!(
                        "[{name}{cut}] {}",
                        String::from_utf8_lossy(&bytes).trim_end()
                    ));
                    output.push('\n');
                }
                None => output.push_str(&format!(
                    "[{name}] still open after the handler exited; not read\n"
                )),
            }
        }
        handled.output = output.trim_end().to_string();
        Ok(handled)
    }

    fn worker(&self) -> Option<Box<dyn Handler + Send + '_>> {
        Some(Box::new(self.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_program_with_a_slash_is_found_beside_the_schedule_file() {
        let e = resolve("./nope.sh", Path::new("/srv/app"), None).unwrap_err();
        assert_eq!(
            e.to_string(),
            "handler.command: \"./nope.sh\" not found (looked for /srv/app/./nope.sh)"
        );
    }

    #[test]
    fn a_bare_program_is_looked_up_in_path() {
        assert_eq!(
            resolve("sh", Path::new("/"), Some("/nonexistent:/bin".into())).unwrap(),
            PathBuf::from("/bin/sh")
        );
        let e = resolve("no-such-handler", Path::new("/"), Some("/bin".into())).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("handler.command: \"no-such-handler\" not found in PATH"),
            "{e}"
        );
    }

    #[test]
    fn the_tail_of_long_output_is_kept() {
        let data = vec![b'x'; 100_000];
        let (kept, total) = read_tail(&data[..]);
        assert_eq!((kept.len(), total), (OUTPUT_TAIL, 100_000));
    }
}

//! A command as the handler: one process per record.
//!
//! The record reaches the process as JSON on stdin and as environment variables, never
//! on its command line, so no record data is ever parsed by a shell. Each process runs
//! in a process group of its own: at the timeout the whole group gets SIGTERM, then
//! SIGKILL after a grace, so a handler that forked (`sh -c 'curl …'`) cannot leave a
//! grandchild running; after a normal exit, whatever is left in the group is killed too,
//! as systemd does with a unit's control group. The process's life, from its spawn to
//! its end, is `child`'s; what outlives it (orphans, a killed tick) is `tree`'s.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::time::Duration;

use super::tree::Tree;
use super::{Context, Ending, Handled, Handler, HandlerError, Outcome, SNOOZE_EXIT, Snooze, child};
use crate::config::HandlerConfig;
use crate::duration;
use crate::record::Record;

/// Runs a program per record.
#[derive(Debug, Clone)]
pub struct CommandHandler {
    program: PathBuf,
    args: Vec<String>,
    dir: PathBuf,
    timeout: Duration,
    env: BTreeMap<String, String>,
    exit_codes: BTreeMap<i32, String>,
    /// The process tree's set-up, held while any clone lives (`tree`).
    _tree: Tree,
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
        // The handler's PATH: its own from `handler.env`, else the tool's.
        let path_var = config
            .env
            .get("PATH")
            .map(OsString::from)
            .or_else(|| std::env::var_os("PATH"));
        let program = resolve(program, dir, path_var)?;
        Ok(CommandHandler {
            program,
            args: args.to_vec(),
            dir: dir.to_path_buf(),
            timeout: config.timeout,
            env: config.env.clone(),
            exit_codes: config.exit_codes.clone(),
            _tree: Tree::new(),
        })
    }

    /// What an exit says; `stdout` is read for a snooze (`SNOOZE_EXIT` and a
    /// `retry-after:` line), and a snooze's exit code may still map to a status.
    fn outcome(&self, status: ExitStatus, stdout: &str) -> Handled {
        match (status.code(), status.signal()) {
            (Some(0), _) => Handled::new(Outcome::Success, "exit 0").with_code(0),
            (Some(code), _) => {
                // Exit 75 with a `retry-after:` line: a snooze, or why it is none.
                let read = (code == SNOOZE_EXIT)
                    .then(|| Snooze::of_stdout(stdout))
                    .flatten();
                let detail = match &read {
                    Some(Ok(snooze)) => format!("exit {code}, {}", snooze.describe()),
                    Some(Err(why)) => format!("exit {code}, retry-after ignored: {why}"),
                    None => format!("exit {code}"),
                };
                let handled = match self.exit_codes.get(&code) {
                    Some(s) => Handled::new(Outcome::Status(s.clone()), detail),
                    None => Handled::new(Outcome::Error, detail),
                }
                .with_code(code.into());
                match read {
                    Some(Ok(snooze)) => handled.snoozed(snooze),
                    _ => handled,
                }
            }
            (None, Some(sig)) => Handled::new(Outcome::Error, format!("killed by signal {sig}"))
                .ended(Ending::Crashed(Some(sig))),
            (None, None) => {
                Handled::new(Outcome::Error, "ended without a status").ended(Ending::Crashed(None))
            }
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
        let path = crate::config::beside(dir, program);
        return match path.metadata() {
            Err(_) => Err(HandlerError::NotFound(format!(
                "{program:?} not found (looked for {})",
                path.display()
            ))),
            Ok(_) if !executable(&path) => Err(HandlerError::NotFound(format!(
                "{} is not an executable file (chmod +x it, or run it through an interpreter: [\"sh\", {program:?}])",
                path.display()
            ))),
            Ok(_) => runnable(path, path_var),
        };
    }
    let found = path_var
        .iter()
        .flat_map(std::env::split_paths)
        .map(|d| d.join(program))
        .find(|p| executable(p));
    if let Some(found) = found {
        return runnable(found, path_var);
    }
    Err(HandlerError::NotFound(format!(
        "{program:?} not found in PATH (cron's PATH is /usr/bin:/bin; give an absolute path, or ./{program} for a file beside the schedule file)"
    )))
}

/// Checks that the kernel can start `path`: a binary, or a script whose `#!` line names
/// an interpreter that is there. A script with no `#!` line, or one naming a missing
/// interpreter, would fail every record ("No such file or directory" on the script
/// itself, for the second): better said once, before the tick takes anything.
fn runnable(path: PathBuf, path_var: Option<OsString>) -> Result<PathBuf, HandlerError> {
    let mut head = [0u8; 256];
    let n = match std::fs::File::open(&path).and_then(|mut f| f.read(&mut head)) {
        Ok(n) => n,
        // Unreadable but executable: the kernel may still run it; let it try.
        Err(_) => return Ok(path),
    };
    let head = &head[..n];
    if head.starts_with(b"\x7fELF") {
        return Ok(path);
    }
    let Some(line) = head.strip_prefix(b"#!") else {
        return Err(HandlerError::NotFound(format!(
            "{} has no #! line and is not a program, so it cannot be started: add one, like #!/bin/sh, as its first line",
            path.display()
        )));
    };
    let line = String::from_utf8_lossy(line.split(|b| *b == b'\n').next().unwrap_or_default())
        .trim()
        .to_string();
    let mut words = line.split_whitespace();
    let interpreter = words.next().unwrap_or_default();
    let missing = |what: &str| {
        HandlerError::NotFound(format!(
            "{} starts with \"#!{line}\", and {what} is not there: fix its #! line, or install the interpreter",
            path.display()
        ))
    };
    if !executable(Path::new(interpreter)) {
        return Err(missing(interpreter));
    }
    // `#!/usr/bin/env python3`: env looks the program up in PATH when the script runs.
    if interpreter.ends_with("/env")
        && let Some(program) = words.find(|w| !w.starts_with('-') && !w.contains('='))
    {
        let in_path = path_var
            .iter()
            .flat_map(std::env::split_paths)
            .any(|d| executable(&d.join(program)));
        if !in_path && !program.contains('/') {
            return Err(missing(&format!("{program} (looked up in PATH)")));
        }
    }
    Ok(path)
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
            );
        match ctx.age {
            Some(age) => cmd.env("BACKLOG_RECORD_AGE_SECONDS", age.as_secs().to_string()),
            None => cmd.env_remove("BACKLOG_RECORD_AGE_SECONDS"),
        };
        // The record's span, the parent of the handler's own (none: the variables the
        // tool was started with pass through, a caller's trace or none).
        if let Some(parent) = ctx.traceparent {
            cmd.env("TRACEPARENT", parent.to_string());
            match ctx.tracestate {
                Some(state) => cmd.env("TRACESTATE", state),
                None => cmd.env_remove("TRACESTATE"),
            };
        }
        let json = record.to_json();
        let ended =
            child::run(&mut cmd, json.as_bytes(), self.timeout, ctx.cancel).map_err(|source| {
                HandlerError::Spawn {
                    program: self.program.display().to_string(),
                    source,
                }
            })?;
        let mut handled = if ended.cancelled {
            Handled::new(
                Outcome::Error,
                "stopped by its tick before it finished (the tick's hold lapsed, or it was asked to stop and handler.stop_grace ran out); a later tick tries the record again",
            )
            .ended(Ending::Stopped)
        } else if ended.timed_out {
            Handled::new(
                Outcome::Error,
                format!(
                    "timed out after {}, killed",
                    duration::compact(self.timeout)
                ),
            )
            .ended(Ending::TimedOut)
        } else {
            self.outcome(ended.status, &ended.stdout)
        };
        handled.output = ended.output;
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
            "handler.command: \"./nope.sh\" not found (looked for /srv/app/nope.sh)"
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
    fn an_env_line_with_settings_looks_up_the_program_it_runs() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("h.sh");
        std::fs::write(&script, "#!/usr/bin/env LC_ALL=C sh\nexit 0\n").unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert!(runnable(script, Some("/bin:/usr/bin".into())).is_ok());
    }
}

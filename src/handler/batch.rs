//! A command as the handler, in batch mode: one long-lived process takes records as
//! JSON lines on stdin and answers one line per record on stdout, in any order.
//!
//! Protocol (also in the README). In, one line per record:
//! `{"id": 42, "window": "7d", "age_seconds": 3600, "record": {…columns…}}`.
//! Out, one line per record: `{"id": 42, "code": 0}`, optionally with `"message"`;
//! code 0 is success, a code in `handler.exit_codes` sets that status, any other is an
//! error. A record with no answer within the timeout is an error and the process is
//! restarted (it may be stuck); if the process dies, its unanswered records are errors
//! and the next batch starts a new one; an answer line that cannot be read is an
//! error naming the line.

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use super::command::{own_group_dying_with_us, resolve, signal_group};
use super::{Context, Handled, Handler, HandlerError, Outcome};
use crate::config::HandlerConfig;
use crate::duration;
use crate::record::Record;

/// One record as the batch process reads it (see the protocol above).
#[derive(serde::Serialize)]
struct Line<'a> {
    id: &'a crate::record::Scalar,
    window: &'a str,
    age_seconds: Option<u64>,
    record: &'a crate::record::Columns,
}

/// A running batch process.
struct Running {
    child: Child,
    stdin: ChildStdin,
    /// Answer lines, as many at a time as had arrived together; `None` once stdout
    /// closed (the process ended).
    lines: mpsc::Receiver<Option<Vec<String>>>,
}

pub struct BatchHandler {
    program: PathBuf,
    args: Vec<String>,
    dir: PathBuf,
    env: BTreeMap<String, String>,
    timeout: Duration,
    exit_codes: BTreeMap<i32, String>,
    batch_size: usize,
    running: Option<Running>,
}

impl BatchHandler {
    pub fn new(config: &HandlerConfig, dir: &Path) -> Result<Self, HandlerError> {
        let (program, args) = config
            .command
            .split_first()
            .expect("config checked the command is not empty");
        Ok(BatchHandler {
            program: resolve(program, dir, std::env::var_os("PATH"))?,
            args: args.to_vec(),
            dir: dir.to_path_buf(),
            env: config.env.clone(),
            timeout: config.timeout,
            exit_codes: config.exit_codes.clone(),
            batch_size: config.batch_size,
            running: None,
        })
    }

    fn start(&mut self) -> Result<&mut Running, HandlerError> {
        if self.running.is_none() {
            let mut cmd = Command::new(&self.program);
            cmd.args(&self.args)
                .current_dir(&self.dir)
                .envs(&self.env)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            own_group_dying_with_us(&mut cmd);
            let spawn_err = |source| HandlerError::Spawn {
                program: self.program.display().to_string(),
                source,
            };
            let mut child = cmd.spawn().map_err(spawn_err)?;
            let stdout = child.stdout.take().expect("stdout is piped");
            let stderr = child.stderr.take().expect("stderr is piped");
            let (tx, lines) = mpsc::channel();
            thread::spawn(move || {
                // The lines already read are passed on together: waking the tick once
                // per line cost more than the rest of an answer's handling.
                let mut out = BufReader::new(stdout);
                let read_line = |out: &mut BufReader<_>| out.lines().next()?.ok();
                while let Some(first) = read_line(&mut out) {
                    let mut lines = vec![first];
                    while out.buffer().contains(&b'\n') {
                        lines.extend(read_line(&mut out));
                    }
                    if tx.send(Some(lines)).is_err() {
                        return;
                    }
                }
                let _ = tx.send(None);
            });
            thread::spawn(move || {
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                    tracing::debug!("batch handler: {line}");
                }
            });
            let stdin = child.stdin.take().expect("stdin is piped");
            tracing::debug!("batch handler started: {}", self.program.display());
            self.running = Some(Running {
                child,
                stdin,
                lines,
            });
        }
        Ok(self.running.as_mut().expect("started above"))
    }

    /// Ends the process and its group; the next batch starts a new one.
    fn stop(&mut self) -> String {
        let Some(mut running) = self.running.take() else {
            return String::new();
        };
        drop(running.stdin);
        signal_group(running.child.id(), libc::SIGKILL);
        match running.child.wait() {
            Ok(status) => status.to_string(),
            Err(e) => e.to_string(),
        }
    }

    /// Reads one answer line: the record it answers (by its place in the batch) and
    /// what became of it. A line that is not a JSON object, or names no record still
    /// waiting, is logged and skipped; one without a numeric code is that record's error.
    fn read_answer(
        &self,
        line: &str,
        waiting: &mut HashMap<String, usize>,
    ) -> Option<(usize, Handled)> {
        let parsed: Option<serde_json::Value> = serde_json::from_str(line).ok();
        let Some(value) = parsed.filter(serde_json::Value::is_object) else {
            tracing::warn!("the batch handler wrote a line that is not a JSON answer: {line:?}");
            return None;
        };
        let id = serde_json::to_string(&value["id"]).unwrap_or_default();
        let Some(i) = waiting.remove(&id) else {
            tracing::warn!("the batch handler answered for no record of this batch: {line:?}");
            return None;
        };
        Some((
            i,
            match value["code"].as_i64() {
                Some(code) => self.answer(code, value["message"].as_str()),
                None => Handled::new(
                    Outcome::Error,
                    format!("garbled answer line {line:?} (wanted {{\"id\": …, \"code\": 0}})"),
                ),
            },
        ))
    }

    fn answer(&self, code: i64, message: Option<&str>) -> Handled {
        let detail = format!("code {code}");
        let mut handled = match i32::try_from(code) {
            Ok(0) => Handled::new(Outcome::Success, detail),
            Ok(c) => match self.exit_codes.get(&c) {
                Some(status) => Handled::new(Outcome::Status(status.clone()), detail),
                None => Handled::new(Outcome::Error, detail),
            },
            Err(_) => Handled::new(Outcome::Error, detail),
        };
        handled.output = message.unwrap_or_default().to_string();
        handled
    }
}

impl Handler for BatchHandler {
    fn handle(&mut self, record: &Record, ctx: &Context<'_>) -> Result<Handled, HandlerError> {
        Ok(self
            .handle_batch(&[record], std::slice::from_ref(ctx))?
            .pop()
            .expect("one answer per record"))
    }

    fn batch_size(&self) -> usize {
        self.batch_size
    }

    fn handle_batch(
        &mut self,
        records: &[&Record],
        contexts: &[Context<'_>],
    ) -> Result<Vec<Handled>, HandlerError> {
        let timeout = self.timeout;
        let running = self.start()?;
        let mut waiting: HashMap<String, usize> = HashMap::new();
        let mut lines = Vec::new();
        let mut window = (Duration::MAX, String::new());
        for (i, (record, ctx)) in records.iter().zip(contexts).enumerate() {
            if window.0 != ctx.window {
                window = (ctx.window, duration::compact(ctx.window));
            }
            let line = Line {
                id: &record.id,
                window: &window.1,
                age_seconds: ctx.age.map(|a| a.as_secs()),
                record: &record.columns,
            };
            serde_json::to_writer(&mut lines, &line).expect("a record serialises");
            lines.push(b'\n');
            let id = serde_json::to_string(&record.id).expect("an id serialises");
            waiting.insert(id, i);
        }
        let mut answers: Vec<Option<Handled>> = records.iter().map(|_| None).collect();
        let sent = running
            .stdin
            .write_all(&lines)
            .and_then(|()| running.stdin.flush());
        let deadline = Instant::now() + timeout;
        let mut ended: Option<String> = None;
        if sent.is_err() {
            ended = Some(format!(
                "the batch handler exited ({}) before answering",
                self.stop()
            ));
        }
        while ended.is_none() && !waiting.is_empty() {
            let running = self.running.as_mut().expect("running while waiting");
            match running
                .lines
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            {
                Ok(Some(batch)) => {
                    for line in batch {
                        if let Some((i, handled)) = self.read_answer(&line, &mut waiting) {
                            answers[i] = Some(handled);
                        }
                    }
                }
                Ok(None) | Err(mpsc::RecvTimeoutError::Disconnected) => {
                    ended = Some(format!(
                        "the batch handler exited ({}) before answering",
                        self.stop()
                    ));
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    self.stop();
                    ended = Some(format!(
                        "no answer within {}; the batch handler was restarted",
                        duration::compact(timeout)
                    ));
                }
            }
        }
        let ended = ended.unwrap_or_default();
        Ok(answers
            .into_iter()
            .map(|a| a.unwrap_or_else(|| Handled::new(Outcome::Error, ended.clone())))
            .collect())
    }
}

impl Drop for BatchHandler {
    fn drop(&mut self) {
        // End of input first, so a handler can finish cleanly; then the group goes.
        if let Some(running) = self.running.as_mut() {
            let _ = running.stdin.flush();
        }
        self.stop();
    }
}

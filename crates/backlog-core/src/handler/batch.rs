//! A command as the handler, in batch mode: one long-lived process takes records as
//! JSON lines on stdin and answers one line per record on stdout, in any order.
//!
//! Protocol (also in docs/handler.md). In, one line per record:
//! `{"id": 42, "window": "7d", "age_seconds": 3600, "record": {…columns…}}`.
//! Out, one line per record: `{"id": 42, "code": 0}`, optionally with `"message"`;
//! code 0 is success, a code in `handler.exit_codes` sets that status, any other is an
//! error. A record with no answer within the timeout is an error and the process is
//! restarted (it may be stuck); if the process dies, its unanswered records are errors
//! and the next batch starts a new one; an answer line that cannot be read is an
//! error naming the line.
//!
//! The tick keeps two batches with the process (`Pipelined`): it writes the next batch
//! while the process answers the one before, and meanwhile reads pages and writes
//! marks, so the process and the tick work at the same time instead of taking turns.
//! A batch's timeout runs from when the tick starts waiting for its answers, after the
//! batch before it was answered: never sooner than one batch at a time would allow.
//! When the process is stopped (a timeout) or dies, the oldest batch's unanswered
//! records are errors; the records of the batch queued behind it were never its
//! turn, and are sent to the new process.
//!
//! What the process writes costs the tick bounded memory and cannot stretch its time:
//! the tick looks at the clock after every read, so a flood does not push a batch's
//! deadline back; a line longer than `MAX_LINE` is dropped as it arrives; junk (lines
//! that are no answers) is counted and logged once a batch (`bounded_lines`); stderr is
//! logged at a bounded rate, and dropped unread when debug is off.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use super::batch_output::{Answer, Said};
use super::batch_process::BatchProcess;
use super::batch_sent::Sent;
use super::bounded_lines::{Junk, JunkKind, sample};
use super::child::{OUTPUT_GRACE, has_exited};
use super::command::resolve;
use super::tree::Tree;
use super::{Context, Ending, Handled, Handler, HandlerError, Outcome, Pipelined};
use crate::config::HandlerConfig;
use crate::duration;
use crate::record::{Columns, Record, Scalar};

/// One record as the batch process reads it (see the protocol above).
#[derive(serde::Serialize)]
struct Line<'a> {
    id: &'a Scalar,
    window: &'a str,
    age_seconds: Option<u64>,
    record: &'a Columns,
    /// The record's span (W3C `traceparent`), where a trace is kept or passed on.
    #[serde(skip_serializing_if = "Option::is_none")]
    traceparent: Option<String>,
}

/// Runs one long-lived program for many records (`handler.batch_size`), in the
/// protocol above: the cost of starting a process is paid once, not per record.
pub struct BatchHandler {
    /// The program as the schedule file names it, and as found.
    name: String,
    program: PathBuf,
    args: Vec<String>,
    dir: PathBuf,
    env: BTreeMap<String, String>,
    timeout: Duration,
    exit_codes: BTreeMap<i32, String>,
    batch_size: usize,
    /// How long the process has to exit on its own once its input ended.
    stop_grace: Duration,
    running: Option<BatchProcess>,
    /// Batches sent, oldest first.
    sent: VecDeque<Sent>,
    /// What the process wrote that was no answer, while the oldest batch was awaited.
    junk: Junk,
    /// When the last answers were read: a record's time runs from the later of this
    /// and its batch's sending (the process was busy with the records before it).
    last_read: Option<Instant>,
    /// The process tree's set-up, held while the handler lives (`tree`).
    _tree: Tree,
}
impl BatchHandler {
    /// Builds the handler of a schedule file whose folder is `dir`, finding the program as
    /// `CommandHandler::new` does; the process starts with the first batch.
    pub fn new(config: &HandlerConfig, dir: &Path) -> Result<Self, HandlerError> {
        let (program, args) = config
            .command
            .split_first()
            .expect("config checked the command is not empty");
        Ok(BatchHandler {
            name: program.clone(),
            program: resolve(program, dir, std::env::var_os("PATH"))?,
            args: args.to_vec(),
            dir: dir.to_path_buf(),
            env: config.env.clone(),
            timeout: config.timeout,
            exit_codes: config.exit_codes.clone(),
            batch_size: config.batch_size,
            stop_grace: config.stop_grace,
            running: None,
            sent: VecDeque::new(),
            junk: Junk::default(),
            last_read: None,
            _tree: Tree::new(),
        })
    }

    fn start(&mut self) -> Result<&mut BatchProcess, HandlerError> {
        if self.running.is_none() {
            self.running = Some(BatchProcess::start(
                &self.name,
                &self.program,
                &self.args,
                &self.dir,
                &self.env,
            )?);
        }
        Ok(self.running.as_mut().expect("started above"))
    }

    /// Kills the process and its group at once (it is stuck, or done for); the next
    /// batch starts a new one. Returns how it ended, as text.
    fn stop(&mut self) -> String {
        self.last_read = None;
        self.running
            .take()
            .map(BatchProcess::kill)
            .unwrap_or_default()
    }

    /// Files each of the whole lines read (see `file_answer`).
    fn file_lines(&mut self, lines: &[u8]) {
        let text = String::from_utf8_lossy(lines);
        let count = text.lines().count() as u32;
        if count == 0 {
            return; // the start of a line: its time runs on
        }
        // Each record's time is its share of the time since the process was last heard
        // from or was sent its batch, whichever is later: the answers read together
        // split it (a process answers a line once it read it and did its work).
        let now = Instant::now();
        let from = self.last_read.max(self.sent.front().map(|s| s.sent_at));
        self.last_read = Some(now);
        let took = from.map(|f| now.saturating_duration_since(f) / count);
        text.lines().for_each(|line| self.file_answer(line, took));
    }

    /// Reads one answer line and files it with the batch waiting for its record. A
    /// line that is not a JSON object, or names no record still waiting, is junk:
    /// counted, and logged once with the batch; one without a numeric code is that
    /// record's error.
    fn file_answer(&mut self, line: &str, took: Option<Duration>) {
        let parsed = line
            .trim_start()
            .starts_with('{')
            .then(|| serde_json::from_str::<Answer>(line).ok())
            .flatten();
        let Some(mut answer) = parsed else {
            self.junk.note(JunkKind::NotAnswer, line.as_bytes());
            return;
        };
        let id = match answer.id.take() {
            Some(serde_json::Value::Number(n)) => n.as_i64().map(Scalar::Int),
            Some(serde_json::Value::String(s)) => Some(Scalar::Text(s)),
            _ => None,
        };
        let place = id.and_then(|id| {
            self.sent
                .iter_mut()
                .enumerate()
                .find_map(|(b, sent)| sent.waiting.remove(&id).map(|i| (b, i)))
        });
        let Some((batch, i)) = place else {
            self.junk.note(JunkKind::Stray, line.as_bytes());
            return;
        };
        let handled = match answer.code.as_ref().and_then(serde_json::Value::as_i64) {
            Some(code) => answer.handled(code, &self.exit_codes),
            None => Handled::new(
                Outcome::Error,
                format!(
                    "garbled answer line {:?} (wanted {{\"id\": …, \"code\": 0}})",
                    sample(line.as_bytes())
                ),
            ),
        };
        self.sent[batch].answers[i] = Some(Handled { took, ..handled });
    }

    /// After the oldest batch timed out or its process died: the records of the later
    /// batches never got their turn, so a new process gets them. Each is sent again
    /// at most once: should that process fail too, their batch is the oldest.
    fn resend_queued(&mut self) -> Result<(), HandlerError> {
        let queued: Vec<Vec<u8>> = self
            .sent
            .iter()
            .skip(1)
            .map(Sent::unanswered_lines)
            .collect();
        if queued.iter().all(Vec::is_empty) {
            return Ok(());
        }
        // Their time runs from now, to the new process.
        let now = Instant::now();
        for sent in self.sent.iter_mut().skip(1) {
            sent.sent_at = now;
        }
        let running = self.start()?;
        for lines in queued.into_iter().filter(|l| !l.is_empty()) {
            // A process that is already gone shows as its closed stdout.
            let _ = running.input.send(lines.into());
        }
        Ok(())
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
        assert!(
            self.sent.is_empty(),
            "a batch handler's pipelined batches are received before it handles another"
        );
        self.send(records, contexts)?;
        self.receive()
    }

    fn pipelined(&mut self) -> Option<&mut dyn Pipelined> {
        Some(self)
    }

    /// A batch handler of its own, which starts its own process (and restarts it on its
    /// own when it dies).
    fn worker(&self) -> Option<Box<dyn Handler + Send + '_>> {
        Some(Box::new(BatchHandler {
            name: self.name.clone(),
            program: self.program.clone(),
            args: self.args.clone(),
            dir: self.dir.clone(),
            env: self.env.clone(),
            timeout: self.timeout,
            exit_codes: self.exit_codes.clone(),
            batch_size: self.batch_size,
            stop_grace: self.stop_grace,
            running: None,
            sent: VecDeque::new(),
            junk: Junk::default(),
            last_read: None,
            _tree: self._tree.clone(),
        }))
    }
}

impl Pipelined for BatchHandler {
    fn send(&mut self, records: &[&Record], contexts: &[Context<'_>]) -> Result<(), HandlerError> {
        let mut lines = Vec::new();
        let mut ends = Vec::with_capacity(records.len());
        let mut waiting = HashMap::with_capacity(records.len());
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
                traceparent: ctx.traceparent.map(|t| t.to_string()),
            };
            serde_json::to_writer(&mut lines, &line).expect("a record serialises");
            lines.push(b'\n');
            ends.push(lines.len());
            waiting.insert(record.id.clone(), i);
        }
        let lines: Arc<[u8]> = lines.into();
        let running = self.start()?;
        // A process that is gone shows as its closed stdout, when answers are awaited.
        let _ = running.input.send(Arc::clone(&lines));
        self.sent.push_back(Sent {
            lines,
            ends,
            waiting,
            answers: records.iter().map(|_| None).collect(),
            ended: None,
            sent_at: Instant::now(),
        });
        Ok(())
    }

    fn receive(&mut self) -> Result<Vec<Handled>, HandlerError> {
        let deadline = Instant::now() + self.timeout;
        loop {
            let oldest = self.sent.front().expect("receive follows a send");
            if oldest.waiting.is_empty() || oldest.ended.is_some() {
                let done = self.sent.pop_front().expect("looked at just above");
                if let Some(summary) = std::mem::take(&mut self.junk).summary() {
                    tracing::warn!("{summary}");
                }
                let (why, ending) = done.ended.unwrap_or((String::new(), Ending::Crashed(None)));
                return Ok(done
                    .answers
                    .into_iter()
                    .map(|a| {
                        a.unwrap_or_else(|| Handled::new(Outcome::Error, why.clone()).ended(ending))
                    })
                    .collect());
            }
            let running = self
                .running
                .as_mut()
                .expect("running while answers are due");
            let mut ending = Ending::Crashed(None);
            let mut why = match running.answers.read(deadline, &mut self.junk) {
                Said::Read => {
                    let mut lines = std::mem::take(&mut running.answers.lines);
                    self.file_lines(&lines);
                    lines.clear();
                    let running = self.running.as_mut().expect("filing stops nothing");
                    running.answers.lines = lines;
                    // The deadline holds however much the process writes.
                    if Instant::now() < deadline || self.sent[0].waiting.is_empty() {
                        continue;
                    }
                    ending = Ending::TimedOut;
                    self.timed_out()
                }
                Said::Ended if self.exited() => format!(
                    "the batch handler exited ({}) before answering",
                    self.stop()
                ),
                Said::Ended => {
                    self.stop();
                    "the batch handler closed its stdout before answering; it was stopped"
                        .to_string()
                }
                Said::Nothing => {
                    ending = Ending::TimedOut;
                    self.timed_out()
                }
            };
            if let Some(summary) = self.junk.summary() {
                why = format!("{why}; {summary}");
            }
            self.sent[0].ended = Some((why, ending));
            self.resend_queued()?;
        }
    }
}

impl BatchHandler {
    fn timed_out(&mut self) -> String {
        self.stop();
        format!(
            "no answer within {}; the batch handler was restarted",
            duration::compact(self.timeout)
        )
    }

    /// After its stdout closed: whether the process exited (given `OUTPUT_GRACE` to),
    /// rather than closed it and ran on. It is not reaped: `stop` ends its group first.
    fn exited(&self) -> bool {
        let Some(running) = &self.running else {
            return true;
        };
        let until = Instant::now() + OUTPUT_GRACE;
        loop {
            if has_exited(running.pid()) {
                return true;
            }
            if Instant::now() >= until {
                return false;
            }
            thread::sleep(Duration::from_millis(1));
        }
    }
}

impl Drop for BatchHandler {
    /// The tick has no more input for the process (every batch sent was answered or
    /// given up on): it reads the end of its stdin and has `stop_grace` to finish its
    /// own work (`BatchProcess::finish`). A tick drops its handlers, a pool's workers
    /// each on its own thread, so that several processes end in about one grace.
    fn drop(&mut self) {
        self.last_read = None;
        if let Some(running) = self.running.take() {
            running.finish(self.stop_grace);
        }
    }
}

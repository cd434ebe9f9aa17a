//! The marks: a tick's counts, and the statuses it writes in groups.
//!
//! Every record handed out is settled here once, on the tick's thread, in the order
//! the answers came back: counted, reported, and queued for its mark. A group is
//! written when it is full or has waited `mark_interval`. The store writes a mark only
//! where the tick still holds the record (`Store::mark`); a mark that lands nowhere is
//! taken back out of the counts and counted as lost, never as a success. A group the
//! database refuses stops the tick's handing out at once (`refused`): the records
//! still in their handlers are settled, and their marks tried once more at the end.

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

use super::failure_counts::FailureCounts;
use super::mark_group::GroupSize;
use super::mark_writer::Writer;
use super::options::Event;
use super::outcome_log::log_outcome;
pub(super) use super::outcome_log::{log_unshown, tail_for_log};
use super::tally::Tally;
use crate::config::{HistoryConfig, HistoryRecord};
use crate::handler::{Ending, Handled, Outcome};
use crate::record::Record;
use crate::store::{Attempt, Mark, Store, StoreError};

/// Writes a tick's marks in groups: a group goes when it is full, or when it has
/// waited `interval` since the last write.
pub(super) struct Marks<'o> {
    pub(super) tally: Tally,
    owner: &'o str,
    /// Handled, not yet written, and whether each was a success (a lost mark is taken
    /// back out of the count it went into, whatever its status).
    marks: Vec<Mark>,
    succeeded: Vec<bool>,
    /// Shared with the marks: a status is allocated once a tick, not once a record.
    success: Arc<str>,
    /// The names log lines give status values (`table.labels`).
    labels: crate::config::Labels,
    error: Arc<str>,
    /// The tick's clock, written to `[retry]`'s `since` column.
    now: DateTime<Utc>,
    /// Until when a record that failed and stays pending is kept from other ticks:
    /// the schedule's next try of it.
    keep: &'o dyn Fn(&Record) -> Option<DateTime<Utc>>,
    /// The statuses a record can be taken in again.
    pending: Vec<String>,
    last_write: Instant,
    /// Marks per transaction, at most: fixed by `TickOptions::mark_group`, or the
    /// store's, asked again after each group (SQLite's grows on a scattered table);
    /// a tick's start from one mark (`GroupSize::start_small`).
    group: GroupSize,
    interval: Duration,
    /// A group could not be written: no more are until `finish`.
    refused: bool,
    /// The marks lost so far (the tick no longer held their records), and the first
    /// ten of their ids: said in one line as the tick finishes.
    lost: (usize, Vec<String>),
    /// The marks lost because another tick held their records, over the whole tick
    /// (a refused group is not one): proof that the tick's holds lapsed.
    taken_over: u64,
    /// Where groups go when the store has a writer of its own (see `Writer`), opened
    /// as `open_writer` says.
    writer: Option<Writer>,
    /// No writer was asked of the store yet.
    may_open_writer: bool,
    /// Which attempts are kept, and the run and tier they are of.
    history: HistoryConfig,
    run_id: i64,
    window_secs: u64,
    /// The tier's number, for the log lines' `tier` field; none for a window no tier
    /// has, or `backlog retry`.
    tier: Option<usize>,
    /// Failures in a row, where `table.give_up_after` counts them.
    pub(super) failures: FailureCounts,
}

/// Where the marks of a tick go: its owner and clock, its run-log row and tier, and
/// what `[history]` keeps.
pub(super) struct MarkPlan<'o> {
    pub(super) owner: &'o str,
    pub(super) now: DateTime<Utc>,
    pub(super) run_id: i64,
    pub(super) window: Duration,
    /// The tier's number, when the window is a tier's.
    pub(super) tier: Option<usize>,
    pub(super) history: HistoryConfig,
}

impl<'o> Marks<'o> {
    pub(super) fn new(
        table: &crate::TableConfig,
        plan: MarkPlan<'o>,
        fixed_group: Option<usize>,
        store_group: usize,
        interval: Duration,
        keep: &'o dyn Fn(&Record) -> Option<DateTime<Utc>>,
    ) -> Self {
        let MarkPlan {
            owner,
            now,
            run_id,
            window,
            tier,
            history,
        } = plan;
        Marks {
            tally: Tally::default(),
            owner,
            marks: Vec::new(),
            succeeded: Vec::new(),
            success: table.success.as_str().into(),
            labels: table.labels.clone(),
            error: table.error.as_str().into(),
            now,
            keep,
            pending: table.pending.clone(),
            last_write: Instant::now(),
            group: GroupSize::new(fixed_group, store_group),
            interval,
            refused: false,
            lost: (0, Vec::new()),
            taken_over: 0,
            writer: None,
            may_open_writer: true,
            history,
            run_id,
            window_secs: window.as_secs(),
            tier,
            failures: FailureCounts::of(table),
        }
    }

    /// A tick's groups start from one mark and double (see `mark_group`): the first
    /// answer proves the database takes its marks, or stops the tick.
    pub(super) fn start_small(&mut self) {
        self.group.start_small();
    }

    /// Whether a group of marks could not be written (the writer's, as soon as it
    /// failed): the tick hands out no more.
    pub(super) fn refused(&self) -> bool {
        self.refused || self.writer.as_ref().is_some_and(Writer::refused)
    }

    /// The store's writer of marks, asked for once, as the first group of the store's
    /// size, or the first written before it was full, is written before the tick's end
    /// (a tick's start over, see `mark_group`): a tick that writes all its marks at
    /// its end (an empty band, a few records) opens no connection for them, and the
    /// groups of a tick's start, which prove its marks can be written, go over the
    /// connection that wrote its run-log row and holds. The writer's connection has written nothing when it takes its first
    /// group, so its groups start from one mark again, and a group it cannot write is
    /// said at once (`Writer::refused`). Without one (SQLite, or no connection to
    /// open), the marks are written on the tick's own.
    fn open_writer(&mut self, store: &mut dyn Store) {
        if !std::mem::take(&mut self.may_open_writer) {
            return;
        }
        match store.mark_writer() {
            Ok(Some(writer)) => self.writer = Some(Writer::start(writer, self.owner)),
            Ok(None) => {}
            Err(e) => {
                tracing::warn!("marks are written between pages: no second connection ({e})")
            }
        }
    }

    /// `handled` counted as the status it names is (see `outcome`): what the breaker
    /// and the marks are given.
    pub(super) fn resolve(&self, handled: Handled) -> Handled {
        super::outcome::resolve(handled, &self.success, &self.error)
    }

    /// Counts a handled record and queues its mark, writing the group when due.
    pub(super) fn settle(
        &mut self,
        record: &Record,
        handled: Handled,
        took: Duration,
        store: &mut dyn Store,
        on_event: &mut dyn FnMut(Event<'_>),
    ) -> Result<(), StoreError> {
        // Idempotent: a caller that counted it in the breaker resolved it already.
        let mut handled = self.resolve(handled);
        let tally = &mut self.tally;
        tally.selected += 1;
        tally.times.add(took);
        if let Some(code) = handled.code
            && matches!(handled.ending, Ending::Answered | Ending::NotYet)
        {
            *tally.answers.entry(code).or_default() += 1;
        }
        let status = match &handled.outcome {
            // A poll not done keeps the status the record had.
            _ if handled.ending == Ending::NotYet => {
                tally.not_yet += 1;
                Arc::clone(&record.status)
            }
            Outcome::Success => {
                tally.succeeded += 1;
                Arc::clone(&self.success)
            }
            Outcome::Error => {
                tally.failed += 1;
                Arc::clone(&self.error)
            }
            Outcome::Status(s) => {
                tally.failed += 1;
                Arc::from(s.as_str())
            }
        };
        let (status, failures) = self
            .failures
            .count(record, &mut handled, status, &self.pending);
        if handled.outcome != Outcome::Success {
            if handled.ending == Ending::Answered && matches!(handled.code, Some(126 | 127)) {
                tally.cannot_run += 1;
                tally.cannot_run_sample = Some(format!(
                    "record {}: {}{}",
                    record.id,
                    handled.detail,
                    tail_for_log(&handled.output)
                ));
            }
            if matches!(handled.outcome, Outcome::Error) {
                tally.warned += 1;
            }
        }
        let label = self.labels.of(&status);
        log_outcome(record, &handled, &status, label, tally.warned, self.tier);
        on_event(Event::Handled {
            record,
            handled: &handled,
            status: &status,
        });
        if handled.ending != Ending::NotYet {
            *tally.statuses.entry(Arc::clone(&status)).or_default() += 1;
        }
        self.succeeded.push(handled.outcome == Outcome::Success);
        // A record the tick itself stopped (its hold lapsed) did not fail at the
        // counterpart: it is not kept from the next ticks.
        let failed_and_pending = handled.outcome != Outcome::Success
            && handled.ending != Ending::Stopped
            && self.pending.iter().any(|p| **p == *status);
        let attempt = (self.history.on()
            && (handled.outcome != Outcome::Success || self.history.record == HistoryRecord::All))
            .then(|| self.attempt(record, &handled, &status, took));
        self.marks.push(Mark {
            at: self.now,
            id: record.id.clone(),
            inserted_at: record.inserted_time.map(|_| record.inserted_at()),
            // The later of the schedule's next try and the handler's "not before".
            keep_until: if failed_and_pending {
                let snooze = handled.snooze.map(|s| s.until(self.now));
                (self.keep)(record).max(snooze)
            } else {
                None
            },
            status,
            attempt,
            failures,
            tried: !matches!(handled.ending, Ending::Snoozed | Ending::GivenUp),
        });
        if !self.refused()
            && (self.marks.len() >= self.group.next() || self.last_write.elapsed() >= self.interval)
        {
            self.write(store)?;
        }
        Ok(())
    }

    /// The attempt `backlog_attempts` keeps of a handled record.
    fn attempt(
        &self,
        record: &Record,
        handled: &Handled,
        status: &str,
        took: Duration,
    ) -> Box<Attempt> {
        let now = Utc::now();
        Box::new(Attempt {
            record_id: record.id.to_string(),
            run_id: self.run_id,
            window_secs: self.window_secs,
            started: chrono::Duration::from_std(took)
                .ok()
                .and_then(|t| now.checked_sub_signed(t))
                .unwrap_or(now),
            took_ms: took.as_millis() as u64,
            status: status.to_string(),
            outcome: handled.kind().to_string(),
            code: handled.code,
            signal: match handled.ending {
                Ending::Crashed(signal) => signal.map(i64::from),
                _ => None,
            },
            detail: without_nul(&handled.detail),
            output: without_nul(&handled.output),
        })
    }

    /// Writes the marks now if they would otherwise wait past their interval for the
    /// next answer (a tick about to sleep `wait` to keep to its rate).
    pub(super) fn write_before(
        &mut self,
        wait: Duration,
        store: &mut dyn Store,
    ) -> Result<(), StoreError> {
        if !self.refused() && self.last_write.elapsed() + wait >= self.interval {
            self.write(store)?;
        }
        Ok(())
    }

    /// Writes the marks not yet written; those the tick no longer held are lost. With
    /// a writer, the group goes to it, and the groups it wrote since are settled here:
    /// the tick waits only when two are out already (`mark_writer::OUT_AT_MOST`).
    fn write(&mut self, store: &mut dyn Store) -> Result<(), StoreError> {
        if self.marks.is_empty() {
            return Ok(());
        }
        let marks = std::mem::take(&mut self.marks);
        let succeeded = std::mem::take(&mut self.succeeded);
        self.last_write = Instant::now();
        let starting = self.group.starting();
        if !starting {
            self.open_writer(store);
        }
        // A group written before it was full (its marks waited `mark_interval`): with
        // so few answers in flight the start would never reach its size, and every
        // group after would stop the handing out for the round trips of its write
        // (on a link of 200 ms, four lanes' marks held a runner to 2 records a second).
        let short = marks.len() < self.group.next();
        self.group.wrote(marks.len(), store.mark_group());
        if let Some(writer) = self.writer.as_mut() {
            let written = writer.send(marks, succeeded);
            return self.settle_groups(written, store);
        }
        let lost = store.mark(self.owner, &marks);
        self.settle_group(&marks, &succeeded, lost, store)?;
        // The vectors go back, cleared, with their room.
        (self.marks, self.succeeded) = (marks, succeeded);
        self.marks.clear();
        self.succeeded.clear();
        // The start on the tick's connection is over: the writer's connection, which
        // has written nothing yet, starts from one mark too.
        if starting && (!self.group.starting() || short) {
            self.open_writer(store);
            if self.writer.is_some() {
                self.group.start_small();
            }
        }
        Ok(())
    }

    /// Writes what is left, waits for the writer's last group, and ends the writer
    /// whatever happened. Its thread runs until its channel closes: a writer left open
    /// on an error (its connection killed), when the tick's scope joined its thread,
    /// hung the tick, its heartbeat renewing its claims for as long as the process
    /// lived. After a group was refused, what is left (the records that were in their
    /// handlers then) is tried once more: a refusal of one record's mark, or a
    /// moment's lack of room, need not cost the others their answers.
    pub(super) fn finish(&mut self, store: &mut dyn Store) -> Result<(), StoreError> {
        // The last group on the tick's connection unless a writer is open already.
        self.may_open_writer = false;
        let wrote = self.write(store);
        let last = self.writer.take().map(Writer::end).unwrap_or_default();
        let settled = self.settle_groups(last, store);
        self.say_lost();
        wrote.and(settled)
    }

    /// The marks lost over the tick because another tick held their records.
    pub(super) fn taken_over(&self) -> u64 {
        self.taken_over
    }

    /// The marks lost over the tick, in one line (however many groups they were in).
    fn say_lost(&mut self) {
        let (n, ids) = std::mem::take(&mut self.lost);
        if n == 0 {
            return;
        }
        let more = if n > ids.len() { ", …" } else { "" };
        let ids = ids.join(", ");
        match n {
            1 => tracing::warn!(
                "1 mark lost: record {ids} was handled after this tick's hold on it lapsed (another tick may hold it now); not marked, it keeps its status"
            ),
            _ => tracing::warn!(
                "{n} marks lost: records {ids}{more} were handled after this tick's hold on them lapsed (another tick may hold them now); not marked, they keep their status"
            ),
        }
    }

    /// Settles each group the writer wrote, or could not, all of them whatever one
    /// says: the first error is the result.
    fn settle_groups(
        &mut self,
        written: Vec<super::mark_writer::Written>,
        store: &mut dyn Store,
    ) -> Result<(), StoreError> {
        let mut result = Ok(());
        for (marks, succeeded, lost) in written {
            let settled = self.settle_group(&marks, &succeeded, lost, store);
            if result.is_ok() {
                result = settled;
            }
        }
        result
    }

    /// Settles a group the store wrote, or could not: a group whose transaction
    /// failed wrote nothing, so none of its marks is counted as succeeded or failed
    /// (the run log, the summary and the metrics count what reached the table).
    fn settle_group(
        &mut self,
        marks: &[Mark],
        succeeded: &[bool],
        written: Result<Vec<usize>, StoreError>,
        store: &mut dyn Store,
    ) -> Result<(), StoreError> {
        match written {
            Ok(lost) => {
                self.settle_lost(marks, succeeded, &lost, store);
                Ok(())
            }
            Err(e) => {
                self.refused = true;
                for (mark, &succeeded) in marks.iter().zip(succeeded) {
                    self.uncount(&mark.status, succeeded);
                }
                match marks.len() {
                    1 => tracing::warn!(
                        "1 handled record was not marked: its group of marks could not be written ({e}); it keeps its status and a later tick tries it again; this tick hands out no more"
                    ),
                    n => tracing::warn!(
                        "{n} handled records were not marked: their group of marks could not be written ({e}); they keep their status and a later tick tries them again; this tick hands out no more"
                    ),
                }
                Err(e)
            }
        }
    }

    /// Takes the marks at `lost` (of `marks`, with whether each succeeded) back out of
    /// the counts: their tick no longer held their records.
    fn settle_lost(
        &mut self,
        marks: &[Mark],
        succeeded: &[bool],
        lost: &[usize],
        store: &mut dyn Store,
    ) {
        if lost.is_empty() {
            return;
        }
        self.keep_lost(marks, lost, store);
        for &i in lost {
            self.uncount(&marks[i].status, succeeded[i]);
            self.taken_over += 1;
            self.lost.0 += 1;
            if self.lost.1.len() < 10 {
                self.lost.1.push(marks[i].id.to_string());
            }
        }
    }

    /// Keeps an attempt of each lost mark the history did not keep already (a lost
    /// success): a mark that landed nowhere is worth a row whatever `record` says.
    fn keep_lost(&self, marks: &[Mark], lost: &[usize], store: &mut dyn Store) {
        if !self.history.on() {
            return;
        }
        let attempts: Vec<Attempt> = lost
            .iter()
            .map(|&i| &marks[i])
            .filter(|m| m.attempt.is_none())
            .map(|m| Attempt {
                record_id: m.id.to_string(),
                run_id: self.run_id,
                window_secs: self.window_secs,
                started: Utc::now(),
                took_ms: 0,
                status: m.status.to_string(),
                outcome: "lost".into(),
                code: None,
                signal: None,
                detail: "handled after this tick's hold lapsed; not marked".into(),
                output: String::new(),
            })
            .collect();
        if let Err(e) = store.record_attempts(&attempts, self.history.max_per_record) {
            tracing::warn!("cannot keep the attempts of the lost marks: {e}");
        }
    }

    /// Takes a mark that was not written back out of the counts, into the lost.
    fn uncount(&mut self, status: &Arc<str>, succeeded: bool) {
        let tally = &mut self.tally;
        tally.lost += 1;
        if succeeded {
            tally.succeeded -= 1;
        } else {
            tally.failed -= 1;
        }
        if let Some(n) = tally.statuses.get_mut(status) {
            *n -= 1;
            if *n == 0 {
                tally.statuses.remove(status);
            }
        }
    }
}

/// Text as a database column can hold it: PostgreSQL refuses NUL in text, and a
/// handler may write one; it shows as U+FFFD.
fn without_nul(text: &str) -> String {
    if text.contains('\0') {
        text.replace('\0', "\u{FFFD}")
    } else {
        text.to_string()
    }
}

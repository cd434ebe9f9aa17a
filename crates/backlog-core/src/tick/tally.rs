//! A tick's running counts: what it selected, how each ended, what it left alone and
//! why, for its summary, its run-log row and the warnings it prints.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::summary::TickSummary;
use crate::error::Error;
use crate::record::Record;
use crate::store::RunEnd;
use crate::timestamp::{TextLayout, TimestampFormat};

/// The running counts of a tick.
#[derive(Debug, Default)]
pub(super) struct Tally {
    pub(super) selected: u64,
    pub(super) succeeded: u64,
    pub(super) failed: u64,
    /// Records whose handler said their work is not done yet (`handler.done_when`).
    pub(super) not_yet: u64,
    pub(super) skipped: u64,
    pub(super) deferred: u64,
    /// Records held back by their counterpart's breaker (`breaker::Breakers`).
    pub(super) held_back: u64,
    /// The answers' codes (a URL handler's HTTP statuses), counted.
    pub(super) answers: BTreeMap<i64, u64>,
    pub(super) lost: u64,
    /// Shares its statuses with the marks.
    pub(super) statuses: BTreeMap<Arc<str>, u64>,
    pub(super) stopped: bool,
    pub(super) breaker: Option<String>,
    /// Why the tick stopped because its holds lapsed, if it did.
    pub(super) lapsed: Option<String>,
    /// Records left alone because their inserted-at value cannot be read, and the first.
    pub(super) unreadable: u64,
    pub(super) unreadable_sample: Option<String>,
    /// Records left alone because their RFC 3339 text carries another UTC offset than
    /// the column's (a band is a range of text, so theirs is not where they sort), and
    /// the first.
    pub(super) other_offset: u64,
    pub(super) other_offset_sample: Option<String>,
    /// Failures logged at WARN, and those past the cap, only counted.
    pub(super) warned: u64,
    /// Failures whose handler could not run at all: exit 126 (not executable) or 127
    /// (not found), as a shell or `env` reports a command it cannot start.
    pub(super) cannot_run: u64,
    /// The account of the last of them.
    pub(super) cannot_run_sample: Option<String>,
    /// What the tick read of its band in a fleet, kept for the other runners not to
    /// step over should it end early (`Pager::withdrawal`).
    pub(super) withdrawal: Option<String>,
    /// How long the handlers took, for the run log's history.
    pub(super) times: crate::store::HandlerTimes,
}

impl Tally {
    /// The run-log row's end of a tick that counted this, ended with `result`.
    pub(super) fn run_end(&self, result: &Result<(), Error>) -> RunEnd {
        let broken = self.handler_broken();
        RunEnd {
            selected: self.selected,
            succeeded: self.succeeded,
            failed: self.failed,
            skipped: self.skipped,
            lost: self.lost,
            outcome: ended(
                result.is_err() || broken.is_some(),
                self.lapsed.is_some(),
                self.breaker.is_some(),
                self.stopped,
            ),
            error: match result {
                Err(e) => Some(e.to_string()),
                Ok(()) => broken
                    .or_else(|| self.lapsed.clone())
                    .or_else(|| self.breaker.clone()),
            },
            pending: Some(self.pending()),
            times: self.times.clone(),
        }
    }

    /// The pending records of the band as the tick came upon them: handed out, held
    /// by other ticks, left to later ticks (a spread share, a `[retry]` wait, a
    /// breaker) or left alone for an unreadable inserted-at value. What the history
    /// charts as pending; a tick that reached its limit read no further, so its
    /// count is the limit and what it stepped over.
    pub(super) fn pending(&self) -> u64 {
        self.selected
            + self.skipped
            + self.deferred
            + self.held_back
            + self.unreadable
            + self.other_offset
    }

    /// Writes the counts into the tick's summary.
    pub(super) fn into_summary(self, summary: &mut TickSummary) {
        summary.handler_broken = self.handler_broken();
        summary.selected = self.selected;
        summary.succeeded = self.succeeded;
        summary.failed = self.failed;
        summary.not_yet = self.not_yet;
        summary.skipped = self.skipped;
        summary.deferred = self.deferred + self.held_back;
        if self.held_back > 0 {
            summary.deferred_by.push("breaker");
        }
        summary.lost = self.lost;
        summary.statuses = self
            .statuses
            .into_iter()
            .map(|(status, n)| (status.to_string(), n))
            .collect();
        summary.stopped = self.stopped;
        summary.breaker = self.breaker;
        summary.lapsed = self.lapsed;
        summary.unreadable = self.unreadable;
        summary.unreadable_sample = self.unreadable_sample;
        summary.other_offset = self.other_offset;
        summary.other_offset_sample = self.other_offset_sample;
        summary.limit_reached = self.selected == summary.limit;
    }

    /// Why the tick failed although it ran: every record it handled failed because its
    /// handler could not run at all (a wrapper whose command is missing).
    pub(super) fn handler_broken(&self) -> Option<String> {
        (self.selected > 0 && self.cannot_run == self.selected).then(|| {
            let (records, they) = match self.selected {
                1 => ("its 1 record".to_string(), "it is"),
                n => (format!("any of the {n} records"), "they are"),
            };
            format!(
                "the handler could not run for {records} ({}); {they} marked failed and kept from the ticks until their next slot: fix the handler, then run the tick again with --retry-failed",
                self.cannot_run_sample.as_deref().unwrap_or_default()
            )
        })
    }

    /// Counts a record left alone for its unreadable inserted-at value.
    pub(super) fn unreadable(&mut self, record: &Record) {
        self.unreadable += 1;
        self.unreadable_sample
            .get_or_insert_with(|| Self::sample(record));
    }

    /// Whether a record of the band is left alone for its inserted-at value: one that
    /// cannot be read has no age, and one in another UTC offset than the column's
    /// sorts, as text, where its instant is not, so no band is surely its own. Counted
    /// either way; the first of another offset is warned of, once a tick.
    pub(super) fn left_alone(&mut self, record: &Record, format: &TimestampFormat) -> bool {
        if record.inserted_time.is_none() {
            self.unreadable(record);
            return true;
        }
        // Only RFC 3339 text has an offset to differ in; other columns pay nothing.
        let TimestampFormat::Text(TextLayout {
            offset: Some(_), ..
        }) = format
        else {
            return false;
        };
        if !format.other_offset(&record.inserted_at()) {
            return false;
        }
        self.other_offset += 1;
        if self.other_offset_sample.is_none() {
            let sample = Self::sample(record);
            tracing::warn!(
                "{sample} carries another UTC offset than the column's {}: text compares it as written, so it is left alone (counted in the summary); store every value in one offset",
                format.offset_written().unwrap_or_default()
            );
            self.other_offset_sample = Some(sample);
        }
        true
    }

    fn sample(record: &Record) -> String {
        format!(
            "record {}: {:?}",
            record.id,
            record.inserted_at().to_string()
        )
    }
}

/// How a tick ended, in the run log's words (`backlog_runs.outcome`): it failed, its
/// holds lapsed, its breaker tripped, a signal stopped it, or it ran to its end.
pub(super) fn ended(failed: bool, lapsed: bool, tripped: bool, stopped: bool) -> &'static str {
    if failed {
        "failed"
    } else if lapsed {
        "lapsed"
    } else if tripped {
        "tripped"
    } else if stopped {
        "stopped"
    } else {
        "done"
    }
}

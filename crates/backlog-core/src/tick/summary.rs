//! What a tick did, as `backlog run` prints it and `--json` writes it.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::config::TableConfig;
use crate::schedule::BandMode;

/// The band a tick covered, in the summary.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct BandSummary {
    /// Ages over this (from 0 inclusive when `"0s"`).
    pub younger: String,
    /// Ages up to this, inclusive.
    pub older: String,
    /// The inserted-at bounds the band had at the tick's `now`.
    pub from: String,
    /// Records inserted before this (at or before it when the band starts at age 0).
    pub to: String,
}

/// What a tick did.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct TickSummary {
    /// The window of the tier that ran, compact (`"7d"`).
    pub window: String,
    /// The tier's 1-based number; absent for a window that no tier has.
    pub tier: Option<usize>,
    /// The tier's cadence as the schedule file writes it; absent when no tier has the
    /// window.
    pub cadence: Option<String>,
    /// Whether the schedule's bands are disjoint or cumulative.
    pub bands: BandMode,
    /// The ages the tick covered, and the inserted-at values they were at `now`.
    pub band: BandSummary,
    /// The tick's clock: `--now`, or the real time when it started (UTC).
    pub now: DateTime<Utc>,
    /// The database, as messages name it (never with its password).
    pub database: String,
    /// The backlog table, as `table.name` names it.
    pub table: String,
    /// The inserted-at format in use, as `table.inserted_at_format` names it.
    pub inserted_at_format: String,
    /// Whether that format was detected from the column's values (`"auto"`) rather
    /// than set.
    pub inserted_at_format_detected: bool,
    /// Nothing was held, handed over or written: the counts are of what it would hand
    /// over.
    pub dry_run: bool,
    /// The tick's run-log row (`backlog_runs`); none for a dry run or a paused tier.
    pub run_id: Option<i64>,
    /// Records handed to the handler (or, in a dry run, that would be).
    pub selected: u64,
    /// Records marked with the success status.
    pub succeeded: u64,
    /// Records marked with any status other than the success status.
    pub failed: u64,
    /// Records whose handler answered that their work is not done yet (a poll's
    /// `handler.done_when` not met): they keep their status, counted neither as
    /// succeeded nor as failed.
    pub not_yet: u64,
    /// Records of the band held by another tick, or marked by one since they were read.
    pub skipped: u64,
    /// Records of the band left to later ticks: the tier's `spread` share, or a
    /// `[retry]` wait not over.
    pub deferred: u64,
    /// Why records could be deferred by this tick: `spread` (the tier's share a
    /// tick), `retry` (the `[retry]` curve's waits), `breaker` (their counterpart's
    /// breaker held them back); empty when none applies.
    pub deferred_by: Vec<&'static str>,
    /// Records handled whose mark was not written because the tick no longer held
    /// them (paused past its lease, another tick took them over): they keep their
    /// status and are counted neither as succeeded nor as failed.
    pub lost: u64,
    /// Pending records past the last tier's window given up on at the tick's end
    /// (`table.given_up`; ticks of the last tier only), in a run-log row of their own;
    /// for a dry run, those it would give up on.
    pub given_up: u64,
    /// The count of each status written.
    pub statuses: BTreeMap<String, u64>,
    /// The most records the tick would hand over: `--limit`, or the tier's limit.
    pub limit: u64,
    /// The tick stopped because it reached `limit`, so the band may hold more.
    pub limit_reached: bool,
    /// A stop was asked for (SIGINT, SIGTERM) and the tick ended early.
    pub stopped: bool,
    /// For a tick that ended before its band did (a stop, a lapse): the pending
    /// records of its band at its end, which the next start takes at once.
    pub left: Option<u64>,
    /// Why the breaker stopped the tick (`handler.stop_after_failures`), if it did.
    pub breaker: Option<String>,
    /// Why the tick stopped because its holds lapsed (it was paused past its lease),
    /// if it did.
    pub lapsed: Option<String>,
    /// Why the tick failed although it ran: its handler could not run for any record
    /// (each exited 126 or 127, as a shell does for a command it cannot start).
    pub handler_broken: Option<String>,
    /// Records of the band left alone because their inserted-at value cannot be read
    /// (they have no age, so no band is really theirs), and the first of them.
    pub unreadable: u64,
    /// The first unreadable inserted-at value, to look the record up by.
    pub unreadable_sample: Option<String>,
    /// Records of the band left alone because their RFC 3339 text carries another UTC
    /// offset than the column's (text compares them as written, so the band they sort
    /// in may not be theirs), and the first of them.
    pub other_offset: u64,
    /// The first of those values.
    pub other_offset_sample: Option<String>,
    /// Records in their handlers at once, at most.
    pub concurrency: usize,
    /// How long the tick took, in seconds of real time.
    pub seconds: f64,
    /// The pause that kept the tick from running (`backlog pause`), if one did: it
    /// then handled nothing and wrote nothing.
    pub paused: Option<crate::store::Pause>,
}

impl TickSummary {
    /// The error a tick that ran ends with all the same (exit codes 5, 8, 7): its
    /// handler could run for no record, its holds lapsed, or the breaker stopped it.
    /// `file` is the schedule file the handler came from.
    pub fn failure(&self, file: &std::path::Path) -> Option<crate::Error> {
        use crate::Error;
        match (&self.handler_broken, &self.lapsed, &self.breaker) {
            (Some(why), ..) => Some(Error::Handler {
                file: Some(file.display().to_string()),
                source: crate::handler::HandlerError::CannotRun(why.clone()),
            }),
            (None, Some(why), _) => Some(Error::Lapsed(why.clone())),
            (None, None, Some(why)) => Some(Error::Tripped(why.clone())),
            (None, None, None) if self.stopped => Some(Error::Stopped(format!(
                "a signal asked it to stop before its band was done{}",
                self.left_note()
            ))),
            (None, None, None) => None,
        }
    }

    /// `, 356 records left: …` for a tick that ended before its band did.
    fn left_note(&self) -> String {
        let rest = "the next start takes them at once (the daemon as it starts, `run --if-due` at its next check)";
        match self.left {
            Some(0) => String::new(),
            Some(1) => format!(", 1 record left: {}", rest.replace("them", "it")),
            Some(n) => format!(", {n} records left: {rest}"),
            None => format!(", the rest of its band left: {rest}"),
        }
    }

    /// A one-line account, as `backlog run` prints it.
    pub fn line(&self, table: &TableConfig) -> String {
        let tier = match self.tier {
            Some(n) => format!(
                "tier {n} ({} {})",
                self.window,
                self.cadence.as_deref().unwrap_or_default()
            ),
            None => format!("window {} (no tier has it)", self.window),
        };
        let paused = self.paused.as_ref().map(|p| {
            let whose = if p.window_secs == 0 {
                "every tier is "
            } else {
                ""
            };
            format!(
                "not ticking, {whose}{}; `{}` lifts it",
                p.describe(),
                p.resume_command()
            )
        });
        if let (Some(paused), false) = (&paused, self.dry_run) {
            return format!("{tier}: {paused}");
        }
        let band = if self.band.younger == "0s" {
            format!("ages 0 to {}", self.band.older)
        } else {
            format!("ages over {} up to {}", self.band.younger, self.band.older)
        };
        // Records left to later ticks, and why (the tier's spread, `[retry]` waits).
        let deferred = if self.deferred > 0 {
            let why: Vec<&str> = self
                .deferred_by
                .iter()
                .map(|w| match *w {
                    "retry" => "[retry] waits not over",
                    "breaker" => "their counterpart's breaker open",
                    other => other,
                })
                .collect();
            // Each record was left for one of them: "or", never a list that reads as both.
            format!(
                ", deferred {} to later ticks ({})",
                self.deferred,
                why.join(" or ")
            )
        } else {
            String::new()
        };
        let mut line = if self.dry_run {
            let held = if self.skipped > 0 {
                format!(
                    ", skipping {} held (by a tick now, or kept by a failure in their slot or a snooze)",
                    self.skipped
                )
            } else {
                String::new()
            };
            let once = if paused.is_some() {
                " once resumed"
            } else {
                ""
            };
            format!(
                "{tier}, {band}: dry run, would hand over {}{once}{held}{deferred}",
                crate::plural::count(self.selected, "record", "records")
            )
        } else {
            // Statuses beyond success and error come from `handler.exit_codes`: name them.
            let mapped: Vec<String> = self
                .statuses
                .iter()
                .filter(|(s, _)| **s != table.success && **s != table.error)
                .map(|(s, n)| format!("{} {n}", table.label(s)))
                .collect();
            let statuses = if mapped.is_empty() {
                String::new()
            } else {
                format!(" (of which {})", mapped.join(", "))
            };
            let not_yet = match self.not_yet {
                0 => String::new(),
                n => format!(", not yet {n}"),
            };
            format!(
                "{tier}, {band}: selected {}, succeeded {}, failed {}{statuses}{not_yet}, skipped {}{} in {:.2}s",
                self.selected, self.succeeded, self.failed, self.skipped, deferred, self.seconds
            )
        };
        self.push_notes(&mut line, table);
        if let Some(paused) = paused {
            line.push_str(&format!("; {paused}"));
        }
        line
    }

    /// What else the line says: a limit reached, records left alone, lost or given up,
    /// and why the tick stopped early.
    fn push_notes(&self, line: &mut String, table: &TableConfig) {
        if self.limit_reached {
            line.push_str(&format!(
                "; limit {} reached, the rest waits for the next tick",
                self.limit
            ));
        }
        if self.unreadable > 0 {
            line.push_str(&format!(
                "; left alone {} with an unreadable {} value ({}; fix them, `backlog doctor` lists them)",
                self.unreadable,
                table.inserted_at,
                self.unreadable_sample.as_deref().unwrap_or_default()
            ));
        }
        if self.other_offset > 0 {
            line.push_str(&format!(
                "; left alone {} whose {} carries another UTC offset than the column's ({}; store every value in one offset, `backlog doctor` lists them)",
                self.other_offset,
                table.inserted_at,
                self.other_offset_sample.as_deref().unwrap_or_default()
            ));
        }
        if self.lost > 0 {
            line.push_str(&format!(
                "; lost {} (handled after this tick's hold lapsed; not marked, they stay pending)",
                self.lost
            ));
        }
        if self.given_up > 0 {
            line.push_str(&format!(
                "; {} {} past the last tier ({})",
                if self.dry_run {
                    "would give up on"
                } else {
                    "gave up on"
                },
                self.given_up,
                table.label(table.given_up.as_deref().unwrap_or_default())
            ));
        }
        if self.stopped {
            line.push_str(&format!("; stopped early by a signal{}", self.left_note()));
        }
        if self.lapsed.is_some() {
            line.push_str(&format!(
                "; stopped: its hold on its records lapsed{}",
                self.left_note()
            ));
        }
        if self.breaker.is_some() {
            line.push_str("; stopped by the breaker (handler.stop_after_failures)");
        }
    }
}

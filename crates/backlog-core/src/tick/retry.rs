//! `backlog retry`: chosen records handed to the handler now, outside any tier's
//! schedule, with a tick's guarantees: held through the same holds and claims (never
//! while a tick has them in a handler: `acting` waits for those), marked only while
//! held, counted in the run log (a row of window 0, `bands = retry`) and kept in the
//! attempts.
//!
//! Records go one at a time: a person retries a few records, or a set with a limit,
//! and reads each outcome as it comes.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::begin::owner_name;
use super::heartbeat::HeartbeatThread;
use super::options::{Event, TickOptions};
use crate::error::Error;
use crate::handler::{Context, Ending, Handled, HandlerError, Outcome};
use crate::handler::{Handler, Snooze};
use crate::record::Record;
use crate::store::{RunEnd, RunStart, Store};

mod acting;

use acting::Acting;

/// What a retry did.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct RetrySummary {
    /// The run-log row of the retry.
    pub run_id: i64,
    /// Records asked for.
    pub asked: u64,
    /// Handed to the handler.
    pub selected: u64,
    /// Marked with the success status.
    pub succeeded: u64,
    /// Marked with any other status.
    pub failed: u64,
    /// Not handed over: no longer pending, or still held by a tick (in its handler)
    /// once the wait for it ended (`busy`).
    pub skipped: u64,
    /// Handled after the hold lapsed: not marked.
    pub lost: u64,
    /// The statuses written, and how many of each.
    pub statuses: std::collections::BTreeMap<String, u64>,
    /// Why it stopped early, if it did.
    pub stopped: Option<String>,
    /// The ids of the records a tick still held (in its handler) when the wait for
    /// them ended (`TickOptions::hold_wait`): not taken, counted in `skipped`.
    pub busy: Vec<String>,
}

impl RetrySummary {
    /// One line: `retried 2 records: succeeded 1, failed 1; run 7`.
    pub fn line(&self) -> String {
        format!(
            "retried {} {}: succeeded {}, failed {}{}",
            self.selected,
            if self.selected == 1 {
                "record"
            } else {
                "records"
            },
            self.succeeded,
            self.failed,
            self.rest()
        )
    }

    /// What ends a person's action's line: what was skipped or lost, why it stopped
    /// early, and its run-log row.
    pub fn rest(&self) -> String {
        let mut line = String::new();
        if self.skipped > 0 {
            let gone = self.skipped > self.busy.len() as u64;
            let held = format!("still held by a tick: {}", acting::named(&self.busy));
            let why = match (gone, self.busy.is_empty()) {
                (_, true) => "no longer pending".to_string(),
                (false, false) => held,
                (true, false) => format!("no longer pending, or {held}"),
            };
            line.push_str(&format!(", skipped {} ({why})", self.skipped));
        }
        if self.lost > 0 {
            line.push_str(&format!(
                ", lost {} (the hold lapsed; not marked)",
                self.lost
            ));
        }
        if let Some(why) = &self.stopped {
            line.push_str(&format!("; stopped early: {why}"));
        }
        format!("{line}; run {}", self.run_id)
    }
}

/// Hands `records` to `handler` now, one at a time, each only while this process
/// holds it; see the module's doc.
pub fn retry_records(
    table: &crate::TableConfig,
    store: &mut dyn Store,
    handler: &mut dyn Handler,
    records: Vec<Record>,
    opts: &TickOptions,
    on_event: &mut dyn FnMut(Event<'_>),
) -> Result<RetrySummary, Error> {
    let action = Action {
        bands: "retry",
        chunk: 1,
        calls: true,
        handle: &mut |record, ctx| handler.handle(record, ctx),
    };
    act(table, store, records, opts, action, on_event)
}

/// Snoozes `records` until `until` (by `opts.now`'s clock): each stays pending, its
/// status as it is, and no tick takes it before then (`backlog retry` does). `by`
/// says who, in the attempt kept of it. The records are held and marked a group at
/// a time, like a tick's.
pub fn snooze_records(
    table: &crate::TableConfig,
    store: &mut dyn Store,
    records: Vec<Record>,
    until: DateTime<Utc>,
    by: &str,
    opts: &TickOptions,
) -> Result<RetrySummary, Error> {
    let detail = format!("snoozed by {by}");
    let action = Action {
        bands: "snooze",
        chunk: ACTION_GROUP,
        calls: false,
        handle: &mut |record, _| {
            Ok(
                Handled::new(Outcome::Status(record.status.to_string()), detail.clone())
                    .ended(Ending::Snoozed)
                    .snoozed(Snooze::Until(until)),
            )
        },
    };
    act(table, store, records, opts, action, &mut |_| {})
}

/// Gives `records` up: each gets `table.given_up` (which must be set), and an attempt
/// `given_up` whose detail says why. Held and marked a group at a time, like a
/// snooze's; `backlog retry` brings them back.
pub fn give_up_records(
    table: &crate::TableConfig,
    store: &mut dyn Store,
    records: Vec<Record>,
    why: &str,
    opts: &TickOptions,
) -> Result<RetrySummary, Error> {
    let Some(given_up) = table.given_up.clone() else {
        return Err(Error::Usage(
            "table.given_up is not set; name the status of a record given up on in the schedule file, like given_up = \"DEAD\"".into(),
        ));
    };
    let action = Action {
        bands: "give-up",
        chunk: ACTION_GROUP,
        calls: false,
        handle: &mut |_, _| {
            Ok(
                Handled::new(Outcome::Status(given_up.clone()), why.to_string())
                    .ended(Ending::GivenUp),
            )
        },
    };
    act(table, store, records, opts, action, &mut |_| {})
}

/// How many records a snooze or a give-up holds and marks at once.
const ACTION_GROUP: usize = 500;

/// What a person's action does with each record it holds.
struct Action<'a> {
    /// The run-log row's `bands`: `retry`, `snooze`, `give-up`.
    bands: &'static str,
    /// Records held, handled and marked at once.
    chunk: usize,
    /// It calls the handler: its starts keep to `handler.rate`, shared with the other
    /// runners of the table's retries (window 0) or of the rate's group.
    calls: bool,
    handle: &'a mut dyn FnMut(&Record, &Context<'_>) -> Result<Handled, HandlerError>,
}

/// Runs `action` on `records`, each only while this process holds it, with a run-log
/// row of window 0 and every attempt kept.
fn act(
    table: &crate::TableConfig,
    store: &mut dyn Store,
    records: Vec<Record>,
    opts: &TickOptions,
    action: Action<'_>,
    on_event: &mut dyn FnMut(Event<'_>),
) -> Result<RetrySummary, Error> {
    let store_err = Error::store(store.describe());
    store.ensure_own_tables().map_err(&store_err)?;
    let owner = owner_name();
    let run_id = store
        .begin_run(&RunStart {
            window: Duration::ZERO,
            tier: None,
            younger: Duration::ZERO,
            older: Duration::ZERO,
            bands: action.bands,
            now: opts.now,
            owner: owner.clone(),
            lease: opts.lease,
            history: opts.history.clone(),
        })
        .map_err(&store_err)?;
    let heartbeat = HeartbeatThread::start(
        store.heartbeat(&owner, run_id).map_err(&store_err)?,
        opts.lease,
    );
    let acting = Acting {
        table,
        opts,
        owner: &owner,
        run_id,
        heartbeat: &heartbeat,
        store_err: &store_err,
    };
    let result = acting.on(store, records, action, on_event);
    drop(heartbeat);
    if let Err(e) = store.release(&owner) {
        tracing::warn!(
            "cannot release the retried records (they are free again within a lease): {e}"
        );
    }
    let logged = store
        .finish_run(run_id, &run_end(&result))
        .map_err(&store_err);
    let summary = result?;
    logged?;
    Ok(summary)
}

/// The run-log row's end for an action's result.
fn run_end(result: &Result<RetrySummary, Error>) -> RunEnd {
    match result {
        Ok(s) => RunEnd {
            selected: s.selected,
            succeeded: s.succeeded,
            failed: s.failed,
            skipped: s.skipped,
            lost: s.lost,
            outcome: if s.stopped.is_some() {
                "stopped"
            } else {
                "done"
            },
            error: s.stopped.clone(),
            ..RunEnd::default()
        },
        Err(e) => RunEnd {
            outcome: "failed",
            error: Some(e.to_string()),
            ..RunEnd::default()
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_summary_names_what_a_tick_still_held() {
        let summary = |skipped: u64, busy: &[&str]| RetrySummary {
            run_id: 7,
            skipped,
            busy: busy.iter().map(|s| s.to_string()).collect(),
            ..RetrySummary::default()
        };
        assert_eq!(
            summary(1, &[]).rest(),
            ", skipped 1 (no longer pending); run 7"
        );
        assert_eq!(
            summary(1, &["42"]).rest(),
            ", skipped 1 (still held by a tick: record 42); run 7"
        );
        assert_eq!(
            summary(3, &["42", "43"]).rest(),
            ", skipped 3 (no longer pending, or still held by a tick: records 42, 43); run 7"
        );
        let many: Vec<String> = (1..=25).map(|i| i.to_string()).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        assert!(
            summary(25, &many)
                .rest()
                .ends_with("records 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20 and 5 more); run 7")
        );
    }
}

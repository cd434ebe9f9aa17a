//! `backlog retry`: chosen records handed to the handler now, outside any tier's
//! schedule, with a tick's guarantees: held through the same holds and claims (never
//! while a tick holds them), marked only while held, counted in the run log (a row of
//! window 0, `bands = retry`) and kept in the attempts.
//!
//! Records go one at a time: a person retries a few records, or a set with a limit,
//! and reads each outcome as it comes.

use std::time::{Duration, Instant};

use super::begin::owner_name;
use super::heartbeat::{HeartbeatThread, Stale};
use super::lanes::catch_panic;
use super::marks::{MarkPlan, Marks, log_unshown};
use super::options::{Event, TickOptions};
use crate::error::Error;
use crate::handler::{Context, Handler};
use crate::record::Record;
use crate::store::{RunEnd, RunStart, Store};

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
    /// Not handed over: no longer pending, or held by a tick now.
    pub skipped: u64,
    /// Handled after the hold lapsed: not marked.
    pub lost: u64,
    /// The statuses written, and how many of each.
    pub statuses: std::collections::BTreeMap<String, u64>,
    /// Why it stopped early, if it did.
    pub stopped: Option<String>,
}

impl RetrySummary {
    /// One line: `retried 2 records: succeeded 1, failed 1; run 7`.
    pub fn line(&self) -> String {
        let mut line = format!(
            "retried {} {}: succeeded {}, failed {}",
            self.selected,
            if self.selected == 1 {
                "record"
            } else {
                "records"
            },
            self.succeeded,
            self.failed
        );
        if self.skipped > 0 {
            line.push_str(&format!(
                ", skipped {} (no longer pending, or held by a tick now)",
                self.skipped
            ));
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
    let store_err = Error::store(store.describe());
    store.ensure_own_tables().map_err(&store_err)?;
    let owner = owner_name();
    let run_id = store
        .begin_run(&RunStart {
            window: Duration::ZERO,
            tier: None,
            younger: Duration::ZERO,
            older: Duration::ZERO,
            bands: "retry",
            now: opts.now,
            owner: owner.clone(),
            lease: opts.lease,
            history: opts.history.clone(),
        })
        .map_err(&store_err)?;
    let asked = records.len() as u64;
    let heartbeat = HeartbeatThread::start(
        store.heartbeat(&owner, run_id).map_err(&store_err)?,
        opts.lease,
    );
    // Each record is held on its own just before its handler runs (on SQLite, the span
    // moves to it), so a retry of records far apart in age blocks no tick's band
    // between them.
    let result = (|| {
        // A retry's failure is not kept from the ticks: the schedule goes on as before.
        let keep = |_: &Record| None;
        // A person asked: what became of each is kept, successes too.
        let history = crate::config::HistoryConfig {
            record: crate::config::HistoryRecord::All,
            ..opts.history.clone()
        };
        let plan = MarkPlan {
            owner: &owner,
            now: opts.now,
            run_id,
            window: Duration::ZERO,
            tier: None,
            history,
        };
        let mut marks = Marks::new(table, plan, Some(1), 1, Duration::ZERO, &keep);
        let mut stopped = None;
        let mut outcome = Ok(());
        let mut skipped = 0;
        for record in records {
            if opts.stop.load(std::sync::atomic::Ordering::Relaxed) {
                stopped = Some("stopped by a signal".to_string());
                break;
            }
            if let Some(Stale::Lapsed(why) | Stale::Failing(why)) = heartbeat.stale() {
                stopped = Some(why);
                break;
            }
            let lease_until = chrono::Utc::now()
                + chrono::Duration::from_std(opts.lease).unwrap_or(chrono::Duration::MAX);
            let Some(record) = store
                .take_records(&owner, vec![record], lease_until)
                .map_err(&store_err)?
                .pop()
            else {
                skipped += 1;
                continue;
            };
            let ctx = Context {
                table: &table.name,
                window: Duration::ZERO,
                age: record.age(opts.now).and_then(|a| a.to_std().ok()),
                cancel: Some(heartbeat.lapsed_flag()),
            };
            let started = Instant::now();
            match catch_panic(|| handler.handle(&record, &ctx)) {
                Ok(handled) => {
                    if let Err(e) =
                        marks.settle(&record, handled, started.elapsed(), store, on_event)
                    {
                        outcome = Err(store_err(e));
                        break;
                    }
                }
                Err(e) => {
                    outcome = Err(Error::Handler {
                        file: None,
                        source: e,
                    });
                    break;
                }
            }
        }
        let written = marks.finish(store).map_err(&store_err);
        log_unshown(&marks.tally);
        let tally = marks.tally;
        let summary = RetrySummary {
            run_id,
            asked,
            selected: tally.selected,
            succeeded: tally.succeeded,
            failed: tally.failed,
            skipped,
            lost: tally.lost,
            statuses: tally
                .statuses
                .into_iter()
                .map(|(s, n)| (s.to_string(), n))
                .collect(),
            stopped,
        };
        outcome.and(written).map(|()| summary)
    })();
    drop(heartbeat);
    if let Err(e) = store.release(&owner) {
        tracing::warn!(
            "cannot release the retried records (they are free again within a lease): {e}"
        );
    }
    let end = match &result {
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
        },
        Err(e) => RunEnd {
            outcome: "failed",
            error: Some(e.to_string()),
            ..RunEnd::default()
        },
    };
    let logged = store.finish_run(run_id, &end).map_err(&store_err);
    let summary = result?;
    logged?;
    Ok(summary)
}

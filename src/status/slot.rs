//! A tier's slot as the fleet ran it: the ticks every runner wrote in the run log for
//! one scheduled time of the tier, summed. Runners that share a band each write a
//! row of their own; what `status`, the dashboard and the metrics show of a tier's
//! last slot is their sum, never one runner's share.
//!
//! A tick belongs to the slot its clock falls in, give or take `DUE_SLACK`, as
//! `--if-due` and the daemon judge it (`Cadence::next_due`).

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use serde::Serialize;

use backlog_core::schedule::{Schedule, Tier, due_slack};
use backlog_core::store::{RecentRun, RunRow, Store, StoreError};

/// The outcomes of a tick, worst first: a slot ended as the worst of its ticks.
const WORST_FIRST: [&str; 7] = [
    "failed",
    "abandoned",
    "lapsed",
    "tripped",
    "stopped",
    "running",
    "done",
];

/// The ticks of one slot of a tier, over every runner.
#[derive(Debug, Clone, Serialize)]
pub struct Slot {
    /// The slot's time by the tier's cadence (UTC): `14:00` for an hourly tier
    /// whose runners started at 14:00:02 and 14:00:05.
    pub at: DateTime<Utc>,
    /// The runners (a host and process each) that ticked in it.
    pub runners: u64,
    /// Its ticks, a run-log row each: more than the runners where one ticked twice
    /// (the rest of a band after a stop).
    pub ticks: u64,
    /// Records handed to the handler, over its ticks.
    pub selected: u64,
    /// Records marked with the success status, over its ticks.
    pub succeeded: u64,
    /// Records marked with any other status, over its ticks.
    pub failed: u64,
    /// Records a tick stepped over because another held them, over its ticks: with
    /// runners sharing a band, each steps over what the others took.
    pub skipped: u64,
    /// Records handled but not marked (the tick no longer held them), over its ticks.
    pub lost: u64,
    /// The worst of its ticks' outcomes (`failed`, `abandoned`, `lapsed`, `tripped`,
    /// `stopped`, `running`, `done`, in that order): `done` when every tick ran to
    /// its end.
    pub outcome: String,
    /// Its ticks by outcome.
    pub outcomes: BTreeMap<String, u64>,
    /// Why the worst tick did not end `done`, if it says.
    pub error: Option<String>,
    /// When its first tick started, by its runner's clock (RFC 3339 UTC).
    pub started_at: String,
    /// When its last tick ended; none while one runs.
    pub finished_at: Option<String>,
    /// Its ticks' run-log rows, oldest first.
    pub run_ids: Vec<i64>,
}

impl Slot {
    /// How long the slot took, from its first tick's start to its last tick's end.
    pub fn seconds(&self) -> Option<f64> {
        let parse = |s: &str| DateTime::parse_from_rfc3339(s).ok();
        let (a, b) = (
            parse(&self.started_at)?,
            parse(self.finished_at.as_deref()?)?,
        );
        Some((b - a).num_milliseconds() as f64 / 1000.0)
    }

    /// Whether each of its ticks ran to its end, or runs still.
    pub fn ran(&self) -> bool {
        matches!(self.outcome.as_str(), "done" | "running")
    }
}

/// The slot of `tier` that the tick `last` belongs to, with every runner's ticks in
/// it, from the run log.
pub fn slot_of(
    tier: &Tier,
    store: &mut dyn Store,
    last: &RunRow,
) -> Result<Option<Slot>, StoreError> {
    let Some(at) = slot_time(tier, last.clock) else {
        return Ok(None);
    };
    let runs = store.runs_since(tier.window, at - due_slack())?;
    let ticks: Vec<&RunRow> = runs
        .iter()
        .filter(|r| slot_time(tier, r.clock) == Some(at))
        .collect();
    Ok(sum(at, &ticks))
}

/// The slot a tick whose clock is `clock` counts for.
fn slot_time(tier: &Tier, clock: DateTime<Utc>) -> Option<DateTime<Utc>> {
    tier.cadence.previous_slot(clock + due_slack())
}

/// The ticks of the slot at `at`, summed; none for no tick.
fn sum(at: DateTime<Utc>, ticks: &[&RunRow]) -> Option<Slot> {
    let worst = ticks
        .iter()
        .min_by_key(|r| rank(&r.outcome))
        .map(|r| (*r).clone())?;
    let mut outcomes = BTreeMap::new();
    for r in ticks {
        *outcomes.entry(r.outcome.clone()).or_default() += 1;
    }
    let total = |pick: fn(&RunRow) -> u64| ticks.iter().map(|r| pick(r)).sum();
    let runners: BTreeSet<&str> = ticks.iter().map(|r| r.runner()).collect();
    Some(Slot {
        at,
        runners: runners.len() as u64,
        ticks: ticks.len() as u64,
        selected: total(|r| r.selected),
        succeeded: total(|r| r.succeeded),
        failed: total(|r| r.failed),
        skipped: total(|r| r.skipped),
        lost: total(|r| r.lost),
        outcome: worst.outcome,
        outcomes,
        error: worst.error,
        started_at: ticks
            .iter()
            .map(|r| r.started_at.clone())
            .min()
            .unwrap_or_default(),
        finished_at: ticks
            .iter()
            .map(|r| r.finished_at.clone())
            .collect::<Option<Vec<String>>>()
            .and_then(|ends| ends.into_iter().max()),
        run_ids: ticks.iter().map(|r| r.run_id).collect(),
    })
}

/// An outcome's place in `WORST_FIRST`; one it does not know is worst of all.
fn rank(outcome: &str) -> usize {
    WORST_FIRST
        .iter()
        .position(|o| *o == outcome)
        .map_or(0, |i| i + 1)
}

/// Recent ticks (oldest first, as `Store::recent_runs` reads them) summed by tier
/// and slot, a row per slot at its slot's time: what a plot of the fleet's work per
/// slot draws. A tick of a window no tier has keeps a row of its own.
pub fn by_slot(schedule: &Schedule, runs: &[RecentRun]) -> Vec<RecentRun> {
    let mut slots: Vec<RecentRun> = Vec::new();
    for run in runs {
        let window = std::time::Duration::from_secs(run.window_secs);
        let at = schedule
            .tier(window)
            .and_then(|(_, tier)| slot_time(tier, run.clock));
        let same =
            |s: &RecentRun| at.is_some_and(|at| s.window_secs == run.window_secs && s.clock == at);
        match slots.iter_mut().rev().find(|s| same(s)) {
            Some(slot) => {
                slot.selected += run.selected;
                slot.succeeded += run.succeeded;
                slot.failed += run.failed;
                if rank(&run.outcome) < rank(&slot.outcome) {
                    slot.outcome = run.outcome.clone();
                }
            }
            None => slots.push(RecentRun {
                clock: at.unwrap_or(run.clock),
                ..run.clone()
            }),
        }
    }
    slots
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use backlog_core::schedule::{Cadence, Schedule, Tier};

    use super::*;

    fn run(run_id: i64, clock: &str, selected: u64, failed: u64, outcome: &str) -> RecentRun {
        RecentRun {
            run_id,
            window_secs: 86_400,
            clock: DateTime::parse_from_rfc3339(clock).unwrap().to_utc(),
            selected,
            succeeded: selected - failed,
            failed,
            outcome: outcome.into(),
        }
    }

    #[test]
    fn a_plot_sums_the_ticks_of_a_slot_and_keeps_the_next_slot_apart() {
        let five_minutes = Cadence::Every(Duration::from_secs(300));
        let schedule = Schedule::new(vec![Tier::new(Duration::from_secs(86_400), five_minutes)]);
        let slots = by_slot(
            &schedule,
            &[
                // Two runners of the 12:00 slot (one a little early, within the slack),
                // then one of 12:05.
                run(1, "2026-11-21T11:59:40Z", 20, 2, "done"),
                run(2, "2026-11-21T12:00:03Z", 13, 1, "lapsed"),
                run(3, "2026-11-21T12:05:01Z", 7, 0, "done"),
            ],
        );
        let got: Vec<(String, u64, u64, u64, &str)> = slots
            .iter()
            .map(|s| {
                let at = s.clock.to_rfc3339();
                (at, s.selected, s.succeeded, s.failed, s.outcome.as_str())
            })
            .collect();
        assert_eq!(
            got,
            [
                ("2026-11-21T12:00:00+00:00".to_string(), 33, 30, 3, "lapsed"),
                ("2026-11-21T12:05:00+00:00".to_string(), 7, 7, 0, "done"),
            ]
        );
    }

    #[test]
    fn a_slot_ends_as_its_worst_tick() {
        assert!(rank("failed") < rank("stopped"));
        assert!(rank("running") < rank("done"));
        assert_eq!(rank("an outcome of a later release"), 0);
    }
}

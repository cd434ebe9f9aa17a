//! Checks of the run log: what a tick writes as it begins and ends, and what `status`,
//! `--if-due` and the daemon read back from it.

use std::time::Duration;

use backlog_core::chrono::{DateTime, TimeDelta, Utc};
use backlog_core::store::{RunEnd, RunRow, RunStart, Store};

use crate::Harness;
use crate::fixture::{Backlog, DAY, Flavour, WEEK, unique};

/// A tick of `window` at the clock `now` as the run log records its start: a tier of
/// the kit's schedule, a 60-second lease.
pub(crate) fn start(window: Duration, now: DateTime<Utc>, owner: &str) -> RunStart {
    RunStart {
        window,
        tier: Some(if window == DAY { 1 } else { 2 }),
        younger: if window == DAY { Duration::ZERO } else { DAY },
        older: window,
        bands: "disjoint",
        now,
        owner: owner.to_string(),
        lease: Duration::from_secs(60),
        history: Default::default(),
    }
}

/// A tick's end with this outcome and no counts.
pub(crate) fn end(outcome: &'static str) -> RunEnd {
    RunEnd {
        outcome,
        ..RunEnd::default()
    }
}

/// Begins a run of `window` at `now` and ends it with `outcome`; its id.
fn run(store: &mut dyn Store, window: Duration, now: DateTime<Utc>, outcome: &'static str) -> i64 {
    let id = store
        .begin_run(&start(window, now, &unique("kit_owner")))
        .unwrap_or_else(|e| panic!("begin_run: {e}"));
    store
        .finish_run(id, &end(outcome))
        .unwrap_or_else(|e| panic!("finish_run: {e}"));
    id
}

fn last_runs(store: &mut dyn Store) -> Vec<RunRow> {
    store
        .last_runs()
        .unwrap_or_else(|e| panic!("last_runs: {e}"))
}

fn unfinished(store: &mut dyn Store, lease: Duration) -> Vec<(u64, String)> {
    store
        .unfinished_runs(lease)
        .unwrap_or_else(|e| panic!("unfinished_runs: {e}"))
        .into_iter()
        .map(|r| (r.window_secs, r.outcome))
        .collect()
}

/// `runs_since` reads the ticks of one window whose clock is at or after a time, oldest
/// first, each with its owner (the runner: a host name may hold a `/`) and its lost
/// marks.
///
/// Why: a tier's slot is summed over these rows (`status`, the metrics, the
/// dashboard); a row read from the wrong window or time, or an owner read wrong,
/// misstates what the fleet did.
pub fn runs_since_reads_a_windows_ticks_from_a_clock(h: &dyn Harness) {
    let backlog = Backlog::new(h, Flavour::Rfc3339Text);
    backlog.insert_new([(1, 5)]);
    let (mut store, _) = backlog.ready();
    let tick = |store: &mut dyn Store, window, now, owner: &str, lost| {
        let id = store.begin_run(&start(window, now, owner)).unwrap();
        let counts = RunEnd {
            selected: 5,
            succeeded: 4,
            failed: 1,
            lost,
            outcome: "done",
            ..RunEnd::default()
        };
        store.finish_run(id, &counts).unwrap();
        id
    };
    let (before, from) = (backlog.ago(10), backlog.ago(5));
    tick(store.as_mut(), DAY, before, "a/1/10/0", 0);
    let at_from = tick(store.as_mut(), DAY, from, "a/1/11/0", 1);
    tick(store.as_mut(), WEEK, from, "a/1/12/0", 0);
    let now = tick(store.as_mut(), DAY, backlog.now, "rack/b/7/13/0", 2);
    let rows = store
        .runs_since(DAY, from)
        .unwrap_or_else(|e| panic!("runs_since: {e}"));
    let got: Vec<_> = rows
        .iter()
        .map(|r| (r.run_id, r.clock, r.runner(), r.lost, r.selected))
        .collect();
    assert_eq!(
        got,
        [
            (at_from, from, "a/1", 1, 5),
            (now, backlog.now, "rack/b/7", 2, 5)
        ],
        "{rows:?}"
    );
}

/// What `begin_run` and `finish_run` write, `last_runs`, `last_tick` and `first_tick`
/// read back: the tick's clock to the second, its counts, its outcome and error, the
/// last run of each window in window order, a failed run left out of `last_tick`;
/// and only this table's runs.
///
/// Why: `status` shows these rows, and `last_tick` decides whether a tier is due
/// (`--if-due`, the daemon): a clock read back wrong runs a tier too often or never.
pub fn run_log_round_trips(h: &dyn Harness) {
    let backlog = Backlog::new(h, Flavour::Rfc3339Text);
    backlog.insert_new([(1, 5)]);
    let other = Backlog::new(h, Flavour::Rfc3339Text);
    other.insert_new([(1, 5)]);
    let (mut store, _) = backlog.ready();
    let (mut other_store, _) = other.ready();
    assert!(
        last_runs(store.as_mut()).is_empty(),
        "a new run log has rows"
    );
    assert_eq!(store.last_tick(DAY).unwrap(), None);
    assert_eq!(store.first_tick().unwrap(), None);

    let (t1, t2, t3) = (backlog.ago(10), backlog.ago(5), backlog.now);
    let id1 = store
        .begin_run(&start(DAY, t1, &unique("kit_owner")))
        .unwrap();
    let counts = RunEnd {
        selected: 3,
        succeeded: 2,
        failed: 1,
        skipped: 4,
        outcome: "done",
        ..RunEnd::default()
    };
    store.finish_run(id1, &counts).unwrap();
    let rows = last_runs(store.as_mut());
    assert_eq!(rows.len(), 1, "last_runs after one run: {rows:?}");
    let row = &rows[0];
    assert_eq!(
        (row.run_id, row.window_secs, row.clock, row.outcome.as_str()),
        (id1, DAY.as_secs(), t1, "done"),
        "{row:?}"
    );
    assert_eq!(
        (row.selected, row.succeeded, row.failed, row.skipped),
        (3, 2, 1, 4),
        "{row:?}"
    );
    assert!(
        row.finished_at.is_some(),
        "a finished run has no finished_at: {row:?}"
    );
    assert_eq!(store.last_tick(DAY).unwrap(), Some(t1));
    assert_eq!(store.last_tick(WEEK).unwrap(), None);

    let id2 = run(store.as_mut(), WEEK, t2, "done");
    let id3 = store
        .begin_run(&start(DAY, t3, &unique("kit_owner")))
        .unwrap();
    store
        .finish_run(
            id3,
            &RunEnd {
                error: Some("the database went away".into()),
                ..end("failed")
            },
        )
        .unwrap();
    assert!(
        id1 < id2 && id2 < id3,
        "run ids do not increase: {id1}, {id2}, {id3}"
    );
    let rows = last_runs(store.as_mut());
    let seen: Vec<_> = rows
        .iter()
        .map(|r| {
            (
                r.run_id,
                r.window_secs,
                r.outcome.as_str(),
                r.error.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            (id3, DAY.as_secs(), "failed", Some("the database went away")),
            (id2, WEEK.as_secs(), "done", None),
        ],
        "last_runs: the last run of each window, by window"
    );
    assert_eq!(
        store.last_tick(DAY).unwrap(),
        Some(t1),
        "last_tick counts a failed run"
    );
    assert_eq!(store.last_tick(WEEK).unwrap(), Some(t2));
    assert_eq!(store.first_tick().unwrap(), Some(t1));
    assert!(
        last_runs(other_store.as_mut()).is_empty(),
        "another table of the database sees this table's runs"
    );
    assert_eq!(other_store.last_tick(DAY).unwrap(), None);
}

/// A run that ended early (`stopped`, `lapsed`) makes its tier unfinished; a run of
/// that window begun after it ended clears it while it runs and once it is done; a
/// window's stop says nothing of another's.
///
/// Why: "stops lose nothing": the next start takes the rest of an unfinished band
/// now, not at the tier's next slot, and `status --check` is not OK until then.
pub fn a_stopped_run_is_unfinished_until_a_later_run_finishes(h: &dyn Harness) {
    let backlog = Backlog::new(h, Flavour::Rfc3339Text);
    backlog.insert_new([(1, 5)]);
    let (mut store, _) = backlog.ready();
    let lease = Duration::from_secs(60);
    run(store.as_mut(), DAY, backlog.ago(2), "stopped");
    run(store.as_mut(), WEEK, backlog.ago(2), "done");
    assert_eq!(
        unfinished(store.as_mut(), lease),
        [(DAY.as_secs(), "stopped".to_string())]
    );

    let later = store
        .begin_run(&start(DAY, backlog.now, &unique("kit_owner")))
        .unwrap();
    assert_eq!(
        unfinished(store.as_mut(), lease),
        [],
        "a run of the window that runs now, begun after the stop, takes the rest"
    );
    store.finish_run(later, &end("done")).unwrap();
    assert_eq!(unfinished(store.as_mut(), lease), []);

    run(store.as_mut(), WEEK, backlog.now, "lapsed");
    assert_eq!(
        unfinished(store.as_mut(), lease),
        [(WEEK.as_secs(), "lapsed".to_string())]
    );
}

/// A run still `running` whose heartbeat is older than a lease counts as unfinished,
/// and the next `begin_run` closes it as `abandoned`, with the reason.
///
/// Why: a tick that was killed never writes its end; without this its tier would
/// look busy for ever, and `status` would show it running.
pub fn begin_run_abandons_a_silent_run(h: &dyn Harness) {
    let backlog = Backlog::new(h, Flavour::Rfc3339Text);
    backlog.insert_new([(1, 5)]);
    let (mut store, _) = backlog.ready();
    let killed = store
        .begin_run(&start(WEEK, backlog.now, &unique("kit_owner")))
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let short = Duration::from_millis(50);
    assert_eq!(
        unfinished(store.as_mut(), short),
        [(WEEK.as_secs(), "running".to_string())],
        "a run silent for longer than the lease is unfinished"
    );
    assert_eq!(
        unfinished(store.as_mut(), Duration::from_secs(60)),
        [],
        "a run whose heartbeat is within the lease is not unfinished"
    );

    let next = RunStart {
        lease: short,
        ..start(
            DAY,
            backlog.now + TimeDelta::seconds(1),
            &unique("kit_owner"),
        )
    };
    store.begin_run(&next).unwrap();
    let rows = last_runs(store.as_mut());
    let killed_row = rows
        .iter()
        .find(|r| r.run_id == killed)
        .unwrap_or_else(|| panic!("the killed run is not among last_runs: {rows:?}"));
    assert_eq!(killed_row.outcome, "abandoned", "{killed_row:?}");
    assert!(
        killed_row.error.is_some(),
        "an abandoned run says why: {killed_row:?}"
    );
}

/// `open_alert` keeps that a tier alerted, from the first time; `take_open_alerts`
/// takes each kind once (a second store gets none), leaves other tiers' and the
/// alert claims' rows alone, and a tier opened again is taken again.
///
/// Why: a `resolved` alert goes out when a tier that alerted ticks clean again, once,
/// whichever runner ticks, and after a restart.
pub fn open_alerts_are_taken_once(h: &dyn Harness) {
    let backlog = Backlog::new(h, Flavour::Rfc3339Text);
    let (mut store, _) = backlog.ready();
    let mut other = backlog.store();
    let t0 = DateTime::from_timestamp(1_800_000_000, 0).unwrap();
    let at = |minutes| t0 + TimeDelta::minutes(minutes);
    let open = |store: &mut dyn Store, window, kind, minutes| {
        store
            .open_alert(window, kind, at(minutes))
            .unwrap_or_else(|e| panic!("open_alert: {e}"))
    };
    let take = |store: &mut dyn Store, window| {
        store
            .take_open_alerts(window)
            .unwrap_or_else(|e| panic!("take_open_alerts: {e}"))
    };
    assert_eq!(take(store.as_mut(), DAY), []);
    store
        .claim_alert(DAY, "tick_failed", at(0), Duration::from_secs(900))
        .unwrap_or_else(|e| panic!("claim_alert: {e}"));
    open(store.as_mut(), DAY, "tick_failed", 0);
    open(store.as_mut(), DAY, "tick_failed", 5);
    open(store.as_mut(), DAY, "breaker_tripped", 7);
    open(store.as_mut(), WEEK, "tick_failed", 9);
    assert_eq!(
        take(store.as_mut(), DAY),
        [
            ("breaker_tripped".to_string(), at(7)),
            ("tick_failed".to_string(), at(0)),
        ],
        "each kind, from when it first went out"
    );
    assert_eq!(take(other.as_mut(), DAY), [], "taken once");
    assert_eq!(
        take(other.as_mut(), WEEK),
        [("tick_failed".to_string(), at(9))]
    );
    open(other.as_mut(), DAY, "tick_lapsed", 20);
    assert_eq!(
        take(store.as_mut(), DAY),
        [("tick_lapsed".to_string(), at(20))]
    );
    // The claim of the alert itself is untouched: within alert_every it holds back.
    let claim = store
        .claim_alert(DAY, "tick_failed", at(1), Duration::from_secs(900))
        .unwrap_or_else(|e| panic!("claim_alert: {e}"));
    assert_eq!(claim, Some(backlog_core::store::Claim::HeldBack));
}

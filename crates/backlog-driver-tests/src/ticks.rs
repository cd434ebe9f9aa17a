//! Checks of whole ticks (`process_backlog` with an `FnHandler`) over a store: what
//! the handler is handed, what the marks write, what the run log says. The records
//! handed out are counted by the handler itself, not by the tick's summary.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use backlog_core::chrono::{DateTime, DurationRound, TimeDelta, Utc};
use backlog_core::config::TableConfig;
use backlog_core::schedule::Schedule;
use backlog_core::store::Store;
use backlog_core::{Config, FnHandler, Handler, Outcome, Record, TickOptions, TickSummary};

use crate::Harness;
use crate::fixture::{Backlog, DAY, Flavour, NONE, Row, id_of};

/// Runs one tick on a store of its own over `config`'s table.
pub(crate) fn tick(config: &Config, handler: &mut dyn Handler, opts: &TickOptions) -> TickSummary {
    let mut store = backlog_core::store::open(&config.database, &config.table)
        .unwrap_or_else(|e| panic!("opening a store: {e}"));
    tick_on(
        &config.schedule,
        &config.table,
        store.as_mut(),
        handler,
        opts,
    )
}

fn tick_on(
    schedule: &Schedule,
    table: &TableConfig,
    store: &mut dyn Store,
    handler: &mut dyn Handler,
    opts: &TickOptions,
) -> TickSummary {
    backlog_core::process_backlog(schedule, table, store, handler, opts, &mut |_| {})
        .unwrap_or_else(|e| panic!("process_backlog: {e}"))
}

/// The records a handler was handed, in order.
#[derive(Default)]
pub(crate) struct Handed(Mutex<Vec<i64>>);

impl Handed {
    pub(crate) fn note(&self, record: &Record) -> i64 {
        let id = id_of(record);
        self.0.lock().unwrap().push(id);
        id
    }

    pub(crate) fn take(&self) -> Vec<i64> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

/// A tick of the day tier at `now`, reading and marking in small pages and groups so
/// that a band of a few dozen records spans several.
pub(crate) fn day_tick(now: DateTime<Utc>) -> TickOptions {
    let mut opts = TickOptions::new(DAY, now);
    opts.page_size = 7;
    opts.mark_group = Some(5);
    opts
}

/// A tick hands every pending record of its band to the handler once, newest first,
/// and marks each with the success status; records of other bands and of other
/// statuses are left alone; the run log records the tick as done; a second tick
/// finds nothing left.
///
/// Why: the tool's one job, end to end: every read, hold, mark and run-log write of
/// the store in the order a tick makes them.
pub fn a_tick_hands_out_each_record_once_and_marks_it(h: &dyn Harness) {
    let backlog = Backlog::new(h, Flavour::Rfc3339Text);
    backlog.insert_new((1..=50).map(|id| (id, id)));
    backlog.insert(&[
        Row {
            id: 100,
            status: "NEW",
            at: backlog.ago(3 * 24 * 60),
        },
        Row {
            id: 101,
            status: "SUCCESS",
            at: backlog.ago(10),
        },
    ]);
    let handed = Handed::default();
    let mut handler = FnHandler(|record: &Record| {
        handed.note(record);
        Outcome::Success
    });
    let summary = tick(&backlog.config, &mut handler, &day_tick(Utc::now()));
    assert_eq!(
        handed.take(),
        (1..=50).collect::<Vec<_>>(),
        "the records handed out, in order"
    );
    assert_eq!(
        (
            summary.selected,
            summary.succeeded,
            summary.failed,
            summary.lost
        ),
        (50, 50, 0, 0),
        "the summary: {summary:?}"
    );
    let mut expected: BTreeMap<i64, String> = (1..=50).map(|id| (id, "SUCCESS".into())).collect();
    expected.insert(100, "NEW".into());
    expected.insert(101, "SUCCESS".into());
    assert_eq!(backlog.statuses(), expected, "the statuses after the tick");

    let (mut store, _) = backlog.ready();
    let runs = store.last_runs().unwrap();
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(
        (
            runs[0].window_secs,
            runs[0].outcome.as_str(),
            runs[0].selected,
            runs[0].succeeded
        ),
        (DAY.as_secs(), "done", 50, 50),
        "{runs:?}"
    );
    assert_eq!(
        store
            .unfinished_runs(Duration::from_secs(60))
            .unwrap()
            .len(),
        0
    );
    assert_eq!(
        store.held_counts().unwrap(),
        (0, 0),
        "holds left after the tick"
    );

    let summary = tick(&backlog.config, &mut handler, &day_tick(Utc::now()));
    assert_eq!(
        (summary.selected, handed.take()),
        (0, NONE.to_vec()),
        "a second tick"
    );
}

/// A tick with a limit hands out that many records, the band's newest, and says it
/// reached its limit; the rest stay pending.
///
/// Why: a tier's limit bounds a tick's work; the newest records are the ones the
/// schedule serves first.
pub fn a_tick_takes_the_newest_up_to_its_limit(h: &dyn Harness) {
    let backlog = Backlog::new(h, Flavour::Rfc3339Text);
    backlog.insert_new((1..=30).map(|id| (id, id)));
    let handed = Handed::default();
    let mut handler = FnHandler(|record: &Record| {
        handed.note(record);
        Outcome::Success
    });
    let mut opts = day_tick(Utc::now());
    opts.limit = Some(10);
    let summary = tick(&backlog.config, &mut handler, &opts);
    assert_eq!(handed.take(), (1..=10).collect::<Vec<_>>());
    assert!(summary.limit_reached, "{summary:?}");
    assert_eq!(backlog.with_status("SUCCESS"), (1..=10).collect::<Vec<_>>());
    assert_eq!(backlog.with_status("NEW"), (11..=30).collect::<Vec<_>>());
}

/// A record whose handler fails gets the error status and stays pending: no tick of
/// the same slot takes it again, and the tier's next slot does, and marks its
/// success.
///
/// Why: "considerate": a failing counterpart sees one try per record per slot, and a
/// failure is retried as the schedule comes round, not lost.
pub fn a_failed_record_waits_for_its_next_slot(h: &dyn Harness) {
    let backlog = Backlog::new(h, Flavour::Rfc3339Text);
    // A clock a second into a 5-minute slot, so the slot is not over before the
    // second tick; the records aged from it.
    let slot = TimeDelta::minutes(5);
    let clock = Utc::now().duration_trunc(slot).unwrap() + TimeDelta::seconds(1);
    let rows: Vec<Row> = (1..=10)
        .map(|id| Row {
            id,
            status: "NEW",
            at: clock - TimeDelta::minutes(id),
        })
        .collect();
    backlog.insert(&rows);
    let failing = AtomicBool::new(true);
    let handed = Handed::default();
    let mut handler = FnHandler(|record: &Record| {
        let id = handed.note(record);
        if id % 2 == 0 && failing.load(Ordering::Relaxed) {
            Outcome::Error
        } else {
            Outcome::Success
        }
    });

    let summary = tick(&backlog.config, &mut handler, &day_tick(clock));
    assert_eq!(handed.take(), (1..=10).collect::<Vec<_>>());
    assert_eq!((summary.succeeded, summary.failed), (5, 5), "{summary:?}");
    assert_eq!(backlog.with_status("ERROR"), [2, 4, 6, 8, 10]);
    assert_eq!(backlog.with_status("SUCCESS"), [1, 3, 5, 7, 9]);

    let summary = tick(&backlog.config, &mut handler, &day_tick(clock));
    assert_eq!(
        (summary.selected, handed.take()),
        (0, NONE.to_vec()),
        "a tick in the same slot took records that failed in it"
    );

    failing.store(false, Ordering::Relaxed);
    let summary = tick(&backlog.config, &mut handler, &day_tick(clock + slot * 2));
    assert_eq!(
        handed.take(),
        [2, 4, 6, 8, 10],
        "the tier's next slot takes the failures again"
    );
    assert_eq!(summary.succeeded, 5, "{summary:?}");
    assert_eq!(backlog.with_status("SUCCESS").len(), 10);
}

/// A tick stopped from outside (a signal sets `stop`) marks what its handlers
/// finished, leaves the rest pending, and its tier unfinished in the run log; the
/// next tick takes the rest, and the tier is no longer unfinished.
///
/// Why: "stops lose nothing": a stop neither loses a handled record's mark nor
/// leaves the rest of the band to the tier's next slot.
pub fn a_stopped_tick_leaves_its_tier_unfinished(h: &dyn Harness) {
    let backlog = Backlog::new(h, Flavour::Rfc3339Text);
    backlog.insert_new((1..=20).map(|id| (id, id)));
    let mut opts = day_tick(Utc::now());
    let stop = opts.stop.clone();
    let handed = Handed::default();
    let mut handler = FnHandler(|record: &Record| {
        if handed.note(record) == 3 {
            stop.store(true, Ordering::Relaxed);
        }
        Outcome::Success
    });
    let summary = tick(&backlog.config, &mut handler, &opts);
    let first = handed.take();
    assert!(summary.stopped, "{summary:?}");
    assert!(
        (3..20).contains(&first.len()),
        "a tick stopped at its third record handed out {first:?}"
    );
    assert_eq!(
        backlog.with_status("SUCCESS"),
        first,
        "the stopped tick's marks"
    );
    let (mut store, _) = backlog.ready();
    let unfinished: Vec<_> = store
        .unfinished_runs(Duration::from_secs(60))
        .unwrap()
        .into_iter()
        .map(|r| (r.window_secs, r.outcome))
        .collect();
    assert_eq!(unfinished, [(DAY.as_secs(), "stopped".to_string())]);

    opts.stop.store(false, Ordering::Relaxed);
    opts.now = Utc::now();
    tick(&backlog.config, &mut handler, &opts);
    let second = handed.take();
    assert_eq!(
        second,
        (first.len() as i64 + 1..=20).collect::<Vec<_>>(),
        "the next tick takes the rest"
    );
    assert_eq!(backlog.with_status("SUCCESS").len(), 20);
    assert_eq!(
        store
            .unfinished_runs(Duration::from_secs(60))
            .unwrap()
            .len(),
        0
    );
}

/// A dry run reports what it would hand out, and hands out, marks and logs nothing.
///
/// Why: `--dry-run` previews a tick on a live table; a preview that writes is not one.
pub fn a_dry_run_writes_nothing(h: &dyn Harness) {
    let backlog = Backlog::new(h, Flavour::Rfc3339Text);
    backlog.insert_new((1..=10).map(|id| (id, id)));
    let before = backlog.statuses();
    let handed = Handed::default();
    let mut handler = FnHandler(|record: &Record| {
        handed.note(record);
        Outcome::Success
    });
    let mut opts = day_tick(Utc::now());
    opts.dry_run = true;
    let (mut store, _) = backlog.ready();
    let mut would = Vec::new();
    backlog_core::process_backlog(
        &backlog.config.schedule,
        &backlog.config.table,
        store.as_mut(),
        &mut handler,
        &opts,
        &mut |event| {
            if let backlog_core::Event::WouldHandle { record } = event {
                would.push(id_of(record));
            }
        },
    )
    .unwrap_or_else(|e| panic!("a dry run: {e}"));
    assert_eq!(
        would,
        (1..=10).collect::<Vec<_>>(),
        "what the dry run would hand out"
    );
    assert_eq!(handed.take(), NONE, "a dry run called the handler");
    assert_eq!(backlog.statuses(), before, "a dry run changed statuses");
    assert_eq!(
        store.last_runs().unwrap().len(),
        0,
        "a dry run wrote the run log"
    );
    assert_eq!(store.held_counts().unwrap(), (0, 0), "a dry run left holds");
}

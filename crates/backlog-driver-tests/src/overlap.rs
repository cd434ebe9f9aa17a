//! Checks of ticks beside other owners of their band: two ticks at once, and a tick
//! whose hold another owner took over while a handler ran. The records handed out
//! are counted by the handler itself.

use std::collections::HashSet;
use std::sync::Mutex;
use std::time::Duration;

use backlog_core::chrono::{TimeDelta, Utc};
use backlog_core::{FnHandler, Outcome, Record, TickOptions};

use crate::Harness;
use crate::fixture::{Backlog, DAY, Flavour, Format, NONE, id_of, unique};
use crate::ticks::{Handed, day_tick, tick};

/// Two ticks of one band at once, on two threads with a store each (one handing out
/// four records at a time), never hand a record to two handlers at once, nor one
/// record twice; a third tick takes what they left; every record is handed out once
/// and marked.
///
/// Why: the design's "never twice at once", as the 5-minute and the hourly tier, or
/// two runners of a fleet, meet in one band.
pub fn two_ticks_at_once_never_share_a_record(h: &dyn Harness) {
    let backlog = Backlog::new(h, Flavour::Rfc3339Text);
    let n = 300;
    backlog.insert_new((1..=n).map(|id| (id, id)));
    let in_hand: Mutex<HashSet<i64>> = Mutex::default();
    let twice_at_once: Mutex<Vec<i64>> = Mutex::default();
    let handed = Handed::default();
    let handle = |record: &Record| {
        let id = handed.note(record);
        if !in_hand.lock().unwrap().insert(id) {
            twice_at_once.lock().unwrap().push(id);
        }
        std::thread::sleep(Duration::from_millis(1));
        in_hand.lock().unwrap().remove(&id);
        Outcome::Success
    };
    let config = backlog.config.clone();
    let now = Utc::now();
    let selected: u64 = std::thread::scope(|scope| {
        let ticks: Vec<_> = [4, 1]
            .map(|concurrency| {
                let (config, handle) = (&config, &handle);
                scope.spawn(move || {
                    let mut opts = TickOptions::new(DAY, now);
                    opts.page_size = 20;
                    opts.concurrency = concurrency;
                    tick(config, &mut FnHandler(handle), &opts).selected
                })
            })
            .into_iter()
            .collect();
        ticks.into_iter().map(|t| t.join().unwrap()).sum()
    });
    let rest = tick(&config, &mut FnHandler(&handle), &day_tick(Utc::now())).selected;
    assert_eq!(
        twice_at_once.into_inner().unwrap(),
        NONE,
        "records in two handlers at once"
    );
    let mut handed = handed.take();
    handed.sort_unstable();
    let repeated: Vec<i64> = handed
        .windows(2)
        .filter(|w| w[0] == w[1])
        .map(|w| w[0])
        .collect();
    assert_eq!(repeated, NONE, "records handed out more than once");
    assert_eq!(handed.len() as i64, n, "records handed out, once each");
    assert_eq!(
        selected + rest,
        n as u64,
        "the ticks' summaries count what they handed out"
    );
    assert_eq!(backlog.with_status("SUCCESS").len() as i64, n);
}

/// A mark lands only where the tick still holds: when a tick's hold is let go while
/// its first record is in the handler (a lease that ran out, as another tick sees
/// it) and another owner takes the band, none of the tick's marks is written, and
/// the tick counts them lost.
///
/// Why: "a tick holds what it hands out": a tick paused past its lease must not
/// overwrite what the tick that took its records over is doing with them. (A
/// `Mark` has no public constructor yet, so the kit checks `Holds::mark` through a
/// tick.)
pub fn a_mark_lands_only_where_the_tick_still_holds(h: &dyn Harness) {
    let backlog = Backlog::new(h, Flavour::Rfc3339Text);
    backlog.insert_new((1..=5).map(|id| (id, id)));
    let (mut other, format) = backlog.ready();
    let band = backlog.day_band(&format);
    let other_owner = unique("kit/other");
    let taken_over: Mutex<Vec<i64>> = Mutex::default();
    let handed = Handed::default();
    let mut handler = FnHandler(|record: &Record| {
        if handed.note(record) == 1 {
            let mut other =
                backlog_core::store::open(&backlog.config.database, &backlog.config.table)
                    .unwrap_or_else(|e| panic!("opening a second store: {e}"));
            Format::of(other.as_mut());
            other.ensure_own_tables().unwrap();
            let owner = other
                .holder(record)
                .unwrap_or_else(|e| panic!("holder: {e}"))
                .and_then(|held| held.owner)
                .expect("the record in the handler is held by its tick");
            other
                .release(&owner)
                .unwrap_or_else(|e| panic!("release of the tick's holds: {e}"));
            let page = other
                .take(
                    &other_owner,
                    &band,
                    None,
                    100,
                    Utc::now() + TimeDelta::minutes(5),
                    &|_| true,
                )
                .unwrap_or_else(|e| panic!("take by another owner: {e}"));
            taken_over
                .lock()
                .unwrap()
                .extend(page.taken.iter().map(id_of));
        }
        Outcome::Success
    });
    let mut opts = day_tick(Utc::now());
    opts.page_size = 5;
    let summary = tick(&backlog.config, &mut handler, &opts);
    let handed = handed.take();
    assert_eq!(
        taken_over.into_inner().unwrap(),
        (1..=5).collect::<Vec<_>>(),
        "another owner's take once the tick's holds were let go"
    );
    assert_eq!(
        backlog.with_status("NEW"),
        (1..=5).collect::<Vec<_>>(),
        "marks written where the tick no longer held (it handed out {handed:?})"
    );
    assert_eq!(
        (summary.succeeded, summary.lost),
        (0, handed.len() as u64),
        "the tick's count of marks written and lost: {summary:?}"
    );
    other.release(&other_owner).unwrap();
}

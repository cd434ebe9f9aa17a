//! The fleet's adapted pace (`rate = "auto"`): one row in `backlog_paces` that every
//! runner moves with a compare-and-set.

use std::time::Duration;

use backlog_core::store::{PaceNews, PaceNow, Store};

use crate::Harness;
use crate::fixture::{Backlog, Flavour};

fn sync(store: &mut dyn Store, name: &str, went_through: u64, ago: Option<u64>) -> PaceNow {
    let news = PaceNews::new(went_through, ago.map(Duration::from_secs));
    store
        .sync_pace(name, 0.5, 1000.0, news)
        .unwrap_or_else(|e| panic!("sync_pace: {e}"))
        .expect("the tool's tables are there once a store is ready")
}

/// `Store::sync_pace` keeps one pace per name for every store: a fresh one starts at
/// one a second in slow start, each call that went through adds one start a second
/// there, another store moves the same row, an overload halves it once, and the
/// refusal of a call that started before that cut (by the database's clock) does not
/// cut again; `Store::paces` lists it.
///
/// Why: 32 runners must not each probe the counterpart, a new runner takes the fleet's
/// pace, and a burst of refusals seen by many runners cuts the pace once.
pub fn an_adapted_pace_is_one_row_every_runner_moves(h: &dyn Harness) {
    let backlog = Backlog::new(h, Flavour::Rfc3339Text);
    let (mut store, _) = backlog.ready();
    let mut other = backlog.store();
    let name = format!("table {}, tier 60s", backlog.name);
    let fresh = sync(store.as_mut(), &name, 0, None);
    assert_eq!(
        (fresh.per_second, fresh.slow_start),
        (1.0, true),
        "{fresh:?}"
    );
    let grown = sync(store.as_mut(), &name, 4, None);
    assert!((grown.per_second - 5.0).abs() < 1e-3, "{grown:?}");
    let seen = sync(other.as_mut(), &name, 5, None);
    assert!(
        (seen.per_second - 10.0).abs() < 1e-3,
        "another store moves the same pace: {seen:?}"
    );
    let cut = sync(other.as_mut(), &name, 0, Some(0));
    assert!(cut.cut && !cut.slow_start, "{cut:?}");
    assert!((cut.per_second - 5.0).abs() < 1e-3, "halved: {cut:?}");
    let stale = sync(store.as_mut(), &name, 0, Some(30));
    assert!(
        !stale.cut,
        "a call from before the cut is no news: {stale:?}"
    );
    assert!((stale.per_second - 5.0).abs() < 1e-3, "{stale:?}");
    let rows = store.paces().unwrap_or_else(|e| panic!("paces: {e}"));
    let row = rows
        .iter()
        .find(|r| r.name == name)
        .unwrap_or_else(|| panic!("{name:?} among {rows:?}"));
    assert!(
        (row.per_second - 5.0).abs() < 1e-3 && !row.slow_start,
        "{row:?}"
    );
    assert!(
        row.cut_ago
            .is_some_and(|ago| ago < Duration::from_secs(600)),
        "{row:?}"
    );
}

/// Two stores on two threads that move one pace at once lose none of each other's
/// news: in slow start each call adds exactly one start a second, so 2 × 25 calls
/// make 51 a second.
///
/// Why: the compare-and-set is what makes the pace the fleet's; a lost update would
/// let each runner's view drift from the others'.
pub fn an_adapted_pace_loses_no_news_to_a_race(h: &dyn Harness) {
    let backlog = Backlog::new(h, Flavour::Rfc3339Text);
    let (mut store, _) = backlog.ready();
    let name = format!("table {}, tier 60s", backlog.name);
    sync(store.as_mut(), &name, 0, None);
    std::thread::scope(|scope| {
        for _ in 0..2 {
            let (config, name) = (&backlog.config, &name);
            scope.spawn(move || {
                let mut store = backlog_core::store::open(&config.database, &config.table)
                    .unwrap_or_else(|e| panic!("opening a store: {e}"));
                for _ in 0..25 {
                    sync(store.as_mut(), name, 1, None);
                }
            });
        }
    });
    let now = sync(store.as_mut(), &name, 0, None);
    assert!((now.per_second - 51.0).abs() < 1e-2, "{now:?}");
}

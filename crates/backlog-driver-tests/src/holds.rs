//! Checks of holding: what `take` holds for a tick, how long, what a heartbeat keeps,
//! what `release` lets go, and what a person's `take_records` may take beside ticks.
//! `Holds::mark` is checked here on its own, and through whole ticks in `overlap` and
//! `ticks`.

use std::collections::BTreeSet;
use std::time::Duration;

use backlog_core::Record;
use backlog_core::chrono::{DateTime, TimeDelta, Utc};
use backlog_core::store::{BandQuery, Cursor, Mark, Page, Store};

use crate::Harness;
use crate::fixture::{Backlog, DAY, Flavour, NONE, id_of, ids, unique};

/// Longer than the shortest hold a server grants (a second), with room for its clock.
const PAST_A_SHORT_LEASE: Duration = Duration::from_millis(2500);

fn take(
    store: &mut dyn Store,
    owner: &str,
    band: &BandQuery,
    after: Option<&Cursor>,
    limit: usize,
    lease_until: DateTime<Utc>,
) -> Page {
    store
        .take(owner, band, after, limit, lease_until, &|_| true)
        .unwrap_or_else(|e| panic!("take by {owner}: {e}"))
}

fn in_a_minute() -> DateTime<Utc> {
    Utc::now() + TimeDelta::seconds(60)
}

fn holder(store: &mut dyn Store, record: &Record) -> Option<String> {
    store
        .holder(record)
        .unwrap_or_else(|e| panic!("holder: {e}"))
        .and_then(|held| held.owner)
}

/// `take` holds the band's pending records for its owner: a second owner's `take` of
/// the same band gets none of them; `holder` and `held_counts` say who holds them;
/// after `release` they are free, and the second owner takes them all.
///
/// Why: "never twice at once": the 5-minute and the hourly tier, a slow tick and the
/// next, runners on several hosts all take from one band.
pub fn take_holds_records_until_release(h: &dyn Harness) {
    let backlog = Backlog::new(h, Flavour::Rfc3339Text);
    backlog.insert_new((1..=10).map(|id| (id, id)));
    let (mut a, format) = backlog.ready();
    let (mut b, _) = backlog.ready();
    let band = backlog.day_band(&format);
    let (owner_a, owner_b) = (unique("kit/a"), unique("kit/b"));

    let page = take(a.as_mut(), &owner_a, &band, None, 100, in_a_minute());
    assert_eq!(
        ids(&page.taken),
        (1..=10).collect::<Vec<_>>(),
        "the first take, newest first"
    );
    assert_eq!(page.read, 10, "{page:?}");
    assert_eq!(holder(b.as_mut(), &page.taken[0]), Some(owner_a.clone()));
    assert_eq!(
        b.held_counts().unwrap(),
        (10, 0),
        "held_counts while a holds all"
    );

    let other = take(b.as_mut(), &owner_b, &band, None, 100, in_a_minute());
    assert_eq!(
        ids(&other.taken),
        NONE,
        "a second owner took records the first holds"
    );

    a.release(&owner_a)
        .unwrap_or_else(|e| panic!("release: {e}"));
    // (Not `None`: on SQLite the second owner's take that got nothing still holds
    // the span it read, and `holder` names it.)
    assert_ne!(
        holder(b.as_mut(), &page.taken[0]),
        Some(owner_a.clone()),
        "held by the first owner after its release"
    );
    let other = take(b.as_mut(), &owner_b, &band, None, 100, in_a_minute());
    assert_eq!(
        ids(&other.taken),
        (1..=10).collect::<Vec<_>>(),
        "the second owner's take after the first's release"
    );
}

/// `mark` writes the statuses of the records its owner took, in one call, and leaves
/// the rest of the band as it was; the marks of an owner that holds nothing (it never
/// took, or let go) are all refused, their places returned.
///
/// Why: a mark written where the tick no longer holds would overwrite what another
/// tick, which took the record since, decided; a mark lost must be said, so that the
/// tick counts it as lost rather than done. (A backend may trust its caller to mark
/// only what it took: SQLite checks the owner's span, not each record's place in it.)
pub fn mark_writes_what_its_owner_holds(h: &dyn Harness) {
    let backlog = Backlog::new(h, Flavour::Rfc3339Text);
    backlog.insert_new((1..=6).map(|id| (id, id)));
    let (mut a, format) = backlog.ready();
    let band = backlog.day_band(&format);
    let owner = unique("kit/marks");

    let page = take(a.as_mut(), &owner, &band, None, 3, in_a_minute());
    assert_eq!(ids(&page.taken), [1, 2, 3], "the three newest taken");
    let now = Utc::now();
    let marks: Vec<Mark> = page
        .taken
        .iter()
        .map(|r| Mark::new(r.id.clone(), "SUCCESS", now))
        .collect();
    let refused = a
        .mark(&owner, &marks)
        .unwrap_or_else(|e| panic!("mark: {e}"));
    assert!(
        refused.is_empty(),
        "marks of held records refused: {refused:?}"
    );
    assert_eq!(
        backlog.with_status("SUCCESS"),
        [1, 2, 3],
        "what the marks wrote"
    );
    assert_eq!(
        backlog.with_status("NEW"),
        [4, 5, 6],
        "the records not taken"
    );
    a.release(&owner).unwrap_or_else(|e| panic!("release: {e}"));

    let stranger = unique("kit/stranger");
    let late: Vec<Mark> = [4, 5]
        .into_iter()
        .map(|id| Mark::new(backlog_core::Scalar::Int(id), "SUCCESS", now))
        .collect();
    let refused = a
        .mark(&stranger, &late)
        .unwrap_or_else(|e| panic!("mark by an owner holding nothing: {e}"));
    assert_eq!(refused, [0, 1], "the marks of an owner that holds nothing");
    assert_eq!(
        backlog.with_status("NEW"),
        [4, 5, 6],
        "a refused mark was written"
    );
}

/// A hold whose lease ran out without a heartbeat is no hold: another owner takes
/// its records.
///
/// Why: a killed tick (or a host that vanished) never releases; its records must wait
/// a lease, not for ever.
pub fn a_lapsed_hold_frees_its_records(h: &dyn Harness) {
    let backlog = Backlog::new(h, Flavour::Rfc3339Text);
    backlog.insert_new((1..=10).map(|id| (id, id)));
    let (mut a, format) = backlog.ready();
    let (mut b, _) = backlog.ready();
    let band = backlog.day_band(&format);
    let (owner_a, owner_b) = (unique("kit/a"), unique("kit/b"));

    let page = take(
        a.as_mut(),
        &owner_a,
        &band,
        None,
        100,
        Utc::now() + TimeDelta::milliseconds(500),
    );
    assert_eq!(page.taken.len(), 10);
    std::thread::sleep(PAST_A_SHORT_LEASE);
    let other = take(b.as_mut(), &owner_b, &band, None, 100, in_a_minute());
    assert_eq!(
        ids(&other.taken),
        (1..=10).collect::<Vec<_>>(),
        "records of a hold that ran out"
    );
    assert_eq!(holder(a.as_mut(), &page.taken[0]), Some(owner_b));
}

/// A heartbeat, from its own connection, extends a hold past its first lease: no
/// other owner takes its records meanwhile.
///
/// Why: a handler may run far longer than a lease; the tick holds its records for
/// as long as it beats, and only as long.
pub fn a_heartbeat_keeps_a_hold(h: &dyn Harness) {
    let backlog = Backlog::new(h, Flavour::Rfc3339Text);
    backlog.insert_new((1..=10).map(|id| (id, id)));
    let (mut a, format) = backlog.ready();
    let (mut b, _) = backlog.ready();
    let band = backlog.day_band(&format);
    let (owner_a, owner_b) = (unique("kit/a"), unique("kit/b"));
    let run_id = a
        .begin_run(&crate::runs::start(DAY, Utc::now(), &owner_a))
        .unwrap_or_else(|e| panic!("begin_run: {e}"));

    let page = take(
        a.as_mut(),
        &owner_a,
        &band,
        None,
        100,
        Utc::now() + TimeDelta::milliseconds(500),
    );
    assert_eq!(page.taken.len(), 10);
    let mut heartbeat = a
        .heartbeat(&owner_a, run_id)
        .unwrap_or_else(|e| panic!("heartbeat: {e}"));
    heartbeat
        .beat(in_a_minute())
        .unwrap_or_else(|e| panic!("a beat within the lease: {e}"));
    std::thread::sleep(PAST_A_SHORT_LEASE);
    let other = take(b.as_mut(), &owner_b, &band, None, 100, in_a_minute());
    assert_eq!(
        ids(&other.taken),
        NONE,
        "a second owner took records a heartbeat kept past their first lease"
    );
    heartbeat
        .beat(in_a_minute())
        .unwrap_or_else(|e| panic!("a second beat: {e}"));
    a.release(&owner_a).unwrap();
    let other = take(b.as_mut(), &owner_b, &band, None, 100, in_a_minute());
    assert_eq!(other.taken.len(), 10, "after release");
}

/// `take_records` (a person's `backlog retry`) takes the records asked for that no
/// tick has in hand, and leaves those a tick took and handed over; a tick's next page
/// takes none of what the person holds.
///
/// Why: a person's action beside running ticks must not hand a record to a second
/// handler while the first still runs.
pub fn take_records_skips_records_in_hand(h: &dyn Harness) {
    let backlog = Backlog::new(h, Flavour::Rfc3339Text);
    backlog.insert_new((1..=10).map(|id| (id, id)));
    let (mut tick, format) = backlog.ready();
    let (mut person, _) = backlog.ready();
    let band = backlog.day_band(&format);
    let (owner_tick, owner_person) = (unique("kit/tick"), unique("kit/person"));

    let page = take(tick.as_mut(), &owner_tick, &band, None, 3, in_a_minute());
    assert_eq!(ids(&page.taken), [1, 2, 3]);
    let away = tick
        .hand_over(&owner_tick, &page.taken)
        .unwrap_or_else(|e| panic!("hand_over: {e}"));
    assert_eq!(
        away,
        Vec::<usize>::new(),
        "hand_over with nobody else about"
    );

    let all = person.select(&band, None, 100).unwrap();
    let got: BTreeSet<i64> = person
        .take_records(&owner_person, all, in_a_minute())
        .unwrap_or_else(|e| panic!("take_records: {e}"))
        .iter()
        .map(id_of)
        .collect();
    assert_eq!(
        got,
        (4..=10).collect(),
        "take_records of every record, three of them in a tick's hands"
    );

    let next = take(
        tick.as_mut(),
        &owner_tick,
        &band,
        page.cursor.as_ref(),
        100,
        in_a_minute(),
    );
    let both: Vec<i64> = ids(&next.taken)
        .into_iter()
        .filter(|id| got.contains(id))
        .collect();
    assert_eq!(
        both, NONE,
        "the tick's next page took records the person holds"
    );
}

/// When a person's `take_records` took records a tick had taken but not yet handed
/// over, the tick's `hand_over` names exactly those, and the tick hands out only the
/// rest: between them, every record is in one pair of hands.
///
/// Why: SQLite's ticks hold a span, not each record, and a person may take a record
/// out of it; `hand_over` is where the tick learns so, before a second handler runs.
pub fn hand_over_names_what_a_person_took(h: &dyn Harness) {
    let backlog = Backlog::new(h, Flavour::Rfc3339Text);
    backlog.insert_new((1..=10).map(|id| (id, id)));
    let (mut tick, format) = backlog.ready();
    let (mut person, _) = backlog.ready();
    let band = backlog.day_band(&format);
    let (owner_tick, owner_person) = (unique("kit/tick"), unique("kit/person"));

    let page = take(tick.as_mut(), &owner_tick, &band, None, 3, in_a_minute());
    assert_eq!(ids(&page.taken), [1, 2, 3]);
    let all = person.select(&band, None, 100).unwrap();
    let got: BTreeSet<i64> = person
        .take_records(&owner_person, all, in_a_minute())
        .unwrap_or_else(|e| panic!("take_records: {e}"))
        .iter()
        .map(id_of)
        .collect();
    let away: BTreeSet<i64> = tick
        .hand_over(&owner_tick, &page.taken)
        .unwrap_or_else(|e| panic!("hand_over: {e}"))
        .into_iter()
        .map(|i| id_of(&page.taken[i]))
        .collect();
    let taken_from_tick: BTreeSet<i64> = got.iter().copied().filter(|id| *id <= 3).collect();
    assert_eq!(
        away, taken_from_tick,
        "hand_over names what the person took of the tick's page (the person got {got:?})"
    );
    let mut expected: BTreeSet<i64> = (4..=10).collect();
    expected.extend(&away);
    assert_eq!(got, expected, "the person's take_records");
}

/// A heartbeat renewing a tick's holds while the tick writes its marks, each on its
/// own connection, never deadlocks with it: the marks (of two statuses, some kept
/// till their slot ends, in an order of their own) and the renewals take the
/// claims in one order, so neither waits on the other for more than a statement.
///
/// Why: on PostgreSQL a deadlock is found after `deadlock_timeout` (a second); a tick
/// whose renewal waited that long under a 2 s lease lost its holds and stopped with
/// the rest of its band undone.
pub fn a_heartbeat_and_marks_never_deadlock(h: &dyn Harness) {
    const RECORDS: i64 = 400;
    let backlog = Backlog::new(h, Flavour::Rfc3339Text);
    backlog.insert_new((1..=RECORDS).map(|id| (id, id)));
    let (mut a, format) = backlog.ready();
    let band = backlog.day_band(&format);
    let owner = unique("kit/beating");
    let run_id = a
        .begin_run(&crate::runs::start(DAY, Utc::now(), &owner))
        .unwrap_or_else(|e| panic!("begin_run: {e}"));
    let page = take(
        a.as_mut(),
        &owner,
        &band,
        None,
        RECORDS as usize,
        in_a_minute(),
    );
    assert_eq!(page.taken.len(), RECORDS as usize);
    let deadlocks_before = h.deadlocks();
    let mut heartbeat = a
        .heartbeat(&owner, run_id)
        .unwrap_or_else(|e| panic!("heartbeat: {e}"));
    let done = std::sync::atomic::AtomicBool::new(false);
    let beats = std::thread::scope(|scope| {
        let beating = scope.spawn(|| {
            let mut beats = 0u32;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                heartbeat
                    .beat(in_a_minute())
                    .unwrap_or_else(|e| panic!("a beat while marks are written: {e}"));
                beats += 1;
            }
            beats
        });
        // Newest first, as a tick's page comes, and in groups of ten with two statuses
        // and kept failures among them: the renewals go through the claims in their
        // own order.
        let now = Utc::now();
        for (n, group) in page.taken.chunks(10).enumerate() {
            let marks: Vec<Mark> = group
                .iter()
                .enumerate()
                .map(|(i, r)| {
                    let mut m = Mark::new(
                        r.id.clone(),
                        if (i + n) % 3 == 0 { "SUCCESS" } else { "ERROR" },
                        now,
                    );
                    if i % 4 == 1 {
                        m.keep_until = Some(now + TimeDelta::minutes(5));
                    }
                    m
                })
                .collect();
            let refused = a
                .mark(&owner, &marks)
                .unwrap_or_else(|e| panic!("mark while a heartbeat beats: {e}"));
            assert!(
                refused.is_empty(),
                "marks of held records refused: {refused:?}"
            );
        }
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        beating.join().expect("the heartbeat's thread")
    });
    // The server counts what its backends report, at the latest as they exit.
    drop(heartbeat);
    drop(a);
    assert!(beats > 0, "no beat ran while the marks were written");
    let marked = backlog.with_status("SUCCESS").len() + backlog.with_status("ERROR").len();
    assert_eq!(marked, RECORDS as usize, "every mark written");
    if let (Some(before), Some(after)) = (deadlocks_before, h.deadlocks()) {
        assert_eq!(
            after - before,
            0,
            "the server broke deadlocks between the heartbeat and the marks ({beats} beats)"
        );
    }
}

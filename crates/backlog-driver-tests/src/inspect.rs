//! Checks of what a store does before any tick: reading the table's shape, making the
//! tool's own tables, its clock and its description.

use backlog_core::chrono::{TimeDelta, Utc};
use backlog_core::store::StoreError;

use crate::Harness;
use crate::fixture::{Backlog, Flavour, Format, config, unique};

/// `inspect` finds the table and decides the inserted-at format from the values, for
/// every format the database can hold; and the format decodes what it encodes.
///
/// Why: the band's bounds are bound in the column's own format and compared with the
/// bare column (so selection stays an index range). A wrong format selects the wrong
/// band, silently: records are tried on another tier's cadence, or never.
pub fn inspect_detects_each_inserted_at_format(h: &dyn Harness) {
    for flavour in Flavour::all(h) {
        let backlog = Backlog::new(h, flavour);
        backlog.insert_new([(1, 5), (2, 90), (3, 3 * 24 * 60)]);
        let format = Format::of(backlog.store().as_mut());
        assert_eq!(
            format.name,
            flavour.setting_name(),
            "inspect of a {flavour:?} column detected {}",
            format.shown
        );
        let t = backlog.ago(42);
        assert_eq!(
            format.decode(&format.encode(t)),
            Some(t),
            "{} does not decode what it encodes",
            format.shown
        );
    }
}

/// A schedule file that names a table the database does not have is refused by
/// `StoreError::NoTable`, when the store is opened or inspected.
///
/// Why: `backlog run` must exit with a message that names the table and the key to
/// fix, not tick over nothing and report success.
pub fn inspect_refuses_a_missing_table(h: &dyn Harness) {
    let missing = unique("backlog_kit_missing");
    let config = config(h, &missing, "status", "inserted_at");
    let result = backlog_core::store::open(&config.database, &config.table)
        .and_then(|mut store| store.inspect().map(drop));
    match result {
        Err(StoreError::NoTable { table, .. }) => assert_eq!(table, missing),
        other => panic!("a missing table {missing:?}: expected StoreError::NoTable, got {other:?}"),
    }
}

/// A schedule file that names a column the table does not have is refused by
/// `StoreError::NoColumn`, naming the column and the schedule-file key to fix, for the
/// status and for the inserted-at column alike.
///
/// Why: a status column that is not there would make every mark fail after its
/// handler ran (the work done, the record handed out again and again).
pub fn inspect_refuses_a_missing_column(h: &dyn Harness) {
    let backlog = Backlog::new(h, Flavour::Rfc3339Text);
    backlog.insert_new([(1, 5)]);
    for (status, inserted_at, wrong, wanted_key) in [
        ("state", "inserted_at", "state", "table.status"),
        ("status", "created", "created", "table.inserted_at"),
    ] {
        let config = config(h, &backlog.name, status, inserted_at);
        let result = backlog_core::store::open(&config.database, &config.table)
            .and_then(|mut store| store.inspect().map(drop));
        match result {
            Err(StoreError::NoColumn {
                table, column, key, ..
            }) => {
                assert_eq!(table, backlog.name);
                assert_eq!(column, wrong);
                assert_eq!(key, wanted_key);
            }
            other => {
                panic!("a missing column {wrong:?}: expected StoreError::NoColumn, got {other:?}")
            }
        }
    }
}

/// `ensure_own_tables` may be called again and again, by one store, by another store
/// on the same table, and by a store on another table of the same database; the run
/// log works after each.
///
/// Why: every tick and every command calls it first, on every runner of a fleet; the
/// second call must find the tables, not fail on them or make them again.
pub fn ensure_own_tables_is_idempotent(h: &dyn Harness) {
    let first = Backlog::new(h, Flavour::Rfc3339Text);
    let second = Backlog::new(h, Flavour::UnixSeconds);
    first.insert_new([(1, 5)]);
    second.insert_new([(1, 5)]);
    let (mut a, _) = first.ready();
    a.ensure_own_tables()
        .unwrap_or_else(|e| panic!("ensure_own_tables a second time: {e}"));
    let (mut b, _) = first.ready();
    let (mut c, _) = second.ready();
    for (store, label) in [
        (&mut a, "first"),
        (&mut b, "second"),
        (&mut c, "other table's"),
    ] {
        store
            .ensure_own_tables()
            .unwrap_or_else(|e| panic!("ensure_own_tables by the {label} store again: {e}"));
        let run = crate::runs::start(crate::fixture::DAY, Utc::now(), &unique("kit_owner"));
        let id = store
            .begin_run(&run)
            .unwrap_or_else(|e| panic!("begin_run by the {label} store: {e}"));
        store
            .finish_run(id, &crate::runs::end("done"))
            .unwrap_or_else(|e| panic!("finish_run by the {label} store: {e}"));
    }
}

/// `clock` reads a time within a few seconds of this host's, and does not go back.
///
/// Why: every runner computes its band from it; a clock read in the wrong zone or
/// unit (hours off, or 1970) moves every band.
pub fn clock_is_near_now(h: &dyn Harness) {
    let backlog = Backlog::new(h, Flavour::Rfc3339Text);
    backlog.insert_new([(1, 5)]);
    let mut store = backlog.store();
    let first = store.clock().unwrap_or_else(|e| panic!("clock: {e}"));
    let second = store.clock().unwrap_or_else(|e| panic!("clock: {e}"));
    let drift = (first - Utc::now()).abs();
    assert!(
        drift < TimeDelta::seconds(5),
        "clock() is {first}, {drift} away from this host's (the test server's clock should be this host's)"
    );
    assert!(
        second >= first - TimeDelta::milliseconds(1),
        "clock() went back: {first}, then {second}"
    );
}

/// The store's description, the schedule's `[database]` as `Debug` shows it, and the
/// message of an error on the database never show the password.
///
/// Why: they go to logs, the dashboard and the run log; a password there is a leak.
pub fn describe_hides_the_password(h: &dyn Harness) {
    let backlog = Backlog::new(h, Flavour::Rfc3339Text);
    backlog.insert_new([(1, 5)]);
    let description = backlog.store().describe();
    assert!(!description.is_empty(), "describe() is empty");
    let missing = config(h, &unique("backlog_kit_missing"), "status", "inserted_at");
    let error = backlog_core::store::open(&missing.database, &missing.table)
        .and_then(|mut store| store.inspect().map(drop))
        .expect_err("a missing table is refused");
    let Some(password) = h.password().filter(|p| !p.is_empty()) else {
        return;
    };
    for (what, text) in [
        ("describe()", description),
        (
            "the [database] section's Debug",
            format!("{:?}", backlog.config.database),
        ),
        ("a StoreError", error.to_string()),
    ] {
        assert!(
            !text.contains(&password),
            "{what} shows the password: {text}"
        );
    }
}

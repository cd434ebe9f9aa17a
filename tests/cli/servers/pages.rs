//! Taking a page of a band on a server: pages read while a tick's marks are written
//! miss no record, and a panic while a page is taken leaves no row locked. Each test
//! body runs on both servers.

use crate::harness::{Backend, Env, NOW, Schedule};
use crate::servers::{
    all_success, batch_schedule, output_within_a_minute, pending_records, spawn_run,
};

/// A tick's marks go to the server on a connection of their own while the tick reads
/// the next pages (a group goes out after a second of handling here). On a table this
/// small, MariaDB read the marks' `id IN (…) FOR UPDATE` by scanning another index and
/// kept every row it scanned locked: the pages read meanwhile skipped the rest of the
/// band, and the tick ended with three of eight records never handed out.
fn pages_read_while_marks_are_written_miss_no_record(backend: Backend) {
    let env = Env::on(backend);
    pending_records(&env, 8);
    batch_schedule(&env, "", "mode = \"batch\"\nbatch_size = 1");
    let out = output_within_a_minute(spawn_run(&env, "0.2"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.contains("\"selected\":8"), "{stdout}");
    assert!(all_success(&env));
    assert_eq!(env.holds_left(), 0);
}

/// A panic while a page is taken (here in the tick's own filter of the records it
/// wants; in a library user's code it could be anywhere) ends the page's transaction:
/// the session is not left holding the page's rows, and the store takes pages again.
fn a_panic_while_a_page_is_taken_leaves_no_row_locked(backend: Backend) {
    use backlog_core::store::BandQuery;
    let env = Env::on(backend);
    env.classic();
    env.write_schedule(&Schedule::default());
    let config = crate::harness::load_config(&env.path("backlog.toml"));
    let mut store = backlog_core::store::open(&config.database, &config.table).unwrap();
    let format = store.inspect().unwrap();
    store.ensure_own_tables().unwrap();
    let now = chrono::DateTime::parse_from_rfc3339(NOW).unwrap().to_utc();
    let band = BandQuery {
        from: format.encode(now - chrono::Duration::days(400)),
        to: format.encode(now),
        to_inclusive: true,
        take_tried: false,
        clock: now,
        wants_all: true,
    };
    let lease = now + chrono::Duration::seconds(60);
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        store.take("test/1", &band, None, 10, lease, &|_| {
            panic!("a filter that fails")
        })
    }));
    assert!(panicked.is_err());
    // Another session may lock every row at once, waiting for none: none is held.
    let locked = env.lines(r#"SELECT CAST("ID" AS TEXT) FROM "BACKLOG" FOR UPDATE NOWAIT"#);
    assert_eq!(locked.len(), 4);
    let page = store
        .take("test/2", &band, None, 10, lease, &|_| true)
        .unwrap();
    assert!(!page.taken.is_empty(), "the store takes pages again");
}

crate::on_servers!(
    pages_read_while_marks_are_written_miss_no_record,
    a_panic_while_a_page_is_taken_leaves_no_row_locked,
);

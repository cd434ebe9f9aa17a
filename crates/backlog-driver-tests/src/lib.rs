//! The conformance suite of backlog's store protocol, as library code: every database
//! crate runs it from its own tests, against its real file or server, as River's
//! drivers all run `riverdrivertest`.
//!
//! The protocol is what the tick relies on and no type can say: a band's pages come
//! newest first with keyset cursors and never repeat a record; a record is handed out
//! only while one tick holds it; a mark lands only where the tick still holds; the run
//! log says which tier stopped early. A backend that compiles and gets one of these
//! wrong loses records or hands one to two handlers at once. Each check below is
//! small, says in its doc comment which promise it keeps, and fails with a message
//! that says what the backend did instead (the test binary names the backend).
//!
//! A database crate gives the kit a [`Harness`]: a fresh database of its own for each
//! check, a `[database]` section that opens it, and a raw connection for the kit's
//! tables and rows. Then, in one of its test files:
//!
//! ```ignore
//! backlog_driver_tests::suite!(MyHarness::fresh());
//! ```
//!
//! which expands to one `#[test]` per check (the expression is evaluated once in
//! each), so `cargo test` lists them by name and runs them in parallel. The kit uses
//! only backlog's public API.
//!
//! Each database crate of this repository runs it from its `tests/driver.rs`: `cargo
//! test -p backlog-sqlite`, and `-p backlog-postgres` or `-p backlog-mysql` with
//! `BACKLOG_TEST_PG` and `BACKLOG_TEST_MYSQL` set to the test servers (`source
//! .ci/postgres.sh && source .ci/mariadb.sh && pg_start && my_start` starts throwaway
//! ones and sets both). Without them the server tests fail, naming the variable; they
//! never skip. A harness installs its crate's driver before the kit loads a schedule
//! file.

mod fixture;

pub mod holds;
pub mod inspect;
pub mod overlap;
pub mod paces;
pub mod reads;
pub mod runs;
pub mod ticks;

use backlog_core::chrono::{DateTime, Utc};

/// What a database crate gives the kit: a database no other check uses (a temp
/// SQLite file, or a database of its own on the test server), dropped with the
/// harness, and a raw connection to it.
///
/// The kit makes its tables with portable SQL: lower-case unquoted names, `BIGINT`,
/// `VARCHAR(n)`, and literals (`'text'`, integers) in multi-row `INSERT`s, one
/// statement per call, so that the same text runs on SQLite, PostgreSQL and MySQL.
/// Only a column of the database's own timestamp type is spelled by the harness.
pub trait Harness {
    /// The body of a schedule file's `[database]` section that opens this database:
    /// `url = "…"` (a SQLite path absolute, since the kit's schedule file has no
    /// folder) and any other key it needs, as TOML.
    fn database_section(&self) -> String;

    /// Runs one SQL statement on this database, on a connection of the harness's own,
    /// committed when it returns. Panics, naming the statement and the database's own
    /// message, if it fails.
    fn execute(&self, sql: &str);

    /// The rows a query returns, each value as text (integers in decimal, NULL as
    /// none). Panics as `execute` does.
    fn query(&self, sql: &str) -> Vec<Vec<Option<String>>>;

    /// The column type of the database's own timestamps, as `CREATE TABLE` spells it
    /// (`timestamptz`, `DATETIME(6)`); none where it has none (SQLite), and the
    /// checks of a native inserted-at column are left out.
    fn native_timestamp_type(&self) -> Option<String> {
        None
    }

    /// An instant as a literal of `native_timestamp_type` in an `INSERT`: by default
    /// `'YYYY-MM-DD HH:MM:SS.ffffff'`, the wall-clock time in UTC (what a `DATETIME`
    /// holds); a type read in the session's zone (`timestamptz`) needs the offset.
    fn native_timestamp_literal(&self, at: DateTime<Utc>) -> String {
        format!("'{}'", at.format("%Y-%m-%d %H:%M:%S%.6f"))
    }

    /// How many deadlocks the server has broken in this database, where it counts
    /// them per database (PostgreSQL's `pg_stat_database`); none where it cannot say.
    fn deadlocks(&self) -> Option<u64> {
        None
    }

    /// The password `database_section` holds, if any: what no description of the
    /// store may show.
    fn password(&self) -> Option<String> {
        None
    }
}

/// Expands to one `#[test]` per check of the kit, each making its harness with
/// `$harness` (evaluated anew in each test, so each check has a database of its own)
/// and running the check on it.
///
/// ```ignore
/// backlog_driver_tests::suite!(SqliteHarness::new());
/// ```
#[macro_export]
macro_rules! suite {
    ($harness:expr) => {
        $crate::__one_test_per_check! {
            $harness;
            inspect::inspect_detects_each_inserted_at_format,
            inspect::inspect_refuses_a_missing_table,
            inspect::inspect_refuses_a_missing_column,
            inspect::ensure_own_tables_is_idempotent,
            inspect::clock_is_near_now,
            inspect::describe_hides_the_password,
            runs::run_log_round_trips,
            runs::runs_since_reads_a_windows_ticks_from_a_clock,
            runs::a_stopped_run_is_unfinished_until_a_later_run_finishes,
            runs::begin_run_abandons_a_silent_run,
            runs::open_alerts_are_taken_once,
            reads::select_pages_a_band_newest_first_without_repeats,
            reads::select_keeps_to_the_band_bounds,
            reads::oldest_of_and_find_read_single_records,
            reads::count_by_status_counts_a_range,
            reads::oldest_in_reads_the_oldest_of_some_statuses_in_a_range,
            reads::inserted_at_page_reads_distinct_values_in_order,
            holds::take_holds_records_until_release,
            holds::mark_writes_what_its_owner_holds,
            holds::a_lapsed_hold_frees_its_records,
            holds::a_heartbeat_keeps_a_hold,
            holds::a_heartbeat_and_marks_never_deadlock,
            holds::take_records_skips_records_in_hand,
            holds::hand_over_names_what_a_person_took,
            ticks::a_tick_hands_out_each_record_once_and_marks_it,
            ticks::a_tick_takes_the_newest_up_to_its_limit,
            ticks::a_failed_record_waits_for_its_next_slot,
            ticks::a_stopped_tick_leaves_its_tier_unfinished,
            ticks::a_dry_run_writes_nothing,
            overlap::two_ticks_at_once_never_share_a_record,
            overlap::a_mark_lands_only_where_the_tick_still_holds,
            paces::an_adapted_pace_is_one_row_every_runner_moves,
            paces::an_adapted_pace_loses_no_news_to_a_race,
        }
    };
}

/// `suite!`'s expansion: a test function per `module::check`.
#[doc(hidden)]
#[macro_export]
macro_rules! __one_test_per_check {
    ($harness:expr; $($module:ident :: $check:ident),+ $(,)?) => {
        $(
            #[test]
            fn $check() {
                let harness = $harness;
                $crate::$module::$check(&harness);
            }
        )+
    };
}

//! The tool's own tables on a server: in the schema (MySQL: the database) the file
//! names, with a version that older tables move from and a newer one stops at. Each
//! test body runs on both servers.

use crate::harness::{Backend, Env, NOW, Schedule, recording_handler};
use crate::servers::server::OwnSchema;

/// The version of the tool's tables this release makes on `backend`, and each older
/// version with the statements that turn today's tables into it (`{s}` the schema).
fn versions(backend: Backend) -> (u32, Vec<(u32, String)>) {
    let (current, older) = versions_before_history(backend);
    // No pending counts or handler times in the run log, no index by clock.
    let history = match backend {
        Backend::Postgres => {
            "DROP TABLE {s}.backlog_run_times; DROP INDEX {s}.backlog_runs_by_clock; ALTER TABLE {s}.backlog_runs DROP COLUMN pending"
        }
        _ => {
            "DROP TABLE {s}.backlog_run_times; DROP INDEX backlog_runs_by_clock ON {s}.backlog_runs; ALTER TABLE {s}.backlog_runs DROP COLUMN pending"
        }
    };
    let older = std::iter::once((current, history.to_string()))
        .chain(
            older
                .into_iter()
                .map(|(v, statements)| (v, format!("{history}; {statements}"))),
        )
        .collect();
    (current + 1, older)
}

/// The same, before the history's step.
fn versions_before_history(backend: Backend) -> (u32, Vec<(u32, &'static str)>) {
    match backend {
        Backend::Postgres => (
            9,
            vec![
                // No answers by code.
                (8, "DROP TABLE {s}.backlog_answers"),
                // No adapted paces.
                (7, "DROP TABLE {s}.backlog_paces, {s}.backlog_answers"),
                // No reaches of a fleet's runners.
                (
                    6,
                    "DROP TABLE {s}.backlog_reaches, {s}.backlog_paces, {s}.backlog_answers",
                ),
                // No failures in a row, no alerts, no shared rates or breakers.
                (
                    3,
                    "DROP TABLE {s}.backlog_failures, {s}.backlog_alerts, {s}.backlog_rates, {s}.backlog_breakers, {s}.backlog_reaches, {s}.backlog_paces, {s}.backlog_answers",
                ),
                // No alerts, no shared rates or breakers.
                (
                    4,
                    "DROP TABLE {s}.backlog_alerts, {s}.backlog_rates, {s}.backlog_breakers, {s}.backlog_reaches, {s}.backlog_paces, {s}.backlog_answers",
                ),
                // No shared rates or breakers, no reaches.
                (
                    5,
                    "DROP TABLE {s}.backlog_rates, {s}.backlog_breakers, {s}.backlog_reaches, {s}.backlog_paces, {s}.backlog_answers",
                ),
                // No `lost` count in the run log, no attempts, no pauses.
                (
                    1,
                    "ALTER TABLE {s}.backlog_runs DROP COLUMN lost; DROP TABLE {s}.backlog_attempts, {s}.backlog_pauses, {s}.backlog_failures, {s}.backlog_alerts, {s}.backlog_rates, {s}.backlog_breakers, {s}.backlog_reaches, {s}.backlog_paces, {s}.backlog_answers",
                ),
            ],
        ),
        _ => (
            7,
            vec![
                // No answers by code.
                (6, "DROP TABLE {s}.backlog_answers"),
                // No adapted paces.
                (5, "DROP TABLE {s}.backlog_paces, {s}.backlog_answers"),
                // No reaches of a fleet's runners.
                (
                    4,
                    "DROP TABLE {s}.backlog_reaches, {s}.backlog_paces, {s}.backlog_answers",
                ),
                // The first MySQL release: no failures in a row, no alerts, no shared
                // rates or breakers.
                (
                    1,
                    "DROP TABLE {s}.backlog_failures, {s}.backlog_alerts, {s}.backlog_rates, {s}.backlog_breakers, {s}.backlog_reaches, {s}.backlog_paces, {s}.backlog_answers",
                ),
                // No shared rates or breakers, no reaches.
                (
                    3,
                    "DROP TABLE {s}.backlog_rates, {s}.backlog_breakers, {s}.backlog_reaches, {s}.backlog_paces, {s}.backlog_answers",
                ),
            ],
        ),
    }
}

/// The tool's tables go in the schema the file names, nothing in the default one; each
/// older version moves to this release's on the next tick, its new tables and columns
/// empty; a version this release does not know stops it with one line.
fn own_tables_live_in_the_named_schema_and_move_from_older_versions(backend: Backend) {
    let env = Env::on(backend);
    let schema = OwnSchema::new(&env);
    let s = &schema.name;
    env.classic();
    let database_extra: &'static str = format!("schema = \"{s}\"").leak();
    env.write_schedule(&Schedule {
        database_extra,
        ..Schedule::default()
    });
    env.write_handler("handler.sh", &recording_handler(&[]));
    env.run_window("1d");
    // Sorted here: MySQL's collation puts `_` after letters.
    let mut tables = env.lines(&format!(
        "SELECT CAST(table_name AS TEXT) FROM information_schema.tables WHERE table_schema = '{s}'"
    ));
    tables.sort();
    assert_eq!(
        tables,
        [
            "backlog_alerts",
            "backlog_answers",
            "backlog_attempts",
            "backlog_breakers",
            "backlog_claims",
            "backlog_failures",
            "backlog_meta",
            "backlog_paces",
            "backlog_pauses",
            "backlog_rates",
            "backlog_reaches",
            "backlog_run_times",
            "backlog_runs"
        ]
    );
    assert!(!env.has_own_tables(), "nothing in the default schema");
    let version = || {
        env.text(&format!(
            r#"SELECT value FROM {s}.backlog_meta WHERE "key" = 'schema_version'"#
        ))
    };
    let (current, older) = versions(backend);
    assert_eq!(version(), current.to_string());
    for (old, statements) in older {
        env.execute(&format!(
            r#"{}; UPDATE {s}.backlog_meta SET value = '{old}' WHERE "key" = 'schema_version'"#,
            statements.replace("{s}", s)
        ));
        env.run_window("1d");
        assert_eq!(version(), current.to_string(), "from version {old}");
        for table in [
            "backlog_failures",
            "backlog_alerts",
            "backlog_attempts",
            "backlog_rates",
            "backlog_breakers",
            "backlog_paces",
            "backlog_answers",
            "backlog_run_times",
        ] {
            assert_eq!(
                env.text(&format!("SELECT CAST(count(*) AS TEXT) FROM {s}.{table}")),
                "0",
                "{table} from version {old}"
            );
        }
        assert_eq!(
            env.text(&format!(
                "SELECT CAST(sum(lost) AS TEXT) FROM {s}.backlog_runs"
            )),
            "0",
            "lost from version {old}"
        );
    }
    let next = current + 1;
    // What holds the tool's tables, in the server's word.
    let holder = match backend {
        Backend::Postgres => "schema",
        _ => "database",
    };
    env.execute(&format!(
        r#"UPDATE {s}.backlog_meta SET value = '{next}' WHERE "key" = 'schema_version'"#
    ));
    env.backlog(&["run", "--window", "1d", "--now", NOW])
        .assert()
        .code(4)
        .stderr(predicates::str::ends_with(format!(
            ": the tool's tables in {holder} \"{s}\" are at schema version {next}, this backlog knows version {current}; use the backlog release that made them\n",
        )));
}

crate::on_servers!(own_tables_live_in_the_named_schema_and_move_from_older_versions);

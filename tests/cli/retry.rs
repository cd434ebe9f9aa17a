//! A `[retry]` section: a per-record strategy on two more columns of the table.

use crate::harness::{Backend, Env, Schedule, recording_handler};

const RETRY: &str = r#"
[retry]
strategy = "exponential"
params = { initial = "1h", factor = 2 }
count = "FAILURES"
since = "LAST_TRY"
"#;

fn env_with_tries(backend: Backend) -> Env {
    let env = Env::on(backend);
    env.create_table("TEXT");
    env.execute(r#"ALTER TABLE "BACKLOG" ADD COLUMN "FAILURES" INTEGER; ALTER TABLE "BACKLOG" ADD COLUMN "LAST_TRY" TEXT;"#);
    env.insert_aged(&[(1, 600), (2, 1200), (3, 1800), (4, 2400)], |t| {
        t.format("%Y-%m-%d %H:%M:%S").to_string().into()
    });
    // 2 failed once 30 minutes ago, 3 once 2 hours ago, 4 three times, last 2 hours ago.
    env.execute(
        r#"UPDATE "BACKLOG" SET "FAILURES" = 1, "LAST_TRY" = '2026-11-21 11:30:00' WHERE "ID" = 2;
           UPDATE "BACKLOG" SET "FAILURES" = 1, "LAST_TRY" = '2026-11-21 10:00:00' WHERE "ID" = 3;
           UPDATE "BACKLOG" SET "FAILURES" = 3, "LAST_TRY" = '2026-11-21 10:00:00' WHERE "ID" = 4;"#,
    );
    env.write_handler("handler.sh", &recording_handler(&[1, 2, 3, 4]));
    env
}

fn schedule_with(env: &Env, retry: &str) -> String {
    Schedule::default().render_for(&env.url()).replacen(
        "[handler]",
        &format!("{retry}\n[handler]"),
        1,
    )
}

fn a_tick_skips_records_whose_delay_has_not_passed_and_counts_the_tries(backend: Backend) {
    let env = env_with_tries(backend);
    std::fs::write(env.path("backlog.toml"), schedule_with(&env, RETRY)).unwrap();
    let out = env.run_window("1d");
    // Exponential from 1h: after one failure wait 1h, after three 4h.
    assert_eq!(
        env.take_calls(),
        [1, 3],
        "1 never tried; 3 waited 2h of 1h; 2 only 30m of 1h; 4 2h of 4h"
    );
    assert!(out.contains("deferred 2 to later ticks"), "{out}");
    let rows = env.lines(
        r#"SELECT CAST("ID" AS TEXT) || ' ' || CAST("FAILURES" AS TEXT) || ' ' || "LAST_TRY" FROM "BACKLOG" ORDER BY "ID""#,
    );
    assert_eq!(
        rows,
        [
            "1 1 2026-11-21 12:00:00",
            "2 1 2026-11-21 11:30:00",
            "3 2 2026-11-21 12:00:00",
            "4 3 2026-11-21 10:00:00",
        ],
        "handled records count one more try, at the tick's clock, in the column's format"
    );
    // Two hours later 1 (1h after one failure) and 3 (2h after two) are due, and 4 (4h) is.
    let out = env
        .backlog(&["run", "--window", "1d", "--now", "2026-11-21T14:00:00Z"])
        .assert()
        .success();
    assert!(String::from_utf8_lossy(&out.get_output().stdout).contains("selected 4"));
    assert_eq!(env.take_calls(), [1, 2, 3, 4]);
}

fn a_bad_retry_section_is_an_error(backend: Backend) {
    let env = env_with_tries(backend);
    std::fs::write(
        env.path("backlog.toml"),
        schedule_with(&env, &RETRY.replace("exponential", "expo")),
    )
    .unwrap();
    env.backlog(&["run", "--window", "1d"])
        .assert()
        .code(3)
        .stderr(predicates::str::contains(
            "backlog.toml: retry: no strategy \"expo\"",
        ));
    std::fs::write(
        env.path("backlog.toml"),
        schedule_with(&env, &RETRY.replace("\"FAILURES\"", "\"FAILS\"")),
    )
    .unwrap();
    env.backlog(&["run", "--window", "1d"])
        .assert()
        .code(4)
        .stderr(predicates::str::contains(
            "table \"BACKLOG\" has no column \"FAILS\" (set retry.count in the schedule file)",
        ));
}

crate::on_every_backend!(
    a_tick_skips_records_whose_delay_has_not_passed_and_counts_the_tries,
    a_bad_retry_section_is_an_error,
);

//! A `[retry]` section: a per-record strategy on two more columns of the table.

use chrono::{DurationRound as _, SecondsFormat, Utc};

use crate::dashboard::{get, serve};
use crate::harness::{Backend, Env, NOW, Schedule, recording_handler};

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
    assert!(
        out.contains("deferred 2 to later ticks ([retry] waits not over)"),
        "{out}"
    );
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
    // The message points at the section.
    let line = std::fs::read_to_string(env.path("backlog.toml"))
        .unwrap()
        .lines()
        .position(|l| l == "[retry]")
        .unwrap()
        + 1;
    env.backlog(&["run", "--window", "1d"])
        .assert()
        .code(3)
        .stderr(predicates::str::contains(format!(
            "backlog.toml:{line}:1: retry: no strategy \"expo\"",
        )));
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

fn stdout(assert: assert_cmd::assert::Assert) -> String {
    String::from_utf8_lossy(&assert.get_output().stdout).into_owned()
}

fn stderr(assert: assert_cmd::assert::Assert) -> String {
    String::from_utf8_lossy(&assert.get_output().stderr).into_owned()
}

/// `show`, `explain --id`, `show --json`, the dashboard and dry runs agree on when a
/// record under a `[retry]` curve is tried next: the first slot of its tier once its
/// wait is over, not the tier's next slot. On the real clock, since the dashboard has
/// no other: the record's last try is set from the hour now began.
fn every_view_of_a_record_agrees_with_the_tick_on_its_next_try(backend: Backend) {
    let now = Utc::now();
    let hour = now.duration_trunc(chrono::Duration::hours(1)).unwrap();
    let env = Env::on(backend);
    env.create_table("TEXT");
    env.execute(r#"ALTER TABLE "BACKLOG" ADD COLUMN "FAILURES" INTEGER; ALTER TABLE "BACKLOG" ADD COLUMN "LAST_TRY" TEXT;"#);
    // Three days old: tier 2's band (7d, every hour).
    env.insert_aged_at(now, &[(7, 3 * 86_400)], |t| {
        t.format("%Y-%m-%d %H:%M:%S").to_string().into()
    });
    // Failed three times, the last half an hour before this hour began: exponential
    // from 1h waits 4h after the third, to 3h30m after this hour began, so the first
    // slot it may take is 4h after (where tier 2's next slot is 1h after): the slot
    // after the wait, not the wait's end.
    let last = (hour - chrono::Duration::minutes(30)).format("%Y-%m-%d %H:%M:%S");
    env.execute(&format!(
        r#"UPDATE "BACKLOG" SET "FAILURES" = 3, "LAST_TRY" = '{last}' WHERE "ID" = 7"#
    ));
    env.write_handler("handler.sh", &recording_handler(&[]));
    std::fs::write(env.path("backlog.toml"), schedule_with(&env, RETRY)).unwrap();
    let next = hour + chrono::Duration::hours(4);
    let next_text = next.to_rfc3339_opts(SecondsFormat::Secs, true);
    let wait = hour + chrono::Duration::minutes(210);
    let wait_text = wait.to_rfc3339_opts(SecondsFormat::Secs, true);

    let show = stdout(env.backlog(&["show", "7"]).assert().success());
    assert!(
        show.contains(&format!("in tier 2's band; tried next at {next_text} (in ")),
        "{show}"
    );
    assert!(
        show.contains(&format!(
            "by tier 2, once its [retry] wait ends at {wait_text}\n"
        )),
        "{show}"
    );
    let json: serde_json::Value = serde_json::from_str(&stdout(
        env.backlog(&["show", "7", "--json"]).assert().success(),
    ))
    .unwrap();
    assert_eq!(json["next_try"]["at"], next_text, "{json}");
    assert_eq!(json["next_try"]["retry_until"], wait_text, "{json}");

    let explain = stdout(env.backlog(&["explain", "--id", "7"]).assert().success());
    assert!(
        explain.contains(&format!("; it is tried next at {next_text} (in "))
            && explain.contains(&format!(
                "by tier 2 (its [retry] wait ends at {wait_text})."
            )),
        "{explain}"
    );
    assert!(
        explain.contains("Under [retry] (exponential), a record that keeps failing is tried about"),
        "{explain}"
    );

    let (server, port) = serve(
        env.command()
            .arg("serve")
            .env_remove("BACKLOG_TOKEN")
            .stderr(std::process::Stdio::null()),
    );
    let page = get(port, "/record?id=7");
    drop(server);
    assert_eq!(page.code, 200, "{}", page.body);
    assert!(
        page.body
            .contains(&next.format("%Y-%m-%d %H:%M:%S UTC").to_string())
            && page.body.contains("once its [retry] wait ends at"),
        "{}",
        page.body
    );

    // The tick itself: a dry run of tier 2 just before the wait ends leaves it, and says
    // why; at the slot it takes it.
    let before = (wait - chrono::Duration::seconds(1)).to_rfc3339();
    let text = stderr(
        env.backlog(&["run", "-w", "7d", "--dry-run", "--now", &before])
            .assert()
            .success(),
    );
    assert!(
        text.contains(
            "dry run, would hand over 0 records, deferred 1 to later ticks ([retry] waits not over)"
        ),
        "{text}"
    );
    let text = stderr(
        env.backlog(&["run", "-w", "7d", "--dry-run", "--now", &next_text])
            .assert()
            .success(),
    );
    assert!(
        text.contains("dry run, would hand over 1 record\n"),
        "{text}"
    );
}

/// A snooze by hand is no try: the count and time of `[retry]` stay as they were, as
/// does the status.
fn a_snooze_by_hand_leaves_the_retry_columns_alone(backend: Backend) {
    let env = env_with_tries(backend);
    std::fs::write(env.path("backlog.toml"), schedule_with(&env, RETRY)).unwrap();
    let rows = || {
        env.lines(
            r#"SELECT CAST("ID" AS TEXT) || ' ' || "STATUS" || ' ' || CAST(coalesce("FAILURES", 0) AS TEXT) || ' ' || coalesce("LAST_TRY", '-') FROM "BACKLOG" ORDER BY "ID""#,
        )
    };
    let before = rows();
    env.backlog(&["snooze", "2", "3", "--for", "2h", "--now", NOW])
        .assert()
        .success();
    assert_eq!(rows(), before);
}

crate::on_every_backend!(
    a_snooze_by_hand_leaves_the_retry_columns_alone,
    a_tick_skips_records_whose_delay_has_not_passed_and_counts_the_tries,
    a_bad_retry_section_is_an_error,
    every_view_of_a_record_agrees_with_the_tick_on_its_next_try,
);

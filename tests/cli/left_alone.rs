//! What a tick leaves alone, and says: inserted-at values it cannot read or place, and
//! a band whose statuses differ from the file's in case only.

use crate::harness::{Backend, NOW, Schedule};
use crate::tick::classic_env;

/// A record whose inserted-at value cannot be read has no age: the tick leaves it
/// alone, counts it and names the first, in a dry run too; the others go through.
fn a_record_with_an_unreadable_inserted_at_value_is_left_alone(backend: Backend) {
    let env = classic_env(
        backend,
        Schedule {
            format: "sqlite",
            ..Schedule::default()
        },
        &[],
    );
    // Sorts between the band's bounds as text, but is no time.
    env.execute(r#"UPDATE "BACKLOG" SET "DATE_INSERTED" = '2026-11-21 06:61:00' WHERE "ID" = 2"#);
    let out = env
        .backlog(&["run", "--window", "1d", "--now", NOW, "--dry-run"])
        .assert()
        .success();
    let dry = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(
        dry.contains("would hand over 1 record; left alone 1 with an unreadable DATE_INSERTED value (record 2: \"2026-11-21 06:61:00\"; fix them, `backlog doctor` lists them)"),
        "{dry}"
    );
    let out = env.run_window("1d");
    assert!(
        out.contains("selected 1, succeeded 1, failed 0, skipped 0")
            && out.contains("; left alone 1 with an unreadable DATE_INSERTED value (record 2: \"2026-11-21 06:61:00\""),
        "{out}"
    );
    assert_eq!(env.take_calls(), [1]);
    assert_eq!(env.statuses()[1], (2, "NEW".to_string()));
}

/// RFC 3339 text in another UTC offset than the rest of the column, in the middle of
/// the table where the format check of its two ends does not look: text compares it
/// as written, so the band it sorts in may not be its own. The tick leaves it alone,
/// counts it, names the first and warns once, in a dry run too.
fn a_record_in_another_utc_offset_is_left_alone(backend: Backend) {
    let env = classic_env(backend, Schedule::default(), &[]);
    env.execute(
        r#"UPDATE "BACKLOG" SET "DATE_INSERTED" = replace("DATE_INSERTED", ' ', 'T') || 'Z'"#,
    );
    // 07:00Z, written five hours behind: the same instant, other text.
    env.execute(
        r#"UPDATE "BACKLOG" SET "DATE_INSERTED" = '2026-11-21T02:00:00-05:00' WHERE "ID" = 2"#,
    );
    let said = "left alone 1 whose DATE_INSERTED carries another UTC offset than the column's (record 2: \"2026-11-21T02:00:00-05:00\"; store every value in one offset, `backlog doctor` lists them)";
    let out = env
        .backlog(&["run", "--window", "1d", "--now", NOW, "--dry-run"])
        .assert()
        .success();
    let dry = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(
        dry.contains(&format!("would hand over 1 record; {said}")),
        "{dry}"
    );
    let out = env
        .backlog(&["run", "--window", "1d", "--now", NOW])
        .assert()
        .success();
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(
        stdout.contains("selected 1, succeeded 1, failed 0, skipped 0") && stdout.contains(said),
        "{stdout}"
    );
    assert_eq!(
        stderr
            .lines()
            .filter(|l| l.contains("carries another UTC offset"))
            .count(),
        1,
        "{stderr}"
    );
    assert_eq!(env.take_calls(), [1]);
    assert_eq!(env.statuses()[1], (2, "NEW".to_string()));
}

/// A band whose records have a pending status in another case (`new` where the file
/// says `NEW`) selects nothing: the tick says why, once, instead of nothing.
///
/// With an index on (status, inserted-at) and none on inserted-at, the sample is read
/// status by status through that index (a sample of the band by inserted-at would scan
/// the table): the same warning.
fn a_band_of_statuses_in_another_case_is_warned_of(backend: Backend) {
    let env = classic_env(backend, Schedule::default(), &[]);
    env.execute(r#"UPDATE "BACKLOG" SET "STATUS" = 'new'"#);
    for layout in ["inserted-at index", "(status, inserted-at) index"] {
        if layout.starts_with("(status") {
            env.execute(match backend {
                Backend::Mysql => r#"DROP INDEX "BACKLOG_BY_DATE" ON "BACKLOG""#,
                _ => r#"DROP INDEX "BACKLOG_BY_DATE""#,
            });
            env.execute(
                r#"CREATE INDEX "BACKLOG_BY_STATUS_DATE" ON "BACKLOG" ("STATUS", "DATE_INSERTED")"#,
            );
        }
        let out = env
            .backlog(&["run", "--window", "1d", "--now", NOW])
            .assert()
            .success();
        let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
        assert_eq!(stderr.lines().count(), 1, "{layout}: {stderr}");
        assert!(
            stderr.contains(
                "WARN tick{tier=1 window=1d}: no record of this band is pending, yet a sample of the band holds statuses that differ from a pending value only in case: 2 \"new\" (the file says \"NEW\"); statuses are compared exactly, case included: set table.pending = [\"new\", \"ERROR\"] in the schedule file"
            ),
            "{layout}: {stderr}"
        );
        assert!(env.take_calls().is_empty());
    }
}

crate::on_every_backend!(
    a_record_with_an_unreadable_inserted_at_value_is_left_alone,
    a_record_in_another_utc_offset_is_left_alone,
    a_band_of_statuses_in_another_case_is_warned_of,
);

//! What a person reads of a status: its label where the file gives one.

use crate::harness::{Env, NOW, Schedule};
use crate::operate::stdout;

/// A status column of codes (0 pending, 1 done) with `[table] labels`: every place a
/// person reads a status says its label (the log line of a failure, the summary,
/// `status`'s headings, `show`, the dashboard); the table keeps its codes. A BLOB
/// holding JSON text shows as that text.
#[test]
fn status_codes_are_shown_by_their_labels() {
    let env = Env::new();
    env.db()
        .execute_batch(
            "CREATE TABLE BACKLOG (ID INTEGER PRIMARY KEY, STATUS INTEGER, DATE_INSERTED TEXT, PAYLOAD BLOB);
             CREATE INDEX BY_DATE ON BACKLOG (DATE_INSERTED);",
        )
        .unwrap();
    env.db()
        .execute_batch(
            "INSERT INTO BACKLOG VALUES (1, 0, '2026-11-21 11:50:00', NULL), (2, 0, '2026-11-21 11:40:00', CAST('{\"order\":2}' AS BLOB));",
        )
        .unwrap();
    env.write_handler("handler.sh", &crate::harness::recording_handler(&[2]));
    let file = Schedule::default().render_for(&env.url()).replacen(
        "inserted_at_format",
        "pending = [\"0\"]\nsuccess = \"1\"\nerror = \"0\"\nlabels = { \"0\" = \"pending\", \"1\" = \"done\" }\ninserted_at_format",
        1,
    );
    std::fs::write(env.path("backlog.toml"), file).unwrap();
    let out = env
        .backlog(&["run", "--window", "1d", "--now", NOW])
        .assert()
        .success();
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(
        stderr.contains(" WARN tick{tier=1 window=1d}: record 2: pending (exit 1)"),
        "{stderr}"
    );
    assert_eq!(
        env.lines(r#"SELECT CAST("STATUS" AS TEXT) FROM "BACKLOG" ORDER BY "ID""#),
        ["1", "0"],
        "the table keeps its codes"
    );
    let status = stdout(env.backlog(&["status", "--now", NOW]).assert().success());
    let heading = status.lines().find(|l| l.starts_with("ages")).unwrap();
    assert_eq!(
        heading.split_whitespace().collect::<Vec<_>>(),
        ["ages", "pending", "done"],
        "{status}"
    );
    let show = stdout(env.backlog(&["show", "2", "--now", NOW]).assert().success());
    assert!(
        show.starts_with("record 2 of BACKLOG: pending, inserted"),
        "{show}"
    );
    // A BLOB of JSON text is shown as that text (its handler gets it as base64).
    assert!(show.contains(r#""PAYLOAD":"{\"order\":2}""#), "{show}");

    let (server, port) = crate::dashboard::serve(
        env.command()
            .arg("serve")
            .env_remove("BACKLOG_TOKEN")
            .stderr(std::process::Stdio::null()),
    );
    let page = crate::dashboard::get(port, "/");
    let record = crate::dashboard::get(port, "/record?id=2");
    drop(server);
    assert!(
        page.body
            .contains(r#"<th class="num">pending</th><th class="num">done</th>"#),
        "{}",
        page.body
    );
    assert!(
        !page.body.contains(r#"<th class="num">0</th>"#),
        "{}",
        page.body
    );
    assert!(record.body.contains(">pending</span>"), "{}", record.body);
}

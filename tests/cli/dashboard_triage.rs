//! The dashboard as a person on call triages with it: the records list says each
//! record's last error, failures and next try; the failures page filters by error text
//! (`--error-contains`'s path) and groups failures by error; an action records who
//! took it (`--user-header`, trusted behind the proxy, else the server's user); and
//! the words say what happened (a snooze is a snooze, one record is one record, a
//! pause is said once, with its Resume beside it).

use crate::dashboard::{csrf, get, location, request, serve};
use crate::harness::{Backend, Env, PROGRESSIVE_TIERS, Running, Schedule};

/// Fails records 1 to 4, each saying why (1 and 2 the same last line, 2 after a line
/// of its own; 4 a line of 300 characters and more); 5 succeeds.
const WHY_HANDLER: &str = r#"#!/bin/sh
cat > /dev/null
case "$BACKLOG_RECORD_ID" in
  1) echo 'connection refused by partner' >&2; exit 1 ;;
  2) echo 'starting'; echo 'connection refused by partner' >&2; exit 1 ;;
  3) echo 'HTTP 429 too many requests'; exit 1 ;;
  4) echo "$(head -c 300 /dev/zero | tr '\0' x) END" >&2; exit 1 ;;
esac
exit 0
"#;

/// Records 1 to 5 in tier 1's band, ticked once by `WHY_HANDLER`, and `backlog serve`
/// with `extra`.
pub(crate) fn failed_and_served(backend: Backend, extra: &[&str]) -> (Env, Running, u16) {
    let env = Env::on(backend);
    env.create_table("TEXT");
    let aged: Vec<(i64, i64)> = (1..=5).map(|id| (id, 60 * id)).collect();
    env.insert_aged_at(chrono::Utc::now(), &aged, |t| {
        t.format("%Y-%m-%d %H:%M:%S").to_string().into()
    });
    env.write_schedule(&Schedule {
        tiers: PROGRESSIVE_TIERS,
        ..Schedule::default()
    });
    let file = std::fs::read_to_string(env.path("backlog.toml")).unwrap();
    std::fs::write(
        env.path("backlog.toml"),
        file.replace(
            "inserted_at_format = \"auto\"",
            "inserted_at_format = \"auto\"\ngiven_up = \"DEAD\"",
        ),
    )
    .unwrap();
    env.write_handler("handler.sh", WHY_HANDLER);
    env.backlog(&["run", "--window", "1d"]).assert().success();
    assert_eq!(env.with_status("ERROR"), 4);
    let log = std::fs::File::create(env.path("serve.log")).unwrap();
    let (server, port) = serve(
        env.command()
            .arg("serve")
            .args(extra)
            .env_remove("BACKLOG_TOKEN")
            .stderr(log),
    );
    (env, server, port)
}

/// The row of record `id` in a page's table of records.
fn row(page: &str, id: &str) -> String {
    let table = page
        .split("<table class=\"records\">")
        .nth(1)
        .unwrap_or_else(|| panic!("no records table: {page}"));
    let link = format!("<a href=\"/record?id={id}\">");
    table
        .split("<tr>")
        .find(|r| r.contains(&link))
        .unwrap_or_else(|| panic!("no row of record {id}: {page}"))
        .split("</tr>")
        .next()
        .unwrap()
        .to_string()
}

/// The record ids the failures list shows, sorted, each once.
fn failed_ids(page: &str) -> Vec<String> {
    let table = page
        .split("<table class=\"attempts\">")
        .nth(1)
        .unwrap_or("");
    let mut ids: Vec<String> = table
        .split("<a href=\"/record?id=")
        .skip(1)
        .map(|s| s[..s.find('"').unwrap()].to_string())
        .collect();
    ids.sort();
    ids.dedup();
    ids
}

/// The records list shows each failed record's last error (cut, whole in the title),
/// its failures kept, and its next try; the failures page filters by error text, in
/// any case, and groups by error with a count and a link to each group's failures.
fn records_and_failures_say_what_failed(backend: Backend) {
    let (env, _server, port) = failed_and_served(backend, &[]);
    env.backlog(&["retry", "3"]).assert().success();
    let page = get(port, "/records?tier=1d&status=ERROR");
    assert_eq!(page.code, 200, "{}", page.body);
    let three = row(&page.body, "3");
    assert!(
        three.contains(">HTTP 429 too many requests</td>"),
        "{three}"
    );
    assert!(
        three.contains("<td class=\"num\">2</td>"),
        "two failures: {three}"
    );
    assert!(three.contains("by tier 1"), "{three}");
    assert!(three.contains(" UTC\">in "), "a next try ahead: {three}");
    // The last line the handler wrote, not its first.
    let two = row(&page.body, "2");
    assert!(two.contains(">connection refused by partner</td>"), "{two}");
    assert!(two.contains("<td class=\"num\">1</td>"), "{two}");
    let four = row(&page.body, "4");
    assert!(
        four.contains(&format!(">{}…</td>", "x".repeat(120))),
        "{four}"
    );
    assert!(four.contains(" END"), "the whole text in the title: {four}");
    assert!(!page.body.contains("?id=5\""), "a success is not listed");

    let filtered = get(port, "/failures?error_contains=CONNECTION+Refused").body;
    assert_eq!(failed_ids(&filtered), ["1", "2"], "{filtered}");
    assert!(
        filtered.contains("Failures 1–2 of 2, newest first."),
        "{filtered}"
    );
    assert!(
        filtered.contains("name=\"error_contains\" value=\"CONNECTION Refused\""),
        "the form keeps the text: {filtered}"
    );
    let none = get(port, "/failures?error_contains=no+such+text").body;
    assert!(
        none.contains("No failures kept whose error holds “no such text”."),
        "{none}"
    );
    assert_eq!(failed_ids(&none), Vec::<String>::new());

    let groups = get(port, "/failures/errors");
    assert_eq!(groups.code, 200, "{}", groups.body);
    let body = &groups.body;
    assert!(body.contains("3 distinct errors in 5 failures"), "{body}");
    let first = body
        .split("<table class=\"errors\">")
        .nth(1)
        .and_then(|t| t.split("<tbody>").nth(1))
        .and_then(|t| t.split("</tr>").next())
        .unwrap_or_else(|| panic!("no groups: {body}"));
    // Most frequent first: 3's two failures, then 1 and 2's line.
    assert!(first.contains(">HTTP 429 too many requests</a>"), "{first}");
    assert!(first.contains("<td class=\"num\">2</td>"), "{first}");
    let link = "href=\"/failures?tier=&amp;outcome=&amp;error_contains=connection%20refused%20by%20partner&amp;page=1\"";
    assert!(body.contains(link), "{body}");
    let of_group = get(port, &link[6..link.len() - 1].replace("&amp;", "&")).body;
    assert_eq!(failed_ids(&of_group), ["1", "2"], "{of_group}");
}

crate::on_every_backend!(records_and_failures_say_what_failed);

/// An action behind a proxy records the name its header gives: a snooze (said as a
/// snooze, with who and until when, on the record's page, the records list and the
/// in-flight page) and a pause (said once, with its Resume beside it). A bulk action
/// by error text takes the records of those failures only; a confirm page agrees
/// with its count.
#[test]
fn actions_record_the_person_and_say_what_they_did() {
    let (env, _server, port) =
        failed_and_served(Backend::Sqlite, &["--user-header", "X-Forwarded-User"]);
    let token = csrf(&get(port, "/failures").body);
    let alice = ["X-Forwarded-User: alice"];
    let post = |path: &str, headers: &[&str], body: &str| {
        request(port, "POST", path, headers, &format!("{body}&csrf={token}"))
    };
    let snooze = "from=failures&error_contains=connection+refused&action=snooze&until=2h";
    let confirm = post("/bulk", &alice, snooze);
    assert!(
        confirm.body.contains("<h1>Snooze 2 records?</h1>"),
        "{}",
        confirm.body
    );
    let ids = confirm.body.split("name=\"ids\" value=\"").nth(1).unwrap();
    let mut ids: Vec<&str> = ids[..ids.find('"').unwrap()].split(',').collect();
    ids.sort();
    assert_eq!(ids, ["1", "2"], "the records of those failures only");
    let done = post("/bulk", &alice, &format!("{snooze}&confirm=yes&ids=1,2"));
    assert_eq!(done.code, 303, "{}", done.body);
    assert!(
        location(&done).starts_with(
            "/failures?tier=&outcome=&error_contains=connection%20refused&page=1&done="
        ),
        "back to the filter: {}",
        location(&done)
    );
    let record = get(port, "/record?id=1").body;
    assert!(
        record.contains("Snoozed by alice (dashboard): kept from the ticks until"),
        "{record}"
    );
    assert!(!record.contains("Failed in its tier's slot"), "{record}");
    let listed = row(&get(port, "/records?tier=1d&status=ERROR").body, "2");
    assert!(
        listed.contains("snoozed by alice (dashboard), until"),
        "{listed}"
    );
    let in_flight = get(port, "/in-flight").body;
    let snoozed = in_flight
        .split("<table class=\"snoozed\">")
        .nth(1)
        .unwrap_or_else(|| panic!("no snoozed table: {in_flight}"));
    let snoozed = snoozed.split("</table>").next().unwrap();
    assert!(
        snoozed.contains("<a href=\"/record?id=1\">")
            && snoozed.contains("<td>alice (dashboard)</td>"),
        "{snoozed}"
    );
    // Failures kept until their slot (3 and 4, when the slot has not ended) are not
    // snoozes.
    assert!(!snoozed.contains("?id=3\""), "{snoozed}");

    // A give-up's attempt names the person; a retry's person is in the server's log.
    let gave_up = post(
        "/bulk",
        &alice,
        "from=failures&action=give-up&reason=partner+gone&confirm=yes&ids=3",
    );
    assert_eq!(gave_up.code, 303, "{}", gave_up.body);
    let record = get(port, "/record?id=3").body;
    assert!(
        record.contains("partner gone (by alice, dashboard)"),
        "{record}"
    );
    let retried = post("/record/retry", &alice, "id=3");
    assert_eq!(retried.code, 303, "{}", retried.body);
    let log = std::fs::read_to_string(env.path("serve.log")).unwrap();
    assert!(
        log.contains("alice (dashboard) asked to give up 1 record")
            && log.contains("alice (dashboard) asked to retry 1 record"),
        "{log}"
    );

    let paused = post("/pause", &alice, "window=&reason=partner+down");
    assert_eq!(paused.code, 303, "{}", paused.body);
    // Said once on the page the pause leads to: the banner, not the notice as well.
    let after = get(port, &location(&paused)).body;
    assert!(after.contains(">Paused every tier.</p>"), "{after}");
    assert_eq!(
        after.matches("partner down").count(),
        1,
        "said once: {after}"
    );
    let overview = get(port, "/").body;
    assert!(
        overview.contains("Every tier is paused since ")
            && overview.contains(" by alice (dashboard): partner down."),
        "{overview}"
    );
    assert_eq!(overview.matches("partner down").count(), 1, "{overview}");
    assert!(!overview.contains("paused paused"), "{overview}");
    let resume = overview.find("Resume every tier").expect("a Resume");
    assert!(
        resume < overview.find("<details class=\"pause\">").unwrap(),
        "Resume beside the banner, not in the collapsed form: {overview}"
    );

    // One of the four records the failures pick is no longer pending.
    env.execute("UPDATE \"BACKLOG\" SET \"STATUS\" = 'SUCCESS' WHERE \"ID\" = 4");
    let retry = post("/bulk", &[], "from=failures&action=retry").body;
    assert!(retry.contains("<h1>Retry 3 records?</h1>"), "{retry}");
    assert!(retry.contains("1 more is no longer fit for it"), "{retry}");
    assert!(retry.contains("and is left alone."), "{retry}");
    let one = post(
        "/bulk",
        &[],
        "from=failures&error_contains=xxx+END&action=retry",
    )
    .body;
    assert!(one.contains("<h1>Nothing to retry</h1>"), "{one}");
    assert!(
        one.contains("The one record the filter picks is not fit for it"),
        "{one}"
    );
}

/// Without `--user-header` a name in that header is not trusted: the action is the
/// server's user's. A header name that is none is refused at the start.
#[test]
fn a_user_header_not_asked_for_is_ignored() {
    let (env, _server, port) = failed_and_served(Backend::Sqlite, &[]);
    let token = csrf(&get(port, "/failures").body);
    // A request without the header, and one with it where it is not asked for.
    let paused = request(
        port,
        "POST",
        "/pause",
        &[],
        &format!("window=1d&reason=x&csrf={token}"),
    );
    assert_eq!(paused.code, 303, "{}", paused.body);
    let done = request(
        port,
        "POST",
        "/bulk",
        &["X-Forwarded-User: mallory"],
        &format!("from=failures&action=snooze&until=2h&confirm=yes&ids=1&csrf={token}"),
    );
    assert_eq!(done.code, 303, "{}", done.body);
    let record = get(port, "/record?id=1").body;
    assert!(!record.contains("mallory"), "{record}");
    assert!(
        record.contains(" (dashboard): kept from the ticks until"),
        "{record}"
    );
    env.backlog(&[
        "serve",
        "--user-header",
        "X Forwarded",
        "--listen",
        "127.0.0.1:0",
    ])
    .env_remove("BACKLOG_TOKEN")
    .assert()
    .code(2)
    .stderr(predicates::str::contains(
        "--user-header \"X Forwarded\" is not a header name",
    ));
}

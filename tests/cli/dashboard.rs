//! The web dashboard (`backlog serve`): plain HTTP for status codes, the token, CSRF,
//! escaping and load (a real headless Chromium is `dashboard_browser.rs`'s).

use std::io::{Read as _, Write as _};
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::harness::{Backend, Env, PROGRESSIVE_TIERS, Running, Schedule};

/// Fails record 2 with an XSS payload on stderr; succeeds the others.
pub(crate) const HOSTILE_HANDLER: &str = r#"#!/bin/sh
cat > /dev/null
if [ "$BACKLOG_RECORD_ID" = 2 ] && [ ! -e fixed ]; then
  echo '<script>alert("owned")</script>' >&2
  exit 1
fi
exit 0
"#;

/// A port free a moment ago, for a program that cannot be told to take any and say
/// which (chromedriver); `backlog serve` is started with `serve` instead.
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub(crate) fn wait_for_port(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "nothing listens on {port}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `backlog serve` (`cmd`, with its arguments but `--listen`) on a loopback port the
/// system gives it, and that port, read from the line it prints once it listens: a
/// port picked free beforehand may be given to another test meanwhile.
pub(crate) fn serve(cmd: &mut std::process::Command) -> (Running, u16) {
    let mut server = Running::spawn(cmd.args(["--listen", "127.0.0.1:0"]).stdout(Stdio::piped()));
    let line = server.stdout_line();
    let port = line
        .trim()
        .trim_end_matches('/')
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("backlog serve said {line:?}, not where it listens"));
    (server, port)
}

/// A backlog with a failure kept, ticked once, and `backlog serve` on a free port.
pub(crate) fn served(backend: Backend, extra: &[&str]) -> (Env, Running, u16) {
    let env = Env::on(backend);
    env.create_table("TEXT");
    env.insert_aged_at(chrono::Utc::now(), &[(1, 60), (2, 120), (3, 180)], |t| {
        t.format("%Y-%m-%d %H:%M:%S").to_string().into()
    });
    env.write_schedule(&Schedule {
        tiers: PROGRESSIVE_TIERS,
        ..Schedule::default()
    });
    env.write_handler("handler.sh", HOSTILE_HANDLER);
    env.backlog(&["run", "--window", "1d"]).assert().success();
    let mut args = vec!["serve"];
    args.extend_from_slice(extra);
    let log = std::fs::File::create(env.path("serve.log")).unwrap();
    let (server, port) = serve(
        env.command()
            .args(&args)
            .env_remove("BACKLOG_TOKEN")
            .stderr(log),
    );
    (env, server, port)
}

/// A response: its status code, headers (lowercased) and body.
pub(crate) struct Response {
    pub(crate) code: u16,
    pub(crate) head: String,
    pub(crate) body: String,
}

pub(crate) fn request(
    port: u16,
    method: &str,
    path: &str,
    headers: &[&str],
    body: &str,
) -> Response {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let mut text = format!("{method} {path} HTTP/1.0\r\n");
    if !headers
        .iter()
        .any(|h| h.to_ascii_lowercase().starts_with("host:"))
    {
        text.push_str("Host: localhost\r\n");
    }
    for h in headers {
        text.push_str(&format!("{h}\r\n"));
    }
    if method == "POST" {
        text.push_str(&format!(
            "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    text.push_str("\r\n");
    text.push_str(body);
    stream.write_all(text.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let code = head.split(' ').nth(1).unwrap().parse().unwrap();
    Response {
        code,
        head: head.to_ascii_lowercase(),
        body: body.to_string(),
    }
}

pub(crate) fn get(port: u16, path: &str) -> Response {
    request(port, "GET", path, &[], "")
}

/// Where a redirect leads.
pub(crate) fn location(response: &Response) -> String {
    response
        .head
        .lines()
        .find_map(|l| l.strip_prefix("location: "))
        .expect("a redirect")
        .trim()
        .to_string()
}

/// The CSRF token the pages' forms carry.
pub(crate) fn csrf(page: &str) -> String {
    let at = page
        .find("name=\"csrf\" value=\"")
        .expect("a form with its token")
        + 19;
    page[at..at + 32].to_string()
}

/// Pages answer with the right codes; nothing from the database reaches a page raw;
/// actions need POST and the page's CSRF token; a retry and a pause go through.
fn pages_escape_what_they_show_and_actions_need_their_token(backend: Backend) {
    let (env, _server, port) = served(backend, &[]);
    let overview = get(port, "/");
    assert_eq!(overview.code, 200, "{}", overview.body);
    assert!(
        overview.head.contains("content-type: text/html"),
        "{}",
        overview.head
    );
    assert!(
        overview
            .head
            .contains("content-security-policy: default-src 'self'")
    );
    for page in [
        &overview.body,
        &get(port, "/failures").body,
        &get(port, "/record?id=2").body,
    ] {
        assert!(
            !page.contains("<script>alert"),
            "a payload reached a page raw:\n{page}"
        );
        assert!(
            page.contains("&lt;script&gt;alert(&quot;owned&quot;)&lt;/script&gt;"),
            "{page}"
        );
    }
    assert!(
        get(port, "/failures?outcome=timeout")
            .body
            .contains("None kept.")
    );
    let missing = get(port, "/record?id=999");
    assert_eq!(missing.code, 404);
    assert!(
        missing
            .body
            .contains("The table has no record with id 999."),
        "{}",
        missing.body
    );
    // An id the id column cannot hold is said so, not "no record".
    let not_an_id = get(port, "/record?id=abc");
    assert_eq!(not_an_id.code, 400);
    assert!(
        not_an_id.body.contains(
            "&quot;abc&quot; is not an id of table BACKLOG: its ID column holds integers"
        ) && !not_an_id.body.contains("no record"),
        "{}",
        not_an_id.body
    );
    assert_eq!(get(port, "/no/such/page").code, 404);
    assert_eq!(get(port, "/pause").code, 405, "GET never acts");
    assert_eq!(get(port, "/plots/ticks.svg").code, 200);
    let plot = get(port, "/plots/backlog.svg");
    assert!(plot.head.contains("content-type: image/svg+xml"));
    assert!(plot.body.len() < 50_000, "{} bytes", plot.body.len());

    let token = csrf(&overview.body);
    let refused = request(port, "POST", "/pause", &[], "window=1d&reason=x");
    assert_eq!(refused.code, 403, "no CSRF token");
    let refused = request(
        port,
        "POST",
        "/pause",
        &[],
        "window=1d&reason=x&csrf=0123456789abcdef0123456789abcdef",
    );
    assert_eq!(refused.code, 403, "a wrong CSRF token");
    let paused = request(
        port,
        "POST",
        "/pause",
        &[],
        &format!("window=1d&reason=maintenance+%3Cb%3E&until=2h&csrf={token}"),
    );
    assert_eq!(paused.code, 303, "{}", paused.body);
    // The result is shown on the page the redirect leads to; the address carries only
    // a key, and a key the server did not give shows nothing.
    let shown = get(port, &location(&paused));
    assert!(
        shown
            .body
            .contains("<p class=\"notice\" role=\"status\">Paused tier 1 (1d).</p>")
            && shown.body.matches("maintenance &lt;b&gt;").count() == 1,
        "{}",
        shown.body
    );
    assert!(
        !get(port, "/?done=Your%20token%20expired")
            .body
            .contains("expired")
    );
    env.backlog(&["run", "--window", "1d"])
        .assert()
        .success()
        .stdout(predicates::str::contains("not ticking, paused since"))
        .stdout(predicates::str::contains("maintenance <b>"));
    assert!(get(port, "/").body.contains("maintenance &lt;b&gt;"));
    let resumed = request(
        port,
        "POST",
        "/resume",
        &[],
        &format!("window=1d&csrf={token}"),
    );
    assert_eq!(resumed.code, 303);

    std::fs::write(env.path("fixed"), "").unwrap();
    let retried = request(
        port,
        "POST",
        "/record/retry",
        &[],
        &format!("id=2&csrf={token}"),
    );
    assert_eq!(retried.code, 303, "{}", retried.body);
    let to = location(&retried);
    assert!(to.starts_with("/record?id=2&done="), "{to}");
    assert!(
        get(port, &to)
            .body
            .contains("retried 1 record: succeeded 1")
    );
    assert_eq!(env.with_status("SUCCESS"), 3);
    let page = get(port, "/record?id=2").body;
    assert!(
        page.contains(">success<") && page.contains(">error<"),
        "{page}"
    );
}

/// A set of failures is retried only after a confirm step that says how many.
fn a_set_is_retried_after_a_confirm_step(backend: Backend) {
    let (env, _server, port) = served(backend, &[]);
    let token = csrf(&get(port, "/failures").body);
    std::fs::write(env.path("fixed"), "").unwrap();
    let confirm = request(
        port,
        "POST",
        "/bulk",
        &[],
        &format!("from=failures&action=retry&tier=1d&outcome=&csrf={token}"),
    );
    assert_eq!(confirm.code, 200);
    assert!(confirm.body.contains("Retry 1 record?"), "{}", confirm.body);
    assert_eq!(
        env.with_status("SUCCESS"),
        2,
        "nothing done before the confirm"
    );
    // The confirm page lists the records it will retry, and posts exactly those.
    assert!(
        confirm.body.contains("name=\"ids\" value=\"2\""),
        "{}",
        confirm.body
    );
    let done = request(
        port,
        "POST",
        "/bulk",
        &[],
        &format!("from=failures&action=retry&tier=1d&outcome=&confirm=yes&ids=2&csrf={token}"),
    );
    assert_eq!(done.code, 303);
    assert_eq!(env.with_status("SUCCESS"), 3);
}

/// The failures page says how many failures the filter picks and pages through them,
/// 200 a page, newest first; a page past the end says so.
fn failures_are_counted_and_paged(backend: Backend) {
    let env = Env::on(backend);
    env.create_table("TEXT");
    let aged: Vec<(i64, i64)> = (1..=205).map(|id| (id, 60 + id)).collect();
    env.insert_aged_at(chrono::Utc::now(), &aged, |t| {
        t.format("%Y-%m-%d %H:%M:%S").to_string().into()
    });
    env.write_schedule(&Schedule {
        command: r#"["./batch.py"]"#,
        handler_extra: "mode = \"batch\"\nbatch_size = 500",
        tiers: PROGRESSIVE_TIERS,
        ..Schedule::default()
    });
    env.write_handler(
        "batch.py",
        "#!/usr/bin/env python3\nimport json, sys\nfor line in sys.stdin:\n    print(json.dumps({\"id\": json.loads(line)[\"id\"], \"code\": 1}), flush=True)\n",
    );
    env.backlog(&["run", "--window", "1d"]).assert().success();
    let (_server, port) = serve(
        env.command()
            .arg("serve")
            .env_remove("BACKLOG_TOKEN")
            .stderr(Stdio::null()),
    );
    let rows = |body: &str| body.matches("<a href=\"/record?id=").count();
    let first = get(port, "/failures?tier=1d");
    assert!(
        first.body.contains("Failures 1–200 of 205, newest first."),
        "{}",
        first.body
    );
    assert_eq!(rows(&first.body), 200);
    assert!(
        first
            .body
            .contains("href=\"/failures?tier=1d&amp;outcome=&amp;error_contains=&amp;page=2\""),
        "{}",
        first.body
    );
    let second = get(port, "/failures?tier=1d&outcome=&page=2");
    assert!(
        second
            .body
            .contains("Failures 201–205 of 205, newest first."),
        "{}",
        second.body
    );
    assert_eq!(rows(&second.body), 5);
    // The oldest five of the tick: records 1 to 5 were handed out first.
    assert!(
        second.body.contains("<a href=\"/record?id=1\">"),
        "{}",
        second.body
    );
    assert!(
        second.body.contains("page=1\""),
        "a link back: {}",
        second.body
    );
    let past = get(port, "/failures?tier=1d&page=9");
    assert!(
        past.body.contains("None on page 9; 205 in all."),
        "{}",
        past.body
    );
}

crate::on_every_backend!(
    pages_escape_what_they_show_and_actions_need_their_token,
    a_set_is_retried_after_a_confirm_step,
    failures_are_counted_and_paged,
);

/// A hundred requests at once are all served; a locked database gives an error page
/// in time, and the server goes on.
#[test]
fn many_clients_and_a_locked_database() {
    let (env, _server, port) = served(Backend::Sqlite, &[]);
    let clients: Vec<_> = (0..100)
        .map(|i| {
            std::thread::spawn(move || {
                let path = if i % 2 == 0 { "/" } else { "/record?id=1" };
                get(port, path).code
            })
        })
        .collect();
    let codes: Vec<u16> = clients.into_iter().map(|c| c.join().unwrap()).collect();
    assert!(codes.iter().all(|c| *c == 200), "{codes:?}");

    // Another process holds the database's lock: readers wait busy_timeout (1 s here).
    let schedule = std::fs::read_to_string(env.path("backlog.toml")).unwrap();
    std::fs::write(
        env.path("backlog.toml"),
        schedule.replace("[database]\n", "[database]\nbusy_timeout = \"1s\"\n"),
    )
    .unwrap();
    let lock = rusqlite::Connection::open(env.path("backlog.db")).unwrap();
    lock.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let started = Instant::now();
    let page = get(port, "/");
    assert_eq!(page.code, 503, "{}", page.body);
    assert!(
        page.body.contains("Cannot read the backlog"),
        "{}",
        page.body
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    lock.execute_batch("ROLLBACK").unwrap();
    assert_eq!(get(port, "/").code, 200);
}

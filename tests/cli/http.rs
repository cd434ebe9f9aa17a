//! The URL handler (`[handler] url = …`) against real HTTP servers on loopback: the
//! answer table, Retry-After in both its forms, a counterpart that hangs, resets,
//! answers slowly or with a huge body, TLS with a CA of the test's own, a record's
//! URL refused on a private address, keep-alive connections, and header values that
//! never reach an output or a table.

use std::time::Duration;

use crate::counterpart::{self, Answer, Counterpart};
use crate::harness::{Backend, Env, NOW, Schedule};

/// Writes the schedule with `handler` (its url and keys) in place of the command.
fn url_schedule(env: &Env, handler: &str) {
    let text = Schedule::default()
        .render_for(&env.url())
        .replace("command = [\"./handler.sh\"]", handler);
    std::fs::write(env.path("backlog.toml"), text).unwrap();
}

fn run(env: &Env) -> assert_cmd::assert::Assert {
    env.backlog(&["run", "--window", "1d", "--now", NOW])
        .assert()
        .success()
}

fn stdout(out: &assert_cmd::assert::Assert) -> String {
    String::from_utf8_lossy(&out.get_output().stdout).into_owned()
}

fn stderr(out: &assert_cmd::assert::Assert) -> String {
    String::from_utf8_lossy(&out.get_output().stderr).into_owned()
}

fn show(env: &Env, id: i64) -> String {
    stdout(
        &env.backlog(&["show", &id.to_string(), "--now", NOW])
            .assert()
            .success(),
    )
}

/// Each row of the answer table: 2xx success, a mapped code its status, any other
/// code an error with the answer's body kept, 429 and 503 with Retry-After (seconds,
/// an HTTP date) snoozed until then, a redirect an answer when none is followed.
fn every_answer_sets_the_status_its_table_says(backend: Backend) {
    let env = Env::on(backend);
    env.records_minutes_apart(10);
    let in_two_hours = httpdate::fmt_http_date(
        (chrono::DateTime::parse_from_rfc3339(NOW).unwrap() + chrono::Duration::hours(2)).into(),
    );
    let server = Counterpart::start(move |id| match id {
        1 => Answer::code(200),
        2 => Answer::code(204).body(Vec::new()),
        3 => Answer::code(410),
        4 => Answer::code(422).body(b"{\"error\": \"bad total\"}".to_vec()),
        5 => Answer::code(500).body(b"stack trace here".to_vec()),
        6 => Answer::code(404),
        7 => Answer::code(429).header("retry-after", "600"),
        8 => Answer::code(503).header("retry-after", in_two_hours.clone()),
        9 => Answer::code(301).header("location", "/elsewhere"),
        _ => Answer::code(202),
    });
    url_schedule(
        &env,
        &format!(
            "url = \"{}/r/{{ID}}\"\nstatuses = {{ 410 = \"GONE\", 422 = \"REJECTED\" }}",
            server.url
        ),
    );
    let out = run(&env);
    assert!(
        stdout(&out).contains("selected 10, succeeded 3, failed 7"),
        "{}",
        stdout(&out)
    );
    let statuses = env.statuses();
    let expected = [
        (1, "SUCCESS"),
        (2, "SUCCESS"),
        (3, "GONE"),
        (4, "REJECTED"),
        (5, "ERROR"),
        (6, "ERROR"),
        (7, "ERROR"),
        (8, "ERROR"),
        (9, "ERROR"),
        (10, "SUCCESS"),
    ];
    let expected: Vec<(i64, String)> = expected.iter().map(|(i, s)| (*i, s.to_string())).collect();
    assert_eq!(statuses, expected);
    // Each record was called once, with its JSON as the body.
    let mut ids = server.ids();
    ids.sort();
    assert_eq!(ids, (1..=10).collect::<Vec<_>>());
    let call = server
        .calls()
        .into_iter()
        .find(|c| c.target == "/r/1")
        .unwrap();
    assert_eq!(call.method, "POST");
    assert_eq!(call.headers["content-type"], "application/json");
    let body: serde_json::Value = serde_json::from_str(&call.body).unwrap();
    assert_eq!(body["ID"], 1);
    assert_eq!(body["PAYLOAD"], "payload of 1");
    // The failing answers' bodies are kept with their attempts, and the details say
    // what came back.
    let five = show(&env, 5);
    assert!(five.contains("error    ERROR (HTTP 500)"), "{five}");
    assert!(five.contains("| stack trace here"), "{five}");
    let four = show(&env, 4);
    assert!(four.contains("REJECTED (HTTP 422)"), "{four}");
    assert!(four.contains("bad total"), "{four}");
    let seven = show(&env, 7);
    assert!(
        seven.contains("kept from the ticks until 2026-11-21T12:10:00Z"),
        "{seven}"
    );
    let eight = show(&env, 8);
    assert!(
        eight.contains("(HTTP 503, retry after 2026-11-21T14:00:00Z)"),
        "{eight}"
    );
    assert!(
        eight.contains("kept from the ticks until 2026-11-21T14:00:00Z"),
        "{eight}"
    );
    assert!(show(&env, 9).contains("(HTTP 301)"));
    // The next slot tries the errors that were not snoozed, not 7 and 8.
    env.backlog(&[
        "run",
        "--window",
        "1d",
        "--now",
        "2026-11-21T12:05:00Z",
        "--metrics-file",
        "metrics.prom",
    ])
    .assert()
    .success();
    let mut again: Vec<i64> = server.ids()[10..].to_vec();
    again.sort();
    assert_eq!(again, [5, 6, 9]);
    // The answers of both ticks, by code, in the metrics.
    let metrics = std::fs::read_to_string(env.path("metrics.prom")).unwrap();
    let answers: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("backlog_http_responses_total{"))
        .collect();
    let expected: Vec<String> = [
        (200, 1),
        (202, 1),
        (204, 1),
        (301, 2),
        (404, 2),
        (410, 1),
        (422, 1),
        (429, 1),
        (500, 2),
        (503, 1),
    ]
    .iter()
    .map(|(code, n)| {
        format!("backlog_http_responses_total{{table=\"BACKLOG\",tier=\"1d\",code=\"{code}\"}} {n}")
    })
    .collect();
    assert_eq!(answers, expected, "{metrics}");
}

crate::on_every_backend!(every_answer_sets_the_status_its_table_says);

/// Calls that get no answer are errors the schedule retries: a counterpart that never
/// answers is cut at the timeout (and the tick with it), one that resets the
/// connection says so; a slow answer inside the timeout is a success; a huge body is
/// kept to its first 4 KiB.
#[test]
fn a_hang_a_reset_a_slow_answer_and_a_huge_body() {
    let env = Env::new();
    env.records_minutes_apart(3);
    let huge = vec![b'x'; 16 << 20];
    let server = Counterpart::start(move |id| match id {
        1 => Answer::code(200).after(Duration::from_millis(1500)),
        2 => Answer::code(500).body(huge.clone()),
        _ => Answer::code(200).body(vec![b'y'; 8 << 20]),
    });
    url_schedule(&env, &format!("url = \"{}/r/{{ID}}\"", server.url));
    let started = std::time::Instant::now();
    run(&env);
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "a huge body is not read whole"
    );
    let statuses: Vec<String> = env.statuses().into_iter().map(|(_, s)| s).collect();
    assert_eq!(statuses, ["SUCCESS", "ERROR", "SUCCESS"]);
    let two = show(&env, 2);
    let kept = two
        .lines()
        .find(|l| l.trim_start().starts_with("| x"))
        .unwrap_or_else(|| panic!("{two}"));
    assert!(kept.len() <= 4096 + 16, "{} bytes kept", kept.len());

    for (url, detail) in [
        (counterpart::hanging(), "timed out after 2s"),
        (counterpart::resetting(), "connection reset"),
        ("http://127.0.0.1:9".to_string(), "connection refused"),
    ] {
        let env = Env::new();
        env.records_minutes_apart(1);
        let text = Schedule {
            timeout: "2s",
            ..Schedule::default()
        }
        .render_for(&env.url())
        .replace(
            "command = [\"./handler.sh\"]",
            &format!("url = \"{url}/r/{{ID}}\""),
        );
        std::fs::write(env.path("backlog.toml"), text).unwrap();
        let started = std::time::Instant::now();
        let out = run(&env);
        assert!(started.elapsed() < Duration::from_secs(10), "{url}");
        assert!(
            stderr(&out).contains(&format!("record 1: ERROR ({detail}")),
            "{url}: {}",
            stderr(&out)
        );
        assert_eq!(env.statuses(), [(1, "ERROR".to_string())], "{url}");
    }
}

/// A tick's calls go out on keep-alive connections: 60 records, 4 at once, on at
/// most 4 connections.
#[test]
fn calls_share_keep_alive_connections() {
    let env = Env::new();
    env.records_minutes_apart(60);
    let server = Counterpart::start(|_| Answer::code(200));
    url_schedule(
        &env,
        &format!("url = \"{}/r/{{ID}}\"\nconcurrency = 4", server.url),
    );
    let out = run(&env);
    assert!(
        stdout(&out).contains("selected 60, succeeded 60"),
        "{}",
        stdout(&out)
    );
    let peers: std::collections::BTreeSet<_> = server.calls().iter().map(|c| c.peer).collect();
    assert!(
        (1..=4).contains(&peers.len()),
        "{} connections for 60 calls",
        peers.len()
    );
}

/// A URL from a record's column may not reach this host's loopback unless
/// `allow_private = true`, whether the column names the address or a name that
/// resolves to it; a placeholder's value in the path is percent-encoded.
#[test]
fn a_records_url_is_refused_on_a_private_address() {
    let server = Counterpart::start(|_| Answer::code(200));
    let port = server.url.rsplit(':').next().unwrap().to_string();
    for allow in [false, true] {
        let env = Env::new();
        env.records_minutes_apart(2);
        env.execute(&format!(
            "UPDATE BACKLOG SET PAYLOAD = 'http://127.0.0.1:{port}/r/' || ID WHERE ID = 1;
             UPDATE BACKLOG SET PAYLOAD = 'http://localhost:{port}/r/' || ID WHERE ID = 2;"
        ));
        let extra = if allow { "\nallow_private = true" } else { "" };
        url_schedule(&env, &format!("url = \"{{PAYLOAD}}\"{extra}"));
        let out = run(&env);
        let statuses: Vec<String> = env.statuses().into_iter().map(|(_, s)| s).collect();
        if allow {
            assert_eq!(statuses, ["SUCCESS", "SUCCESS"], "{}", stderr(&out));
        } else {
            assert_eq!(statuses, ["ERROR", "ERROR"]);
            let err = stderr(&out);
            assert!(
                err.contains("a private address; a URL from a record may not reach it unless handler.allow_private = true"),
                "{err}"
            );
        }
    }
    assert_eq!(server.ids().len(), 2, "only the allowed calls arrived");

    let env = Env::new();
    env.records_minutes_apart(1);
    env.execute("UPDATE BACKLOG SET PAYLOAD = 'a b/c?d'");
    url_schedule(
        &env,
        &format!("url = \"{}/r/{{ID}}/{{PAYLOAD}}\"", server.url),
    );
    run(&env);
    let last = server.calls().pop().unwrap();
    assert_eq!(last.target, "/r/1/a%20b%2Fc%3Fd");
}

/// A token in a header reaches the counterpart and nothing else, and the signing
/// secret goes nowhere: not stdout, stderr, `explain`, `status`, `show`, `doctor`,
/// `--json`, nor any table of the database.
#[test]
fn a_header_value_never_reaches_an_output_or_a_table() {
    const TOKEN: &str = "s3cr3t-t0ken-4242";
    // The signing secret, and its key's base64 alone.
    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    let env = Env::new();
    env.records_minutes_apart(2);
    let server = Counterpart::start(|id| Answer::code(if id == 1 { 200 } else { 500 }));
    url_schedule(
        &env,
        &format!(
            "url = \"{}/r/{{ID}}\"\nheaders = {{ Authorization = \"Bearer ${{API_TOKEN}}\" }}\nsign = \"standard-webhooks\"\nsecret = \"${{WEBHOOK_SECRET}}\"",
            server.url
        ),
    );
    let mut outputs = String::new();
    for args in [
        vec!["run", "--window", "1d", "--now", NOW],
        vec!["run", "--window", "1d", "--now", NOW, "--json"],
        vec!["explain"],
        vec!["explain", "--json"],
        vec!["status", "--now", NOW],
        vec!["status", "--json", "--now", NOW],
        vec!["show", "2", "--now", NOW],
        vec!["doctor"],
    ] {
        let out = env
            .backlog(&args)
            .env("API_TOKEN", TOKEN)
            .env("WEBHOOK_SECRET", SECRET)
            .output()
            .unwrap();
        outputs.push_str(&String::from_utf8_lossy(&out.stdout));
        outputs.push_str(&String::from_utf8_lossy(&out.stderr));
    }
    assert!(!outputs.contains(TOKEN), "{outputs}");
    assert!(!outputs.contains(&SECRET[6..]), "{outputs}");
    assert!(outputs.contains("POST"), "{outputs}");
    let auth: Vec<String> = server
        .calls()
        .iter()
        .map(|c| c.headers["authorization"].clone())
        .collect();
    assert!(
        auth.iter().all(|a| *a == format!("Bearer {TOKEN}")),
        "{auth:?}"
    );
    // Every text of every table of the database file.
    let db = env.db();
    let tables: Vec<String> = db
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table'")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    for table in tables {
        let mut statement = db.prepare(&format!("SELECT * FROM \"{table}\"")).unwrap();
        let columns = statement.column_count();
        let mut rows = statement.query([]).unwrap();
        while let Some(row) = rows.next().unwrap() {
            for i in 0..columns {
                if let Ok(Some(text)) = row.get::<_, Option<String>>(i) {
                    assert!(!text.contains(TOKEN), "{table}: {text}");
                    assert!(!text.contains(&SECRET[6..]), "{table}: {text}");
                }
            }
        }
    }
}

/// HTTPS to a server whose certificate a CA of the test's own signed (openssl makes
/// both; Python's ssl module serves): refused without `ca_file`, delivered with it.
#[test]
fn https_with_a_ca_of_its_own() {
    let env = Env::new();
    let dir = env.path("tls");
    std::fs::create_dir(&dir).unwrap();
    let openssl = |args: &[&str]| {
        let out = std::process::Command::new("openssl")
            .args(args)
            .current_dir(&dir)
            .output()
            .expect("openssl runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    openssl(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=backlog test CA",
    ]);
    openssl(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
        "-subj",
        "/CN=localhost",
    ]);
    std::fs::write(
        dir.join("ext"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\n",
    )
    .unwrap();
    openssl(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "server.pem",
        "-days",
        "2",
        "-extfile",
        "ext",
    ]);
    let server = r#"
import http.server, ssl, sys
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self.send_response(200); self.send_header("content-length", "2"); self.end_headers()
        self.wfile.write(b"ok")
    def log_message(self, *a): pass
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
c = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER); c.load_cert_chain("server.pem", "server.key")
s.socket = c.wrap_socket(s.socket, server_side=True)
print(s.server_address[1], flush=True)
s.serve_forever()
"#;
    let mut child = crate::harness::Running::spawn(
        std::process::Command::new("python3")
            .args(["-c", server])
            .current_dir(&dir)
            .stdout(std::process::Stdio::piped()),
    );
    let port = child.stdout_line();
    let port = port.trim();
    env.records_minutes_apart(1);
    let url = format!("url = \"https://127.0.0.1:{port}/r/{{ID}}\"");
    url_schedule(&env, &url);
    let out = run(&env);
    assert!(
        stderr(&out).contains("record 1: ERROR (TLS: "),
        "{}",
        stderr(&out)
    );
    // doctor makes the handshake without sending a record, and says what failed.
    let doctor = env.backlog(&["doctor"]).assert().code(1);
    assert!(
        stdout(&doctor).contains(&format!("FAIL handler.url: the TLS handshake with 127.0.0.1:{port} failed: invalid peer certificate: UnknownIssuer; a certificate of a CA of your own goes in handler.ca_file")),
        "{}",
        stdout(&doctor)
    );
    url_schedule(&env, &format!("{url}\nca_file = \"tls/ca.pem\""));
    let doctor = env.backlog(&["doctor"]).assert().success();
    assert!(
        stdout(&doctor).contains("TLS verified"),
        "{}",
        stdout(&doctor)
    );
    // The next slot: the failure was kept from the ticks until then.
    env.backlog(&["run", "--window", "1d", "--now", "2026-11-21T12:05:00Z"])
        .assert()
        .success();
    assert_eq!(env.statuses(), [(1, "SUCCESS".to_string())]);
}

/// Mistakes in a URL handler's keys: one line naming the key and the fix, exit 3 (a
/// placeholder naming no column of the table exits 4, as any column the file names
/// and the table lacks does), the table untouched.
#[test]
fn bad_url_handlers_name_the_key_and_the_fix() {
    let env = Env::new();
    env.records_minutes_apart(2);
    for (handler, message) in [
        (
            "url = \"http://127.0.0.1:9/r/{ID}\"\ncommand = [\"./h.sh\"]",
            "handler.url and handler.command both name the handler; keep one: url for an HTTP call per record, command for a program",
        ),
        (
            "url = \"ftp://files.example/{ID}\"",
            "handler.url: \"ftp://files.example/{ID}\" is not an http or https URL; a URL handler calls http:// or https://, like \"https://hooks.example.com/orders/{id}\"",
        ),
        (
            "url = \"http://127.0.0.1:9/r/{ID}\"\nstatuses = { 700 = \"GONE\" }",
            "handler.statuses: \"700\" is not an HTTP status code; use codes from 100 to 599, like statuses = { 410 = \"GONE\" }",
        ),
        (
            "url = \"http://127.0.0.1:9/r/{ID}\"\nexit_codes = { 3 = \"GONE\" }",
            "handler.exit_codes is a key of a command handler, but the handler is a URL: answers have status codes; map them with statuses, like statuses = { 410 = \"GONE\" }; leave exit_codes out",
        ),
        (
            "url = \"http://127.0.0.1:9/r/{ID}\"\nsign = \"standard-webhooks\"\nsecret = \"whsec_not base64!\"",
            "handler.secret is not a Standard Webhooks secret; give whsec_ and the key in base64, like secret = \"${WEBHOOK_SECRET}\" set to whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        ),
        (
            "url = \"http://127.0.0.1:9/r/{ID}\"\nsign = \"standard-webhooks\"",
            "handler.sign = \"standard-webhooks\" needs the signing key; add secret = \"${WEBHOOK_SECRET}\" (whsec_ and the key in base64)",
        ),
        (
            "command = [\"./h.sh\"]\nstatuses = { 410 = \"GONE\" }",
            "handler.statuses is a key of a URL handler, but the handler is a command; leave statuses out, or give handler.url instead of handler.command",
        ),
    ] {
        url_schedule(&env, handler);
        let out = env
            .backlog(&["run", "--window", "1d", "--now", NOW])
            .assert()
            .code(3);
        let err = stderr(&out);
        assert!(err.contains(message), "{handler}:\n{err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(
            env.statuses().iter().all(|(_, s)| s == "NEW"),
            "{handler}: the table is untouched"
        );
    }
    url_schedule(&env, "url = \"http://127.0.0.1:9/r/{ORDER_ID}\"");
    let out = env
        .backlog(&["run", "--window", "1d", "--now", NOW])
        .assert()
        .code(4);
    assert_eq!(
        stderr(&out).trim(),
        format!(
            "backlog: sqlite:{}: table \"BACKLOG\" has no column \"ORDER_ID\" (set handler.url in the schedule file); columns: ID, STATUS, DATE_INSERTED, PAYLOAD",
            env.path("backlog.db").display()
        )
    );
    assert!(env.statuses().iter().all(|(_, s)| s == "NEW"));
}

/// `sign = "standard-webhooks"`: each call carries `webhook-id`, `webhook-timestamp`
/// and `webhook-signature`, which the specification's own Python library
/// (`standardwebhooks`) verifies; the id is the same at a record's every try, and the
/// `Idempotency-Key` is that id.
#[test]
fn signed_calls_verify_with_the_reference_library() {
    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    let env = Env::new();
    env.records_minutes_apart(3);
    let tries = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = std::sync::Arc::clone(&tries);
    // Record 2 fails its first try, so that its second try can be compared.
    let server = Counterpart::start(move |id| {
        if id == 2 && seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
            Answer::code(500)
        } else {
            Answer::code(200)
        }
    });
    url_schedule(
        &env,
        &format!(
            "url = \"{}/r/{{ID}}\"\nsign = \"standard-webhooks\"\nsecret = \"${{WEBHOOK_SECRET}}\"",
            server.url
        ),
    );
    for now in [NOW, "2026-11-21T12:05:00Z"] {
        let out = env
            .backlog(&["run", "--window", "1d", "--now", now])
            .env("WEBHOOK_SECRET", SECRET)
            .output()
            .unwrap();
        assert!(out.status.success());
        assert!(!String::from_utf8_lossy(&out.stderr).contains("MfKQ9r8"));
    }
    let calls = server.calls();
    assert_eq!(calls.len(), 4, "{calls:?}");
    let messages: Vec<serde_json::Value> = calls
        .iter()
        .map(|c| serde_json::json!({ "body": c.body, "headers": c.headers }))
        .collect();
    std::fs::write(
        env.path("calls.json"),
        serde_json::to_string(&messages).unwrap(),
    )
    .unwrap();
    let verify = format!(
        r#"
import json, standardwebhooks
hook = standardwebhooks.Webhook("{SECRET}")
for call in json.load(open("calls.json")):
    hook.verify(call["body"], call["headers"])
    print(call["headers"]["webhook-id"], call["headers"]["idempotency-key"])
"#
    );
    let out = std::process::Command::new("python3")
        .args(["-c", &verify])
        .current_dir(env.dir.path())
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "the reference library refused a signature: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ids: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(ids.len(), 4);
    assert!(ids.iter().all(|l| {
        let (id, key) = l.split_once(' ').unwrap();
        id == key
    }));
    let twos: Vec<&String> = ids.iter().filter(|l| l.starts_with("BACKLOG_2 ")).collect();
    assert_eq!(
        twos.len(),
        2,
        "record 2's two tries share their id: {ids:?}"
    );
    // A changed body no longer verifies: the check is real.
    let tampered = verify.replace(
        "hook.verify(call[\"body\"], call[\"headers\"])",
        "hook.verify(call[\"body\"] + \" \", call[\"headers\"])",
    );
    let out = std::process::Command::new("python3")
        .args(["-c", &tampered])
        .current_dir(env.dir.path())
        .output()
        .unwrap();
    assert!(!out.status.success(), "a tampered body was verified");
}

/// Polling: `done_when` marks a record done when its 2xx JSON body says so; any other
/// 2xx is "not yet": the record keeps its status, the breaker does not count it (one
/// failure in a row would trip it here), and the summary counts it apart.
#[test]
fn a_poll_is_done_when_the_body_says_so_and_not_yet_otherwise() {
    let env = Env::new();
    env.records_minutes_apart(4);
    let server = Counterpart::start(|id| match id {
        1 => Answer::code(200).body(br#"{"order": {"state": "shipped"}}"#.to_vec()),
        2 => Answer::code(200).body(br#"{"order": {"state": "packed"}}"#.to_vec()),
        3 => Answer::code(200).body(b"<html>maintenance</html>".to_vec()),
        _ => Answer::code(200).body(br#"{"order": {}}"#.to_vec()),
    });
    url_schedule(
        &env,
        &format!(
            "url = \"{}/r/{{ID}}\"\nmethod = \"GET\"\nstop_after_failures = 1\ndone_when = {{ pointer = \"/order/state\", in = [\"shipped\", \"delivered\"] }}",
            server.url
        ),
    );
    let out = run(&env);
    assert!(
        stdout(&out).contains("selected 4, succeeded 1, failed 0, not yet 3, skipped 0"),
        "{}",
        stdout(&out)
    );
    let statuses: Vec<String> = env.statuses().into_iter().map(|(_, s)| s).collect();
    assert_eq!(statuses, ["SUCCESS", "NEW", "NEW", "NEW"]);
    assert!(
        server
            .calls()
            .iter()
            .all(|c| c.method == "GET" && c.body.is_empty())
    );
    let two = show(&env, 2);
    assert!(
        two.contains("not_yet  NEW (HTTP 200, not yet: /order/state is \"packed\")"),
        "{two}"
    );
    assert!(show(&env, 3).contains("not yet: the body is not JSON"));
    assert!(show(&env, 4).contains("not yet: no /order/state in the body"));
    // Not yet is tried again at the next slot, as a failure would be.
    env.backlog(&["run", "--window", "1d", "--now", "2026-11-21T12:05:00Z"])
        .assert()
        .success();
    assert_eq!(server.calls().len(), 7);

    url_schedule(
        &env,
        &format!(
            "url = \"{}/r/{{ID}}\"\ndone_when = {{ pointer = \"order.state\", in = [\"shipped\"] }}",
            server.url
        ),
    );
    let out = env.backlog(&["run", "--window", "1d"]).assert().code(3);
    assert!(
        stderr(&out).contains("handler.done_when.pointer: \"order.state\" is not a JSON pointer; start it with / and name the keys on the way, like pointer = \"/order/state\" (~1 for a / in a key, ~0 for a ~)"),
        "{}",
        stderr(&out)
    );
}

/// With a URL from the record and `stop_after_failures`, each host has a breaker of
/// its own: an endpoint that is down gets that many calls and a cool-down, while the
/// records of the other endpoint are all delivered; the tick ends well (exit 0), its
/// summary saying what waits and why, and the next tick in the cool-down leaves the
/// down endpoint alone.
#[test]
fn one_endpoint_down_trips_its_own_breaker_while_the_others_deliver() {
    let env = Env::new();
    env.records_minutes_apart(12);
    let up = Counterpart::start(|_| Answer::code(200));
    let down = Counterpart::start(|_| Answer::code(500));
    env.execute(&format!(
        "UPDATE BACKLOG SET PAYLOAD = '{}/r/' || ID WHERE ID % 2 = 0;
         UPDATE BACKLOG SET PAYLOAD = '{}/r/' || ID WHERE ID % 2 = 1;",
        up.url, down.url
    ));
    url_schedule(
        &env,
        "url = \"{PAYLOAD}\"\nallow_private = true\nstop_after_failures = 2\nbreaker_cooldown = \"1h\"",
    );
    let out = run(&env);
    assert_eq!(down.calls().len(), 2, "the down endpoint's limit of calls");
    assert_eq!(
        up.calls().len(),
        6,
        "every record of the endpoint that is up"
    );
    assert!(
        stdout(&out).contains("selected 8, succeeded 6, failed 2, skipped 0, deferred 4 to later ticks (their counterpart's breaker open)"),
        "{}",
        stdout(&out)
    );
    assert!(
        stderr(&out).contains(&format!(
            "counterpart {}: 2 failures in a row (handler.stop_after_failures), each: HTTP 500: answer 500; this counterpart's records wait, the others' go on",
            down.url.trim_start_matches("http://")
        )),
        "{}",
        stderr(&out)
    );
    let statuses = env.statuses();
    assert_eq!(
        statuses.iter().filter(|(_, s)| s == "SUCCESS").count(),
        6,
        "{statuses:?}"
    );
    assert_eq!(statuses.iter().filter(|(_, s)| s == "NEW").count(), 4);
    // The next slot, inside the cool-down: the down endpoint gets no call.
    env.backlog(&["run", "--window", "1d", "--now", "2026-11-21T12:05:00Z"])
        .assert()
        .success();
    assert_eq!(
        down.calls().len(),
        2,
        "the cool-down holds for the next tick"
    );
}

/// `concurrency_per_key = 1`: of 4 calls in flight, at most one goes to each
/// endpoint (the host and port a record's URL names), while both are served.
#[test]
fn concurrency_per_key_caps_the_calls_in_flight_to_one_endpoint() {
    let env = Env::new();
    env.records_minutes_apart(12);
    let slow = || Counterpart::start(|_| Answer::code(200).after(Duration::from_millis(150)));
    let (a, b) = (slow(), slow());
    env.execute(&format!(
        "UPDATE BACKLOG SET PAYLOAD = '{}/r/' || ID WHERE ID % 2 = 0;
         UPDATE BACKLOG SET PAYLOAD = '{}/r/' || ID WHERE ID % 2 = 1;",
        a.url, b.url
    ));
    url_schedule(
        &env,
        "url = \"{PAYLOAD}\"\nallow_private = true\nconcurrency = 4\nconcurrency_per_key = 1",
    );
    let out = run(&env);
    assert!(
        stdout(&out).contains("selected 12, succeeded 12"),
        "{}",
        stdout(&out)
    );
    assert_eq!((a.calls().len(), b.calls().len()), (6, 6));
    assert_eq!((a.most_at_once(), b.most_at_once()), (1, 1));

    // Without the cap the same tick sends them several at once.
    let env = Env::new();
    env.records_minutes_apart(12);
    let c = slow();
    env.execute(&format!(
        "UPDATE BACKLOG SET PAYLOAD = '{}/r/' || ID",
        c.url
    ));
    url_schedule(
        &env,
        "url = \"{PAYLOAD}\"\nallow_private = true\nconcurrency = 4",
    );
    run(&env);
    assert!(c.most_at_once() > 1, "{}", c.most_at_once());

    url_schedule(
        &env,
        "url = \"http://127.0.0.1:9/r/{ID}\"\nconcurrency = 4\nconcurrency_per_key = 2",
    );
    let out = env.backlog(&["run", "--window", "1d"]).assert().code(3);
    assert!(
        stderr(&out).contains("handler.concurrency_per_key = 2 caps the calls in flight to one counterpart, but nothing says a record's counterpart; name its column with rate_key = \"merchant_id\", or take the URL's host from the record (url = \"{endpoint}\")"),
        "{}",
        stderr(&out)
    );
}

/// A CONNECT proxy on loopback that counts the tunnels it opens and pipes each to
/// its target.
fn connect_proxy() -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::io::{BufRead as _, Write as _};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let tunnels = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = std::sync::Arc::clone(&tunnels);
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            let counted = std::sync::Arc::clone(&counted);
            std::thread::spawn(move || {
                let mut reader = std::io::BufReader::new(client.try_clone().unwrap());
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                let target = line
                    .split_whitespace()
                    .nth(1)
                    .unwrap_or_default()
                    .to_string();
                loop {
                    let mut header = String::new();
                    if reader.read_line(&mut header).unwrap_or(0) == 0 || header == "\r\n" {
                        break;
                    }
                }
                let Ok(upstream) = std::net::TcpStream::connect(&target) else {
                    return;
                };
                counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let mut client = client;
                client
                    .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                    .unwrap();
                let (mut up_read, mut up_write) = (upstream.try_clone().unwrap(), upstream);
                let mut down = client.try_clone().unwrap();
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut up_read, &mut down);
                });
                let _ = std::io::copy(&mut reader, &mut up_write);
            });
        }
    });
    (url, tunnels)
}

/// Proxies as curl reads them: an http URL goes through `http_proxy`, not
/// `HTTPS_PROXY`; `no_proxy` sends a host direct; a proxy that is no URL is one line
/// naming the variable (exit 5), its password never shown.
#[test]
fn calls_go_through_the_proxy_curl_would_use() {
    let server = Counterpart::start(|_| Answer::code(200));
    let (proxy, tunnels) = connect_proxy();
    let tick = |vars: &[(&str, &str)]| {
        let env = Env::new();
        env.records_minutes_apart(2);
        url_schedule(&env, &format!("url = \"{}/r/{{ID}}\"", server.url));
        let mut cmd = env.backlog(&["run", "--window", "1d", "--now", NOW]);
        for (name, value) in vars {
            cmd.env(name, value);
        }
        let out = cmd.output().unwrap();
        (env, out)
    };
    let through = || tunnels.load(std::sync::atomic::Ordering::SeqCst);
    let (env, out) = tick(&[("http_proxy", &proxy)]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(env.statuses().iter().all(|(_, s)| s == "SUCCESS"));
    assert!(through() >= 1, "the calls went through the proxy");
    let before = through();
    let (env, out) = tick(&[("http_proxy", &proxy), ("no_proxy", "127.0.0.1")]);
    assert!(out.status.success());
    assert!(env.statuses().iter().all(|(_, s)| s == "SUCCESS"));
    let (env, out) = tick(&[("HTTPS_PROXY", &proxy)]);
    assert!(out.status.success());
    assert!(env.statuses().iter().all(|(_, s)| s == "SUCCESS"));
    assert_eq!(
        through(),
        before,
        "no_proxy and an https proxy leave http calls direct"
    );
    assert_eq!(server.ids().len(), 6);
    let (env, out) = tick(&[("http_proxy", "http://user:hunter2@[bad")]);
    assert_eq!(out.status.code(), Some(5));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("http_proxy: \"…@[bad\" is not a proxy URL"),
        "{err}"
    );
    assert!(!err.contains("hunter2"), "{err}");
    assert!(env.statuses().iter().all(|(_, s)| s == "NEW"));
}

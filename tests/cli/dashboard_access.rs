//! Who may reach the dashboard: loopback host names and origins only, a token beyond
//! loopback, no password on any page; and its health probes.

use std::process::Stdio;

use crate::dashboard::*;
use crate::harness::{Backend, Env, Schedule};

/// Without a token, a request under another host name (DNS rebinding) and a POST from
/// another origin are refused.
#[test]
fn another_host_name_or_origin_is_refused() {
    let (_env, _server, port) = served(Backend::Sqlite, &[]);
    assert_eq!(
        request(port, "GET", "/", &["Host: localhost:1"], "").code,
        200
    );
    let rebound = request(port, "GET", "/", &["Host: attacker.example"], "");
    assert_eq!(rebound.code, 421, "{}", rebound.body);
    // Names that only look like this machine are another site's.
    for host in [
        "127.evil.example",
        "127.0.0.1.nip.io",
        "localhost.evil",
        "127.0.0.1.nip.io:8080",
    ] {
        let probe = request(port, "GET", "/", &[&format!("Host: {host}")], "");
        assert_eq!(probe.code, 421, "{host}: {}", probe.body);
    }
    for host in ["[::1]", "[::1]:8080", "127.0.0.2", "LOCALHOST"] {
        let probe = request(port, "GET", "/", &[&format!("Host: {host}")], "");
        assert_eq!(probe.code, 200, "{host}: {}", probe.body);
    }
    let token = csrf(&get(port, "/").body);
    let foreign = request(
        port,
        "POST",
        "/pause",
        &["Origin: http://attacker.example"],
        &format!("window=1d&reason=x&csrf={token}"),
    );
    assert_eq!(foreign.code, 403, "{}", foreign.body);
}

/// `/healthz` answers while the process lives; `/readyz` while the database answers and
/// no tier's last tick failed, and says why not otherwise. Both answer under any host
/// name and without the token, as probes send neither.
#[test]
fn health_probes_say_alive_and_ready() {
    let token_file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(token_file.path(), "0123456789abcdef0123456789abcdef\n").unwrap();
    let (env, _server, port) = served(
        Backend::Sqlite,
        &["--token-file", token_file.path().to_str().unwrap()],
    );
    let probe = |path: &str| request(port, "GET", path, &["Host: 10.1.2.3:8080"], "");
    let alive = probe("/healthz");
    assert_eq!((alive.code, alive.body.as_str()), (200, "ok\n"));
    let ready = probe("/readyz");
    assert_eq!((ready.code, ready.body.as_str()), (200, "ready\n"));
    assert_eq!(
        probe("/").code,
        401,
        "the dashboard itself still wants its token"
    );
    // A tick whose handler cannot run fails: not ready, and why.
    env.write_handler("handler.sh", "#!/bin/sh\nexec no-such-command-here\n");
    env.backlog(&["run", "--window", "1d", "--retry-failed"])
        .assert()
        .code(5);
    let unready = probe("/readyz");
    assert_eq!(unready.code, 503, "{}", unready.body);
    // Named, not quoted: a handler's words may be about a record, and a probe has no
    // token.
    assert_eq!(
        unready.body,
        "backlog: tier 1's last tick failed; `backlog status` says why\n"
    );
    assert_eq!(probe("/healthz").code, 200);
}

/// With a token, every request needs it: a header, or the cookie `/login` sets.
#[test]
fn a_token_guards_every_page() {
    let env_token = "0123456789abcdef0123456789abcdef";
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("token");
    std::fs::write(&file, format!("{env_token}\n")).unwrap();
    let (_env, _server, port) = served(Backend::Sqlite, &["--token-file", file.to_str().unwrap()]);
    assert_eq!(get(port, "/").code, 401);
    assert_eq!(get(port, "/metrics").code, 401);
    assert_eq!(get(port, "/plots/ticks.svg").code, 401);
    let bearer = format!("Authorization: Bearer {env_token}");
    assert_eq!(request(port, "GET", "/", &[&bearer], "").code, 200);
    assert_eq!(
        request(port, "GET", "/", &["Authorization: Bearer nope"], "").code,
        401
    );
    assert_eq!(get(port, "/login?token=wrong").code, 401);
    let login = get(port, &format!("/login?token={env_token}"));
    assert_eq!(login.code, 303);
    assert!(
        login.head.contains("set-cookie: backlog_token="),
        "{}",
        login.head
    );
    assert!(login.head.contains("httponly") && login.head.contains("samesite=strict"));
    let cookie = format!("Cookie: backlog_token={env_token}");
    assert_eq!(request(port, "GET", "/failures", &[&cookie], "").code, 200);
}

/// Beyond loopback a token is required; a token too short is refused.
#[test]
fn listening_beyond_loopback_needs_a_token() {
    let env = Env::new();
    env.classic();
    env.write_schedule(&Schedule::default());
    env.backlog(&["serve", "--listen", "0.0.0.0:0"])
        .env_remove("BACKLOG_TOKEN")
        .assert()
        .code(2)
        .stderr(predicates::str::contains(
            "0.0.0.0:0 is not a loopback address: give --token-file FILE (or BACKLOG_TOKEN)",
        ));
    env.backlog(&["serve", "--listen", "0.0.0.0:0"])
        .env("BACKLOG_TOKEN", "short")
        .assert()
        .code(2)
        .stderr(predicates::str::contains(
            "the token is shorter than 16 characters",
        ));
}

/// A password in the database URL never appears on a page.
#[test]
fn a_password_never_reaches_a_page() {
    let env = Env::on(Backend::Postgres);
    env.classic();
    let pg = env.pg.as_ref().unwrap();
    let url = pg.schedule_url().replacen(
        "postgres://postgres@",
        &format!("postgres://postgres:{}@", pg.password()),
        1,
    );
    let schedule = Schedule::default()
        .render_for(&url)
        .replace("password_file = \"pgpass\"", "");
    std::fs::write(env.path("backlog.toml"), schedule).unwrap();
    env.write_handler("handler.sh", HOSTILE_HANDLER);
    env.backlog(&["run", "--window", "1d"]).assert().success();
    let (_server, port) = serve(env.command().arg("serve").stderr(Stdio::null()));
    for path in ["/", "/failures", "/record?id=1", "/metrics"] {
        let page = get(port, path);
        assert_eq!(page.code, 200, "{path}: {}", page.body);
        assert!(
            !page.body.contains(&pg.password()),
            "{path} shows the password"
        );
    }
}

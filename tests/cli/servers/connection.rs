//! Reaching a server: one line for each way a connection fails, the password from the
//! environment, a file or the URL and never printed, a password with the characters a
//! URL gives meaning to. Each test body runs on both servers.

use crate::harness::{Backend, Env, NOW};
use crate::servers::server::{
    Login, Tls, classic, fits, one_line_error, runs_and_selects, write_url,
};

/// The user of the test server's URL.
fn user_of(env: &Env) -> String {
    url::Url::parse(&env.url()).unwrap().username().to_string()
}

/// Connection refused, a wrong password, no password and a database the server does
/// not have: one line each, naming the URL without its password, and what to check.
fn connection_failures_give_one_clear_line_each(backend: Backend) {
    let var = backend.password_env();
    // Bound and never listened on while the test runs: refused, and given to no
    // other test's server meanwhile.
    let refused = crate::hooks::refused();
    let closed = refused.url.rsplit(':').next().unwrap().to_string();
    let (env, real) = classic(
        backend,
        |url| {
            let port = url.split(':').nth(2).unwrap().split('/').next().unwrap();
            url.replace(&format!(":{port}/"), &format!(":{closed}/"))
        },
        None,
    );
    let user = user_of(&env);
    let db = url::Url::parse(&env.url()).unwrap().path()[1..].to_string();
    assert_eq!(
        one_line_error(&env, &[(var, &real)]),
        format!(
            "backlog: {}://{user}@127.0.0.1:{closed}/{db}?{}: cannot connect: connection refused (is the server running, and listening on that host and port?)\n",
            backend.scheme(),
            backend.tls(Tls::Disable),
        )
    );

    let (env, _) = classic(backend, |url| url.to_string(), Some("not-the-password"));
    let line = one_line_error(&env, &[]);
    let wrong = match backend {
        Backend::Postgres => format!(
            "backlog: {}: cannot connect: password authentication failed for user \"{user}\" (check the password: in the URL, database.password_file or PGPASSWORD)\n",
            env.url()
        ),
        _ => format!(
            "backlog: {}: cannot connect: Access denied for user '{user}'@'*(using password: YES) (error 1045) (check the password: in the URL, database.password_file or MYSQL_PWD; or the user may connect over TLS only: leave ssl-mode=DISABLED out)\n",
            env.url()
        ),
    };
    assert!(fits(&wrong, &line), "{line}");

    let (env, _) = classic(backend, |url| url.to_string(), None);
    let line = one_line_error(&env, &[]);
    // MySQL's server does not say that it wanted a password: its refusal reads as a
    // wrong one's, "using password: NO".
    let none = match backend {
        Backend::Postgres => format!(
            "backlog: {}: cannot connect: the server asks for a password and none was given (put it in database.password_file, PGPASSWORD or the URL)\n",
            env.url()
        ),
        _ => format!(
            "backlog: {}: cannot connect: Access denied for user '{user}'@'*(using password: NO) (error 1045) (check the password: in the URL, database.password_file or MYSQL_PWD; or the user may connect over TLS only: leave ssl-mode=DISABLED out)\n",
            env.url()
        ),
    };
    assert!(fits(&none, &line), "{line}");

    let (env, real) = classic(
        backend,
        |url| url.replace("/backlog_test_", "/no_such_"),
        None,
    );
    let line = one_line_error(&env, &[(var, &real)]);
    let url = env.url().replace("/backlog_test_", "/no_such_");
    let db = url::Url::parse(&url).unwrap().path()[1..].to_string();
    // PostgreSQL's line has no hint; MySQL's says to check the URL's path.
    let missing = match backend {
        Backend::Postgres => {
            format!("backlog: {url}: cannot connect: database \"{db}\" does not exist\n")
        }
        _ => format!(
            "backlog: {url}: cannot connect: *does not exist on that server (check the URL's path)\n"
        ),
    };
    assert!(fits(&missing, &line), "{line}");
}

/// The password from the environment (PGPASSWORD, MYSQL_PWD), from a file (its first
/// line), or in the URL: it works, and no output of any command shows it, nor the
/// message of a run that fails.
fn the_password_comes_from_the_environment_a_file_or_the_url_and_is_never_printed(
    backend: Backend,
) {
    let var = backend.password_env();
    let (env, real) = classic(backend, |url| url.to_string(), None);
    let mut seen = runs_and_selects(&env, &[(var, &real)], 2);
    let (env, real) = classic(backend, |url| url.to_string(), Some("placeholder"));
    std::fs::write(env.path("pgpass"), format!("{real}\n")).unwrap();
    seen += &runs_and_selects(&env, &[], 2);
    let user = user_of(&env);
    let (env, real) = classic(
        backend,
        |url| url.replacen(&format!("{user}@"), &format!("{user}:{{password}}@"), 1),
        None,
    );
    let path = env.path("backlog.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replace("{password}", &real)).unwrap();
    for args in [
        &["run", "--window", "1d", "--now", NOW, "-vv", "--json"][..],
        &["run", "--window", "7d", "--now", NOW, "--dry-run"],
        &["status"],
        &["status", "--json"],
        &["doctor"],
        &["show", "3"],
        &["explain", "--id", "3"],
    ] {
        let out = env.backlog(args).env_remove(var).assert().success();
        let o = out.get_output();
        seen += &String::from_utf8_lossy(&o.stdout);
        seen += &String::from_utf8_lossy(&o.stderr);
    }
    assert!(
        seen.contains(&format!("{}://{user}@127.0.0.1", backend.scheme())),
        "{seen}"
    );
    assert!(!seen.contains(&real), "the password was printed:\n{seen}");
    // A failing run's message names the database without the password, too.
    env.execute(r#"DROP TABLE "BACKLOG""#);
    let out = env
        .backlog(&["run", "--window", "1d"])
        .env_remove(var)
        .assert()
        .code(4);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr);
    assert!(stderr.contains("no table \"BACKLOG\""), "{stderr}");
    assert!(!stderr.contains(&real), "{stderr}");
}

/// A password with the characters a URL gives meaning to (`@ : / # ? % +`, and a
/// letter outside ASCII) connects when written percent-encoded in the URL, in its user
/// part or its query, where `+` is a plus, as the servers' clients read it (an HTML
/// form's space would make it another password), written bare or as `%2B`.
fn a_password_with_url_characters_connects(backend: Backend) {
    let (env, _) = classic(backend, |url| url.to_string(), None);
    let login = Login::create(&env, "p@ss+w:rd/#?%é");
    let base = env.url();
    let user = format!("{}@", user_of(&env));
    let disable = backend.tls(Tls::Disable);
    // A parameter of the server's client beside the password (MySQL's URLs take a
    // short list of options and refuse the rest).
    let other = match backend {
        Backend::Postgres => "&application_name=a+b",
        _ => "",
    };
    let encoded = "p%40ss+w:rd%2F%23%3F%25%C3%A9";
    let in_query = |password: &str| {
        base.replacen(&user, &format!("{}@", login.name), 1)
            .replace(
                &format!("?{disable}"),
                &format!("?connect_timeout=5&password={password}&{disable}{other}"),
            )
    };
    for url in [
        base.replacen(&user, &format!("{}:{encoded}@", login.name), 1),
        in_query(encoded),
        in_query(&encoded.replace('+', "%2B")),
    ] {
        write_url(&env, &url);
        let mut cmd = env.backlog(&["run", "--window", "1d", "--now", NOW, "--dry-run"]);
        cmd.env_remove(backend.password_env());
        let out = cmd.assert().success();
        let stderr = String::from_utf8_lossy(&out.get_output().stderr);
        assert!(
            stderr.contains("would hand over 2 records"),
            "{url}: {stderr}"
        );
    }
}

crate::on_servers!(
    connection_failures_give_one_clear_line_each,
    the_password_comes_from_the_environment_a_file_or_the_url_and_is_never_printed,
    a_password_with_url_characters_connects,
);

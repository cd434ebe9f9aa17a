//! A `postgres://` (or `postgresql://`) URL, read as libpq reads one: the parts
//! percent-decoded once, the query's parameters handed to the driver, libpq's
//! `verify-ca` / `verify-full` taken out for the store to check, and the password
//! settled from the URL, `database.password_file` or `PGPASSWORD`. Nothing here prints
//! a password: what is shown is `PostgresUrl::shown`.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use backlog_core::config::server_url::{ENCODE, not_utf8, query_pairs, read_password_file};

/// A PostgreSQL connection, with its password resolved from wherever it came. Only
/// `shown` (the URL without its password) is ever printed: the `Debug` and `Display`
/// of this type and of `DatabaseUrl` both use it.
#[derive(Clone)]
#[non_exhaustive]
pub struct PostgresUrl {
    /// The settings the driver connects with, password included: never print it (`shown`
    /// is for messages).
    pub config: postgres::Config,
    /// `postgres://user@host:port/dbname?sslmode=…`, never with the password.
    pub shown: String,
    /// With `sslmode=verify-ca` or `verify-full`: the server's certificate must chain to
    /// these roots.
    pub verify: Option<Verify>,
}

/// How a server certificate is checked (libpq's `verify-ca` and `verify-full`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Verify {
    /// The PEM file of trusted roots (`sslrootcert`, else `~/.postgresql/root.crt`).
    pub root_cert: PathBuf,
    /// `verify-full`: the certificate must also name the host connected to.
    pub check_name: bool,
}

/// Two connections are the same when they reach the same place as the same user.
impl PartialEq for PostgresUrl {
    fn eq(&self, other: &Self) -> bool {
        self.shown == other.shown
    }
}

impl Eq for PostgresUrl {}

impl fmt::Debug for PostgresUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.shown)
    }
}

/// Parses a `postgres://` URL and settles its password: in the URL, or from
/// `database.password_file`, or from `PGPASSWORD`, in that order, as libpq does with
/// its URL and environment. Messages never repeat the URL, which may hold a password.
pub fn resolve_postgres(
    url: &str,
    password_file: Option<&Path>,
    env_password: Option<String>,
) -> Result<PostgresUrl, String> {
    let (conninfo, verify) = conninfo(url)?;
    let mut config: postgres::Config = conninfo.parse().map_err(|e| {
        format!("database.url is not a valid PostgreSQL URL ({}); write it like \"postgres://user@host:5432/dbname?sslmode=require\"", crate::causes::chain(&e))
    })?;
    if config.get_hosts().is_empty() {
        return Err(
            "database.url names no host; write it like \"postgres://user@host:5432/dbname\"".into(),
        );
    }
    match (config.get_password().is_some(), password_file) {
        (true, Some(_)) => {
            return Err("database.url holds a password and database.password_file is set too; keep one (the file is the safer)".into());
        }
        (false, Some(file)) => {
            config.password(read_password_file(file)?);
        }
        (false, None) => {
            if let Some(password) = env_password.filter(|p| !p.is_empty()) {
                config.password(password);
            }
        }
        (true, None) => {}
    }
    if config.get_application_name().is_none() {
        config.application_name("backlog");
    }
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(Duration::from_secs(10));
    }
    // A server that vanishes mid-tick (a dead host, a cut link) is noticed in about a
    // minute instead of the kernel's two hours.
    config.keepalives_idle(Duration::from_secs(30));
    config.tcp_user_timeout(Duration::from_secs(60));
    let mut shown = show_postgres(&config);
    if let Some(v) = &verify {
        let mode = if v.check_name {
            "verify-full"
        } else {
            "verify-ca"
        };
        shown = shown.replace("sslmode=require", &format!("sslmode={mode}"));
    }
    Ok(PostgresUrl {
        shown,
        config,
        verify,
    })
}

/// Reads a `postgres://` URL with the `url` crate and writes it out as libpq's
/// `key='value'` connection string, every part percent-decoded once (`+` stays a plus,
/// as libpq reads it, in the password and in the query alike). libpq's
/// `sslmode=verify-ca|verify-full` and `sslrootcert` are taken out (the PostgreSQL
/// client library knows neither): the connection then requires TLS, and the store
/// checks the certificate against the roots.
fn conninfo(text: &str) -> Result<(String, Option<Verify>), String> {
    let url = url::Url::parse(text).map_err(|e| {
        let hint = if text.split('?').next().unwrap_or("").contains(',') {
            "several hosts go in the query: postgres://user@/dbname?host=h1,h2&port=5432,5433"
                .to_string()
        } else {
            ENCODE.to_string()
        };
        format!("database.url is not a valid PostgreSQL URL ({e}); {hint}")
    })?;
    let decode = |key: &str, part: &str| {
        percent_encoding::percent_decode_str(part)
            .decode_utf8()
            .map(|d| d.into_owned())
            .map_err(|_| not_utf8(key))
    };
    let mut pairs: Vec<(String, String)> = Vec::new();
    if !url.username().is_empty() {
        pairs.push(("user".into(), decode("user name", url.username())?));
    }
    if let Some(password) = url.password() {
        pairs.push(("password".into(), decode("password", password)?));
    }
    match url.host() {
        None => {}
        Some(url::Host::Domain("")) => {}
        // A socket folder: `postgres://%2Fvar%2Frun%2Fpostgresql/db`.
        Some(url::Host::Domain(name)) => pairs.push(("host".into(), decode("host", name)?)),
        Some(url::Host::Ipv4(ip)) => pairs.push(("host".into(), ip.to_string())),
        Some(url::Host::Ipv6(ip)) => pairs.push(("host".into(), ip.to_string())),
    }
    if let Some(port) = url.port() {
        pairs.push(("port".into(), port.to_string()));
    }
    let dbname = url.path().trim_start_matches('/');
    if !dbname.is_empty() {
        pairs.push(("dbname".into(), decode("database name", dbname)?));
    }
    let mut mode = None;
    let mut root = None;
    for (key, value) in query_pairs(&url)? {
        // Keys are written bare into the connection string: only a name is one.
        if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(format!(
                "database.url: {key:?} in the query is not a connection parameter; write parameters like ?sslmode=require&connect_timeout=5"
            ));
        }
        match (key.as_str(), value.as_str()) {
            ("sslmode", "verify-ca" | "verify-full") => mode = Some(value),
            ("sslrootcert", _) => root = Some(value),
            _ => pairs.push((key, value)),
        }
    }
    let verify = match (mode, root) {
        (None, Some(_)) => {
            return Err("database.url: sslrootcert is used only with sslmode=verify-ca or verify-full; add one".into());
        }
        (None, None) => None,
        (Some(mode), root) => {
            pairs.push(("sslmode".into(), "require".into()));
            let root_cert = match root {
                Some(path) => PathBuf::from(path),
                None => std::env::var_os("HOME")
                    .map(|home| PathBuf::from(home).join(".postgresql/root.crt"))
                    .ok_or(format!("database.url: sslmode={mode} needs the server's root certificate; add sslrootcert=/path/to/root.crt"))?,
            };
            Some(Verify {
                root_cert,
                check_name: mode == "verify-full",
            })
        }
    };
    let conninfo: Vec<String> = pairs
        .iter()
        .map(|(k, v)| format!("{k}='{}'", v.replace('\\', "\\\\").replace('\'', "\\'")))
        .collect();
    Ok((conninfo.join(" "), verify))
}

/// The connection as `postgres://user@host:port/dbname?sslmode=…`, without the password.
fn show_postgres(config: &postgres::Config) -> String {
    use postgres::config::{Host, SslMode};
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let host = match h {
                Host::Tcp(name) => name.clone(),
                Host::Unix(path) => path.display().to_string(),
            };
            match config.get_ports().get(i).or(config.get_ports().first()) {
                Some(port) => format!("{host}:{port}"),
                None => host,
            }
        })
        .collect();
    let user = config
        .get_user()
        .map(|u| format!("{u}@"))
        .unwrap_or_default();
    let dbname = config.get_dbname().unwrap_or("");
    let ssl = match config.get_ssl_mode() {
        SslMode::Disable => "?sslmode=disable",
        SslMode::Require => "?sslmode=require",
        _ => "",
    };
    format!("postgres://{user}{}/{dbname}{ssl}", hosts.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::DatabaseUrl;

    /// A password with `%40` or `+` and a root certificate path with `%2F` or `%20`
    /// come out as written before they were encoded.
    #[test]
    fn url_parts_are_percent_decoded() {
        let u = resolve_postgres(
            "postgres://u:p%40ss%2Bw+x@h/db?sslmode=verify-full&sslrootcert=%2Ftmp%2Fmy%20ca.crt",
            None,
            None,
        )
        .unwrap();
        assert_eq!(u.config.get_password(), Some(&b"p@ss+w+x"[..]));
        assert_eq!(
            u.verify,
            Some(Verify {
                root_cert: PathBuf::from("/tmp/my ca.crt"),
                check_name: true
            })
        );
        assert!(!u.shown.contains("p@ss"), "{}", u.shown);
        let e = resolve_postgres(
            "postgres://h/db?sslmode=verify-ca&sslrootcert=%FF%FE",
            None,
            None,
        )
        .unwrap_err();
        assert_eq!(
            e,
            "database.url: the sslrootcert is not UTF-8 once percent-decoded; percent-encode it from UTF-8 text"
        );
    }

    /// Each part of the URL is decoded once, as libpq does: `%40` is `@`, `+` and
    /// `%2B` are `+`, a `:` after the first is part of the password.
    #[test]
    fn passwords_are_read_as_libpq_reads_them() {
        for (url, password) in [
            ("postgres://app:p%40ss@db/shop", "p@ss"),
            ("postgres://app:a+b@db/shop", "a+b"),
            ("postgres://app:a%2Bb@db/shop", "a+b"),
            ("postgres://app:a:b@db/shop", "a:b"),
            ("postgres://app:a%3Ab%2F%23%3F%25@db/shop", "a:b/#?%"),
            ("postgres://app:%C3%A9t%C3%A9@db/shop", "été"),
            ("postgres://app@db/shop?password=a+b%40c%26d", "a+b@c&d"),
        ] {
            let pg = resolve_postgres(url, None, None).unwrap();
            assert_eq!(pg.config.get_password(), Some(password.as_bytes()), "{url}");
            assert_eq!(pg.config.get_user(), Some("app"), "{url}");
            assert_eq!(pg.shown, "postgres://app@db/shop", "{url}");
        }
    }

    #[test]
    fn every_parameter_of_the_query_is_read() {
        use postgres::config::{Host, SslMode, TargetSessionAttrs};
        let pg = resolve_postgres(
            "postgresql://us%40er@[::1]:6432/my%20db?sslmode=disable&connect_timeout=5&application_name=shop+sync%20job&target_session_attrs=read-write&options=-c%20search_path%3Dx",
            None,
            None,
        )
        .unwrap();
        let c = &pg.config;
        assert_eq!(c.get_user(), Some("us@er"));
        assert_eq!(c.get_hosts(), [Host::Tcp("::1".into())]);
        assert_eq!(c.get_ports(), [6432]);
        assert_eq!(c.get_dbname(), Some("my db"));
        assert_eq!(c.get_ssl_mode(), SslMode::Disable);
        assert_eq!(c.get_connect_timeout(), Some(&Duration::from_secs(5)));
        assert_eq!(c.get_application_name(), Some("shop+sync job"));
        assert_eq!(c.get_target_session_attrs(), TargetSessionAttrs::ReadWrite);
        assert_eq!(c.get_options(), Some("-c search_path=x"));
        let socket =
            resolve_postgres("postgres://%2Fvar%2Frun%2Fpostgresql/shop", None, None).unwrap();
        assert_eq!(
            socket.config.get_hosts(),
            [Host::Unix("/var/run/postgresql".into())]
        );
        let in_query =
            resolve_postgres("postgres:///shop?host=h1,h2&port=5432,5433", None, None).unwrap();
        assert_eq!(in_query.shown, "postgres://h1:5432,h2:5433/shop");
    }

    /// A message names `database.url` and the fix, and never the password.
    #[test]
    fn a_bad_url_is_named_without_its_password() {
        for (url, expected) in [
            (
                "postgres://app:se/cret@db/shop",
                "database.url is not a valid PostgreSQL URL (invalid port number); percent-encode @ : / # ? in the user name and password (@ as %40, : as %3A, / as %2F, # as %23, ? as %3F)",
            ),
            (
                "postgres://app:secret@db:5432,db2:5432/shop",
                "database.url is not a valid PostgreSQL URL (invalid port number); several hosts go in the query: postgres://user@/dbname?host=h1,h2&port=5432,5433",
            ),
            (
                "postgres://app:secret@db/shop?sslmode=sometimes",
                "database.url is not a valid PostgreSQL URL (invalid connection string: invalid value for option `sslmode`); write it like \"postgres://user@host:5432/dbname?sslmode=require\"",
            ),
            (
                "postgres://app:secret@db/shop?x%27%20password=y",
                "database.url: \"x' password\" in the query is not a connection parameter; write parameters like ?sslmode=require&connect_timeout=5",
            ),
            (
                "postgres://app:secret%FF@db/shop",
                "database.url: the password is not UTF-8 once percent-decoded; percent-encode it from UTF-8 text",
            ),
        ] {
            let e = resolve_postgres(url, None, None).unwrap_err();
            assert_eq!(e, expected, "{url}");
            assert!(!e.contains("secret") && !e.contains("cret"), "{e}");
        }
    }

    #[test]
    fn a_postgres_password_comes_from_the_url_a_file_or_the_environment_and_is_never_shown() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("pw");
        std::fs::write(&file, "from-file\nignored\n").unwrap();
        let url = "postgres://app@db.internal:6432/orders?sslmode=require";
        let cases = [
            (
                "postgres://app:in-url@db.internal:6432/orders?sslmode=require",
                None,
                Some("from-env"),
                "in-url",
            ),
            (url, Some(file.as_path()), Some("from-env"), "from-file"),
            (url, None, Some("from-env"), "from-env"),
        ];
        for (url, file, env, expected) in cases {
            let pg = resolve_postgres(url, file, env.map(String::from)).unwrap();
            assert_eq!(pg.config.get_password(), Some(expected.as_bytes()));
            assert_eq!(
                pg.shown,
                "postgres://app@db.internal:6432/orders?sslmode=require"
            );
            let debug = format!("{:?}", DatabaseUrl::Server(Box::new(pg)));
            assert!(!debug.contains(expected), "{debug}");
        }
        let none = resolve_postgres(url, None, None).unwrap();
        assert_eq!(none.config.get_password(), None);
        let empty = dir.path().join("empty");
        std::fs::write(&empty, "").unwrap();
        let err = resolve_postgres(url, Some(&empty), None).unwrap_err();
        assert!(
            err.ends_with("is empty; write the password on its first line"),
            "{err}"
        );
    }

    #[test]
    fn verify_modes_are_taken_out_of_the_url_and_shown() {
        let pg = resolve_postgres(
            "postgres://app@db:5432/shop?sslmode=verify-full&sslrootcert=/etc/ssl/pg-root.crt&connect_timeout=5",
            None,
            None,
        )
        .unwrap();
        assert_eq!(
            pg.verify,
            Some(Verify {
                root_cert: "/etc/ssl/pg-root.crt".into(),
                check_name: true
            })
        );
        assert_eq!(pg.config.get_ssl_mode(), postgres::config::SslMode::Require);
        assert_eq!(pg.shown, "postgres://app@db:5432/shop?sslmode=verify-full");
        let ca = resolve_postgres(
            "postgres://app@db/shop?sslmode=verify-ca&sslrootcert=r.crt",
            None,
            None,
        )
        .unwrap();
        assert!(!ca.verify.unwrap().check_name);
        let err =
            resolve_postgres("postgres://app@db/shop?sslrootcert=r.crt", None, None).unwrap_err();
        assert_eq!(
            err,
            "database.url: sslrootcert is used only with sslmode=verify-ca or verify-full; add one"
        );
    }
}

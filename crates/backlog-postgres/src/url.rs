//! A `postgres://` (or `postgresql://`) URL. `postgres::Config` reads it as libpq
//! does: each part percent-decoded once (`+` stays a plus), libpq's parameters in the
//! query, several hosts (`h1:5432,h2:5433`) tried in order. Here is what it lacks:
//! libpq's `verify-ca` / `verify-full` for the store to check over rustls, a few places
//! where it reads a URL otherwise than libpq (`read_url`), the password from
//! `database.password_file` or `PGPASSWORD`, the tool's defaults, and
//! `PostgresUrl::shown`, the URL without its password: nothing here prints one.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use backlog_core::config::KeyError;
use backlog_core::config::server_url::{ENCODE, not_utf8, read_password_file};
use percent_encoding::{NON_ALPHANUMERIC, percent_decode_str, percent_encode};
use postgres::config::Host;

/// A PostgreSQL connection, with its password resolved from wherever it came. Only
/// `shown` (the URL without its password) is ever printed: the `Debug` and `Display`
/// of this type and of `DatabaseUrl` both use it.
#[derive(Clone)]
#[non_exhaustive]
pub struct PostgresUrl {
    /// The settings the driver connects with, password included: never print it (`shown`
    /// is for messages).
    pub config: postgres::Config,
    /// `postgres://user@host:port,host:port/dbname?sslmode=…`, never with the password.
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

/// How a URL is written, for messages.
const EXAMPLE: &str = "write it like \"postgres://user@host:5432/dbname?sslmode=require\"";

/// Parses a `postgres://` URL and settles its password: in the URL, or from
/// `database.password_file`, or from `PGPASSWORD`, in that order, as libpq does with
/// its URL and environment. Messages never repeat the URL, which may hold a password
/// (the client's own name an option, never its value).
pub fn resolve_postgres(
    url: &str,
    password_file: Option<&Path>,
    env_password: Option<String>,
) -> Result<PostgresUrl, KeyError> {
    let (mut config, verify) = read_url(url)?;
    check_hosts(&config)?;
    match (config.get_password(), password_file) {
        (Some(password), _) if std::str::from_utf8(password).is_err() => {
            return Err(not_utf8("password"));
        }
        (Some(_), Some(_)) => {
            return Err("database.url holds a password and database.password_file is set too; keep one (the file is the safer)".into());
        }
        (None, Some(file)) => {
            config.password(read_password_file(file)?);
        }
        (None, None) => {
            if let Some(password) = env_password.filter(|p| !p.is_empty()) {
                config.password(password);
            }
        }
        (Some(_), None) => {}
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
    let shown = show_postgres(&config, verify.as_ref());
    Ok(PostgresUrl {
        shown,
        config,
        verify,
    })
}

/// The URL read by `postgres::Config` as libpq reads it, and the check of the
/// certificate it cannot express. Three things the client reads otherwise: an `@`
/// after the first `/` ends no user name (it is encoded); `?host=h1,h2` is a list (it
/// becomes `host=h1&host=h2`); `sslmode=verify-ca|verify-full` and `sslrootcert` are
/// libpq's only (taken out: the connection then requires TLS, the store checks the
/// certificate). Hosts before the path and in the query are refused: libpq lets the
/// query's replace them, the client adds them up.
fn read_url(url: &str) -> Result<(postgres::Config, Option<Verify>), KeyError> {
    let Some((scheme, rest)) = ["postgres://", "postgresql://"]
        .into_iter()
        .find_map(|scheme| Some((scheme, url.strip_prefix(scheme)?)))
    else {
        return Err(KeyError::new(format!(
            "database.url is not a valid PostgreSQL URL; {EXAMPLE}"
        )));
    };
    let rest = match (rest.find('@'), rest.find('/')) {
        (Some(at), Some(slash)) if slash < at => rest.replace('@', "%40"),
        _ => rest.to_string(),
    };
    let hosts_at = rest.find('@').map_or(0, |at| at + 1);
    let (head, query) = match rest[hosts_at..].find('?') {
        Some(q) => (&rest[..hosts_at + q], Some(&rest[hosts_at + q + 1..])),
        None => (rest.as_str(), None),
    };
    let (mut parts, mut mode, mut root, mut hosts_in_query) = (vec![], None, None, false);
    for part in query.into_iter().flat_map(|q| q.split('&')) {
        let Some((key, value)) = part.split_once('=') else {
            parts.push(part.into()); // the client refuses it
            continue;
        };
        let value = percent_decode_str(value);
        match percent_decode_str(key).decode_utf8_lossy().as_ref() {
            "sslmode" => {
                let wanted = value.decode_utf8_lossy();
                if wanted == "verify-ca" || wanted == "verify-full" {
                    mode = Some(wanted.into_owned());
                    parts.push("sslmode=require".into());
                } else {
                    mode = None; // the last one counts, as in libpq
                    parts.push(part.into());
                }
            }
            "sslrootcert" => {
                let path = value.decode_utf8().map_err(|_| not_utf8("sslrootcert"))?;
                root = Some(path.into_owned());
            }
            "host" => {
                hosts_in_query = true;
                for name in value.collect::<Vec<u8>>().split(|b| *b == b',') {
                    parts.push(format!("host={}", percent_encode(name, NON_ALPHANUMERIC)));
                }
            }
            key => {
                hosts_in_query |= key == "port";
                parts.push(part.into());
            }
        }
    }
    if hosts_in_query && !matches!(head[hosts_at..].chars().next(), None | Some('/')) {
        return Err("database.url names hosts before the path and ?host= or ?port= too; write each host with its port before the path, like postgres://user@h1:5432,h2:5433/dbname".into());
    }
    let verify = match (mode, root) {
        (None, Some(_)) => {
            return Err("database.url: sslrootcert is used only with sslmode=verify-ca or verify-full; add one".into());
        }
        (None, None) => None,
        (Some(mode), root) => {
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
    let query = query
        .map(|_| format!("?{}", parts.join("&")))
        .unwrap_or_default();
    let config = format!("{scheme}{head}{query}").parse().map_err(|e| {
        // The client reads the query last: if the rest reads, the query is at fault;
        // else most likely a user name or password is not encoded.
        let hint = match format!("{scheme}{head}").parse::<postgres::Config>() {
            Ok(_) => EXAMPLE,
            Err(_) => ENCODE,
        };
        let cause = backlog_core::causes::chain(&e);
        format!("database.url is not a valid PostgreSQL URL ({cause}); {hint}")
    })?;
    Ok((config, verify))
}

/// A URL with no host, or with an `@` of its password read as part of a host (and so
/// shown), is refused now rather than when connecting.
fn check_hosts(config: &postgres::Config) -> Result<(), KeyError> {
    let hosts = config.get_hosts();
    if hosts.is_empty() {
        return Err(
            "database.url names no host; write it like \"postgres://user@host:5432/dbname\"".into(),
        );
    }
    if hosts
        .iter()
        .any(|h| matches!(h, Host::Tcp(name) if name.contains('@')))
    {
        return Err(KeyError::new(format!(
            "database.url has an @ after the user name and password; {ENCODE}"
        )));
    }
    Ok(())
}

/// The connection as `postgres://user@host:port,…/dbname?sslmode=…`, without the
/// password: each host with the port it is reached on.
fn show_postgres(config: &postgres::Config, verify: Option<&Verify>) -> String {
    use postgres::config::SslMode;
    let ports = config.get_ports();
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let host = match h {
                Host::Tcp(name) if name.contains(':') => format!("[{name}]"),
                Host::Tcp(name) => name.clone(),
                // As written in a URL: `%2Fvar%2Frun%2Fpostgresql`.
                Host::Unix(path) => path.display().to_string().replace('/', "%2F"),
            };
            let port = ports.get(i).or(ports.first()).copied().unwrap_or(5432);
            format!("{host}:{port}")
        })
        .collect();
    let user = config
        .get_user()
        .map(|u| format!("{u}@"))
        .unwrap_or_default();
    let dbname = config.get_dbname().unwrap_or("");
    let ssl = match (verify, config.get_ssl_mode()) {
        (Some(v), _) if v.check_name => "?sslmode=verify-full",
        (Some(_), _) => "?sslmode=verify-ca",
        (None, SslMode::Disable) => "?sslmode=disable",
        (None, SslMode::Require) => "?sslmode=require",
        _ => "",
    };
    format!("postgres://{user}{}/{dbname}{ssl}", hosts.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;
    use backlog_core::config::DatabaseUrl;

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
        .unwrap_err()
        .message;
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
            assert_eq!(pg.shown, "postgres://app@db:5432/shop", "{url}");
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
        assert_eq!(
            socket.shown,
            "postgres://%2Fvar%2Frun%2Fpostgresql:5432/shop"
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
                "database.url is not a valid PostgreSQL URL (invalid connection string: invalid value for option `port`); percent-encode @ : / # ? in the user name and password (@ as %40, : as %3A, / as %2F, # as %23, ? as %3F)",
            ),
            (
                "postgres://app:se@cret@db/shop",
                "database.url has an @ after the user name and password; percent-encode @ : / # ? in the user name and password (@ as %40, : as %3A, / as %2F, # as %23, ? as %3F)",
            ),
            (
                "postgres://app:secret@db/shop?sslmode=sometimes",
                "database.url is not a valid PostgreSQL URL (invalid connection string: invalid value for option `sslmode`); write it like \"postgres://user@host:5432/dbname?sslmode=require\"",
            ),
            (
                "postgres://app:secret@db/shop?x%27%20password=y",
                "database.url is not a valid PostgreSQL URL (invalid connection string: unknown option `x' password`); write it like \"postgres://user@host:5432/dbname?sslmode=require\"",
            ),
            (
                "postgres://app:secret@db/shop?target_session_attrs=primary",
                "database.url is not a valid PostgreSQL URL (invalid connection string: invalid value for option `target_session_attrs`); write it like \"postgres://user@host:5432/dbname?sslmode=require\"",
            ),
            (
                "postgres://app:secret@db/shop?port=6432",
                "database.url names hosts before the path and ?host= or ?port= too; write each host with its port before the path, like postgres://user@h1:5432,h2:5433/dbname",
            ),
            (
                "postgres://app:secret@/shop",
                "database.url names no host; write it like \"postgres://user@host:5432/dbname\"",
            ),
            (
                "postgres://app:secret%FF@db/shop",
                "database.url: the password is not UTF-8 once percent-decoded; percent-encode it from UTF-8 text",
            ),
        ] {
            let e = resolve_postgres(url, None, None).unwrap_err().message;
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
        let err = resolve_postgres(url, Some(&empty), None)
            .unwrap_err()
            .message;
        assert!(
            err.ends_with("is empty; write the password on its first line"),
            "{err}"
        );
    }

    /// Several hosts, before the path as libpq writes them or in `?host=`, are tried in
    /// order; `target_session_attrs=read-write` passes over those that refuse writes.
    #[test]
    fn several_hosts_are_read_in_either_place() {
        use postgres::config::{Host, LoadBalanceHosts, TargetSessionAttrs};
        let tcp = |names: &[&str]| -> Vec<Host> {
            names.iter().map(|n| Host::Tcp(n.to_string())).collect()
        };
        let pg = resolve_postgres(
            "postgres://h1,h2/db?target_session_attrs=read-write",
            None,
            None,
        )
        .unwrap();
        assert_eq!(pg.config.get_hosts(), tcp(&["h1", "h2"]));
        assert_eq!(pg.config.get_ports(), [5432, 5432]);
        assert_eq!(
            pg.config.get_target_session_attrs(),
            TargetSessionAttrs::ReadWrite
        );
        assert_eq!(pg.shown, "postgres://h1:5432,h2:5432/db");
        // The form the conninfo text refused ("invalid port number").
        let pg =
            resolve_postgres("postgres://app:secret@db:5432,db2:5433/shop", None, None).unwrap();
        assert_eq!(pg.config.get_hosts(), tcp(&["db", "db2"]));
        assert_eq!(pg.config.get_ports(), [5432, 5433]);
        assert_eq!(pg.config.get_password(), Some(&b"secret"[..]));
        assert_eq!(pg.shown, "postgres://app@db:5432,db2:5433/shop");
        let pg = resolve_postgres(
            "postgresql://[::1]:6432,[fe80::1],db.internal/x?load_balance_hosts=random",
            None,
            None,
        )
        .unwrap();
        assert_eq!(
            pg.config.get_hosts(),
            tcp(&["::1", "fe80::1", "db.internal"])
        );
        assert_eq!(pg.config.get_ports(), [6432, 5432, 5432]);
        assert_eq!(pg.config.get_load_balance_hosts(), LoadBalanceHosts::Random);
        assert_eq!(
            pg.shown,
            "postgres://[::1]:6432,[fe80::1]:5432,db.internal:5432/x"
        );
        // In the query, a list as libpq reads it (the client alone would look up one
        // name "h1,h2"), sockets among them.
        let pg = resolve_postgres(
            "postgres://app@/shop?host=%2Fvar%2Frun%2Fpostgresql,h2%2Ch3&port=5432,5433,5434",
            None,
            None,
        )
        .unwrap();
        assert_eq!(
            pg.config.get_hosts(),
            [
                Host::Unix("/var/run/postgresql".into()),
                Host::Tcp("h2".into()),
                Host::Tcp("h3".into())
            ]
        );
        assert_eq!(
            pg.shown,
            "postgres://app@%2Fvar%2Frun%2Fpostgresql:5432,h2:5433,h3:5434/shop"
        );
        // verify-full checks each host's certificate against its own name.
        let pg = resolve_postgres(
            "postgres://h1,h2/db?sslmode=verify-full&sslrootcert=r.crt",
            None,
            None,
        )
        .unwrap();
        assert!(pg.verify.unwrap().check_name);
        assert_eq!(
            pg.shown,
            "postgres://h1:5432,h2:5432/db?sslmode=verify-full"
        );
    }

    /// An `@` after the path is no end of a user name and password, as in libpq: it
    /// stays in the value, and a password in the query is not shown as a user name.
    #[test]
    fn an_at_sign_after_the_path_is_part_of_the_value() {
        let pg = resolve_postgres(
            "postgres://db/shop?password=secret&application_name=job@web1",
            None,
            None,
        )
        .unwrap();
        assert_eq!(
            pg.config.get_hosts(),
            [postgres::config::Host::Tcp("db".into())]
        );
        assert_eq!(pg.config.get_user(), None);
        assert_eq!(pg.config.get_application_name(), Some("job@web1"));
        assert_eq!(pg.shown, "postgres://db:5432/shop");
        // The last sslmode counts: a verify mode given before another is dropped.
        let pg = resolve_postgres(
            "postgres://db/shop?sslmode=verify-ca&sslmode=disable",
            None,
            None,
        )
        .unwrap();
        assert_eq!(pg.verify, None);
        assert_eq!(pg.shown, "postgres://db:5432/shop?sslmode=disable");
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
        let err = resolve_postgres("postgres://app@db/shop?sslrootcert=r.crt", None, None)
            .unwrap_err()
            .message;
        assert_eq!(
            err,
            "database.url: sslrootcert is used only with sslmode=verify-ca or verify-full; add one"
        );
    }
}

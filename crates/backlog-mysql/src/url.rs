//! A `mysql://` (or `mariadb://`) URL: the server, the user, the database, TLS as the
//! URL asks (MySQL's own `ssl-mode` names, or libpq's `sslmode` ones for those who come
//! from PostgreSQL) and a password from the URL, `database.password_file` or
//! `MYSQL_PWD`, in that order, as the `mysql` client reads its options and environment.
//! Nothing here prints a password: what is shown is `MysqlUrl::shown`.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use backlog_core::config::KeyError;

/// How the connection is encrypted (MySQL's `--ssl-mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum MysqlTls {
    /// `DISABLED`: never.
    Disabled,
    /// `PREFERRED`, the default: when the server offers it, certificate not checked.
    Preferred,
    /// `REQUIRED`: always, certificate not checked.
    Required,
    /// `VERIFY_CA`: the certificate must chain to `ssl-ca`; the name in it is not checked.
    VerifyCa,
    /// `VERIFY_IDENTITY`: the certificate must chain to `ssl-ca` and name the host.
    VerifyIdentity,
}

impl MysqlTls {
    /// The mode as MySQL's clients spell it (`VERIFY_CA`).
    fn name(self) -> &'static str {
        match self {
            MysqlTls::Disabled => "DISABLED",
            MysqlTls::Preferred => "PREFERRED",
            MysqlTls::Required => "REQUIRED",
            MysqlTls::VerifyCa => "VERIFY_CA",
            MysqlTls::VerifyIdentity => "VERIFY_IDENTITY",
        }
    }
}

/// A MySQL or MariaDB connection, with its password resolved. Only `shown` (the URL
/// without its password) is ever printed.
#[derive(Clone)]
#[non_exhaustive]
pub struct MysqlUrl {
    /// The server's host name or address (or none with a socket).
    pub host: String,
    /// The server's port.
    pub port: u16,
    /// A Unix socket to connect through instead (`?socket=/run/mysqld/mysqld.sock`).
    pub socket: Option<PathBuf>,
    /// The user name.
    pub user: Option<String>,
    /// The password: never print it.
    pub password: Option<String>,
    /// The database holding the table (and, unless `database.schema` names another,
    /// the tool's own tables).
    pub database: String,
    /// TLS, as `ssl-mode` says.
    pub tls: MysqlTls,
    /// The roots a `VERIFY_CA` / `VERIFY_IDENTITY` certificate must chain to (`ssl-ca`).
    pub ca: Option<PathBuf>,
    /// How long connecting may take (`connect_timeout`, seconds; 10 by default).
    pub connect_timeout: Duration,
    /// `mysql://user@host:port/db?ssl-mode=…`, never with the password.
    pub shown: String,
}

impl PartialEq for MysqlUrl {
    fn eq(&self, other: &Self) -> bool {
        self.shown == other.shown
    }
}

impl Eq for MysqlUrl {}

impl fmt::Debug for MysqlUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.shown)
    }
}

const EXAMPLE: &str = "write it like \"mysql://user@host:3306/dbname?ssl-mode=REQUIRED\"";

/// Parses a `mysql://` or `mariadb://` URL and settles its password. Messages never
/// repeat the URL, which may hold a password.
pub fn resolve_mysql(
    text: &str,
    password_file: Option<&Path>,
    env_password: Option<String>,
) -> Result<MysqlUrl, KeyError> {
    let url = url::Url::parse(text).map_err(|e| {
        format!(
            "database.url is not a valid MySQL URL ({e}); {}",
            backlog_core::config::server_url::ENCODE
        )
    })?;
    let decode = |part: &str, value: &str| {
        percent_encoding::percent_decode_str(value)
            .decode_utf8()
            .map(|d| d.into_owned())
            .map_err(|_| backlog_core::config::server_url::not_utf8(part))
    };
    let user = match url.username() {
        "" => None,
        u => Some(decode("user name", u)?),
    };
    let mut password = url.password().map(|p| decode("password", p)).transpose()?;
    let host = match url.host() {
        None => String::new(),
        Some(url::Host::Domain(name)) => decode("host", name)?,
        Some(url::Host::Ipv4(ip)) => ip.to_string(),
        Some(url::Host::Ipv6(ip)) => ip.to_string(),
    };
    let database = decode("database name", url.path().trim_start_matches('/'))?;
    if database.is_empty() {
        return Err(KeyError::new(format!(
            "database.url names no database; {EXAMPLE} (the database that holds the table)"
        )));
    }
    let mut tls = MysqlTls::Preferred;
    let mut ca = None;
    let mut socket = None;
    let mut connect_timeout = Duration::from_secs(10);
    for (key, value) in backlog_core::config::server_url::query_pairs(&url)? {
        match key.as_str() {
            "ssl-mode" | "ssl_mode" | "sslmode" => {
                tls = tls_mode(&value)?;
            }
            "ssl-ca" | "ssl_ca" | "sslrootcert" => ca = Some(PathBuf::from(value)),
            "socket" => socket = Some(PathBuf::from(value)),
            "connect_timeout" | "connect-timeout" => {
                let secs: u64 = value.parse().ok().filter(|s| (1..=3600).contains(s)).ok_or(
                    format!("database.url: connect_timeout={value} is not a number of seconds from 1 to 3600"),
                )?;
                connect_timeout = Duration::from_secs(secs);
            }
            "password" => password = Some(value),
            other => {
                return Err(KeyError::new(format!(
                    "database.url: {other:?} in the query is not an option backlog knows for MySQL; use ssl-mode, ssl-ca, socket or connect_timeout"
                )));
            }
        }
    }
    check_ca(tls, ca.as_deref())?;
    if host.is_empty() && socket.is_none() {
        return Err(KeyError::new(format!(
            "database.url names no host; {EXAMPLE}"
        )));
    }
    match (password.is_some(), password_file) {
        (true, Some(_)) => {
            return Err("database.url holds a password and database.password_file is set too; keep one (the file is the safer)".into());
        }
        (false, Some(file)) => {
            password = Some(backlog_core::config::server_url::read_password_file(file)?)
        }
        (false, None) => password = env_password.filter(|p| !p.is_empty()),
        (true, None) => {}
    }
    let port = url.port().unwrap_or(3306);
    let mode = match tls {
        MysqlTls::Preferred => String::new(),
        other => format!("?ssl-mode={}", other.name()),
    };
    let at = user.as_deref().map(|u| format!("{u}@")).unwrap_or_default();
    let place = match &socket {
        Some(path) if host.is_empty() => path.display().to_string(),
        _ => format!("{host}:{port}"),
    };
    let shown = format!("{}://{at}{place}/{database}{mode}", url.scheme());
    Ok(MysqlUrl {
        host,
        port,
        socket,
        user,
        password,
        database,
        tls,
        ca,
        connect_timeout,
        shown,
    })
}

/// An `ssl-mode` of the URL, as MySQL's clients spell it or as PostgreSQL's do.
fn tls_mode(value: &str) -> Result<MysqlTls, KeyError> {
    Ok(
        match value.to_ascii_lowercase().replace('_', "-").as_str() {
            "disabled" | "disable" => MysqlTls::Disabled,
            "preferred" | "prefer" => MysqlTls::Preferred,
            "required" | "require" => MysqlTls::Required,
            "verify-ca" => MysqlTls::VerifyCa,
            "verify-identity" | "verify-full" => MysqlTls::VerifyIdentity,
            _ => {
                return Err(KeyError::new(format!(
                    "database.url: ssl-mode={value} is not a mode; use DISABLED, PREFERRED, REQUIRED, VERIFY_CA or VERIFY_IDENTITY"
                )));
            }
        },
    )
}

/// A root certificate is given where, and only where, the mode verifies the server.
fn check_ca(tls: MysqlTls, ca: Option<&Path>) -> Result<(), KeyError> {
    match (tls, ca) {
        (MysqlTls::VerifyCa | MysqlTls::VerifyIdentity, None) => Err("database.url: ssl-mode=VERIFY_CA and VERIFY_IDENTITY need the server's root certificate; add ssl-ca=/path/to/ca.pem".into()),
        (MysqlTls::Disabled | MysqlTls::Preferred | MysqlTls::Required, Some(_)) => Err("database.url: ssl-ca is used only with ssl-mode=VERIFY_CA or VERIFY_IDENTITY; add one".into()),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mysql_url_is_read_with_its_password_kept_out_of_sight() {
        let u = resolve_mysql(
            "mysql://app:p%40ss+w@db.internal:3307/shop?ssl-mode=verify_identity&ssl-ca=%2Fetc%2Fca.pem",
            None,
            None,
        )
        .unwrap();
        assert_eq!(u.password.as_deref(), Some("p@ss+w"));
        assert_eq!((u.host.as_str(), u.port), ("db.internal", 3307));
        assert_eq!(u.database, "shop");
        assert_eq!(u.tls, MysqlTls::VerifyIdentity);
        assert_eq!(u.ca.as_deref(), Some(Path::new("/etc/ca.pem")));
        assert_eq!(
            u.shown,
            "mysql://app@db.internal:3307/shop?ssl-mode=VERIFY_IDENTITY"
        );
        assert!(!format!("{u:?}").contains("p@ss"));
        let env = resolve_mysql("mariadb://app@db/shop", None, Some("from-env".into())).unwrap();
        assert_eq!(env.password.as_deref(), Some("from-env"));
        assert_eq!(env.tls, MysqlTls::Preferred);
        assert_eq!(env.shown, "mariadb://app@db:3306/shop");
        // In the query too, `+` is a plus, `%2B` the same, and `%20` a space.
        for (query, password) in [("p+w", "p+w"), ("p%2Bw", "p+w"), ("p%20w", "p w")] {
            let url = format!("mysql://app@db/shop?password={query}");
            let u = resolve_mysql(&url, None, None).unwrap();
            assert_eq!(u.password.as_deref(), Some(password), "{url}");
        }
    }

    #[test]
    fn a_bad_mysql_url_gets_one_line_without_the_password() {
        for (url, expected) in [
            (
                "mysql://app:secret@db",
                "database.url names no database; write it like \"mysql://user@host:3306/dbname?ssl-mode=REQUIRED\" (the database that holds the table)",
            ),
            (
                "mysql://app:secret@db/shop?ssl-mode=sometimes",
                "database.url: ssl-mode=sometimes is not a mode; use DISABLED, PREFERRED, REQUIRED, VERIFY_CA or VERIFY_IDENTITY",
            ),
            (
                "mysql://app:secret@db/shop?ssl-mode=VERIFY_CA",
                "database.url: ssl-mode=VERIFY_CA and VERIFY_IDENTITY need the server's root certificate; add ssl-ca=/path/to/ca.pem",
            ),
            (
                "mysql://app:secret@db/shop?charset=latin1",
                "database.url: \"charset\" in the query is not an option backlog knows for MySQL; use ssl-mode, ssl-ca, socket or connect_timeout",
            ),
        ] {
            let e = resolve_mysql(url, None, None).unwrap_err().message;
            assert_eq!(e, expected, "{url}");
            assert!(!e.contains("secret"), "{e}");
        }
    }
}

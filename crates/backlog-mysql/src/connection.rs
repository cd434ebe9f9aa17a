//! Connecting to MySQL or MariaDB: TLS as the URL asks, the session settings every
//! statement of the backend relies on, errors as one line that never holds the
//! password, and the statements the backends share run through `Sql`.

use std::borrow::Cow;
use std::time::Duration;

use mysql::prelude::Queryable;
use mysql::{Conn, OptsBuilder, SslOpts};

use crate::url::{MysqlTls, MysqlUrl};
use backlog_core::store::StoreError;
use backlog_core::store::fault::{DbError, Fault, retrying};
use backlog_core::store::sql::{Sql, SqlError, Value, unquoted};

/// What every connection sets first: times in UTC (`NOW()`, and `TIMESTAMP` columns
/// read and written in UTC), identifiers in double quotes and `||` as concatenation
/// (so the statements the backends share read the same here), READ COMMITTED, so
/// that a claim's `SELECT … FOR UPDATE` locks the rows it finds and no gap between
/// them (REPEATABLE READ's gap locks make runners claiming neighbouring records wait
/// for each other, and deadlock), and autocommit, which a server's `init_connect` may
/// have turned off (the run log's writes outside a transaction would never land).
const SESSION: [&str; 4] = [
    "SET time_zone = '+00:00'",
    "SET autocommit = 1",
    "SET SESSION sql_mode = CONCAT_WS(',', NULLIF(@@SESSION.sql_mode, ''), 'ANSI_QUOTES', 'PIPES_AS_CONCAT')",
    "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED",
];

/// The socket's error under a driver's error: its own I/O error, or one met as it
/// read or wrote a packet (its codec's, which names it only as its source).
fn io_of(e: &mysql::Error) -> Option<&std::io::Error> {
    match e {
        mysql::Error::IoError(io) => Some(io),
        mysql::Error::CodecError(codec) => {
            std::error::Error::source(codec).and_then(|s| s.downcast_ref::<std::io::Error>())
        }
        _ => None,
    }
}

/// A MySQL error as one line: the server's message, or what happened to the
/// connection. Never the URL, which may hold a password.
pub(crate) fn describe_error(e: &mysql::Error) -> String {
    match e {
        mysql::Error::MySqlError(my) => format!("{} (error {})", my.message, my.code),
        _ if let Some(io) = io_of(e) => match io.kind() {
            std::io::ErrorKind::UnexpectedEof
            | std::io::ErrorKind::BrokenPipe
            | std::io::ErrorKind::ConnectionReset
            | std::io::ErrorKind::ConnectionAborted => {
                "the connection to the server was lost".to_string()
            }
            _ => format!("the connection to the server failed: {io}"),
        },
        mysql::Error::DriverError(mysql::DriverError::ConnectTimeout) => {
            "the server did not answer in time (check the host, the port and the firewall)".into()
        }
        other => backlog_core::causes::chain(other),
    }
}

/// A MySQL error as the protocol reads it: its kind (a deadlock is 1213, a lock wait
/// that ran out 1205, a lost connection 2006 or 2013 or the socket's end, a full disk
/// or table 1021 and 1114) and its line.
pub(crate) fn db_error(e: &mysql::Error) -> DbError {
    let fault = match e {
        mysql::Error::MySqlError(my) => match my.code {
            1213 => Fault::Deadlock,
            1205 => Fault::LockTimeout,
            2006 | 2013 => Fault::Lost,
            1021 | 1114 => Fault::DiskFull,
            _ => Fault::Other,
        },
        // The socket broke, under the driver or under its packets.
        _ if io_of(e).is_some() => Fault::Lost,
        _ => Fault::Other,
    };
    DbError {
        fault,
        message: describe_error(e),
    }
}

/// Why a transaction failed: the server's error, or the tool's.
pub(super) enum Failed {
    My(mysql::Error),
    Store(StoreError),
}

impl From<mysql::Error> for Failed {
    fn from(e: mysql::Error) -> Self {
        Failed::My(e)
    }
}

impl From<StoreError> for Failed {
    fn from(e: StoreError) -> Self {
        Failed::Store(e)
    }
}

/// Runs `work` in a transaction, again when the server rolled it back for a deadlock
/// or a lock wait timeout (see `fault::retrying`).
pub(super) fn transaction<T>(
    conn: &mut Conn,
    context: &str,
    mut work: impl FnMut(&mut Mq<mysql::Transaction<'_>>) -> Result<T, Failed>,
) -> Result<T, StoreError> {
    retrying(context, || {
        let mut tx = Mq(conn
            .start_transaction(mysql::TxOpts::default())
            .map_err(my(context))?);
        let value = work(&mut tx).map_err(|failed| match failed {
            Failed::My(e) => my(context)(e),
            Failed::Store(e) => e,
        })?;
        tx.0.commit().map_err(my(context))?;
        Ok(value)
    })
}

/// A failed statement, named by what it was doing.
pub(super) fn my(context: impl Into<String>) -> impl FnOnce(mysql::Error) -> StoreError {
    let context = context.into();
    move |e| StoreError::Database {
        context,
        source: Box::new(db_error(&e)),
    }
}

/// Why a connection could not be made, with what to check.
fn connect_error(e: &mysql::Error, url: &MysqlUrl) -> StoreError {
    let io_kind = match e {
        mysql::Error::IoError(io) => Some(io.kind()),
        mysql::Error::DriverError(mysql::DriverError::CouldNotConnect(Some((_, _, kind)))) => {
            Some(*kind)
        }
        _ => None,
    };
    let reason = match (e, io_kind) {
        (mysql::Error::MySqlError(my), _) if my.code == 1045 => format!(
            "{} (check the password: in the URL, database.password_file or MYSQL_PWD{})",
            describe_error(e),
            if url.tls == MysqlTls::Disabled {
                "; or the user may connect over TLS only: leave ssl-mode=DISABLED out"
            } else {
                ""
            }
        ),
        (mysql::Error::MySqlError(my), _) if my.code == 1049 => format!(
            "the database {:?} does not exist on that server (check the URL's path)",
            url.database
        ),
        (mysql::Error::MySqlError(my), _) if my.code == 3159 => format!(
            "{} (this user must connect over TLS: leave ssl-mode=DISABLED out of the URL)",
            describe_error(e)
        ),
        (_, Some(std::io::ErrorKind::ConnectionRefused)) => {
            "connection refused (is the server running, and listening on that host and port?)"
                .to_string()
        }
        (_, Some(std::io::ErrorKind::TimedOut)) => {
            "the server did not answer in time (check the host, the port and the firewall)"
                .to_string()
        }
        (mysql::Error::DriverError(mysql::DriverError::TlsNotSupported), _) => {
            "the server does not offer TLS, and the URL's ssl-mode requires it".to_string()
        }
        (mysql::Error::TlsError(_), _) => format!(
            "TLS failed: {} (check ssl-ca, and that the certificate names the host)",
            describe_error(e)
        ),
        // rustls's refusal comes through the driver's codec as an I/O error.
        (mysql::Error::CodecError(codec), _) if codec.to_string().contains("certificate") => {
            let text = codec.to_string();
            let cause = text
                .trim_start_matches("IO error: ")
                .trim_matches(['`', '\'']);
            format!("TLS failed: {cause} (check ssl-ca, and that the certificate names the host)")
        }
        _ => describe_error(e),
    };
    StoreError::Connect { reason }
}

/// The driver's options for `url`, with TLS `tls` (none: a plain connection), its row
/// lock waits cut at `lock_wait` (`database.busy_timeout`, whole seconds, at least 1).
fn options(url: &MysqlUrl, tls: Option<SslOpts>, lock_wait: Duration) -> OptsBuilder {
    let mut init: Vec<String> = SESSION.iter().map(|s| s.to_string()).collect();
    init.push(format!(
        "SET SESSION innodb_lock_wait_timeout = {}",
        lock_wait.as_secs_f64().ceil().max(1.0) as u64
    ));
    OptsBuilder::new()
        .ip_or_hostname(Some(url.host.clone()).filter(|h| !h.is_empty()))
        .tcp_port(url.port)
        .socket(url.socket.as_ref().map(|p| p.display().to_string()))
        // Asked for TCP, a loopback connection stays TCP (the driver would otherwise
        // switch to the server's socket, leaving TLS and the URL's port behind).
        .prefer_socket(false)
        .user(url.user.clone())
        .pass(url.password.clone())
        .db_name(Some(url.database.clone()))
        .tcp_connect_timeout(Some(url.connect_timeout))
        // A server that vanishes mid-tick (a dead host, a cut link) is noticed in about
        // a minute instead of the kernel's two hours.
        .tcp_keepalive_time_ms(Some(30_000))
        .tcp_user_timeout_ms(Some(60_000))
        .init(init)
        .ssl_opts(tls)
}

/// The TLS settings `ssl-mode` asks for; none for DISABLED.
fn tls_of(url: &MysqlUrl) -> Option<SslOpts> {
    let base = SslOpts::default();
    match url.tls {
        MysqlTls::Disabled => None,
        // Encrypted, the certificate unchecked, as the mysql client's REQUIRED.
        MysqlTls::Preferred | MysqlTls::Required => Some(
            base.with_danger_accept_invalid_certs(true)
                .with_danger_skip_domain_validation(true),
        ),
        MysqlTls::VerifyCa => Some(
            base.with_root_cert_path(url.ca.clone().map(Cow::Owned))
                .with_danger_skip_domain_validation(true),
        ),
        MysqlTls::VerifyIdentity => Some(base.with_root_cert_path(url.ca.clone().map(Cow::Owned))),
    }
}

/// Opens a connection: over TLS unless `ssl-mode=DISABLED`; with PREFERRED, the
/// default, a server that offers no TLS is connected to without. A statement waits
/// `lock_wait` at most for another's row lock (error 1205, then tried again).
pub(super) fn connect(url: &MysqlUrl, lock_wait: Duration) -> Result<Conn, StoreError> {
    // The driver takes rustls's process-wide provider; more than one crate of the
    // build enables one, so rustls cannot pick one by itself. Ours is ring, as for
    // PostgreSQL. (Installed once; a second call changes nothing.)
    let _ = rustls::crypto::ring::default_provider().install_default();
    if let Some(root) = url.ca.as_deref()
        && let Err(e) = std::fs::metadata(root)
    {
        return Err(StoreError::Connect {
            reason: format!("cannot read ssl-ca {}: {e}", root.display()),
        });
    }
    match Conn::new(options(url, tls_of(url), lock_wait)) {
        Ok(conn) => Ok(conn),
        Err(mysql::Error::DriverError(mysql::DriverError::TlsNotSupported))
            if url.tls == MysqlTls::Preferred =>
        {
            Conn::new(options(url, None, lock_wait)).map_err(|e| connect_error(&e, url))
        }
        Err(e) => Err(connect_error(&e, url)),
    }
}

/// A statement of the shared form (`?1`-numbered placeholders, in any order, any
/// number of times) as MySQL takes it: bare `?`, with the values in their order.
pub(super) fn positional(sql: &str, params: &[Value]) -> (String, Vec<mysql::Value>) {
    let mut out = String::with_capacity(sql.len());
    let mut values = Vec::new();
    let mut chars = unquoted(sql).peekable();
    while let Some((c, free)) = chars.next() {
        if c != '?' || !free {
            out.push(c);
            continue;
        }
        let mut n = 0usize;
        while let Some((d, _)) = chars.peek().filter(|(d, _)| d.is_ascii_digit()) {
            n = n * 10 + d.to_digit(10).expect("a digit") as usize;
            chars.next();
        }
        out.push('?');
        values.push(
            n.checked_sub(1)
                .and_then(|i| params.get(i))
                .map_or(mysql::Value::NULL, to_mysql),
        );
    }
    (out, values)
}

fn to_mysql(v: &Value) -> mysql::Value {
    match v {
        Value::Int(Some(i)) => mysql::Value::Int(*i),
        Value::Text(Some(t)) => mysql::Value::Bytes(t.clone().into_bytes()),
        Value::Int(None) | Value::Text(None) => mysql::Value::NULL,
        Value::Scalar(s) => super::values::bound(s),
    }
}

/// A value of the tool's own tables as the shared statements read it.
fn from_mysql(v: mysql::Value) -> Value {
    match v {
        mysql::Value::NULL => Value::Int(None),
        mysql::Value::Int(i) => Value::Int(Some(i)),
        mysql::Value::UInt(u) => Value::Int(i64::try_from(u).ok()),
        mysql::Value::Float(f) => Value::Int(Some(f as i64)),
        mysql::Value::Double(f) => Value::Int(Some(f as i64)),
        // A sum comes back as DECIMAL text; `Value::int` parses it.
        mysql::Value::Bytes(b) => Value::Text(Some(String::from_utf8_lossy(&b).into_owned())),
        other => Value::Text(super::values::text(&other)),
    }
}

/// `?, ?, …`: `n` placeholders.
pub(super) fn placeholders(n: usize) -> String {
    vec!["?"; n].join(", ")
}

/// A `DATETIME(6)` column of the tool's tables (UTC) as RFC 3339 text with milliseconds.
pub(super) fn rfc3339_of(column: &str) -> String {
    format!(
        "CONCAT(DATE_FORMAT({column}, '%Y-%m-%dT%H:%i:%s.'), LPAD(FLOOR(MICROSECOND({column}) / 1000), 3, '0'), 'Z')"
    )
}

fn run(q: &mut impl Queryable, sql: &str, params: &[Value]) -> Result<u64, SqlError> {
    let (sql, values) = positional(sql, params);
    let result = q
        .exec_iter(sql, values)
        .map_err(|e| SqlError::from(db_error(&e)))?;
    Ok(result.affected_rows())
}

fn inserted(q: &mut impl Queryable, sql: &str, params: &[Value]) -> Result<i64, SqlError> {
    let (sql, values) = positional(sql, params);
    let result = q
        .exec_iter(sql, values)
        .map_err(|e| SqlError::from(db_error(&e)))?;
    result
        .last_insert_id()
        .and_then(|id| i64::try_from(id).ok())
        .ok_or_else(|| "the INSERT returned no id".into())
}

/// The rows of a shared statement, each value read by `read`.
fn rows<T>(
    q: &mut impl Queryable,
    sql: &str,
    params: &[Value],
    read: fn(mysql::Value) -> T,
) -> Result<Vec<Vec<T>>, SqlError> {
    let (sql, values) = positional(sql, params);
    let rows: Vec<mysql::Row> = q
        .exec(sql, values)
        .map_err(|e| SqlError::from(db_error(&e)))?;
    Ok(rows
        .into_iter()
        .map(|row| row.unwrap().into_iter().map(read).collect())
        .collect())
}

/// A connection, or a transaction, as the shared statements see it (`Sql` is the
/// core's trait, `Conn` the driver's: a type of this crate must stand between them).
/// It dereferences to what it wraps.
pub(crate) struct Mq<C>(pub C);

impl<C> std::ops::Deref for Mq<C> {
    type Target = C;

    fn deref(&self) -> &C {
        &self.0
    }
}

impl<C> std::ops::DerefMut for Mq<C> {
    fn deref_mut(&mut self) -> &mut C {
        &mut self.0
    }
}

/// MySQL's forms of the few clauses the shared statements cannot write alike.
macro_rules! mysql_sql {
    ($t:ty) => {
        impl Sql for $t {
            fn execute(&mut self, sql: &str, params: &[Value]) -> Result<u64, SqlError> {
                run(&mut self.0, sql, params)
            }

            fn query(&mut self, sql: &str, params: &[Value]) -> Result<Vec<Vec<Value>>, SqlError> {
                rows(&mut self.0, sql, params, from_mysql)
            }

            fn query_user(
                &mut self,
                sql: &str,
                params: &[Value],
            ) -> Result<Vec<Vec<Option<backlog_core::record::Scalar>>>, SqlError> {
                rows(&mut self.0, sql, params, crate::values::scalar)
            }

            fn rfc3339(&self, column: &str) -> String {
                rfc3339_of(column)
            }

            fn now(&self) -> String {
                "UTC_TIMESTAMP(6)".into()
            }

            fn upsert(&self, _key: &[&str], set: &[&str]) -> String {
                let set: Vec<String> = set.iter().map(|c| format!("{c} = VALUES({c})")).collect();
                format!("ON DUPLICATE KEY UPDATE {}", set.join(", "))
            }

            fn bigint(&self) -> &'static str {
                "SIGNED"
            }

            fn ago(&self, micros: &str) -> String {
                format!("UTC_TIMESTAMP(6) - INTERVAL {micros} MICROSECOND")
            }

            fn later(&self, micros: &str) -> String {
                format!("UTC_TIMESTAMP(6) + INTERVAL {micros} MICROSECOND")
            }

            fn time(&self, placeholder: &str) -> String {
                format!("STR_TO_DATE({placeholder}, '%Y-%m-%dT%H:%i:%s.%fZ')")
            }

            fn time_value(&self, t: chrono::DateTime<chrono::Utc>) -> Value {
                t.to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
                    .as_str()
                    .into()
            }

            fn insert_returning_id(
                &mut self,
                sql: &str,
                params: &[Value],
            ) -> Result<i64, SqlError> {
                inserted(&mut self.0, sql, params)
            }
        }
    };
}

mysql_sql!(Mq<Conn>);
mysql_sql!(Mq<mysql::Transaction<'_>>);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbered_placeholders_become_positional_in_their_order() {
        let (sql, values) = positional(
            "SELECT ?2, ?1 FROM t WHERE a = ?2 AND b IN (?10)",
            &(1..=10).map(i64::from).map(Value::from).collect::<Vec<_>>(),
        );
        assert_eq!(sql, "SELECT ?, ? FROM t WHERE a = ? AND b IN (?)");
        assert_eq!(values, [2, 1, 2, 10].map(mysql::Value::Int).to_vec());
    }

    #[test]
    fn a_question_mark_in_quotes_is_no_placeholder() {
        let (sql, values) = positional(
            "SELECT \"a?\", `b?` FROM \"t?\"\"\" WHERE c = '?' AND d = ?1",
            &[Value::from(7)],
        );
        assert_eq!(
            sql,
            "SELECT \"a?\", `b?` FROM \"t?\"\"\" WHERE c = '?' AND d = ?"
        );
        assert_eq!(values, [mysql::Value::Int(7)]);
    }
}

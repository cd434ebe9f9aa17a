//! The test servers: a database of its own on PostgreSQL or MySQL for each test, and
//! the values a test row binds on each.

use std::sync::atomic::{AtomicU32, Ordering};

use chrono::{DateTime, NaiveDateTime, Utc};

/// The superuser URL of the test server.
pub fn pg_admin_url() -> String {
    std::env::var("BACKLOG_TEST_PG").unwrap_or_else(|_| {
        panic!("the PostgreSQL tests need a server: run `bash .ci/run`, which starts a throwaway one, or set BACKLOG_TEST_PG to a superuser URL like postgres://postgres:secret@127.0.0.1:5432/postgres?sslmode=disable")
    })
}

pub fn pg_connect(url: &str) -> postgres::Client {
    postgres::Client::connect(url, postgres::NoTls)
        .unwrap_or_else(|e| panic!("cannot connect to the test server: {e}"))
}

/// A database of its own on the test server, dropped with the `Env`.
pub struct PgDb {
    pub name: String,
    /// The superuser URL of this database (with the password).
    pub url: String,
}

impl PgDb {
    pub(super) fn create() -> Self {
        static N: AtomicU32 = AtomicU32::new(0);
        let admin = pg_admin_url();
        let name = format!(
            "backlog_test_{}_{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        let mut admin_client = pg_connect(&admin);
        for sql in [
            format!("DROP DATABASE IF EXISTS {name}"),
            format!("CREATE DATABASE {name}"),
        ] {
            admin_client
                .batch_execute(&sql)
                .unwrap_or_else(|e| panic!("{sql}: {e}"));
        }
        let url = swap_dbname(&admin, &name);
        PgDb { name, url }
    }

    /// The URL as a schedule file gives it: the user, host, port and database, the
    /// password kept out (it goes in a password file).
    pub fn schedule_url(&self) -> String {
        let config: postgres::Config = self.url.parse().unwrap();
        let host = match &config.get_hosts()[0] {
            postgres::config::Host::Tcp(h) => h.clone(),
            postgres::config::Host::Unix(p) => p.display().to_string(),
        };
        format!(
            "postgres://{}@{host}:{}/{}?sslmode=disable",
            config.get_user().unwrap_or("postgres"),
            config.get_ports().first().unwrap_or(&5432),
            self.name
        )
    }

    pub fn password(&self) -> String {
        let config: postgres::Config = self.url.parse().unwrap();
        String::from_utf8(config.get_password().unwrap_or_default().to_vec()).unwrap()
    }
}

impl Drop for PgDb {
    fn drop(&mut self) {
        if let Ok(mut admin) = postgres::Client::connect(&pg_admin_url(), postgres::NoTls) {
            let _ = admin.batch_execute(&format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.name
            ));
        }
    }
}

/// The URL of a user with every right on the MySQL test server.
pub fn my_admin_url() -> String {
    std::env::var("BACKLOG_TEST_MYSQL").unwrap_or_else(|_| {
        panic!("the MySQL tests need a server: run `bash .ci/run`, which starts a throwaway MariaDB, or set BACKLOG_TEST_MYSQL to the URL of a user with every right, like mysql://root:secret@127.0.0.1:3306/mysql")
    })
}

/// A connection to the MySQL test server whose session reads `"NAME"` as a name, as
/// the tool's does, so that a test's SQL reads the same on every backend.
pub fn my_connect(url: &str) -> mysql::Conn {
    let opts = mysql::Opts::from_url(url).expect("a MySQL URL");
    let opts = mysql::OptsBuilder::from_opts(opts)
        .prefer_socket(false)
        .init(vec![
            "SET time_zone = '+00:00'",
            "SET SESSION sql_mode = CONCAT_WS(',', NULLIF(@@SESSION.sql_mode, ''), 'ANSI_QUOTES', 'PIPES_AS_CONCAT')",
        ]);
    mysql::Conn::new(opts)
        .unwrap_or_else(|e| panic!("cannot connect to the MySQL test server: {e}"))
}

/// A database of its own on the MySQL test server, dropped with the `Env`.
pub struct MyDb {
    pub name: String,
    /// The URL of this database (with the password).
    pub url: String,
}

impl MyDb {
    pub(super) fn create() -> Self {
        use mysql::prelude::Queryable;
        static N: AtomicU32 = AtomicU32::new(0);
        let admin = my_admin_url();
        let name = format!(
            "backlog_test_{}_{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        my_connect(&admin)
            .query_drop(format!(
                "DROP DATABASE IF EXISTS {name}; CREATE DATABASE {name}"
            ))
            .unwrap_or_else(|e| panic!("creating {name}: {e}"));
        let url = swap_dbname(&admin, &name);
        MyDb { name, url }
    }

    /// The URL as a schedule file gives it, the password kept out.
    pub fn schedule_url(&self) -> String {
        let url = url::Url::parse(&self.url).unwrap();
        format!(
            "mysql://{}@{}:{}/{}?ssl-mode=DISABLED",
            url.username(),
            url.host_str().unwrap(),
            url.port().unwrap_or(3306),
            self.name
        )
    }

    pub fn password(&self) -> String {
        let url = url::Url::parse(&self.url).unwrap();
        url.password().unwrap_or_default().to_string()
    }
}

impl Drop for MyDb {
    fn drop(&mut self) {
        use mysql::prelude::Queryable;
        if let Ok(opts) = mysql::Opts::from_url(&my_admin_url())
            && let Ok(mut admin) = mysql::Conn::new(opts)
        {
            let _ = admin.query_drop(format!("DROP DATABASE IF EXISTS {}", self.name));
        }
    }
}

/// The URL with another database name.
pub fn swap_dbname(url: &str, dbname: &str) -> String {
    let (base, query) = url
        .split_once('?')
        .map_or((url, None), |(b, q)| (b, Some(q)));
    let base = base.rsplit_once('/').map_or(base, |(b, _)| b);
    match query {
        Some(q) => format!("{base}/{dbname}?{q}"),
        None => format!("{base}/{dbname}"),
    }
}

/// A value for a test row, bound in the backend's own way.
#[derive(Debug, Clone)]
pub enum Val {
    Int(i64),
    Text(String),
    Time(DateTime<Utc>),
    Naive(NaiveDateTime),
}

impl From<i64> for Val {
    fn from(v: i64) -> Self {
        Val::Int(v)
    }
}

impl From<String> for Val {
    fn from(v: String) -> Self {
        Val::Text(v)
    }
}

impl From<DateTime<Utc>> for Val {
    fn from(v: DateTime<Utc>) -> Self {
        Val::Time(v)
    }
}

impl From<NaiveDateTime> for Val {
    fn from(v: NaiveDateTime) -> Self {
        Val::Naive(v)
    }
}

impl rusqlite::ToSql for Val {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::ToSqlOutput;
        Ok(match self {
            Val::Int(i) => ToSqlOutput::from(*i),
            Val::Text(s) => ToSqlOutput::from(s.as_str()),
            Val::Time(t) => ToSqlOutput::from(t.to_rfc3339()),
            Val::Naive(t) => ToSqlOutput::from(t.to_string()),
        })
    }
}

impl postgres::types::ToSql for Val {
    fn to_sql(
        &self,
        ty: &postgres::types::Type,
        out: &mut bytes::BytesMut,
    ) -> Result<postgres::types::IsNull, Box<dyn std::error::Error + Sync + Send>> {
        use postgres::types::Type;
        match (self, ty) {
            (Val::Int(i), &Type::INT4) => i32::try_from(*i)?.to_sql(ty, out),
            (Val::Int(i), _) => i.to_sql(ty, out),
            (Val::Text(s), _) => s.to_sql(ty, out),
            (Val::Time(t), _) => t.to_sql(ty, out),
            (Val::Naive(t), _) => t.to_sql(ty, out),
        }
    }

    fn accepts(_: &postgres::types::Type) -> bool {
        true
    }

    postgres::types::to_sql_checked!();
}

/// A value of a MySQL result as text (NULL as empty).
pub fn my_text(v: &mysql::Value) -> String {
    match v {
        mysql::Value::NULL => String::new(),
        mysql::Value::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
        mysql::Value::Int(i) => i.to_string(),
        mysql::Value::UInt(u) => u.to_string(),
        other => other.as_sql(true).trim_matches('\'').to_string(),
    }
}

/// A test value as MySQL binds it: instants as UTC `DATETIME`s.
pub fn my_value(v: &Val) -> mysql::Value {
    match v {
        Val::Int(i) => mysql::Value::Int(*i),
        Val::Text(s) => mysql::Value::from(s.as_str()),
        Val::Time(t) => my_datetime(t.naive_utc()),
        Val::Naive(t) => my_datetime(*t),
    }
}

fn my_datetime(t: NaiveDateTime) -> mysql::Value {
    use chrono::{Datelike, Timelike};
    mysql::Value::Date(
        t.year() as u16,
        t.month() as u8,
        t.day() as u8,
        t.hour() as u8,
        t.minute() as u8,
        t.second() as u8,
        t.nanosecond() / 1000,
    )
}

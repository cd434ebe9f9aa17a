//! The driver tests on MySQL or MariaDB: each check on a database of its own on the
//! test server that `BACKLOG_TEST_MYSQL` names (the URL of a user with every right;
//! `.ci/mariadb.sh` starts a throwaway MariaDB). Without it they fail, never skip.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};

use backlog_driver_tests::Harness;
use mysql::prelude::Queryable;

fn admin_url() -> String {
    std::env::var("BACKLOG_TEST_MYSQL").unwrap_or_else(|_| {
        panic!(
            "the MySQL driver tests need a server: set BACKLOG_TEST_MYSQL to the URL of a user with every right, like mysql://root:secret@127.0.0.1:3306/mysql (`source .ci/mariadb.sh && my_start` starts a throwaway MariaDB and sets it)"
        )
    })
}

fn connect(url: &str) -> mysql::Conn {
    let opts = mysql::Opts::from_url(url).expect("BACKLOG_TEST_MYSQL is a MySQL URL");
    let opts = mysql::OptsBuilder::from_opts(opts).prefer_socket(false);
    mysql::Conn::new(opts)
        .unwrap_or_else(|e| panic!("cannot connect to the MySQL test server: {e}"))
}

/// The URL with another database name.
fn with_database(url: &str, name: &str) -> String {
    let (base, query) = url
        .split_once('?')
        .map_or((url, None), |(b, q)| (b, Some(q)));
    let base = base.rsplit_once('/').map_or(base, |(b, _)| b);
    match query {
        Some(q) => format!("{base}/{name}?{q}"),
        None => format!("{base}/{name}"),
    }
}

/// A database of its own on the test server, dropped with the harness.
struct Mysql {
    name: String,
    url: String,
    conn: Mutex<mysql::Conn>,
}

impl Mysql {
    fn fresh() -> Self {
        backlog_mysql::install();
        static N: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "backlog_kit_{}_{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        let admin = admin_url();
        connect(&admin)
            .query_drop(format!(
                "DROP DATABASE IF EXISTS {name}; CREATE DATABASE {name}"
            ))
            .unwrap_or_else(|e| panic!("creating database {name}: {e}"));
        let url = with_database(&admin, &name);
        let conn = Mutex::new(connect(&url));
        Mysql { name, url, conn }
    }
}

impl Drop for Mysql {
    fn drop(&mut self) {
        if let Ok(opts) = mysql::Opts::from_url(&admin_url())
            && let Ok(mut admin) = mysql::Conn::new(opts)
        {
            let _ = admin.query_drop(format!("DROP DATABASE IF EXISTS {}", self.name));
        }
    }
}

impl Harness for Mysql {
    fn database_section(&self) -> String {
        format!("url = {:?}", self.url)
    }

    fn execute(&self, sql: &str) {
        self.conn
            .lock()
            .unwrap()
            .query_drop(sql)
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }

    fn query(&self, sql: &str) -> Vec<Vec<Option<String>>> {
        let rows: Vec<mysql::Row> = self
            .conn
            .lock()
            .unwrap()
            .query(sql)
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        rows.into_iter()
            .map(|row| {
                row.unwrap()
                    .into_iter()
                    .map(|value| match value {
                        mysql::Value::NULL => None,
                        mysql::Value::Bytes(b) => Some(String::from_utf8_lossy(&b).into_owned()),
                        mysql::Value::Int(v) => Some(v.to_string()),
                        mysql::Value::UInt(v) => Some(v.to_string()),
                        other => Some(other.as_sql(true)),
                    })
                    .collect()
            })
            .collect()
    }

    fn native_timestamp_type(&self) -> Option<String> {
        Some("DATETIME(6)".into())
    }

    /// InnoDB counts deadlocks for the whole server only, and describes the latest:
    /// one whose description names this test's database is counted (a later one
    /// elsewhere on the server would hide it, never add one).
    fn deadlocks(&self) -> Option<u64> {
        let status = self.query("SHOW ENGINE INNODB STATUS");
        let text = status[0][2].clone().unwrap_or_default();
        let latest = text
            .split("LATEST DETECTED DEADLOCK")
            .nth(1)
            .and_then(|rest| rest.split("\n------------\nTRANSACTIONS").next())
            .unwrap_or("");
        // Names are quoted as the session's sql_mode does: ours has ANSI_QUOTES.
        let named = [format!("`{}`", self.name), format!("\"{}\"", self.name)];
        Some(u64::from(named.iter().any(|n| latest.contains(n.as_str()))))
    }

    fn password(&self) -> Option<String> {
        let opts = mysql::Opts::from_url(&self.url).ok()?;
        opts.get_pass().map(str::to_string)
    }
}

backlog_driver_tests::suite!(Mysql::fresh());

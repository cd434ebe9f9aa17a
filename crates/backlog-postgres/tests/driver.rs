//! The driver tests on PostgreSQL: each check on a database of its own on the test
//! server that `BACKLOG_TEST_PG` names (a superuser's URL; `.ci/postgres.sh` starts a
//! throwaway one). Without it they fail, never skip.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};

use backlog_core::chrono::{DateTime, Utc};
use backlog_driver_tests::Harness;
use postgres::{NoTls, SimpleQueryMessage};

fn admin_url() -> String {
    std::env::var("BACKLOG_TEST_PG").unwrap_or_else(|_| {
        panic!(
            "the PostgreSQL driver tests need a server: set BACKLOG_TEST_PG to a superuser URL like postgres://postgres:secret@127.0.0.1:5432/postgres?sslmode=disable (`source .ci/postgres.sh && pg_start` starts a throwaway one and sets it)"
        )
    })
}

fn connect(url: &str) -> postgres::Client {
    postgres::Client::connect(url, NoTls)
        .unwrap_or_else(|e| panic!("cannot connect to the PostgreSQL test server: {e}"))
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
struct Postgres {
    name: String,
    url: String,
    client: Mutex<postgres::Client>,
}

impl Postgres {
    fn fresh() -> Self {
        backlog_postgres::install();
        static N: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "backlog_kit_{}_{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        let admin = admin_url();
        let mut client = connect(&admin);
        for sql in [
            format!("DROP DATABASE IF EXISTS {name}"),
            format!("CREATE DATABASE {name}"),
        ] {
            client
                .batch_execute(&sql)
                .unwrap_or_else(|e| panic!("{sql}: {e}"));
        }
        let url = with_database(&admin, &name);
        let client = Mutex::new(connect(&url));
        Postgres { name, url, client }
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        if let Ok(mut admin) = postgres::Client::connect(&admin_url(), NoTls) {
            let _ = admin.batch_execute(&format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.name
            ));
        }
    }
}

/// The server's own message: the driver's `Display` says only "db error".
fn message(e: &postgres::Error) -> String {
    e.as_db_error()
        .map_or(e.to_string(), |d| d.message().to_string())
}

impl Harness for Postgres {
    fn database_section(&self) -> String {
        format!("url = {:?}", self.url)
    }

    fn execute(&self, sql: &str) {
        self.client
            .lock()
            .unwrap()
            .batch_execute(sql)
            .unwrap_or_else(|e| panic!("{sql}: {}", message(&e)));
    }

    fn query(&self, sql: &str) -> Vec<Vec<Option<String>>> {
        // The simple protocol answers every value as text.
        self.client
            .lock()
            .unwrap()
            .simple_query(sql)
            .unwrap_or_else(|e| panic!("{sql}: {}", message(&e)))
            .into_iter()
            .filter_map(|m| match m {
                SimpleQueryMessage::Row(row) => Some(
                    (0..row.len())
                        .map(|i| row.get(i).map(str::to_string))
                        .collect(),
                ),
                _ => None,
            })
            .collect()
    }

    fn native_timestamp_type(&self) -> Option<String> {
        Some("timestamptz".into())
    }

    fn native_timestamp_literal(&self, at: DateTime<Utc>) -> String {
        format!("'{}'", at.format("%Y-%m-%d %H:%M:%S%.6f+00"))
    }

    /// The server counts a backend's deadlocks once it reports its statistics (at
    /// the latest when it exits): the count is read again for a second or so.
    fn deadlocks(&self) -> Option<u64> {
        let read = || -> u64 {
            let rows = self.query(
                "SELECT pg_stat_clear_snapshot(), deadlocks FROM pg_stat_database WHERE datname = current_database()",
            );
            rows[0][1]
                .as_deref()
                .and_then(|n| n.parse().ok())
                .unwrap_or(0)
        };
        let mut most = read();
        for _ in 0..6 {
            std::thread::sleep(std::time::Duration::from_millis(250));
            most = most.max(read());
        }
        Some(most)
    }

    fn password(&self) -> Option<String> {
        let config: postgres::Config = self.url.parse().ok()?;
        config
            .get_password()
            .map(|p| String::from_utf8_lossy(p).into_owned())
    }
}

backlog_driver_tests::suite!(Postgres::fresh());

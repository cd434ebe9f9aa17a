//! Where a run's records live: a fresh SQLite file, or, with `BENCH_PG`, a fresh
//! database on that PostgreSQL server (dropped and made again for each run). Each
//! gets the same table (every record due in the 1d tier's band, an index on
//! inserted-at), and is read back the same way: records marked `SUCCESS`, the fleet's
//! pace from `backlog_paces`.

use std::path::PathBuf;
use std::time::Duration;

use chrono::{DateTime, Utc};
use rusqlite::{Connection, OpenFlags, params};

/// The PostgreSQL database each run makes afresh.
const PG_DB: &str = "backlog_bench_pace";

pub enum Database {
    Sqlite(PathBuf),
    /// The server's URL (a user who may create databases), and the run's database's.
    Postgres {
        admin: String,
        url: String,
    },
}

/// A connection that reads the pace while the runners run.
pub enum Reader {
    Sqlite(Connection),
    Postgres(Box<postgres::Client>),
}

fn with_db(url: &str, db: &str) -> String {
    let (base, query) = url.split_once('?').unwrap_or((url, ""));
    let base = base.rsplit_once('/').map_or(base, |(b, _)| b);
    match query {
        "" => format!("{base}/{db}"),
        q => format!("{base}/{db}?{q}"),
    }
}

impl Database {
    /// The run `name`'s database: `dir/name.db`, or the bench's database on `pg`.
    pub fn of(dir: &std::path::Path, name: &str, pg: Option<&str>) -> Database {
        match pg {
            None => Database::Sqlite(dir.join(format!("{name}.db"))),
            Some(admin) => Database::Postgres {
                admin: admin.to_string(),
                url: with_db(admin, PG_DB),
            },
        }
    }

    /// What the schedule file's `[database] url` says.
    pub fn url(&self) -> String {
        match self {
            Database::Sqlite(path) => path.display().to_string(),
            Database::Postgres { url, .. } => url.clone(),
        }
    }

    /// A fresh database with `records` pending records inserted evenly between 2 and
    /// 20 hours before `now`.
    pub fn create(&self, records: u64, now: DateTime<Utc>) {
        let span_ms = 18 * 3600 * 1000;
        match self {
            Database::Sqlite(path) => {
                for suffix in ["", "-wal", "-shm"] {
                    let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
                }
                let mut db = Connection::open(path).unwrap();
                db.execute_batch(
                    "PRAGMA journal_mode = WAL;
                     CREATE TABLE BACKLOG (ID INTEGER PRIMARY KEY, STATUS TEXT NOT NULL,
                         DATE_INSERTED TEXT NOT NULL, PAYLOAD TEXT);
                     CREATE INDEX BACKLOG_BY_DATE ON BACKLOG (DATE_INSERTED);",
                )
                .unwrap();
                let tx = db.transaction().unwrap();
                {
                    let mut insert = tx
                        .prepare("INSERT INTO BACKLOG VALUES (?1, 'NEW', ?2, '{\"order\": 1}')")
                        .unwrap();
                    for i in 0..records {
                        let age_ms = 2 * 3600 * 1000 + span_ms * i / records;
                        let at = now - chrono::Duration::milliseconds(age_ms as i64);
                        let at = at.format("%Y-%m-%d %H:%M:%S").to_string();
                        insert.execute(params![i as i64 + 1, at]).unwrap();
                    }
                }
                tx.commit().unwrap();
            }
            Database::Postgres { admin, url } => {
                let mut server = postgres::Client::connect(admin, postgres::NoTls).unwrap();
                // One statement each: neither may run in a transaction.
                for sql in [
                    format!("DROP DATABASE IF EXISTS {PG_DB} WITH (FORCE)"),
                    format!("CREATE DATABASE {PG_DB}"),
                ] {
                    server.batch_execute(&sql).unwrap();
                }
                let mut db = postgres::Client::connect(url, postgres::NoTls).unwrap();
                db.batch_execute(
                    r#"CREATE TABLE "BACKLOG" ("ID" bigint PRIMARY KEY, "STATUS" text NOT NULL,
                           "DATE_INSERTED" timestamptz NOT NULL, "PAYLOAD" text);
                       CREATE INDEX "BACKLOG_BY_DATE" ON "BACKLOG" ("DATE_INSERTED")"#,
                )
                .unwrap();
                db.execute(
                    r#"INSERT INTO "BACKLOG" SELECT i, 'NEW',
                           $1::timestamptz - make_interval(secs => 7200 + ((i - 1) * $2::int8 / $3::int8) / 1000.0), '{"order": 1}'
                       FROM generate_series(1, $3::int8) AS i"#,
                    &[&now, &(span_ms as i64), &(records as i64)],
                )
                .unwrap();
            }
        }
    }

    /// A connection to read the pace with.
    pub fn reader(&self) -> Reader {
        match self {
            Database::Sqlite(path) => {
                let db =
                    Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
                db.busy_timeout(Duration::from_millis(200)).unwrap();
                Reader::Sqlite(db)
            }
            Database::Postgres { url, .. } => Reader::Postgres(Box::new(
                postgres::Client::connect(url, postgres::NoTls).unwrap(),
            )),
        }
    }

    /// Records marked `SUCCESS`.
    pub fn succeeded(&self) -> i64 {
        let sql = r#"SELECT count(*) FROM "BACKLOG" WHERE "STATUS" = 'SUCCESS'"#;
        match self.reader() {
            Reader::Sqlite(db) => db.query_row(sql, [], |r| r.get(0)).unwrap(),
            Reader::Postgres(mut db) => db.query_one(sql, &[]).unwrap().get(0),
        }
    }
}

impl Reader {
    /// The fleet's pace, starts a second (the fastest row, where there are several).
    pub fn pace(&mut self) -> Option<f64> {
        let micro = match self {
            Reader::Sqlite(db) => db
                .query_row("SELECT max(micro_per_second) FROM backlog_paces", [], |r| {
                    r.get::<_, Option<i64>>(0)
                })
                .ok()
                .flatten(),
            Reader::Postgres(db) => db
                .query_one(
                    "SELECT max(micro_per_second) FROM backlog.backlog_paces",
                    &[],
                )
                .ok()
                .and_then(|row| row.get::<_, Option<i64>>(0)),
        };
        micro.map(|micro| micro as f64 / 1e6)
    }
}

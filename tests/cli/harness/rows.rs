//! What a test reads and writes in its database, alike on every backend: statements,
//! counts, the classic table and its rows.

use chrono::{DateTime, Utc};

use super::*;

impl Env {
    /// The database URL a schedule file gives.
    pub fn url(&self) -> String {
        match (&self.pg, &self.my) {
            (Some(pg), _) => pg.schedule_url(),
            (_, Some(my)) => my.schedule_url(),
            _ => "backlog.db".into(),
        }
    }

    /// The database's URL with its password, as a person types it on a command line
    /// (a SQLite file's path).
    pub fn url_with_password(&self) -> String {
        match (&self.pg, &self.my) {
            (Some(pg), _) => pg.url.clone(),
            (_, Some(my)) => my.url.clone(),
            _ => "backlog.db".into(),
        }
    }

    /// A MySQL connection to the test database.
    pub fn my(&self) -> mysql::Conn {
        my_connect(&self.my.as_ref().expect("a MySQL test").url)
    }

    /// The first column of each row of a query on MySQL, as MySQL values. The casts
    /// the tests write for the other backends are read in MySQL's words.
    fn my_column(&self, sql: &str) -> Vec<mysql::Value> {
        use mysql::prelude::Queryable;
        let sql = &sql
            .replace(" AS BIGINT)", " AS SIGNED)")
            .replace(" AS TEXT)", " AS CHAR)");
        self.my()
            .query_map(sql, |row: mysql::Row| {
                row.unwrap()
                    .into_iter()
                    .next()
                    .unwrap_or(mysql::Value::NULL)
            })
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
    }

    /// A PostgreSQL connection to the test database.
    pub fn pg(&self) -> postgres::Client {
        pg_connect(&self.pg.as_ref().expect("a PostgreSQL test").url)
    }

    /// Runs statements (`;`-separated) on the test database.
    pub fn execute(&self, sql: &str) {
        match self.backend {
            Backend::Sqlite => self
                .db()
                .execute_batch(sql)
                .unwrap_or_else(|e| panic!("{sql}: {e}")),
            // The server's own message: the driver's Display says only "db error".
            Backend::Postgres => self.pg().batch_execute(sql).unwrap_or_else(|e| {
                panic!(
                    "{sql}: {}",
                    e.as_db_error()
                        .map_or(e.to_string(), |d| d.message().to_string())
                )
            }),
            Backend::Mysql => {
                use mysql::prelude::Queryable;
                self.my()
                    .query_drop(sql)
                    .unwrap_or_else(|e| panic!("{sql}: {e}"))
            }
        }
    }

    /// The integer a one-value query returns (a NULL reads as 0).
    pub fn count(&self, sql: &str) -> i64 {
        match self.backend {
            Backend::Sqlite => self
                .db()
                .query_row(sql, [], |r| r.get::<_, Option<i64>>(0))
                .unwrap_or_else(|e| panic!("{sql}: {e}"))
                .unwrap_or(0),
            Backend::Postgres => {
                let row = self
                    .pg()
                    .query_one(sql, &[])
                    .unwrap_or_else(|e| panic!("{sql}: {e}"));
                match row.columns()[0].type_() {
                    &postgres::types::Type::INT4 => row.get::<_, Option<i32>>(0).map(i64::from),
                    _ => row.get::<_, Option<i64>>(0),
                }
                .unwrap_or(0)
            }
            Backend::Mysql => self
                .my_column(sql)
                .first()
                .map_or(0, |v| my_text(v).parse().unwrap_or(0)),
        }
    }

    /// The text a one-value query returns.
    pub fn text(&self, sql: &str) -> String {
        match self.backend {
            Backend::Sqlite => self.db().query_row(sql, [], |r| r.get(0)),
            Backend::Postgres => {
                return self
                    .pg()
                    .query_one(sql, &[])
                    .unwrap_or_else(|e| panic!("{sql}: {e}"))
                    .get(0);
            }
            Backend::Mysql => {
                return my_text(self.my_column(sql).first().expect("a row"));
            }
        }
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
    }

    /// The first column of each row of a query, as text. Quoted upper-case names
    /// (`"BACKLOG"`) reach the test table on both backends.
    pub fn lines(&self, sql: &str) -> Vec<String> {
        match self.backend {
            Backend::Sqlite => {
                let db = self.db();
                let mut stmt = db.prepare(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
                stmt.query_map([], |r| r.get(0))
                    .unwrap()
                    .map(Result::unwrap)
                    .collect()
            }
            Backend::Postgres => self
                .pg()
                .query(sql, &[])
                .unwrap_or_else(|e| panic!("{sql}: {e}"))
                .iter()
                .map(|r| r.get(0))
                .collect(),
            Backend::Mysql => self.my_column(sql).iter().map(my_text).collect(),
        }
    }

    /// How many holds are left in the tool's tables: claims of records on PostgreSQL,
    /// ticks' spans on SQLite.
    pub fn holds_left(&self) -> i64 {
        let table = match self.backend {
            Backend::Sqlite => "backlog_holds",
            Backend::Postgres | Backend::Mysql => "backlog_claims",
        };
        // PostgreSQL keeps the claim of a failed record until the end of its slot,
        // under an owner of its own: not a tick's hold.
        let kept = match self.backend {
            Backend::Sqlite => "",
            Backend::Postgres | Backend::Mysql => " WHERE owner <> 'backlog: failed in this slot'",
        };
        self.count(&format!("SELECT count(*) FROM {}{kept}", self.own(table)))
    }

    /// The server's own checks of the test database find nothing wrong: on
    /// PostgreSQL amcheck's `bt_index_check` of every B-tree index with its table's
    /// rows (`heapallindexed`), the user's table's and the tool's; on MySQL `CHECK
    /// TABLE` of every table. Panics naming what failed.
    pub fn assert_intact(&self) {
        match self.backend {
            Backend::Sqlite => {
                let found = self.lines("PRAGMA integrity_check");
                assert_eq!(found, ["ok"], "integrity_check");
            }
            Backend::Postgres => pg_intact(&mut self.pg()),
            Backend::Mysql => my_intact(&mut self.my()),
        }
    }

    /// How many records have `status`.
    pub fn with_status(&self, status: &str) -> i64 {
        self.count(&format!(
            r#"SELECT count(*) FROM "BACKLOG" WHERE "STATUS" = '{status}'"#
        ))
    }

    /// Whether any of the tool's own tables exists.
    pub fn has_own_tables(&self) -> bool {
        match self.backend {
            Backend::Sqlite => self.count("SELECT count(*) FROM sqlite_schema WHERE name IN ('backlog_meta', 'backlog_runs', 'backlog_holds')") > 0,
            Backend::Postgres => self.count("SELECT count(*) FROM pg_namespace WHERE nspname = 'backlog'") > 0,
            Backend::Mysql => self.count("SELECT count(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'backlog_pauses'") > 0,
        }
    }

    /// The name of one of the tool's own tables, as SQL on this backend reaches it.
    pub fn own(&self, table: &str) -> String {
        match self.backend {
            Backend::Sqlite | Backend::Mysql => table.to_string(),
            Backend::Postgres => format!("backlog.{table}"),
        }
    }

    /// Creates the classic BACKLOG table with an index on DATE_INSERTED, of the given
    /// column type (`INTEGER` is `bigint` on PostgreSQL). On PostgreSQL the names are
    /// quoted upper case, so that they read as on SQLite.
    pub fn create_table(&self, inserted_type: &str) {
        self.execute(&match self.backend {
            Backend::Sqlite => format!(
                "CREATE TABLE BACKLOG (ID INTEGER PRIMARY KEY, STATUS TEXT NOT NULL, DATE_INSERTED {inserted_type}, PAYLOAD TEXT);
                 CREATE INDEX BACKLOG_BY_DATE ON BACKLOG (DATE_INSERTED);"
            ),
            Backend::Postgres => format!(
                r#"CREATE TABLE "BACKLOG" ("ID" bigint PRIMARY KEY, "STATUS" text NOT NULL, "DATE_INSERTED" {}, "PAYLOAD" text);
                   CREATE INDEX "BACKLOG_BY_DATE" ON "BACKLOG" ("DATE_INSERTED");"#,
                if inserted_type == "INTEGER" { "bigint" } else { inserted_type }
            ),
            // MySQL indexes no TEXT column without a length: text is a VARCHAR.
            Backend::Mysql => format!(
                r#"CREATE TABLE "BACKLOG" ("ID" BIGINT PRIMARY KEY, "STATUS" VARCHAR(64) NOT NULL, "DATE_INSERTED" {}, "PAYLOAD" TEXT);
                   CREATE INDEX "BACKLOG_BY_DATE" ON "BACKLOG" ("DATE_INSERTED");"#,
                match inserted_type {
                    "INTEGER" => "BIGINT",
                    "TEXT" => "VARCHAR(64)",
                    "timestamptz" | "timestamp" => "DATETIME(6)",
                    other => other,
                }
            ),
        });
    }

    /// Creates the table (its inserted-at as text) with `n` records, ids 1 to `n`, record
    /// `id` inserted `id` minutes before `NOW`: a band of the day's tier, oldest last.
    pub fn records_minutes_apart(&self, n: i64) {
        self.create_table("TEXT");
        let aged: Vec<(i64, i64)> = (1..=n).map(|id| (id, id * 60)).collect();
        self.insert_aged(&aged, |t| t.format("%Y-%m-%d %H:%M:%S").to_string().into());
    }

    /// Inserts records with the given ids and ages (seconds before `NOW`), inserted-at
    /// values written by `encode`.
    pub fn insert_aged(&self, records: &[(i64, i64)], encode: impl Fn(DateTime<Utc>) -> Val) {
        let now = DateTime::parse_from_rfc3339(NOW)
            .unwrap()
            .with_timezone(&Utc);
        self.insert_aged_at(now, records, encode);
    }

    /// The same, with ages counted back from `now`: the real clock for a daemon, which
    /// has no `--now`, so that its bands hold the records whatever today's date is.
    pub fn insert_aged_at(
        &self,
        now: DateTime<Utc>,
        records: &[(i64, i64)],
        encode: impl Fn(DateTime<Utc>) -> Val,
    ) {
        let rows = records.iter().map(|(id, age)| {
            let at = now - chrono::Duration::seconds(*age);
            (*id, encode(at), format!("payload of {id}"))
        });
        match self.backend {
            Backend::Sqlite => {
                let mut db = self.db();
                let tx = db.transaction().unwrap();
                for (id, at, payload) in rows {
                    tx.execute(
                        "INSERT INTO BACKLOG (ID, STATUS, DATE_INSERTED, PAYLOAD) VALUES (?1, 'NEW', ?2, ?3)",
                        rusqlite::params![id, at, payload],
                    )
                    .expect("a record is inserted");
                }
                tx.commit().unwrap();
            }
            Backend::Postgres => {
                let mut db = self.pg();
                let mut tx = db.transaction().unwrap();
                let insert = tx
                    .prepare(r#"INSERT INTO "BACKLOG" ("ID", "STATUS", "DATE_INSERTED", "PAYLOAD") VALUES ($1, 'NEW', $2, $3)"#)
                    .unwrap();
                for (id, at, payload) in rows {
                    tx.execute(&insert, &[&id, &at, &payload])
                        .expect("a record is inserted");
                }
                tx.commit().unwrap();
            }
            Backend::Mysql => {
                use mysql::prelude::Queryable;
                let mut db = self.my();
                let mut tx = db.start_transaction(mysql::TxOpts::default()).unwrap();
                for (id, at, payload) in rows {
                    tx.exec_drop(
                        r#"INSERT INTO "BACKLOG" ("ID", "STATUS", "DATE_INSERTED", "PAYLOAD") VALUES (?, 'NEW', ?, ?)"#,
                        (id, my_value(&at), payload),
                    )
                    .expect("a record is inserted");
                }
                tx.commit().unwrap();
            }
        }
    }

    /// The classic backlog, with SQLite's CURRENT_TIMESTAMP text, aged from `NOW`.
    pub fn classic(&self) {
        self.classic_at(
            DateTime::parse_from_rfc3339(NOW)
                .unwrap()
                .with_timezone(&Utc),
        );
    }

    /// The classic backlog aged from `now`.
    pub fn classic_at(&self, now: DateTime<Utc>) {
        self.create_table("TEXT");
        self.insert_aged_at(now, &CLASSIC_AGES, |t| {
            t.format("%Y-%m-%d %H:%M:%S").to_string().into()
        });
    }

    /// Every record's (id, status), by id.
    pub fn statuses(&self) -> Vec<(i64, String)> {
        if self.backend == Backend::Mysql {
            use mysql::prelude::Queryable;
            return self
                .my()
                .query(r#"SELECT "ID", "STATUS" FROM "BACKLOG" ORDER BY "ID""#)
                .unwrap();
        }
        if self.backend == Backend::Postgres {
            return self
                .pg()
                .query(r#"SELECT "ID", "STATUS" FROM "BACKLOG" ORDER BY "ID""#, &[])
                .unwrap()
                .iter()
                .map(|r| (r.get(0), r.get(1)))
                .collect();
        }
        let db = self.db();
        let mut stmt = db
            .prepare("SELECT ID, STATUS FROM BACKLOG ORDER BY ID")
            .unwrap();
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    }

    /// The table as text, to check that a failed run changed nothing.
    pub fn dump(&self) -> String {
        if self.backend == Backend::Mysql {
            use mysql::prelude::Queryable;
            let rows: Vec<mysql::Row> = self
                .my()
                .query(r#"SELECT * FROM "BACKLOG" ORDER BY "ID""#)
                .unwrap();
            return rows
                .into_iter()
                .map(|r| {
                    r.unwrap()
                        .iter()
                        .map(|v| v.as_sql(false))
                        .collect::<Vec<_>>()
                        .join("|")
                })
                .collect::<Vec<_>>()
                .join("\n");
        }
        if self.backend == Backend::Postgres {
            return self
                .pg()
                .query(
                    r#"SELECT row_to_json(t)::text FROM "BACKLOG" t ORDER BY 1"#,
                    &[],
                )
                .unwrap()
                .iter()
                .map(|r| r.get::<_, String>(0))
                .collect::<Vec<_>>()
                .join("\n");
        }
        let db = self.db();
        let mut stmt = db.prepare("SELECT * FROM BACKLOG ORDER BY ID").unwrap();
        let n = stmt.column_count();
        stmt.query_map([], |r| {
            (0..n)
                .map(|i| {
                    r.get::<_, rusqlite::types::Value>(i)
                        .map(|v| format!("{v:?}"))
                })
                .collect::<Result<Vec<_>, _>>()
        })
        .unwrap()
        .map(|row| row.unwrap().join("|"))
        .collect::<Vec<_>>()
        .join("\n")
    }

    /// The ids the recording handler saw, in order, and empties its log.
    pub fn take_calls(&self) -> Vec<i64> {
        let text = std::fs::read_to_string(self.path("calls.log")).unwrap_or_default();
        let _ = std::fs::remove_file(self.path("calls.log"));
        text.lines().map(|l| l.parse().unwrap()).collect()
    }
}

/// Checks every B-tree index of the database `pg` is connected to with amcheck
/// (`bt_index_check`, heap included): a crash or a cut left nothing torn.
pub fn pg_intact(pg: &mut postgres::Client) {
    pg.batch_execute("CREATE EXTENSION IF NOT EXISTS amcheck")
        .unwrap_or_else(|e| panic!("amcheck: {e}"));
    let indexes: Vec<String> = pg
            .query(
                "SELECT c.oid::regclass::text FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
                 JOIN pg_am a ON a.oid = c.relam JOIN pg_namespace n ON n.oid = c.relnamespace
                 WHERE a.amname = 'btree' AND n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')",
                &[],
            )
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
    assert!(indexes.len() >= 3, "the indexes to check: {indexes:?}");
    for index in indexes {
        pg.execute("SELECT bt_index_check($1::text::regclass, true)", &[&index])
            .unwrap_or_else(|e| {
                panic!(
                    "amcheck of {index}: {}",
                    e.as_db_error()
                        .map_or(e.to_string(), |d| d.message().to_string())
                )
            });
    }
}

/// `CHECK TABLE` of every table of the database `my` is connected to.
pub fn my_intact(my: &mut mysql::Conn) {
    use mysql::prelude::Queryable;
    let tables: Vec<String> = my
        .query("SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE()")
        .unwrap();
    assert!(tables.len() >= 3, "the tables to check: {tables:?}");
    for table in tables {
        let rows: Vec<mysql::Row> = my.query(format!("CHECK TABLE \"{table}\"")).unwrap();
        for row in rows {
            let (kind, text): (String, String) = (row.get(2).unwrap(), row.get(3).unwrap());
            assert!(
                kind != "error" && (kind != "status" || text == "OK"),
                "CHECK TABLE {table}: {kind}: {text}"
            );
        }
    }
}

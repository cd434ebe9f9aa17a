//! The driver tests on SQLite: each check on a file of its own in a temp folder.

use std::path::PathBuf;

use backlog_driver_tests::Harness;
use rusqlite::types::ValueRef;

/// A SQLite file of its own, deleted with its folder.
struct Sqlite {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl Sqlite {
    fn fresh() -> Self {
        backlog_sqlite::install();
        let dir = tempfile::tempdir().expect("a temp folder");
        let path = dir.path().join("backlog.db");
        // The store opens an existing database only: it never makes the user's.
        rusqlite::Connection::open(&path).expect("a new SQLite file");
        Sqlite { _dir: dir, path }
    }

    fn connect(&self) -> rusqlite::Connection {
        rusqlite::Connection::open(&self.path)
            .unwrap_or_else(|e| panic!("opening {}: {e}", self.path.display()))
    }
}

impl Harness for Sqlite {
    fn database_section(&self) -> String {
        format!("url = {:?}", self.path.display().to_string())
    }

    fn execute(&self, sql: &str) {
        self.connect()
            .execute_batch(sql)
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }

    fn query(&self, sql: &str) -> Vec<Vec<Option<String>>> {
        let conn = self.connect();
        let mut stmt = conn.prepare(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
        let n = stmt.column_count();
        stmt.query_map([], |row| {
            (0..n)
                .map(|i| {
                    Ok(match row.get_ref(i)? {
                        ValueRef::Null => None,
                        ValueRef::Integer(v) => Some(v.to_string()),
                        ValueRef::Real(v) => Some(v.to_string()),
                        ValueRef::Text(t) | ValueRef::Blob(t) => {
                            Some(String::from_utf8_lossy(t).into_owned())
                        }
                    })
                })
                .collect()
        })
        .and_then(|rows| rows.collect())
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
    }
}

backlog_driver_tests::suite!(Sqlite::fresh());

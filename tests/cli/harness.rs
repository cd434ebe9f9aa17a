//! A temp folder with a backlog database, a schedule file and handlers, and a command
//! builder for the real binary.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

use assert_cmd::Command;
use rusqlite::Connection;
use tempfile::TempDir;

/// The pinned clock of the tests.
pub const NOW: &str = "2026-11-21T12:00:00Z";

/// The classic four-record backlog: ids 1–4 aged 8 minutes, 5 hours, 3 days, 2 months.
pub const CLASSIC_AGES: [(i64, i64); 4] = [
    (1, 8 * 60),
    (2, 5 * 3600),
    (3, 3 * 86_400),
    (4, 60 * 86_400),
];

pub struct Env {
    pub dir: TempDir,
}

/// The parts of a schedule file a test changes; the rest is the classic table and
/// the default progressive tiers.
pub struct Schedule {
    pub bands: &'static str,
    pub format: &'static str,
    pub command: &'static str,
    pub timeout: &'static str,
    pub handler_extra: &'static str,
    pub database_extra: &'static str,
    pub tiers: &'static str,
}

pub const PROGRESSIVE_TIERS: &str = r#"
[[tier]]
window = "1d"
every = "5m"

[[tier]]
window = "7d"
every = "1h"

[[tier]]
window = "14d"
every = "12h"

[[tier]]
window = "30d"
every = "24h"

[[tier]]
window = "180d"
every = "96h"

[[tier]]
window = "360d"
every = "192h"
"#;

impl Default for Schedule {
    fn default() -> Self {
        Schedule {
            bands: "disjoint",
            format: "auto",
            command: r#"["./handler.sh"]"#,
            timeout: "10s",
            handler_extra: "",
            database_extra: "",
            tiers: PROGRESSIVE_TIERS,
        }
    }
}

impl Schedule {
    pub fn render(&self) -> String {
        format!(
            r#"bands = "{bands}"

[database]
url = "backlog.db"
{database_extra}

[table]
name = "BACKLOG"
id = "ID"
status = "STATUS"
inserted_at = "DATE_INSERTED"
inserted_at_format = "{format}"

[handler]
command = {command}
timeout = "{timeout}"
{handler_extra}
{tiers}"#,
            bands = self.bands,
            database_extra = self.database_extra,
            format = self.format,
            command = self.command,
            timeout = self.timeout,
            handler_extra = self.handler_extra,
            tiers = self.tiers,
        )
    }
}

/// A handler that appends its record id to `calls.log` and fails the ids given.
pub fn recording_handler(failing_ids: &[i64]) -> String {
    let cases: String = failing_ids
        .iter()
        .map(|id| format!("  {id}) exit 1 ;;\n"))
        .collect();
    format!(
        "#!/bin/sh\ncat > /dev/null\necho \"$BACKLOG_RECORD_ID\" >> calls.log\ncase \"$BACKLOG_RECORD_ID\" in\n{cases}esac\nexit 0\n"
    )
}

impl Env {
    pub fn new() -> Self {
        Env {
            dir: tempfile::tempdir().expect("a temp dir"),
        }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub fn db(&self) -> Connection {
        Connection::open(self.path("backlog.db")).expect("the test database opens")
    }

    /// Creates the classic BACKLOG table with an index on DATE_INSERTED, of the given
    /// column type.
    pub fn create_table(&self, inserted_type: &str) {
        self.db()
            .execute_batch(&format!(
                "CREATE TABLE BACKLOG (ID INTEGER PRIMARY KEY, STATUS TEXT NOT NULL, DATE_INSERTED {inserted_type}, PAYLOAD TEXT);
                 CREATE INDEX BACKLOG_BY_DATE ON BACKLOG (DATE_INSERTED);"
            ))
            .expect("the table is created");
    }

    /// Inserts records with the given ids and ages (seconds before `NOW`), inserted-at
    /// values written by `encode`.
    pub fn insert_aged(
        &self,
        records: &[(i64, i64)],
        encode: impl Fn(chrono::DateTime<chrono::Utc>) -> rusqlite::types::Value,
    ) {
        let now = chrono::DateTime::parse_from_rfc3339(NOW)
            .unwrap()
            .with_timezone(&chrono::Utc);
        let db = self.db();
        for (id, age) in records {
            let at = now - chrono::Duration::seconds(*age);
            db.execute(
                "INSERT INTO BACKLOG (ID, STATUS, DATE_INSERTED, PAYLOAD) VALUES (?1, 'NEW', ?2, ?3)",
                rusqlite::params![id, encode(at), format!("payload of {id}")],
            )
            .expect("a record is inserted");
        }
    }

    /// The classic backlog, with SQLite's CURRENT_TIMESTAMP text.
    pub fn classic(&self) {
        self.create_table("TEXT");
        self.insert_aged(&CLASSIC_AGES, |t| {
            t.format("%Y-%m-%d %H:%M:%S").to_string().into()
        });
    }

    pub fn write_schedule(&self, schedule: &Schedule) {
        std::fs::write(self.path("backlog.toml"), schedule.render())
            .expect("the schedule is written");
    }

    pub fn write_handler(&self, name: &str, script: &str) {
        let path = self.path(name);
        std::fs::write(&path, script).expect("the handler is written");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
            .expect("the handler is executable");
    }

    /// `backlog` run in the temp folder, with the clock pinned.
    pub fn backlog(&self, args: &[&str]) -> Command {
        let mut cmd = Command::cargo_bin("backlog").expect("the binary is built");
        cmd.current_dir(self.dir.path())
            .args(args)
            .env_remove("BACKLOG_SCHEDULE")
            .env_remove("RUST_LOG");
        cmd
    }

    /// `backlog run --window W --now NOW` and its stdout.
    pub fn run_window(&self, window: &str) -> String {
        let out = self
            .backlog(&["run", "--window", window, "--now", NOW])
            .assert()
            .success();
        String::from_utf8(out.get_output().stdout.clone()).unwrap()
    }

    /// Every record's (id, status), by id.
    pub fn statuses(&self) -> Vec<(i64, String)> {
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

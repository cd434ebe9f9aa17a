//! The demo `backlog init` writes: the default schedule file, a SQLite backlog in the
//! classic shape and a shell handler that fails some records.
//!
//! The files are the ones the repository ships (`schedules/progressive.toml`,
//! `examples/shell/handler.sh`), compiled in, so the demo always runs the schedule the
//! project documents.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use chrono::{DateTime, Duration, Utc};
use rusqlite::{Connection, params};

use crate::error::Error;

/// The demo's schedule file, in the folder `init` writes to: the name `--schedule`
/// defaults to, so the demo runs without it.
pub const SCHEDULE_FILE: &str = "backlog.toml";
/// The demo's SQLite backlog, beside the schedule file.
pub const DATABASE_FILE: &str = "backlog.db";
/// The demo's handler script, beside the schedule file.
pub const HANDLER_FILE: &str = "handler.sh";
/// Records in the demo backlog.
pub const RECORDS: u32 = 400;

/// The default progressive schedule, as `schedules/progressive.toml` writes it.
pub const SCHEDULE: &str = include_str!("../schedules/progressive.toml");
const HANDLER: &str = include_str!("../examples/shell/handler.sh");

fn io(context: String) -> impl FnOnce(std::io::Error) -> Error {
    move |source| Error::Io { context, source }
}

/// Writes the demo into `dir` and returns a line per file written. Refuses to overwrite
/// unless `force`. Records are aged relative to `now`.
pub fn write(dir: &Path, force: bool, now: DateTime<Utc>) -> Result<Vec<String>, Error> {
    std::fs::create_dir_all(dir).map_err(io(format!("cannot create {}", dir.display())))?;
    let files = [SCHEDULE_FILE, DATABASE_FILE, HANDLER_FILE].map(|f| dir.join(f));
    if !force && let Some(existing) = files.iter().find(|f| f.exists()) {
        return Err(Error::Usage(format!(
            "{} exists; pass --force to overwrite the demo files",
            existing.display()
        )));
    }
    let [schedule, database, handler] = files;
    std::fs::write(&schedule, SCHEDULE)
        .map_err(io(format!("cannot write {}", schedule.display())))?;
    std::fs::write(&handler, HANDLER).map_err(io(format!("cannot write {}", handler.display())))?;
    std::fs::set_permissions(&handler, std::fs::Permissions::from_mode(0o755))
        .map_err(io(format!("cannot make {} executable", handler.display())))?;
    for suffix in ["", "-journal", "-wal", "-shm"] {
        let mut name = database.clone().into_os_string();
        name.push(suffix);
        match std::fs::remove_file(&name) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(io(format!("cannot remove {}", Path::new(&name).display()))(
                    e,
                ));
            }
            _ => {}
        }
    }
    create_database(&database, now).map_err(|e| Error::Io {
        context: format!("cannot write the demo database {}", database.display()),
        source: std::io::Error::other(e),
    })?;
    Ok(vec![
        format!(
            "wrote {} (the default progressive schedule)",
            schedule.display()
        ),
        format!(
            "wrote {} ({RECORDS} records in table BACKLOG, aged 5 minutes to 400 days)",
            database.display()
        ),
        format!(
            "wrote {} (a handler that fails records whose id ends in 3 or 7)",
            handler.display()
        ),
    ])
}

/// The classic backlog table, with records whose ages grow geometrically from five
/// minutes to 400 days, so every tier of the default schedule has some.
fn create_database(path: &Path, now: DateTime<Utc>) -> rusqlite::Result<()> {
    let mut conn = Connection::open(path)?;
    conn.execute_batch(
        "CREATE TABLE BACKLOG (
             ID INTEGER PRIMARY KEY,
             STATUS TEXT NOT NULL DEFAULT 'NEW',
             DATE_INSERTED TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP,
             PAYLOAD TEXT
         );
         CREATE INDEX BACKLOG_BY_DATE_INSERTED ON BACKLOG (DATE_INSERTED);",
    )?;
    let tx = conn.transaction()?;
    {
        let mut insert = tx.prepare(
            "INSERT INTO BACKLOG (ID, STATUS, DATE_INSERTED, PAYLOAD) VALUES (?1, ?2, ?3, ?4)",
        )?;
        let (youngest, oldest) = (300.0_f64, 400.0 * 86_400.0);
        for i in 0..RECORDS {
            let age = youngest * (oldest / youngest).powf(f64::from(i) / f64::from(RECORDS - 1));
            let inserted = now - Duration::seconds(age as i64);
            let status = match i % 10 {
                3 | 8 => "ERROR",
                6 => "SUCCESS",
                _ => "NEW",
            };
            let id = i64::from(RECORDS - i);
            let payload = format!(
                r#"{{"order": {}, "customer": "c{:02}", "amount_cents": {}}}"#,
                10_000 + id,
                id % 37,
                (id * 7919) % 100_000
            );
            insert.execute(params![
                id,
                status,
                inserted.format("%Y-%m-%d %H:%M:%S").to_string(),
                payload
            ])?;
        }
    }
    tx.commit()
}

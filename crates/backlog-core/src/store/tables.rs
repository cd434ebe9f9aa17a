//! The tool's own tables, written once: what they are, and how every database creates
//! them and moves them to this release's version ([`ensure`]).
//!
//! A table is its columns with their types as placeholders, its key and its indexes; a
//! dialect ([`Ddl`]) spells the types, says whether its indexes go inside the `CREATE
//! TABLE` (MySQL has no `CREATE INDEX IF NOT EXISTS`), reads its catalog, and keeps
//! other runners out while it writes DDL. The steps each database's tables took before
//! the backends shared them stay that database's (`Ddl::legacy`); every step since is
//! in [`LATER`], once.

use super::StoreError;
use super::sql::{Sql, Value, failed};

/// One of the tool's tables. `columns` names each column's type by a placeholder the
/// dialect spells: `{serial}` (the generated key), `{bigint}`, `{int}`, `{text}`
/// (unbounded, in no key or index), `{key}` (text in a key or an index: MySQL indexes
/// no `TEXT`), `{time}` (a UTC instant), `{any}` (SQLite's untyped value, which keeps
/// what the user's column holds).
pub struct Table {
    /// The table's name.
    pub name: &'static str,
    /// Its columns, as the CREATE TABLE lists them.
    pub columns: &'static str,
    /// The primary key's columns, when it is not a `{serial}` column.
    pub key: Option<&'static str>,
    /// Each index's name and columns.
    pub indexes: &'static [(&'static str, &'static str)],
    /// A column this table has that one of the same name made by someone else is
    /// unlikely to have: how the tool tells its tables from a user's.
    pub mark: &'static str,
}

/// The version of the tables and the values the tool keeps about them.
pub const META: Table = Table {
    name: "backlog_meta",
    columns: r#""key" {key} NOT NULL, value {text} NOT NULL"#,
    key: Some(r#""key""#),
    indexes: &[],
    mark: "value",
};

/// The run log: a row per tick.
pub const RUNS: Table = Table {
    name: "backlog_runs",
    columns: "id {serial},
        table_name {key} NOT NULL,
        window_secs {bigint} NOT NULL,
        tier {int},
        band_from_secs {bigint} NOT NULL,
        band_to_secs {bigint} NOT NULL,
        bands {text} NOT NULL,
        clock {time} NOT NULL,
        started_at {time} NOT NULL,
        heartbeat_at {time},
        finished_at {time},
        selected {bigint} NOT NULL DEFAULT 0,
        succeeded {bigint} NOT NULL DEFAULT 0,
        failed {bigint} NOT NULL DEFAULT 0,
        skipped {bigint} NOT NULL DEFAULT 0,
        lost {bigint} NOT NULL DEFAULT 0,
        outcome {text} NOT NULL,
        error {text},
        owner {text} NOT NULL,
        pending {bigint}",
    key: None,
    indexes: &[
        ("backlog_runs_by_window", "table_name, window_secs, id"),
        ("backlog_runs_by_clock", "table_name, clock"),
    ],
    mark: "window_secs",
};

/// The tables every database has: the version, the run log, attempts, pauses,
/// failures in a row, alerts, shared rates, breakers, adapted paces, answers by
/// code and the ticks' handler times (a database adds
/// how its ticks hold records, see `Ddl::tables`).
pub const SHARED: [&Table; 11] = [
    &META,
    &RUNS,
    &super::attempts::TABLE,
    &super::pauses::TABLE,
    &super::failures::TABLE,
    &super::alerts::TABLE,
    &super::rates::TABLE,
    &super::breakers::TABLE,
    &super::paces::TABLE,
    &super::answers::TABLE,
    &super::history::TABLE,
];

/// The steps of the tables since the backends shared them, written once: the `n`th
/// moves a database's tables from `Ddl::base` + n to the next version. A step that
/// only adds a table has no statements: `ensure` creates every missing table first.
pub const LATER: &[&[Step]] = &[
    // `backlog_failures`: failures in a row, for `table.give_up_after`.
    &[],
    // backlog_alerts (`[alert]`'s deduplication), created by `ensure` before the step.
    &[],
    // backlog_rates (`handler.rate` shared by the fleet) and backlog_breakers
    // (`handler.stop_after_failures` shared by the fleet), created the same way.
    &[],
    // backlog_reaches (how far a fleet's runners have read their band), on servers.
    &[],
    // backlog_paces (`rate = "auto"`'s pace, shared by the fleet).
    &[],
    // backlog_answers (a URL handler's answers by code, for the metrics).
    &[],
    // The history: each tick's pending count, its handler times (backlog_run_times,
    // created by `ensure`), and the run log by clock for the charts' ranges.
    &[
        Step::Column {
            table: "backlog_runs",
            column: "pending",
            spec: "{bigint}",
        },
        Step::Index {
            table: "backlog_runs",
            name: "backlog_runs_by_clock",
            columns: "table_name, clock",
        },
    ],
];

/// One change of a step of [`LATER`] to a table that is there. A table `ensure`
/// made just now has this version's columns and indexes already: the step leaves it.
pub enum Step {
    /// A column added to a table, unless it has it.
    Column {
        /// The table.
        table: &'static str,
        /// The column's name.
        column: &'static str,
        /// Its type and constraints, with the type placeholders of [`Table::columns`].
        spec: &'static str,
    },
    /// An index added to a table.
    Index {
        /// The table.
        table: &'static str,
        /// The index's name.
        name: &'static str,
        /// Its columns.
        columns: &'static str,
    },
}

/// What a database says and does for [`ensure`].
pub trait Ddl {
    /// The connection, or the transaction `ensure` runs in.
    fn sql(&mut self) -> &mut dyn Sql;

    /// What names the tool's tables there: `` or `"schema".`.
    fn prefix(&self) -> String;

    /// Where the tables are, for messages: `schema "backlog"`, a file's path.
    fn place(&self) -> String;

    /// How to keep the tool's tables apart from a user's table of the same name.
    fn apart(&self) -> String;

    /// The database's spelling of a type placeholder of [`Table::columns`].
    fn spell(&self, placeholder: &str) -> &'static str;

    /// The tool's tables there: [`SHARED`] and those its ticks hold records in.
    fn tables(&self) -> Vec<&'static Table>;

    /// The columns of those of the tool's tables `names` that are there, by name, in
    /// one question: on a server each is a round trip, and a tick asks for all of
    /// them as it starts (on a link of 200 ms, 26 questions were 5 s).
    fn columns(&mut self, names: &[&str]) -> Result<Columns, StoreError>;

    /// Keeps other runners from writing DDL until `unlock` or the transaction's end,
    /// so that eight runners starting at once on a new database do not race.
    fn lock(&mut self) -> Result<(), StoreError>;

    /// Lets other runners write DDL again (a lock the transaction does not end).
    fn unlock(&mut self) {}

    /// Creates the schema or database the tables go in, if it is not there.
    fn make_place(&mut self) -> Result<(), StoreError> {
        Ok(())
    }

    /// Whether indexes are declared inside `CREATE TABLE` (MySQL), else after it.
    fn inline_indexes(&self) -> bool {
        false
    }

    /// What follows a table's `CREATE TABLE (…)`: MySQL's engine and collation,
    /// SQLite's `WITHOUT ROWID`.
    fn options(&self, _table: &Table) -> &'static str {
        ""
    }

    /// The version the database's tables had when the backends began to share them:
    /// the first that [`LATER`] moves on.
    fn base(&self) -> i64;

    /// Moves tables at `version`, below `base`, one step up, writing the new version.
    fn legacy(&mut self, version: i64) -> Result<(), StoreError> {
        unknown(&self.place(), version)
    }
}

/// The columns of the tool's tables that are there, by table name.
pub type Columns = std::collections::HashMap<String, Vec<String>>;

/// Refuses tables at a version below the base that no release wrote there.
pub fn unknown(place: &str, version: i64) -> Result<(), StoreError> {
    Err(StoreError::Schema(format!(
        "the tool's tables in {place} are at schema version {version}, which no release of backlog wrote there; move them apart, then run again"
    )))
}

/// The version this release writes on a database whose tables began at `base`.
pub fn version_for(base: i64) -> i64 {
    base + LATER.len() as i64
}

/// Makes the tool's tables ready: refuses a table of their names that is not the
/// tool's, and creates what is missing and moves older tables to this release's
/// version under the dialect's lock. Tables already at it need no DDL (and no lock),
/// so a runner may work without the right to create anything.
pub fn ensure(d: &mut dyn Ddl) -> Result<(), StoreError> {
    let current = version_for(d.base());
    if missing(d)?.is_empty() && stored_version(d)?.as_deref() == Some(&*current.to_string()) {
        return Ok(());
    }
    d.lock()?;
    let done = under_lock(d, current);
    d.unlock();
    done
}

/// What the creation of the tool's tables was doing, for its errors.
const CREATING: &str = "creating the tool's own tables";

/// Why the tool's tables could not be made, and what to do: a full disk is said as
/// such; anything else is most often a user without the right to create tables.
fn creation_refused(e: StoreError) -> StoreError {
    let why = match e.fault() {
        super::fault::Fault::DiskFull => {
            "the database's disk is full: make room on it, then run again"
        }
        _ => {
            "this needs the right to create tables there: run one tick as a user who has it, or have an administrator run it once"
        }
    };
    match e {
        StoreError::Database { source, .. } => StoreError::Database {
            context: format!("{CREATING} ({why})"),
            source,
        },
        other => other,
    }
}

/// What `ensure` does once no other runner writes DDL: another may have done it all
/// while this one waited.
fn under_lock(d: &mut dyn Ddl, current: i64) -> Result<(), StoreError> {
    let missing = missing(d)?;
    let made: Vec<&str> = missing.iter().map(|t| t.name).collect();
    if !missing.is_empty() {
        d.make_place()?;
        for table in missing {
            for statement in create(d, table) {
                d.sql()
                    .execute(&statement, &[])
                    .map_err(failed(CREATING))
                    .map_err(creation_refused)?;
            }
            // The version goes in with its table: MySQL commits each DDL statement,
            // and a creation cut short after it makes the other tables next time.
            if table.name == META.name {
                write_new_version(d, current)?;
            }
        }
    }
    // Every table there but no version: a creation cut short between the version's
    // table and its row (before this release wrote them together).
    if version(d)?.is_none() {
        write_new_version(d, current)?;
    }
    let base = d.base();
    loop {
        let found = version(d)?.unwrap_or_default();
        match found.parse::<i64>() {
            Ok(v) if v < base => d.legacy(v)?,
            Ok(v) if v < current => {
                let prefix = d.prefix();
                let step = format!("moving the tool's tables to version {}", v + 1);
                for change in LATER[(v - base) as usize] {
                    let Some(statement) = change_sql(d, change, &made, &prefix)? else {
                        continue;
                    };
                    d.sql().execute(&statement, &[]).map_err(failed(&step))?;
                }
                set_version(d, v + 1)?;
            }
            _ => return check_version(&found, current, &d.place()),
        }
    }
}

/// The statement of a step's `change`, or none where the table has it: made just now
/// (its name in `made`), or, for a column, there already.
fn change_sql(
    d: &mut dyn Ddl,
    change: &Step,
    made: &[&str],
    prefix: &str,
) -> Result<Option<String>, StoreError> {
    let sql = match *change {
        Step::Column { table, .. } | Step::Index { table, .. } if made.contains(&table) => {
            return Ok(None);
        }
        Step::Column {
            table,
            column,
            spec,
        } => {
            let found = d.columns(&[table])?;
            if found
                .get(table)
                .is_some_and(|c| c.iter().any(|c| c == column))
            {
                return Ok(None);
            }
            format!("ALTER TABLE {prefix}{table} ADD COLUMN {column} {spec}")
        }
        // MySQL has no `IF NOT EXISTS` here: its tables at an older version lack it.
        Step::Index {
            table,
            name,
            columns,
        } => match d.inline_indexes() {
            true => format!("CREATE INDEX {name} ON {prefix}{table} ({columns})"),
            false => format!("CREATE INDEX IF NOT EXISTS {name} ON {prefix}{table} ({columns})"),
        },
    };
    Ok(Some(spelled(d, &sql)))
}

/// The tool's tables that are not there yet; refuses one of their names that is not
/// the tool's (it lacks the table's `mark`).
fn missing(d: &mut dyn Ddl) -> Result<Vec<&'static Table>, StoreError> {
    let tables = d.tables();
    let names: Vec<&str> = tables.iter().map(|t| t.name).collect();
    let mut found = d.columns(&names)?;
    let mut missing = Vec::new();
    for table in tables {
        match found.remove(table.name) {
            None => missing.push(table),
            Some(found) if !found.iter().any(|c| c == table.mark) => {
                return Err(StoreError::Schema(format!(
                    "a table {} is there but it is not backlog's (it has no column {}; its columns: {}): {}",
                    table.name,
                    table.mark,
                    found.join(", "),
                    d.apart()
                )));
            }
            Some(_) => {}
        }
    }
    Ok(missing)
}

/// The version in `backlog_meta`, if the table and the row are there.
pub fn version(d: &mut dyn Ddl) -> Result<Option<String>, StoreError> {
    if d.columns(&[META.name])?.is_empty() {
        return Ok(None);
    }
    stored_version(d)
}

/// The version's row in `backlog_meta`, which is there.
fn stored_version(d: &mut dyn Ddl) -> Result<Option<String>, StoreError> {
    let sql = format!(
        r#"SELECT value FROM {}backlog_meta WHERE "key" = 'schema_version'"#,
        d.prefix()
    );
    let rows = d
        .sql()
        .query(&sql, &[])
        .map_err(failed("reading backlog_meta"))?;
    Ok(rows.first().and_then(|row| row[0].text()))
}

/// Writes the version of tables made just now, unless a row is there: another runner's,
/// which a transaction begun before it wrote it may not have seen.
fn write_new_version(d: &mut dyn Ddl, current: i64) -> Result<(), StoreError> {
    // An upsert that sets the key to itself: insert, or leave the row as it is.
    let insert = format!(
        r#"INSERT INTO {}backlog_meta ("key", value) VALUES ('schema_version', ?1) {}"#,
        d.prefix(),
        d.sql().upsert(&[r#""key""#], &[r#""key""#])
    );
    d.sql()
        .execute(&insert, &[Value::from(&*current.to_string())])
        .map_err(failed("writing backlog_meta"))?;
    Ok(())
}

/// Writes the tables' version (a step of a migration, in its transaction where the
/// database has one for DDL).
pub fn set_version(d: &mut dyn Ddl, version: i64) -> Result<(), StoreError> {
    let sql = format!(
        r#"UPDATE {}backlog_meta SET value = ?1 WHERE "key" = 'schema_version'"#,
        d.prefix()
    );
    d.sql()
        .execute(&sql, &[Value::from(&*version.to_string())])
        .map_err(failed("writing backlog_meta"))?;
    Ok(())
}

/// Refuses tables of another version than `known`, the one this release writes on
/// that database; `place` says where they are.
fn check_version(found: &str, known: i64, place: &str) -> Result<(), StoreError> {
    if found.parse::<i64>().ok() == Some(known) {
        return Ok(());
    }
    Err(StoreError::Schema(format!(
        "the tool's tables in {place} are at schema version {found}, this backlog knows version {known}; use the backlog release that made them"
    )))
}

/// The statements that create `table` as the dialect spells it.
fn create(d: &dyn Ddl, table: &Table) -> Vec<String> {
    let prefix = d.prefix();
    let mut body = vec![table.columns.to_string()];
    if let Some(key) = table.key {
        body.push(format!("PRIMARY KEY ({key})"));
    }
    let inline = d.inline_indexes();
    if inline {
        body.extend(
            table
                .indexes
                .iter()
                .map(|(name, columns)| format!("INDEX {name} ({columns})")),
        );
    }
    let mut statements = vec![spelled(
        d,
        &format!(
            "CREATE TABLE IF NOT EXISTS {prefix}{} ({}) {}",
            table.name,
            body.join(", "),
            d.options(table)
        ),
    )];
    if !inline {
        statements.extend(table.indexes.iter().map(|(name, columns)| {
            format!(
                "CREATE INDEX IF NOT EXISTS {name} ON {prefix}{} ({columns})",
                table.name
            )
        }));
    }
    statements
}

/// `sql` with its type placeholders in the dialect's words.
fn spelled(d: &dyn Ddl, sql: &str) -> String {
    ["serial", "bigint", "int", "text", "key", "time", "any"]
        .into_iter()
        .fold(sql.to_string(), |sql, t| {
            sql.replace(&format!("{{{t}}}"), d.spell(t))
        })
}

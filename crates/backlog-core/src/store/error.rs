//! What can go wrong with the database, the table or the tool's own tables, as one
//! line that names the input and the fix.

/// What went wrong with the database, the table or the tool's own tables.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The SQLite file named by `database.url` does not exist: opening a store never
    /// creates the user's database, only the tool's tables in an existing one.
    #[error(
        "no such database file (set database.url in the schedule file; `backlog init` writes a demo)"
    )]
    NoDatabase,
    /// The table named by `table.name` is not in the database.
    #[error(
        "no table {table:?} (set table.name in the schedule file){}{}",
        crate::suggest::did_you_mean(table, available.iter().map(String::as_str)),
        list("tables", available)
    )]
    NoTable {
        /// The name looked for, as the schedule file spells it.
        table: String,
        /// The tables the database does have, to pick the right one from.
        available: Vec<String>,
    },
    /// `table.name` names a view (or another relation that is not a plain table), where
    /// the statuses the tick writes would not stay.
    #[error(
        "{table:?} is a {kind}, not a table: a status written to it would not stick, and every tick would hand out the same rows again; set table.name to the table it reads"
    )]
    NotATable {
        /// The relation's name.
        table: String,
        /// What it is instead, as the database calls it (`view`, `materialized view`…).
        kind: &'static str,
    },
    /// A column the schedule file names (id, status, inserted-at, `[retry]`'s `since`) is
    /// not in the table.
    #[error(
        "table {table:?} has no column {column:?} (set {key} in the schedule file){}{}",
        crate::suggest::did_you_mean(column, available.iter().map(String::as_str)),
        list("columns", available)
    )]
    NoColumn {
        /// The table, as the schedule file names it.
        table: String,
        /// The column looked for.
        column: String,
        /// The schedule-file key that named it, such as `table.inserted_at`: where to fix
        /// it.
        key: &'static str,
        /// The columns the table does have.
        available: Vec<String>,
    },
    /// An id asked for (`show ID`, the dashboard's record page, `retry ID`) that no
    /// record can have: it is not of the id column's type (`abc` for integers).
    #[error("{id:?} is not an id of table {table}: its {column} column holds {holds}")]
    NotAnId {
        /// The id as given.
        id: String,
        /// The table, as the schedule file names it.
        table: String,
        /// The id column, as the schedule file names it.
        column: String,
        /// What the column holds, for a person: `integers`, `uuids`.
        holds: &'static str,
    },
    /// The inserted-at column (or `[retry]`'s `since` column) holds values that are not
    /// timestamps, mixes formats or UTC offsets, or does not match
    /// `table.inserted_at_format`: records would have no age, or a wrong one.
    #[error("column {column:?} of table {table:?} {problem}")]
    Timestamps {
        /// The table, as the schedule file names it.
        table: String,
        /// The column whose values cannot be read.
        column: String,
        /// What is wrong with them, with the value or formats found.
        problem: String,
    },
    /// PostgreSQL could not be reached or refused the login (or its TLS settings cannot
    /// be used); the reason is worded for a person, with what to set.
    #[error("cannot connect: {reason}")]
    Connect {
        /// What failed and what to set, without the password.
        reason: String,
    },
    /// The tool's own tables are of another schema version, a table named like one of
    /// them is not the tool's, or the database answered in a shape the tool cannot read.
    #[error("{0}")]
    Schema(String),
    /// The tick's hold on its records ran out (it was paused or cut off for longer
    /// than the lease): another tick may have taken them.
    #[error("{0}")]
    HoldLapsed(String),
    /// No installed driver reads this database's URL (see `store::driver`): the
    /// message names the crate to add.
    #[error("{0}")]
    NoDriver(String),
    /// A statement failed for a reason the tool does not interpret (lock timeout, lost
    /// connection, permissions…).
    #[error("{context}: {source}")]
    Database {
        /// What the tool was doing, such as "reading backlog_claims".
        context: String,
        /// The driver's error.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// `; columns: A, B` for a message, or `; it has no columns`.
fn list(what: &str, names: &[String]) -> String {
    if names.is_empty() {
        format!("; it has no {what}")
    } else {
        format!("; {what}: {}", names.join(", "))
    }
}

impl StoreError {
    /// `id` is not of the type of `table`'s id column, which holds `holds`.
    pub fn not_an_id(id: &str, table: &crate::TableConfig, holds: &'static str) -> StoreError {
        StoreError::NotAnId {
            id: id.to_string(),
            table: table.name.clone(),
            column: table.id.clone(),
            holds,
        }
    }

    /// The schedule file does not match the database it reached: a table, a column or a
    /// timestamp format it names is not the table's. The fix is in the file (or the
    /// table), not in the database's availability: `status --check` says UNKNOWN for
    /// these, CRITICAL for a database it cannot reach or read.
    pub fn is_file_mismatch(&self) -> bool {
        matches!(
            self,
            StoreError::NoTable { .. }
                | StoreError::NotATable { .. }
                | StoreError::NoColumn { .. }
                | StoreError::Timestamps { .. }
        )
    }
}

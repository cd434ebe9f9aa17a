//! A table as its catalog describes it: what `backlog init` reads to propose a
//! schedule file for a table the tool has never seen.

/// The table's columns and key.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TableShape {
    /// The table's name as the database spells it, as `table.name` would write it.
    pub name: String,
    /// The table as this database's SQL names it: quoted, qualified where needed.
    pub quoted: String,
    /// Its columns, in the table's order.
    pub columns: Vec<TableColumn>,
    /// The primary key's columns, in the key's order (empty: the table has none).
    pub primary_key: Vec<String>,
}

/// One column of a [`TableShape`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TableColumn {
    /// The column's name as the database spells it.
    pub name: String,
    /// Its type as the database writes it (`timestamp with time zone`, `varchar`).
    pub sql_type: String,
    /// What the type holds, as far as `init` cares.
    pub kind: Kind,
    /// An enumeration's labels, in the type's order (empty for other kinds): the
    /// statuses a column may hold that no record holds yet.
    pub labels: Vec<String>,
}

/// Every record, where [`Survey::values`](super::Survey::values) is given no sample:
/// a bound each database takes in `LIMIT`.
pub const ALL: i64 = i64::MAX;

/// What a column's type holds: a status is text or an integer code, an inserted-at
/// time a timestamp (or text or integers that `inspect` reads as one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// An integer type.
    Integer,
    /// Text.
    Text,
    /// An enumeration's labels: text that takes no other value.
    Enum,
    /// A date and time type.
    Timestamp,
    /// Anything else (numbers with fractions, bytes, JSON…).
    Other,
}

impl TableShape {
    /// The column of this name, exactly or else in any case (as an unquoted name
    /// matches).
    pub fn column(&self, name: &str) -> Option<&TableColumn> {
        self.columns.iter().find(|c| c.name == name).or_else(|| {
            self.columns
                .iter()
                .find(|c| c.name.eq_ignore_ascii_case(name))
        })
    }
}

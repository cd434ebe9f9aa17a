//! A record of the backlog table as the tick sees it: its id, status and inserted-at
//! value, and every column as JSON for the handler.
//!
//! Ids and inserted-at values stay in the type the database gave them (`Scalar`), so
//! that they can be bound back into queries in the column's own format: comparing an
//! integer id with its text form would miss the index, or the row.

use std::fmt;
use std::sync::{Arc, OnceLock};

use chrono::{DateTime, NaiveDateTime, SecondsFormat, Utc};
use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{Map, Value};

pub mod row_buffer;
pub use row_buffer::RowBuffer;

/// A single database value of the kinds ids and inserted-at columns hold, in the
/// column's own type: a handler matches on it (`Scalar::Int(id)`) or prints it (its
/// `Display` is the value as the database holds it).
///
/// ```
/// use backlog_core::Scalar;
///
/// let id = Scalar::Int(42);
/// assert_eq!(id.to_string(), "42");
/// assert!(matches!(id, Scalar::Int(n) if n % 2 == 0));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(untagged)]
#[non_exhaustive]
pub enum Scalar {
    /// An integer column (SQLite `INTEGER`, PostgreSQL `integer`, `bigint`).
    Int(i64),
    /// A text column (a UUID or a code as text, a timestamp written as text).
    Text(String),
    /// A native instant (PostgreSQL `timestamptz`).
    Time(DateTime<Utc>),
    /// A native wall-clock time without zone (PostgreSQL `timestamp`).
    Naive(NaiveDateTime),
}

impl fmt::Display for Scalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scalar::Int(i) => write!(f, "{i}"),
            Scalar::Text(s) => f.write_str(s),
            Scalar::Time(t) => f.write_str(&t.to_rfc3339_opts(SecondsFormat::AutoSi, true)),
            Scalar::Naive(t) => write!(f, "{}", t.format("%Y-%m-%d %H:%M:%S%.f")),
        }
    }
}

/// One pending record, selected for a tick: what a handler is given.
///
/// `columns` holds the whole row (`record.columns["total"]` is a
/// [`serde_json::Value`]); `id`, `status` and `inserted_time` are the three columns the
/// schedule file names, read for the tick.
#[derive(Debug, Clone)]
pub struct Record {
    /// The id column's value, in its own type.
    pub id: Scalar,
    /// The status as text. The records of a page that share a status share its text
    /// (see `Statuses`): a table holds few distinct ones.
    pub status: Arc<str>,
    /// The inserted-at value read as an instant (absent only if the value is unreadable).
    pub inserted_time: Option<DateTime<Utc>>,
    /// Every column of the row, in table order: integers as numbers, NULL as null,
    /// text as strings, blobs as base64 strings.
    pub columns: Columns,
    inserted_at: InsertedAt,
}

/// Where a record's inserted-at value is: a copy of its own, or its column in the
/// page's row buffer, read when asked for (a tick needs it for a page's first and last
/// record only).
#[derive(Debug, Clone)]
enum InsertedAt {
    Held(Scalar),
    Column(usize),
}

impl Record {
    /// A record whose columns hold their values (see `Columns::new`).
    pub fn new(
        id: Scalar,
        status: Arc<str>,
        inserted_at: Scalar,
        inserted_time: Option<DateTime<Utc>>,
        columns: Columns,
    ) -> Self {
        Record {
            id,
            status,
            inserted_time,
            columns,
            inserted_at: InsertedAt::Held(inserted_at),
        }
    }

    /// A record of a row buffer whose column `inserted_at` holds the inserted-at value.
    pub fn in_buffer(
        id: Scalar,
        status: Arc<str>,
        inserted_at: usize,
        inserted_time: Option<DateTime<Utc>>,
        columns: Columns,
    ) -> Self {
        Record {
            id,
            status,
            inserted_time,
            columns,
            inserted_at: InsertedAt::Column(inserted_at),
        }
    }

    /// The inserted-at value as stored, in the column's own type.
    pub fn inserted_at(&self) -> Scalar {
        match &self.inserted_at {
            InsertedAt::Held(value) => value.clone(),
            InsertedAt::Column(i) => self
                .columns
                .cell(*i)
                .expect("a record made in a row buffer has its columns there")
                .to_scalar(),
        }
    }

    /// The JSON object the handler reads on stdin.
    pub fn to_json(&self) -> String {
        serde_json::to_string(&self.columns).expect("a map of JSON values always serialises")
    }

    /// How old the record is at `now`, if its inserted-at value could be read.
    pub fn age(&self, now: DateTime<Utc>) -> Option<chrono::Duration> {
        self.inserted_time.map(|t| now - t)
    }
}

/// One value of a row as SQLite holds it, borrowed from where it is kept. Blobs are
/// kept as base64 text, as handlers receive them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Cell<'a> {
    /// SQL NULL: `null` to the handler.
    Null,
    /// SQLite's INTEGER storage class.
    Int(i64),
    /// SQLite's REAL storage class.
    Real(f64),
    /// Text, or a blob as base64.
    Text(&'a str),
}

impl Cell<'_> {
    /// As the handler's JSON has it: a float that JSON cannot hold (NaN) as null.
    pub fn to_json(self) -> Value {
        match self {
            Cell::Null => Value::Null,
            Cell::Int(i) => Value::from(i),
            Cell::Real(f) => serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number),
            Cell::Text(t) => Value::String(t.to_owned()),
        }
    }

    /// As an id or inserted-at value: a float as its text, NULL as empty text.
    pub fn to_scalar(self) -> Scalar {
        match self {
            Cell::Int(i) => Scalar::Int(i),
            Cell::Real(f) => Scalar::Text(f.to_string()),
            Cell::Text(t) => Scalar::Text(t.to_owned()),
            Cell::Null => Scalar::Text(String::new()),
        }
    }
}

impl Serialize for Cell<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match *self {
            Cell::Null => serializer.serialize_unit(),
            Cell::Int(i) => serializer.serialize_i64(i),
            Cell::Real(f) if f.is_finite() => serializer.serialize_f64(f),
            Cell::Real(_) => serializer.serialize_unit(),
            Cell::Text(t) => serializer.serialize_str(t),
        }
    }
}

/// The distinct statuses a store has read, so that records share them instead of each
/// owning a copy: a page holds a few statuses over a thousand records.
#[derive(Debug, Default)]
pub struct Statuses(Vec<Arc<str>>);

impl Statuses {
    /// The shared text equal to `status`, made on first sight.
    pub fn get(&mut self, status: &[u8]) -> Arc<str> {
        if let Some(known) = self.0.iter().find(|s| s.as_bytes() == status) {
            return Arc::clone(known);
        }
        let new: Arc<str> = String::from_utf8_lossy(status).into();
        self.0.push(Arc::clone(&new));
        new
    }
}

/// The columns of one row, serialised as a JSON object in table order.
///
/// The names are shared by every row of a page: a tick reads tens of thousands of
/// records a second, and a map owning its keys cost an allocation per column per
/// record besides the hashing. A row read from SQLite keeps its values in the page's
/// `RowBuffer` and makes JSON values of them only when they are first asked for
/// (`get`, `iter`); serialising it for a command handler reads the buffer directly.
#[derive(Clone)]
pub struct Columns {
    row: Row,
    /// The values as JSON: given (`Columns::new`), or made from the row buffer once.
    values: OnceLock<Vec<Value>>,
    /// Which given values are binary columns' base64 (`with_binary`); a row buffer
    /// knows its blobs itself.
    binary: Option<Arc<[bool]>>,
}

#[derive(Clone)]
enum Row {
    /// Names of values held in `Columns::values`.
    Values(Arc<[String]>),
    /// Row `usize` of a page's buffer.
    Buffered(Arc<RowBuffer>, usize),
}

impl Columns {
    /// Values in the order of `names`, which the rows of a page share.
    pub fn new(names: Arc<[String]>, values: Vec<Value>) -> Self {
        assert_eq!(names.len(), values.len(), "a value for each column");
        Columns {
            row: Row::Values(names),
            values: OnceLock::from(values),
            binary: None,
        }
    }

    /// These columns, `binary` saying which values (in the order of the names) are a
    /// binary column's base64: a page's rows share it.
    pub fn with_binary(mut self, binary: Arc<[bool]>) -> Self {
        self.binary = Some(binary);
        self
    }

    /// Whether the value of column number `column` is a binary value's base64.
    fn is_binary(&self, column: usize) -> bool {
        match &self.row {
            Row::Values(_) => self
                .binary
                .as_ref()
                .is_some_and(|b| b.get(column).copied().unwrap_or(false)),
            Row::Buffered(buffer, row) => buffer.is_blob(*row, column),
        }
    }

    /// Row `row` of `buffer`.
    pub fn buffered(buffer: Arc<RowBuffer>, row: usize) -> Self {
        assert!(row < buffer.rows(), "row {row} is in the buffer");
        Columns {
            row: Row::Buffered(buffer, row),
            values: OnceLock::new(),
            binary: None,
        }
    }

    fn names(&self) -> &[String] {
        match &self.row {
            Row::Values(names) => names,
            Row::Buffered(buffer, _) => buffer.names(),
        }
    }

    fn values(&self) -> &[Value] {
        self.values.get_or_init(|| match &self.row {
            Row::Values(_) => unreachable!("given values are set at construction"),
            Row::Buffered(buffer, row) => (0..buffer.names().len())
                .map(|c| buffer.cell(*row, c).to_json())
                .collect(),
        })
    }

    /// The value of column number `column` as held in a row buffer; none for values
    /// given as JSON.
    fn cell(&self, column: usize) -> Option<Cell<'_>> {
        match &self.row {
            Row::Values(_) => None,
            Row::Buffered(buffer, row) => Some(buffer.cell(*row, column)),
        }
    }

    /// The value of the column `name`, as the table spells it.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.iter().find(|(n, _)| *n == name).map(|(_, v)| v)
    }

    /// The value of the column `name`, in any case (as SQL resolves names).
    pub fn get_ignore_case(&self, name: &str) -> Option<&Value> {
        self.iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
    }

    /// Names and values, in table order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.names().iter().map(String::as_str).zip(self.values())
    }

    /// The row as a person reads it (`show`, the dashboard): a blob, which handlers get
    /// as base64, shows as its text when that text is a JSON object or array (a
    /// payload column of type BLOB); everything else as handlers get it (a text column
    /// that holds base64 too: that is what the table holds).
    pub fn for_people(&self) -> Map<String, Value> {
        self.iter()
            .enumerate()
            .map(|(column, (name, value))| {
                let shown = match value {
                    Value::String(s) if self.is_binary(column) => {
                        json_in_base64(s).map(Value::String)
                    }
                    _ => None,
                };
                (name.to_string(), shown.unwrap_or_else(|| value.clone()))
            })
            .collect()
    }

    /// How many columns the row has.
    pub fn len(&self) -> usize {
        self.names().len()
    }

    /// Whether there are no columns (a table always has some; `Columns` built by hand
    /// may not).
    pub fn is_empty(&self) -> bool {
        self.names().is_empty()
    }
}

impl PartialEq for Columns {
    fn eq(&self, other: &Self) -> bool {
        self.iter().eq(other.iter())
    }
}

impl fmt::Debug for Columns {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl From<Map<String, Value>> for Columns {
    fn from(map: Map<String, Value>) -> Self {
        let (names, values): (Vec<String>, Vec<Value>) = map.into_iter().unzip();
        Columns::new(names.into(), values)
    }
}

impl std::ops::Index<&str> for Columns {
    type Output = Value;

    /// The value of the column `name`; panics, naming it, if the row has no such column.
    fn index(&self, name: &str) -> &Value {
        self.get(name)
            .unwrap_or_else(|| panic!("the record has no column {name:?}"))
    }
}

impl Serialize for Columns {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.len()))?;
        match (&self.row, self.values.get()) {
            (Row::Buffered(buffer, row), None) => {
                for (c, name) in buffer.names().iter().enumerate() {
                    map.serialize_entry(name, &buffer.cell(*row, c))?;
                }
            }
            _ => {
                for (name, value) in self.iter() {
                    map.serialize_entry(name, value)?;
                }
            }
        }
        map.end()
    }
}

/// The JSON text that `text` is the base64 of, if it is one: an object or an array,
/// so that text that merely happens to be base64 stays as it is.
fn json_in_base64(text: &str) -> Option<String> {
    use base64::Engine as _;
    if text.len() < 4 || !text.len().is_multiple_of(4) {
        return None;
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text)
        .ok()?;
    let decoded = String::from_utf8(bytes).ok()?;
    let trimmed = decoded.trim_start();
    ((trimmed.starts_with('{') || trimmed.starts_with('['))
        && serde_json::from_str::<Value>(&decoded).is_ok())
    .then_some(decoded)
}

#[cfg(test)]
pub mod tests;

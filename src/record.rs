//! A record of the backlog table as the tick sees it: its id, status and inserted-at
//! value, and every column as JSON for the handler.
//!
//! Ids and inserted-at values stay in the type the database gave them (`Scalar`), so
//! that they can be bound back into queries in the column's own format: comparing an
//! integer id with its text form would miss the index, or the row.

use std::fmt;
use std::sync::Arc;

use chrono::{DateTime, NaiveDateTime, SecondsFormat, Utc};
use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{Map, Value};

/// A single database value of the kinds ids and inserted-at columns hold.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(untagged)]
pub enum Scalar {
    Int(i64),
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

/// One pending record, selected for a tick.
#[derive(Debug, Clone)]
pub struct Record {
    pub id: Scalar,
    /// The status as text. The records of a page that share a status share its text
    /// (see `Statuses`): a table holds few distinct ones.
    pub status: Arc<str>,
    /// The inserted-at value as stored.
    pub inserted_at: Scalar,
    /// The inserted-at value read as an instant (absent only if the value is unreadable).
    pub inserted_time: Option<DateTime<Utc>>,
    /// Every column of the row, in table order: integers as numbers, NULL as null,
    /// text as strings, blobs as base64 strings.
    pub columns: Columns,
}

impl Record {
    /// The JSON object the handler reads on stdin.
    pub fn to_json(&self) -> String {
        serde_json::to_string(&self.columns).expect("a map of JSON values always serialises")
    }

    /// How old the record is at `now`, if its inserted-at value could be read.
    pub fn age(&self, now: DateTime<Utc>) -> Option<chrono::Duration> {
        self.inserted_time.map(|t| now - t)
    }
}

/// The distinct statuses a store has read, so that records share them instead of each
/// owning a copy: a page holds a few statuses over a thousand records.
#[derive(Debug, Default)]
pub(crate) struct Statuses(Vec<Arc<str>>);

impl Statuses {
    /// The shared text equal to `status`, made on first sight.
    pub(crate) fn get(&mut self, status: &[u8]) -> Arc<str> {
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
/// record besides the hashing, about a sixth of a tick with a no-op handler.
#[derive(Debug, Clone, PartialEq)]
pub struct Columns {
    names: Arc<[String]>,
    values: Vec<Value>,
}

impl Columns {
    /// Values in the order of `names`, which the rows of a page share.
    pub fn new(names: Arc<[String]>, values: Vec<Value>) -> Self {
        assert_eq!(names.len(), values.len(), "a value for each column");
        Columns { names, values }
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
        self.names.iter().map(String::as_str).zip(&self.values)
    }

    pub fn len(&self) -> usize {
        self.values.len()
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
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
        for (name, value) in self.iter() {
            map.serialize_entry(name, value)?;
        }
        map.end()
    }
}

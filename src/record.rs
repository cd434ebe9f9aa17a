//! A record of the backlog table as the tick sees it: its id, status and inserted-at
//! value, and every column as JSON for the handler.
//!
//! Ids and inserted-at values stay in the type the database gave them (`Scalar`), so
//! that they can be bound back into queries in the column's own format: comparing an
//! integer id with its text form would miss the index, or the row.

use std::fmt;

use chrono::{DateTime, NaiveDateTime, SecondsFormat, Utc};
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
    pub status: String,
    /// The inserted-at value as stored.
    pub inserted_at: Scalar,
    /// The inserted-at value read as an instant (absent only if the value is unreadable).
    pub inserted_time: Option<DateTime<Utc>>,
    /// Every column of the row, in table order: integers as numbers, NULL as null,
    /// text as strings, blobs as base64 strings.
    pub columns: Map<String, Value>,
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

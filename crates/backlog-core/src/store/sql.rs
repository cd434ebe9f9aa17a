//! SQL the backends share: the statements of the tool's own tables that read the same
//! on SQLite and PostgreSQL, run through one small trait, so they are written once.
//!
//! Statements are written with `?1`-style placeholders (SQLite's); the PostgreSQL side
//! turns them into `$1`, the MySQL side into bare `?` with the values in their order.
//! The few clauses that differ (an upsert, a cast to a 64-bit integer, a time as text)
//! are the trait's to write. Values are 64-bit integers or text, either possibly NULL,
//! which every backend stores alike.

use chrono::{DateTime, SecondsFormat, Utc};

use crate::record::Scalar;
use crate::store::StoreError;

/// A value bound to, or read from, a shared statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// An integer, or NULL.
    Int(Option<i64>),
    /// Text, or NULL.
    Text(Option<String>),
    /// A value of the user's table (an inserted-at bound, a status), bound as the
    /// backend binds that column's values; never read back.
    Scalar(Scalar),
}

impl Value {
    /// The integer it holds, if it is one.
    pub fn int(&self) -> Option<i64> {
        match self {
            Value::Int(i) => *i,
            Value::Text(t) => t.as_deref().and_then(|t| t.parse().ok()),
            Value::Scalar(Scalar::Int(i)) => Some(*i),
            Value::Scalar(other) => other.to_string().parse().ok(),
        }
    }

    /// The text it holds (an integer written out), if any.
    pub fn text(&self) -> Option<String> {
        match self {
            Value::Int(i) => i.map(|i| i.to_string()),
            Value::Text(t) => t.clone(),
            Value::Scalar(s) => Some(s.to_string()),
        }
    }
}

impl From<i64> for Value {
    fn from(i: i64) -> Self {
        Value::Int(Some(i))
    }
}

impl From<Option<i64>> for Value {
    fn from(i: Option<i64>) -> Self {
        Value::Int(i)
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::Text(Some(s.to_string()))
    }
}

impl From<Option<&str>> for Value {
    fn from(s: Option<&str>) -> Self {
        Value::Text(s.map(String::from))
    }
}

/// Failure of a shared statement, before the caller says what it was doing.
pub type SqlError = Box<dyn std::error::Error + Send + Sync>;

/// A connection (or a transaction) that runs the shared statements.
pub trait Sql {
    /// Runs a statement; returns the number of rows it changed.
    fn execute(&mut self, sql: &str, params: &[Value]) -> Result<u64, SqlError>;

    /// Runs a query; returns its rows.
    fn query(&mut self, sql: &str, params: &[Value]) -> Result<Vec<Vec<Value>>, SqlError>;

    /// Runs a query of the user's table; returns its values as the backend reads a
    /// record's (SQLite: a REAL as its text, a BLOB as base64; MySQL: a float as its
    /// text), NULL as none.
    fn query_user(
        &mut self,
        sql: &str,
        params: &[Value],
    ) -> Result<Vec<Vec<Option<Scalar>>>, SqlError> {
        Ok(self
            .query(sql, params)?
            .into_iter()
            .map(|row| {
                row.into_iter()
                    .map(|v| match v {
                        Value::Int(i) => i.map(Scalar::Int),
                        Value::Text(t) => t.map(Scalar::Text),
                        Value::Scalar(s) => Some(s),
                    })
                    .collect()
            })
            .collect())
    }

    /// An expression giving a time column of the tool's tables as RFC 3339 text in UTC:
    /// SQLite keeps them so; PostgreSQL's `timestamptz` would print in the session's
    /// DateStyle.
    fn rfc3339(&self, column: &str) -> String {
        column.to_string()
    }

    /// The database's time, as a time column of the tool's tables holds it (SQLite:
    /// RFC 3339 text with milliseconds).
    fn now(&self) -> String {
        "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')".into()
    }

    /// The clause that turns an INSERT into a replacement of the row with the same
    /// `key`, writing the columns `set` from the new row.
    fn upsert(&self, key: &[&str], set: &[&str]) -> String {
        let set: Vec<String> = set.iter().map(|c| format!("{c} = excluded.{c}")).collect();
        format!(
            "ON CONFLICT ({}) DO UPDATE SET {}",
            key.join(", "),
            set.join(", ")
        )
    }

    /// The type a `CAST` to a 64-bit integer names (MySQL's `SIGNED`).
    fn bigint(&self) -> &'static str {
        "BIGINT"
    }

    /// The database's time `micros` microseconds ago (`micros` a placeholder bound to
    /// an integer), as a time column of the tool's tables holds it.
    fn ago(&self, micros: &str) -> String {
        format!(
            "strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-' || ({micros} / 1000000.0) || ' seconds')"
        )
    }

    /// The database's time `micros` microseconds from now (`micros` a placeholder
    /// bound to an integer), as a time column of the tool's tables holds it.
    fn later(&self, micros: &str) -> String {
        format!(
            "strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '+' || ({micros} / 1000000.0) || ' seconds')"
        )
    }

    /// A time as the placeholder `time_value` binds it, written into a time column of
    /// the tool's tables (SQLite keeps the RFC 3339 text as it is).
    fn time(&self, placeholder: &str) -> String {
        placeholder.to_string()
    }

    /// `t` bound for `time`: RFC 3339 text in UTC.
    fn time_value(&self, t: DateTime<Utc>) -> Value {
        t.to_rfc3339_opts(SecondsFormat::Secs, true).as_str().into()
    }

    /// Runs an INSERT into one of the tool's tables whose key is `id`, generated, and
    /// returns the new row's id.
    fn insert_returning_id(&mut self, sql: &str, params: &[Value]) -> Result<i64, SqlError>;
}

/// The characters of a statement, each with whether it stands outside quotes (a name
/// in double quotes or backquotes, text in single quotes): a `?` outside is a
/// placeholder of the shared statements, one inside is part of a user's table or column
/// name. For the servers, which write their placeholders another way.
pub fn unquoted(sql: &str) -> impl Iterator<Item = (char, bool)> + '_ {
    let mut quote = None;
    sql.chars().map(move |c| {
        match quote {
            Some(q) if c == q => quote = None,
            None if matches!(c, '"' | '\'' | '`') => quote = Some(c),
            _ => {}
        }
        (c, quote.is_none())
    })
}

/// Names a failed statement by what it was doing.
pub fn failed(context: &str) -> impl FnOnce(SqlError) -> StoreError + '_ {
    move |source| StoreError::Database {
        context: context.to_string(),
        source,
    }
}

/// `?a, ?a+1, …`: `n` placeholders numbered from `first`, for an `IN (…)` list.
pub fn numbered(first: usize, n: usize) -> String {
    (first..first + n)
        .map(|i| format!("?{i}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `(?a, ?a+1, …), (…)`: the placeholders of `rows` rows of `width` values for a
/// multi-row INSERT, numbered from `first`.
pub fn rows_of(rows: usize, width: usize, first: usize) -> String {
    (0..rows)
        .map(|r| format!("({})", numbered(first + r * width, width)))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_numbered_in_order() {
        assert_eq!(numbered(3, 2), "?3, ?4");
        assert_eq!(rows_of(2, 2, 2), "(?2, ?3), (?4, ?5)");
    }
}

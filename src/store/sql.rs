//! SQL the backends share: the statements of the tool's own tables that read the same
//! on SQLite and PostgreSQL, run through one small trait, so they are written once.
//!
//! Statements are written with `?1`-style placeholders (SQLite's); the PostgreSQL side
//! turns them into `$1`, the MySQL side into bare `?` with the values in their order.
//! The few clauses that differ (an upsert, a cast to a 64-bit integer, a time as text)
//! are the trait's to write. Values are 64-bit integers or text, either possibly NULL,
//! which every backend stores alike.

use crate::store::StoreError;

/// A value bound to, or read from, a shared statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    Int(Option<i64>),
    Text(Option<String>),
}

impl Value {
    pub(super) fn int(&self) -> Option<i64> {
        match self {
            Value::Int(i) => *i,
            Value::Text(t) => t.as_deref().and_then(|t| t.parse().ok()),
        }
    }

    pub(super) fn text(&self) -> Option<String> {
        match self {
            Value::Int(i) => i.map(|i| i.to_string()),
            Value::Text(t) => t.clone(),
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
}

/// Names a failed statement by what it was doing.
pub(super) fn failed(context: &str) -> impl FnOnce(SqlError) -> StoreError + '_ {
    move |source| StoreError::Database {
        context: context.to_string(),
        source,
    }
}

/// `(?a, ?a+1, …), (…)`: the placeholders of `rows` rows of `width` values for a
/// multi-row INSERT, numbered from `first`.
pub(super) fn rows_of(rows: usize, width: usize, first: usize) -> String {
    (0..rows)
        .map(|r| {
            let cells: Vec<String> = (0..width)
                .map(|c| format!("?{}", first + r * width + c))
                .collect();
            format!("({})", cells.join(", "))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// SQLite runs the shared statements as written.
impl Sql for &rusqlite::Connection {
    fn execute(&mut self, sql: &str, params: &[Value]) -> Result<u64, SqlError> {
        let mut stmt = self.prepare_cached(sql)?;
        Ok(stmt.execute(rusqlite::params_from_iter(params.iter().map(lite)))? as u64)
    }

    fn query(&mut self, sql: &str, params: &[Value]) -> Result<Vec<Vec<Value>>, SqlError> {
        use rusqlite::types::ValueRef;
        let mut stmt = self.prepare_cached(sql)?;
        let width = stmt.column_count();
        let rows = stmt.query_map(rusqlite::params_from_iter(params.iter().map(lite)), |row| {
            (0..width)
                .map(|i| {
                    Ok(match row.get_ref(i)? {
                        ValueRef::Null => Value::Int(None),
                        ValueRef::Integer(n) => Value::Int(Some(n)),
                        ValueRef::Real(f) => Value::Int(Some(f as i64)),
                        ValueRef::Text(t) | ValueRef::Blob(t) => {
                            Value::Text(Some(String::from_utf8_lossy(t).into_owned()))
                        }
                    })
                })
                .collect()
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}

impl Sql for rusqlite::Connection {
    fn execute(&mut self, sql: &str, params: &[Value]) -> Result<u64, SqlError> {
        Sql::execute(&mut &*self, sql, params)
    }

    fn query(&mut self, sql: &str, params: &[Value]) -> Result<Vec<Vec<Value>>, SqlError> {
        Sql::query(&mut &*self, sql, params)
    }
}

fn lite(v: &Value) -> rusqlite::types::Value {
    use rusqlite::types::Value as V;
    match v {
        Value::Int(Some(i)) => V::Integer(*i),
        Value::Text(Some(t)) => V::Text(t.clone()),
        Value::Int(None) | Value::Text(None) => V::Null,
    }
}

/// PostgreSQL numbers its placeholders `$1`; the shared statements hold no other `?`.
fn dollars(sql: &str) -> String {
    sql.replace('?', "$")
}

impl postgres::types::ToSql for Value {
    fn to_sql(
        &self,
        ty: &postgres::types::Type,
        out: &mut bytes::BytesMut,
    ) -> Result<postgres::types::IsNull, SqlError> {
        use postgres::types::Type;
        match self {
            Value::Int(Some(i)) if *ty == Type::INT4 => i32::try_from(*i)?.to_sql(ty, out),
            Value::Int(Some(i)) if *ty == Type::TEXT || *ty == Type::VARCHAR => {
                i.to_string().to_sql(ty, out)
            }
            Value::Int(Some(i)) => i.to_sql(ty, out),
            Value::Text(Some(t)) => t.to_sql(ty, out),
            Value::Int(None) | Value::Text(None) => Ok(postgres::types::IsNull::Yes),
        }
    }

    fn accepts(ty: &postgres::types::Type) -> bool {
        use postgres::types::Type;
        [Type::INT8, Type::INT4, Type::TEXT, Type::VARCHAR].contains(ty)
    }

    postgres::types::to_sql_checked!();
}

fn pg_rows(rows: Vec<postgres::Row>) -> Result<Vec<Vec<Value>>, SqlError> {
    use postgres::types::Type;
    rows.iter()
        .map(|row| {
            (0..row.len())
                .map(|i| {
                    let ty = row.columns()[i].type_();
                    Ok(if *ty == Type::INT8 {
                        Value::Int(row.try_get::<_, Option<i64>>(i)?)
                    } else if *ty == Type::INT4 {
                        Value::Int(row.try_get::<_, Option<i32>>(i)?.map(i64::from))
                    } else {
                        Value::Text(row.try_get::<_, Option<String>>(i)?)
                    })
                })
                .collect()
        })
        .collect()
}

fn pg_params(params: &[Value]) -> Vec<&(dyn postgres::types::ToSql + Sync)> {
    params
        .iter()
        .map(|p| p as &(dyn postgres::types::ToSql + Sync))
        .collect()
}

/// The server's message (and hint) of a PostgreSQL error, as the backend says it.
fn pg_error(e: postgres::Error) -> SqlError {
    Box::new(super::postgres::db_error(&e))
}

/// A `timestamptz` column as RFC 3339 text in UTC, whatever the session's DateStyle.
fn pg_rfc3339(column: &str) -> String {
    format!("to_char({column} AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')")
}

impl Sql for postgres::Client {
    fn rfc3339(&self, column: &str) -> String {
        pg_rfc3339(column)
    }

    fn now(&self) -> String {
        "now()".into()
    }

    fn execute(&mut self, sql: &str, params: &[Value]) -> Result<u64, SqlError> {
        postgres::Client::execute(self, &dollars(sql), &pg_params(params)).map_err(pg_error)
    }

    fn query(&mut self, sql: &str, params: &[Value]) -> Result<Vec<Vec<Value>>, SqlError> {
        pg_rows(postgres::Client::query(self, &dollars(sql), &pg_params(params)).map_err(pg_error)?)
    }
}

impl Sql for postgres::Transaction<'_> {
    fn rfc3339(&self, column: &str) -> String {
        pg_rfc3339(column)
    }

    fn now(&self) -> String {
        "now()".into()
    }

    fn execute(&mut self, sql: &str, params: &[Value]) -> Result<u64, SqlError> {
        postgres::Transaction::execute(self, &dollars(sql), &pg_params(params)).map_err(pg_error)
    }

    fn query(&mut self, sql: &str, params: &[Value]) -> Result<Vec<Vec<Value>>, SqlError> {
        pg_rows(
            postgres::Transaction::query(self, &dollars(sql), &pg_params(params))
                .map_err(pg_error)?,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_numbered_in_order() {
        assert_eq!(rows_of(2, 2, 2), "(?2, ?3), (?4, ?5)");
    }
}

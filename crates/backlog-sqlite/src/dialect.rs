//! SQLite's side of the statements the backends share (`store::sql`): it runs them as
//! written, `?1` placeholders and all.

use backlog_core::record::Scalar;
use backlog_core::store::sql::{Sql, SqlError, Value};

/// A connection as the shared statements see it (`Sql` is the core's trait, the
/// connection rusqlite's: a type of this crate must stand between them).
/// The store's own connection is one (it dereferences to rusqlite's); a transaction,
/// or any borrowed connection, is one as `LiteRef`.
pub struct Lite(pub rusqlite::Connection);

/// A borrowed connection (a transaction's) as the shared statements see it.
pub struct LiteRef<'c>(pub &'c rusqlite::Connection);

impl std::ops::Deref for Lite {
    type Target = rusqlite::Connection;

    fn deref(&self) -> &rusqlite::Connection {
        &self.0
    }
}

impl std::ops::DerefMut for Lite {
    fn deref_mut(&mut self) -> &mut rusqlite::Connection {
        &mut self.0
    }
}

impl Sql for Lite {
    fn execute(&mut self, sql: &str, params: &[Value]) -> Result<u64, SqlError> {
        LiteRef(&self.0).execute(sql, params)
    }

    fn query(&mut self, sql: &str, params: &[Value]) -> Result<Vec<Vec<Value>>, SqlError> {
        LiteRef(&self.0).query(sql, params)
    }

    fn query_user(
        &mut self,
        sql: &str,
        params: &[Value],
    ) -> Result<Vec<Vec<Option<Scalar>>>, SqlError> {
        LiteRef(&self.0).query_user(sql, params)
    }

    fn insert_returning_id(&mut self, sql: &str, params: &[Value]) -> Result<i64, SqlError> {
        LiteRef(&self.0).insert_returning_id(sql, params)
    }
}

impl std::ops::Deref for LiteRef<'_> {
    type Target = rusqlite::Connection;

    fn deref(&self) -> &rusqlite::Connection {
        self.0
    }
}

/// SQLite runs the shared statements as written; their errors are read as the
/// protocol reads them (`super::cause`: a full disk is one).
impl Sql for LiteRef<'_> {
    fn execute(&mut self, sql: &str, params: &[Value]) -> Result<u64, SqlError> {
        let run = || -> rusqlite::Result<u64> {
            let mut stmt = self.0.prepare_cached(sql)?;
            Ok(stmt.execute(rusqlite::params_from_iter(params.iter().map(lite)))? as u64)
        };
        run().map_err(super::cause)
    }

    fn query(&mut self, sql: &str, params: &[Value]) -> Result<Vec<Vec<Value>>, SqlError> {
        use rusqlite::types::ValueRef;
        let run = || -> rusqlite::Result<Vec<Vec<Value>>> {
            let mut stmt = self.0.prepare_cached(sql)?;
            let width = stmt.column_count();
            let rows =
                stmt.query_map(rusqlite::params_from_iter(params.iter().map(lite)), |row| {
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
            rows.collect()
        };
        run().map_err(super::cause)
    }

    fn query_user(
        &mut self,
        sql: &str,
        params: &[Value],
    ) -> Result<Vec<Vec<Option<Scalar>>>, SqlError> {
        use rusqlite::types::ValueRef;
        let run = || -> rusqlite::Result<Vec<Vec<Option<Scalar>>>> {
            let mut stmt = self.0.prepare_cached(sql)?;
            let width = stmt.column_count();
            let rows =
                stmt.query_map(rusqlite::params_from_iter(params.iter().map(lite)), |row| {
                    (0..width)
                        .map(|i| {
                            Ok(Some(row.get_ref(i)?)
                                .filter(|v| *v != ValueRef::Null)
                                .map(super::scalar))
                        })
                        .collect()
                })?;
            rows.collect()
        };
        run().map_err(super::cause)
    }

    fn insert_returning_id(&mut self, sql: &str, params: &[Value]) -> Result<i64, SqlError> {
        Sql::execute(self, sql, params)?;
        Ok(self.0.last_insert_rowid())
    }
}

fn lite(v: &Value) -> rusqlite::types::Value {
    use rusqlite::types::Value as V;
    match v {
        Value::Int(Some(i)) => V::Integer(*i),
        Value::Text(Some(t)) => V::Text(t.clone()),
        Value::Int(None) | Value::Text(None) => V::Null,
        Value::Scalar(Scalar::Int(i)) => V::Integer(*i),
        Value::Scalar(s) => V::Text(s.to_string()),
    }
}

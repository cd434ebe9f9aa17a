//! PostgreSQL's side of the statements the backends share (`store::sql`): `$1`
//! placeholders, its types, `now()`, and times as RFC 3339 text whatever the session's
//! DateStyle.

use chrono::{DateTime, SecondsFormat, Utc};

use backlog_core::store::sql::{Sql, SqlError, Value, unquoted};

/// PostgreSQL numbers its placeholders `$1` (see `sql::unquoted`).
fn dollars(sql: &str) -> String {
    unquoted(sql)
        .map(|(c, free)| if free && c == '?' { '$' } else { c })
        .collect()
}

/// A connection, or a transaction, as the shared statements see it (`Sql` is the
/// core's trait, `Client` the driver's: a type of this crate must stand between them).
/// It dereferences to what it wraps.
pub struct Pg<C>(pub C);

impl<C> std::ops::Deref for Pg<C> {
    type Target = C;

    fn deref(&self) -> &C {
        &self.0
    }
}

impl<C> std::ops::DerefMut for Pg<C> {
    fn deref_mut(&mut self) -> &mut C {
        &mut self.0
    }
}

/// A shared statement's parameter bound for the driver.
#[derive(Debug)]
struct PgValue<'a>(&'a Value);

impl postgres::types::ToSql for PgValue<'_> {
    fn to_sql(
        &self,
        ty: &postgres::types::Type,
        out: &mut bytes::BytesMut,
    ) -> Result<postgres::types::IsNull, SqlError> {
        use postgres::types::Type;
        let own = [Type::INT8, Type::INT4, Type::TEXT, Type::VARCHAR].contains(ty);
        match self.0 {
            // A value of the user's table, converted to its column's type.
            Value::Scalar(s) => super::Bound(s).to_sql(ty, out),
            Value::Int(None) | Value::Text(None) => Ok(postgres::types::IsNull::Yes),
            _ if !own => Err(format!("cannot bind {:?} as {ty}", self.0).into()),
            Value::Int(Some(i)) if *ty == Type::INT4 => i32::try_from(*i)?.to_sql(ty, out),
            Value::Int(Some(i)) if *ty == Type::TEXT || *ty == Type::VARCHAR => {
                i.to_string().to_sql(ty, out)
            }
            Value::Int(Some(i)) => i.to_sql(ty, out),
            Value::Text(Some(t)) => t.to_sql(ty, out),
        }
    }

    /// The tool's own columns take 64- and 32-bit integers and text; a value of the
    /// user's table, whatever its column's type (see `to_sql`).
    fn accepts(_: &postgres::types::Type) -> bool {
        true
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

fn pg_params(params: &[Value]) -> Vec<PgValue<'_>> {
    params.iter().map(PgValue).collect()
}

fn pg_refs<'a>(values: &'a [PgValue<'a>]) -> Vec<&'a (dyn postgres::types::ToSql + Sync)> {
    values
        .iter()
        .map(|p| p as &(dyn postgres::types::ToSql + Sync))
        .collect()
}

/// The parameters with the types the tool's own columns take (64-bit integers, text),
/// so that a statement goes in one round trip instead of a prepare and a run (on a
/// link of 200 ms, half a second less each); `None` where one is a value of the
/// user's table, whose type only the server knows.
fn typed<'a>(
    values: &'a [PgValue<'a>],
) -> Option<
    Vec<(
        &'a (dyn postgres::types::ToSql + Sync),
        postgres::types::Type,
    )>,
> {
    use postgres::types::Type;
    values
        .iter()
        .map(|v| match v.0 {
            Value::Scalar(_) => None,
            Value::Int(_) => Some((v as &(dyn postgres::types::ToSql + Sync), Type::INT8)),
            Value::Text(_) => Some((v as &(dyn postgres::types::ToSql + Sync), Type::TEXT)),
        })
        .collect()
}

/// The rows a statement sent without parameters (the simple protocol: one round
/// trip) wrote.
fn simple_count(messages: Vec<postgres::SimpleQueryMessage>) -> Result<u64, SqlError> {
    Ok(messages
        .iter()
        .filter_map(|m| match m {
            postgres::SimpleQueryMessage::CommandComplete(n) => Some(*n),
            _ => None,
        })
        .sum())
}

/// The server's message (and hint) of a PostgreSQL error, as the backend says it.
fn pg_error(e: postgres::Error) -> SqlError {
    Box::new(super::db_error(&e))
}

/// A `timestamptz` column as RFC 3339 text in UTC, whatever the session's DateStyle.
fn pg_rfc3339(column: &str) -> String {
    format!("to_char({column} AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')")
}

/// PostgreSQL's forms of the clauses the shared statements cannot write alike.
macro_rules! pg_sql {
    ($t:ty) => {
        impl Sql for $t {
            fn rfc3339(&self, column: &str) -> String {
                pg_rfc3339(column)
            }

            fn now(&self) -> String {
                "now()".into()
            }

            fn ago(&self, micros: &str) -> String {
                format!("now() - CAST({micros} AS BIGINT) * INTERVAL '1 microsecond'")
            }

            fn later(&self, micros: &str) -> String {
                format!("now() + CAST({micros} AS BIGINT) * INTERVAL '1 microsecond'")
            }

            // Bound as text, then read as a time: the value's own type is text.
            fn time(&self, placeholder: &str) -> String {
                format!("CAST(CAST({placeholder} AS TEXT) AS TIMESTAMPTZ)")
            }

            fn time_value(&self, t: DateTime<Utc>) -> Value {
                t.to_rfc3339_opts(SecondsFormat::Micros, true)
                    .as_str()
                    .into()
            }

            fn execute(&mut self, sql: &str, params: &[Value]) -> Result<u64, SqlError> {
                if params.is_empty() {
                    return simple_count(self.0.simple_query(sql).map_err(pg_error)?);
                }
                let values = pg_params(params);
                match typed(&values) {
                    Some(typed) => {
                        use postgres::fallible_iterator::FallibleIterator;
                        let mut rows = self
                            .0
                            .query_typed_raw(&dollars(sql), typed)
                            .map_err(pg_error)?;
                        while rows.next().map_err(pg_error)?.is_some() {}
                        Ok(rows.rows_affected().unwrap_or(0))
                    }
                    None => self
                        .0
                        .execute(&dollars(sql), &pg_refs(&values))
                        .map_err(pg_error),
                }
            }

            fn query(&mut self, sql: &str, params: &[Value]) -> Result<Vec<Vec<Value>>, SqlError> {
                let values = pg_params(params);
                pg_rows(
                    match typed(&values) {
                        Some(typed) => self.0.query_typed(&dollars(sql), &typed),
                        None => self.0.query(&dollars(sql), &pg_refs(&values)),
                    }
                    .map_err(pg_error)?,
                )
            }

            fn insert_returning_id(
                &mut self,
                sql: &str,
                params: &[Value],
            ) -> Result<i64, SqlError> {
                let rows = Sql::query(self, &format!("{sql} RETURNING id"), params)?;
                rows.first()
                    .and_then(|row| row[0].int())
                    .ok_or_else(|| "the INSERT returned no id".into())
            }
        }
    };
}

pg_sql!(Pg<postgres::Client>);
pg_sql!(Pg<postgres::Transaction<'_>>);
pg_sql!(Pg<&mut postgres::Client>);
pg_sql!(Pg<&mut postgres::Transaction<'_>>);

#[cfg(test)]
mod tests {
    #[test]
    fn a_question_mark_in_quotes_is_no_placeholder() {
        assert_eq!(
            super::dollars("SELECT \"a?\" FROM \"t?\"\"\" WHERE c = '?' AND d = ?12"),
            "SELECT \"a?\" FROM \"t?\"\"\" WHERE c = '?' AND d = $12"
        );
    }
}

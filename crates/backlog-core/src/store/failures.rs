//! `backlog_failures`: how many times in a row each pending record failed, counted by
//! the tool in its own tables (never the user's) where `table.give_up_after` is set,
//! so that a tick gives up on a record at that failure. Written with the marks, in
//! their transaction (a mark that stays pending after a try sets the count, any other
//! clears it); read a page at a time as a tick takes its records.

use std::collections::HashMap;

use super::sql::{Sql, Value, failed, numbered, rows_of};
use super::{Mark, StoreError};

/// The table: a row per record that failed and is still pending.
pub const TABLE: super::tables::Table = super::tables::Table {
    name: "backlog_failures",
    columns: "table_name {key} NOT NULL,
        record_id {key} NOT NULL,
        failures {bigint} NOT NULL",
    key: Some("table_name, record_id"),
    indexes: &[],
    mark: "failures",
};

/// Ids a statement names at once: well under every database's limit of placeholders.
const CHUNK: usize = 500;

/// Writes the counts the marks carry (`Mark::failures`), except those of marks the
/// store could not write (`lost`): a count of 0 removes the record's row.
pub fn write(
    sql: &mut dyn Sql,
    s: &str,
    table: &str,
    marks: &[Mark],
    lost: &dyn Fn(usize) -> bool,
) -> Result<(), StoreError> {
    let counted: Vec<(String, u32)> = marks
        .iter()
        .enumerate()
        .filter(|(i, _)| !lost(*i))
        .filter_map(|(_, m)| m.failures.map(|n| (m.id.to_string(), n)))
        .collect();
    let context = "writing backlog_failures";
    for chunk in counted.chunks(CHUNK) {
        let mut params: Vec<Value> = vec![table.into()];
        params.extend(chunk.iter().map(|(id, _)| Value::from(id.as_str())));
        sql.execute(
            &format!(
                "DELETE FROM {s}backlog_failures WHERE table_name = ?1 AND record_id IN ({})",
                numbered(2, chunk.len())
            ),
            &params,
        )
        .map_err(failed(context))?;
        let rows: Vec<&(String, u32)> = chunk.iter().filter(|(_, n)| *n > 0).collect();
        if rows.is_empty() {
            continue;
        }
        let params: Vec<Value> = rows
            .iter()
            .flat_map(|(id, n)| [table.into(), id.as_str().into(), i64::from(*n).into()])
            .collect();
        sql.execute(
            &format!(
                "INSERT INTO {s}backlog_failures (table_name, record_id, failures) VALUES {}",
                rows_of(rows.len(), 3, 1)
            ),
            &params,
        )
        .map_err(failed(context))?;
    }
    Ok(())
}

/// The counts of the records with these ids that have one.
pub fn read(
    sql: &mut dyn Sql,
    s: &str,
    table: &str,
    ids: &[String],
) -> Result<HashMap<String, u32>, StoreError> {
    let mut counts = HashMap::new();
    for chunk in ids.chunks(CHUNK) {
        let mut params: Vec<Value> = vec![table.into()];
        params.extend(chunk.iter().map(|id| Value::from(id.as_str())));
        let rows = sql
            .query(
                &format!(
                    "SELECT record_id, failures FROM {s}backlog_failures WHERE table_name = ?1 AND record_id IN ({})",
                    numbered(2, chunk.len())
                ),
                &params,
            )
            .map_err(failed("reading backlog_failures"))?;
        counts.extend(rows.into_iter().filter_map(|row| {
            let n = u32::try_from(row.get(1)?.int()?).ok()?;
            Some((row.first()?.text()?, n))
        }));
    }
    Ok(counts)
}

//! `backlog_answers`: how a URL handler's calls were answered, counted by table, tier
//! and HTTP status code, for `backlog_http_responses_total`. A row per code a tier has
//! seen: a few dozen at most, whatever the backlog's size. Each tick adds its counts
//! as it closes, with an increment the database makes (`n = n + ?`), so the fleet's
//! runners add theirs without reading one another's.

use super::sql::{Sql, failed};
use super::{Store, StoreError};

/// The table: a row per table, tier and code.
pub const TABLE: super::tables::Table = super::tables::Table {
    name: "backlog_answers",
    columns: "table_name {key} NOT NULL,
        window_secs {bigint} NOT NULL,
        code {bigint} NOT NULL,
        answers {bigint} NOT NULL",
    key: Some("table_name, window_secs, code"),
    indexes: &[],
    mark: "answers",
};

/// The answers a tier's calls got with one code, over the table's life.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnswerTotal {
    /// The tier's window in seconds.
    pub window_secs: u64,
    /// The HTTP status code.
    pub code: i64,
    /// How many calls it answered.
    pub answers: u64,
}

/// Adds `n` answers of `code` to the tier's row, making it where there is none (a
/// second runner's insert that loses the race adds to the row the first made).
fn add(
    sql: &mut dyn Sql,
    s: &str,
    table: &str,
    window: i64,
    code: i64,
    n: i64,
) -> Result<(), StoreError> {
    let context = "writing backlog_answers";
    let update = format!(
        "UPDATE {s}backlog_answers SET answers = answers + ?4 WHERE table_name = ?1 AND window_secs = ?2 AND code = ?3"
    );
    let params = [table.into(), window.into(), code.into(), n.into()];
    if sql.execute(&update, &params).map_err(failed(context))? == 1 {
        return Ok(());
    }
    let insert = format!(
        "INSERT INTO {s}backlog_answers (table_name, window_secs, code, answers) VALUES (?1, ?2, ?3, ?4)"
    );
    match sql.execute(&insert, &params) {
        Ok(_) => Ok(()),
        Err(e) => match sql.execute(&update, &params).map_err(failed(context))? {
            1 => Ok(()),
            _ => Err(failed(context)(e)),
        },
    }
}

impl dyn Store + '_ {
    /// Adds a tick's answers by code to its tier's counts; nothing while the tool's
    /// tables are not there.
    pub fn add_answers(
        &mut self,
        window_secs: u64,
        answers: &std::collections::BTreeMap<i64, u64>,
    ) -> Result<(), StoreError> {
        if answers.is_empty() {
            return Ok(());
        }
        let table = self.table().name.clone();
        let window = i64::try_from(window_secs).unwrap_or(i64::MAX);
        self.at_clock("backlog_answers", "writing backlog_answers", |sql, s, _| {
            for (code, n) in answers {
                add(
                    sql,
                    s,
                    &table,
                    window,
                    *code,
                    i64::try_from(*n).unwrap_or(i64::MAX),
                )?;
            }
            Ok(())
        })
        .map(drop)
    }

    /// The table's answers by tier and code, ordered so.
    pub fn answer_totals(&mut self) -> Result<Vec<AnswerTotal>, StoreError> {
        let table = self.table().name.clone();
        Ok(self
            .at_clock("backlog_answers", "reading backlog_answers", |sql, s, _| {
                let rows = sql
                    .query(
                        &format!(
                            "SELECT window_secs, code, answers FROM {s}backlog_answers WHERE table_name = ?1 ORDER BY window_secs, code"
                        ),
                        &[table.as_str().into()],
                    )
                    .map_err(failed("reading backlog_answers"))?;
                Ok(rows
                    .iter()
                    .map(|r| AnswerTotal {
                        window_secs: r[0].int().unwrap_or(0).max(0) as u64,
                        code: r[1].int().unwrap_or(0),
                        answers: r[2].int().unwrap_or(0).max(0) as u64,
                    })
                    .collect())
            })?
            .unwrap_or_default())
    }
}

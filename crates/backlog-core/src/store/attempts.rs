//! `backlog_attempts`: what was tried, when, and what the handler said, one row per
//! handled record, kept by the tool because the user's table has no room for it.
//!
//! Rows are written with the marks, in their transaction, so a record's status and
//! the attempt that explains it land together or not at all. Growth is bounded twice:
//! a record keeps its newest `history.max_per_record` attempts (pruned as each group
//! is written), and every tick deletes a small step of attempts older than
//! `history.keep`, so no tick pays for a backlog of pruning.

use chrono::{DateTime, TimeZone as _, Utc};

use super::StoreError;
use super::sql::{Sql, Value, failed, numbered, rows_of};

/// The table: a row per try kept, found by record and by time.
pub const TABLE: super::tables::Table = super::tables::Table {
    name: "backlog_attempts",
    columns: r#"id {serial},
        table_name {key} NOT NULL,
        record_id {key} NOT NULL,
        run_id {bigint} NOT NULL,
        window_secs {bigint} NOT NULL,
        started_ms {bigint} NOT NULL,
        took_ms {bigint} NOT NULL,
        status {text} NOT NULL,
        outcome {text} NOT NULL,
        code {bigint},
        "signal" {bigint},
        detail {text} NOT NULL,
        output {text} NOT NULL"#,
    key: None,
    indexes: &[
        ("backlog_attempts_by_record", "table_name, record_id, id"),
        ("backlog_attempts_by_time", "table_name, started_ms"),
    ],
    mark: "took_ms",
};

pub use crate::handler::{GIVEN_UP, SNOOZED};

/// Outcomes of attempts that were no try but an action on the record: kept so that
/// `show` says who did what and why, counted as neither a failure nor a handler's time.
pub const ACTIONS: [&str; 2] = [SNOOZED, GIVEN_UP];

/// The outcomes that are no failure, as an SQL list: success and the actions.
pub fn not_failures_sql() -> String {
    std::iter::once("success")
        .chain(ACTIONS)
        .map(|o| format!("'{o}'"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// How many attempts of a group go in one INSERT (12 values each).
const ROWS_PER_INSERT: usize = 50;

/// How many attempts past `history.keep` a tick deletes, at most: a step small enough
/// to cost a tick little, large enough to keep up with any tick's own writes.
pub const PRUNE_STEP: i64 = 5_000;

/// One try of one record.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Attempt {
    /// The record's id, as text.
    pub record_id: String,
    /// The run-log row of the tick (or `backlog retry`) that tried it.
    pub run_id: i64,
    /// The tier's window, in seconds (0 for `backlog retry`).
    pub window_secs: u64,
    /// When its handler was started.
    #[serde(with = "chrono::serde::ts_milliseconds")]
    pub started: DateTime<Utc>,
    /// How long the handler took (for a batch, the batch).
    pub took_ms: u64,
    /// The status the tick wrote (or would have, for a lost mark).
    pub status: String,
    /// `success`, `error`, `mapped`, `timeout`, `crash`, `stopped` or `lost` (handled
    /// after the tick's hold lapsed: not marked).
    pub outcome: String,
    /// The exit code, or a batch answer's code.
    pub code: Option<i64>,
    /// The signal that killed the handler.
    pub signal: Option<i64>,
    /// A short account: `exit 3`, `timed out after 30s, killed`.
    pub detail: String,
    /// The tail of what the handler wrote (stdout, then stderr), or its answer's
    /// message, bounded (4 KiB).
    pub output: String,
}

/// Writes `attempts` (`lost[i]`: the mark of attempt i was not written) and keeps each
/// of their records' newest `max_per_record`.
pub fn write(
    sql: &mut dyn Sql,
    s: &str,
    table: &str,
    attempts: &[(&Attempt, bool)],
    max_per_record: u32,
) -> Result<(), StoreError> {
    const WIDTH: usize = 12;
    let context = "writing backlog_attempts";
    // The statement of a full chunk is built once: its text is the cache's key.
    let insert = |rows: usize| {
        format!(
            "INSERT INTO {s}backlog_attempts (table_name, record_id, run_id, window_secs, started_ms, took_ms, status, outcome, code, \"signal\", detail, output) VALUES {}",
            rows_of(rows, WIDTH, 1)
        )
    };
    let full = insert(ROWS_PER_INSERT.min(attempts.len()));
    for chunk in attempts.chunks(ROWS_PER_INSERT) {
        let mut params: Vec<Value> = Vec::with_capacity(chunk.len() * WIDTH);
        for (a, lost) in chunk {
            params.extend([
                table.into(),
                a.record_id.as_str().into(),
                a.run_id.into(),
                (a.window_secs as i64).into(),
                a.started.timestamp_millis().into(),
                (a.took_ms as i64).into(),
                a.status.as_str().into(),
                if *lost { "lost" } else { &a.outcome }.into(),
                a.code.into(),
                a.signal.into(),
                a.detail.as_str().into(),
                a.output.as_str().into(),
            ]);
        }
        let partial;
        let text = if chunk.len() == ROWS_PER_INSERT.min(attempts.len()) {
            &full
        } else {
            partial = insert(chunk.len());
            &partial
        };
        sql.execute(text, &params).map_err(failed(context))?;
    }
    // A record's attempts beyond its newest `max_per_record`, for the records just
    // written only: an index range each.
    let mut ids: Vec<&str> = attempts.iter().map(|(a, _)| a.record_id.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    for chunk in ids.chunks(500) {
        let mut params: Vec<Value> = vec![table.into(), i64::from(max_per_record).into()];
        params.extend(chunk.iter().map(|id| Value::from(*id)));
        let beyond = format!(
            "SELECT id FROM (
                 SELECT id, row_number() OVER (PARTITION BY record_id ORDER BY id DESC) AS n
                 FROM {s}backlog_attempts WHERE table_name = ?1 AND record_id IN ({})
             ) AS ranked WHERE n > ?2",
            numbered(3, chunk.len())
        );
        let rows = sql.query(&beyond, &params).map_err(failed(context))?;
        delete_ids(sql, s, &rows, context)?;
    }
    Ok(())
}

/// Deletes the attempts whose ids are the first values of `rows`, by their key. Read
/// first, then deleted by id, a delete locks only the rows it deletes: one that
/// chose its rows in a subquery locked every row it scanned on MariaDB, and two
/// runners writing marks deadlocked on each other's (error 1213).
fn delete_ids(
    sql: &mut dyn Sql,
    s: &str,
    rows: &[Vec<Value>],
    context: &str,
) -> Result<u64, StoreError> {
    let mut deleted = 0;
    for chunk in rows.chunks(1000) {
        let ids: Vec<Value> = chunk.iter().map(|r| Value::from(r[0].int())).collect();
        deleted += sql
            .execute(
                &format!(
                    "DELETE FROM {s}backlog_attempts WHERE id IN ({})",
                    numbered(1, ids.len())
                ),
                &ids,
            )
            .map_err(failed(context))?;
    }
    Ok(deleted)
}

/// Deletes up to `PRUNE_STEP` attempts of `table` started before `before`.
pub fn prune(
    sql: &mut dyn Sql,
    s: &str,
    table: &str,
    before: DateTime<Utc>,
) -> Result<u64, StoreError> {
    let context = "pruning backlog_attempts";
    let rows = sql
        .query(
            &format!(
                "SELECT id FROM {s}backlog_attempts WHERE table_name = ?1 AND started_ms < ?2
                 ORDER BY table_name, started_ms LIMIT ?3"
            ),
            &[
                table.into(),
                before.timestamp_millis().into(),
                PRUNE_STEP.into(),
            ],
        )
        .map_err(failed(context))?;
    delete_ids(sql, s, &rows, context)
}

/// Which attempts to read, newest first.
#[derive(Debug, Clone, Default)]
pub struct AttemptQuery {
    /// Only this record's (its id as text).
    pub record_id: Option<String>,
    /// Only these outcomes; empty: any but `success`.
    pub outcomes: Vec<String>,
    /// Only those of the tier with this window (in seconds).
    pub window_secs: Option<u64>,
    /// Only those started at or after this time.
    pub since: Option<DateTime<Utc>>,
    /// At most this many.
    pub limit: usize,
    /// After skipping this many, newest first (a page of a longer list).
    pub offset: usize,
    /// Successes too (when `outcomes` is empty).
    pub successes: bool,
}

/// (`signal` is quoted: MySQL reserves the word.)
const COLUMNS: &str = "record_id, run_id, window_secs, started_ms, took_ms, status, outcome, code, \"signal\", detail, output";

/// The `WHERE` clause of `query` on `table`'s attempts, and its values.
fn filter_of(table: &str, query: &AttemptQuery) -> (String, Vec<Value>) {
    let mut params: Vec<Value> = vec![table.into()];
    let mut filter = String::from("table_name = ?1");
    let mut bind = |clause: &str, value: Value, params: &mut Vec<Value>| {
        params.push(value);
        filter.push_str(&clause.replace('#', &format!("?{}", params.len())));
    };
    if let Some(id) = &query.record_id {
        bind(" AND record_id = #", id.as_str().into(), &mut params);
    }
    if let Some(w) = query.window_secs {
        bind(" AND window_secs = #", (w as i64).into(), &mut params);
    }
    if let Some(since) = query.since {
        bind(
            " AND started_ms >= #",
            since.timestamp_millis().into(),
            &mut params,
        );
    }
    if query.outcomes.is_empty() {
        if !query.successes {
            filter.push_str(&format!(" AND outcome NOT IN ({})", not_failures_sql()));
        }
    } else {
        let mut list = Vec::new();
        for o in &query.outcomes {
            params.push(o.as_str().into());
            list.push(format!("?{}", params.len()));
        }
        filter.push_str(&format!(" AND outcome IN ({})", list.join(", ")));
    }
    (filter, params)
}

/// The attempts of `table` that `query` asks for, newest first.
pub fn read(
    sql: &mut dyn Sql,
    s: &str,
    table: &str,
    query: &AttemptQuery,
) -> Result<Vec<Attempt>, StoreError> {
    let (filter, mut params) = filter_of(table, query);
    params.push((query.limit.max(1) as i64).into());
    params.push((query.offset as i64).into());
    let text = format!(
        "SELECT {COLUMNS} FROM {s}backlog_attempts WHERE {filter} ORDER BY id DESC LIMIT ?{} OFFSET ?{}",
        params.len() - 1,
        params.len()
    );
    let rows = sql
        .query(&text, &params)
        .map_err(failed("reading backlog_attempts"))?;
    Ok(rows.iter().map(|r| attempt(r)).collect())
}

/// How many attempts of `table` `query` picks, whatever its limit and offset.
pub fn count(
    sql: &mut dyn Sql,
    s: &str,
    table: &str,
    query: &AttemptQuery,
) -> Result<u64, StoreError> {
    let (filter, params) = filter_of(table, query);
    let rows = sql
        .query(
            &format!("SELECT count(*) FROM {s}backlog_attempts WHERE {filter}"),
            &params,
        )
        .map_err(failed("counting backlog_attempts"))?;
    Ok(rows.first().and_then(|r| r[0].int()).unwrap_or(0).max(0) as u64)
}

/// How many attempts of `table` ended in each outcome since `since`.
pub fn count_since(
    sql: &mut dyn Sql,
    s: &str,
    table: &str,
    since: DateTime<Utc>,
) -> Result<Vec<(String, u64)>, StoreError> {
    let rows = sql
        .query(
            &format!(
                "SELECT outcome, count(*) FROM {s}backlog_attempts WHERE table_name = ?1 AND started_ms >= ?2 GROUP BY outcome ORDER BY outcome"
            ),
            &[table.into(), since.timestamp_millis().into()],
        )
        .map_err(failed("reading backlog_attempts"))?;
    Ok(rows
        .iter()
        .map(|r| {
            (
                r[0].text().unwrap_or_default(),
                r[1].int().unwrap_or(0) as u64,
            )
        })
        .collect())
}

fn attempt(row: &[Value]) -> Attempt {
    let int = |i: usize| row[i].int();
    let text = |i: usize| row[i].text().unwrap_or_default();
    Attempt {
        record_id: text(0),
        run_id: int(1).unwrap_or(0),
        window_secs: int(2).unwrap_or(0) as u64,
        started: Utc
            .timestamp_millis_opt(int(3).unwrap_or(0))
            .single()
            .unwrap_or_default(),
        took_ms: int(4).unwrap_or(0) as u64,
        status: text(5),
        outcome: text(6),
        code: int(7),
        signal: int(8),
        detail: text(9),
        output: text(10),
    }
}

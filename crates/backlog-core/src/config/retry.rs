//! The optional `[retry]` section: a per-record backoff strategy, checked against
//! `backlog backoff`'s catalog when the file is loaded, and the two columns that count
//! a record's attempts and time its last one.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::KeyError;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRetry {
    strategy: String,
    #[serde(default)]
    params: BTreeMap<String, toml::Value>,
    count: String,
    since: String,
}

/// The optional `[retry]` section: a per-record strategy for tables that can have two
/// more columns, a count of attempts and the time of the last one. Without it the
/// schedule needs no column beyond id, status and inserted-at.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RetryConfig {
    /// A strategy name of `backlog backoff`.
    pub strategy: String,
    /// Its parameters as `name=value`.
    pub params: Vec<String>,
    /// The column counting the attempts (NULL counts as 0).
    pub count: String,
    /// The column holding the time of the last attempt.
    pub since: String,
}

impl RetryConfig {
    /// A `[retry]` section of `strategy` (a name of `backlog backoff`, with its default
    /// parameters), counting attempts in the column `count` and timing them in `since`.
    pub fn new(strategy: &str, count: &str, since: &str) -> RetryConfig {
        RetryConfig {
            strategy: strategy.into(),
            params: Vec::new(),
            count: count.into(),
            since: since.into(),
        }
    }
}

pub fn resolve_retry(raw: RawRetry) -> Result<RetryConfig, KeyError> {
    let params: Vec<String> = raw
        .params
        .iter()
        .map(|(k, v)| match v {
            toml::Value::String(s) => format!("{k}={s}"),
            other => format!("{k}={other}"),
        })
        .collect();
    crate::backoff::catalog::build(&raw.strategy, &params, 1.0)
        .map_err(|e| format!("retry: {e}"))?;
    for (key, value) in [("count", &raw.count), ("since", &raw.since)] {
        if value.trim().is_empty() {
            return Err(KeyError::new(format!(
                "retry.{key} is empty; give the column's name"
            )));
        }
    }
    Ok(RetryConfig {
        strategy: raw.strategy,
        params,
        count: raw.count,
        since: raw.since,
    })
}

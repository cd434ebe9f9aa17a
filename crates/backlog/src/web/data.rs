//! What the pages read: the status of the backlog, the ticks over time, the latest
//! failures, one record. Blocking calls, run on the blocking threads.

use chrono::{DateTime, Utc};

use crate::config::Config;
use crate::error::Error;
use crate::status::Status;
use crate::store::{Attempt, AttemptQuery};

/// The overview page's data.
pub(crate) struct Overview {
    pub(crate) config: Config,
    pub(crate) status: Status,
    pub(crate) failures: Vec<Attempt>,
}

pub(crate) fn overview(config: Config, now: DateTime<Utc>) -> Result<Overview, Error> {
    let mut store = crate::operate::inspected(&config)?;
    let store_err = Error::store(store.describe());
    let status = crate::status::status(&config, store.as_mut(), now).map_err(&store_err)?;
    let failures = store
        .attempts(&AttemptQuery {
            limit: 8,
            ..AttemptQuery::default()
        })
        .map_err(&store_err)?;
    Ok(Overview {
        config,
        status,
        failures,
    })
}

/// The failures page's filter.
#[derive(Debug, Clone, Default, serde::Deserialize)]
pub(crate) struct FailureFilter {
    /// A tier's window, like `7d`, or `retry`; empty: every tier.
    #[serde(default)]
    pub(crate) tier: String,
    /// An outcome (`error`, `timeout`…); empty: any but success.
    #[serde(default)]
    pub(crate) outcome: String,
    /// Which page of the list, from 1 (as text: a form flattened into another reads
    /// every value as text; one that is no number is the first page).
    #[serde(default)]
    pub(crate) page: String,
}

impl FailureFilter {
    /// The page asked for, from 1.
    pub(crate) fn page(&self) -> usize {
        self.page.trim().parse().unwrap_or(1).max(1)
    }

    /// The query it stands for, or why it stands for none.
    pub(crate) fn query(&self, limit: usize) -> Result<AttemptQuery, String> {
        let window_secs = match self.tier.trim() {
            "" => None,
            "retry" => Some(0),
            tier => Some(
                crate::duration::parse_span(tier)
                    .map_err(|e| {
                        format!(
                            "Tier: {tier:?} is neither a tier's window, like 7d, nor retry ({e})"
                        )
                    })?
                    .as_secs(),
            ),
        };
        let outcomes = match self.outcome.trim() {
            "" => Vec::new(),
            o => vec![o.to_string()],
        };
        Ok(AttemptQuery {
            window_secs,
            outcomes,
            limit,
            offset: (self.page() - 1).saturating_mul(limit),
            ..AttemptQuery::default()
        })
    }
}

/// The failed attempts that `filter` picks, newest first: its page of at most
/// `limit`, and how many it picks in all.
pub(crate) fn failures(
    config: &Config,
    filter: &FailureFilter,
    limit: usize,
) -> Result<(Vec<Attempt>, u64), Error> {
    let query = filter.query(limit).map_err(Error::Usage)?;
    let mut store = crate::operate::inspected(config)?;
    let store_err = Error::store(store.describe());
    let page = store.attempts(&query).map_err(&store_err)?;
    let total = store.attempt_count(&query).map_err(&store_err)?;
    Ok((page, total))
}

/// The records of the failures `filter` picks, on every page, newest failure first,
/// each once, at most `most`.
pub(crate) fn failed_records(
    config: &Config,
    filter: &FailureFilter,
    most: usize,
) -> Result<Vec<String>, Error> {
    const STEP: usize = 1000;
    let mut query = filter.query(STEP).map_err(Error::Usage)?;
    query.offset = 0;
    let mut store = crate::operate::inspected(config)?;
    let store_err = Error::store(store.describe());
    let mut seen = std::collections::HashSet::new();
    let mut ids = Vec::new();
    loop {
        let page = store.attempts(&query).map_err(&store_err)?;
        for a in &page {
            if seen.insert(a.record_id.clone()) {
                ids.push(a.record_id.clone());
                if ids.len() == most {
                    return Ok(ids);
                }
            }
        }
        if page.len() < STEP {
            return Ok(ids);
        }
        query.offset += STEP;
    }
}

//! What the pages read: the status of the backlog, the ticks over time, the latest
//! failures, one record. Blocking calls, run on the blocking threads.

use chrono::{DateTime, Utc};

use crate::error::Error;
use crate::operate::{ErrorText, attempts_holding};
use backlog::status::Status;
use backlog_core::config::Config;
use backlog_core::store::{Attempt, AttemptQuery};

/// The overview page's data.
pub(crate) struct Overview {
    pub(crate) config: Config,
    pub(crate) status: Status,
    pub(crate) failures: Vec<Attempt>,
}

pub(crate) fn overview(config: Config, now: DateTime<Utc>) -> Result<Overview, Error> {
    let mut store = crate::operate::inspected(&config)?;
    let store_err = Error::store(store.describe());
    let status = backlog::status::status(&config, store.as_mut(), now).map_err(&store_err)?;
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
    /// A text the failure's error holds, in any case (its detail or output, as
    /// `--error-contains` reads it); empty: any.
    #[serde(default)]
    pub(crate) error_contains: String,
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
                backlog_core::duration::parse_span(tier)
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

/// The failures `filter` picks, a page of them.
pub(crate) struct Failures {
    /// The page, newest first.
    pub(crate) attempts: Vec<Attempt>,
    /// How many the filter picks in all (among those read, when `bounded`).
    pub(crate) total: u64,
    /// A filter by error text read the newest `ATTEMPTS_READ` failures only, and more
    /// are kept: the total is of those.
    pub(crate) bounded: bool,
}

/// The failed attempts that `filter` picks, newest first: its page of at most
/// `limit`, and how many it picks in all. A filter by error text reads the attempts
/// through `--error-contains`'s own path (`operate::attempts_holding`), the newest
/// `ATTEMPTS_READ` at most; the others are counted by the database.
pub(crate) fn failures(
    config: &Config,
    filter: &FailureFilter,
    limit: usize,
) -> Result<Failures, Error> {
    let query = filter.query(limit).map_err(Error::Usage)?;
    let mut store = crate::operate::inspected(config)?;
    let store_err = Error::store(store.describe());
    let text = ErrorText::new(&filter.error_contains);
    if text.is_any() {
        let attempts = store.attempts(&query).map_err(&store_err)?;
        let total = store.attempt_count(&query).map_err(&store_err)?;
        return Ok(Failures {
            attempts,
            total,
            bounded: false,
        });
    }
    let (skip, mut attempts, mut total) = (query.offset as u64, Vec::new(), 0u64);
    let bounded = attempts_holding(store.as_mut(), &query, &text, &mut |_, a| {
        if total >= skip && attempts.len() < limit {
            attempts.push(a);
        }
        total += 1;
        Ok(true)
    })?;
    Ok(Failures {
        attempts,
        total,
        bounded,
    })
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
    let text = ErrorText::new(&filter.error_contains);
    if !text.is_any() {
        attempts_holding(store.as_mut(), &query, &text, &mut |_, a| {
            if seen.insert(a.record_id.clone()) {
                ids.push(a.record_id);
            }
            Ok(ids.len() < most)
        })?;
        return Ok(ids);
    }
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

/// The line that names a failure: the last line its handler wrote, without the name
/// of its stream (where a traceback
/// ends with its exception, and a command's last word usually is), else its detail
/// (`exit 3`, `timed out after 30s, killed`). What the lists show, and what failures
/// are grouped by.
pub(crate) fn error_line(a: &Attempt) -> &str {
    a.output
        .lines()
        .rev()
        // The stream a line came from (`[stderr] …`) is no part of what it says.
        .map(|l| {
            l.strip_prefix("[stdout] ")
                .or_else(|| l.strip_prefix("[stderr] "))
                .unwrap_or(l)
                .trim()
        })
        .find(|l| !l.is_empty())
        .unwrap_or(a.detail.trim())
}

/// The longest error line a group keeps (a longer one is cut, and the group's link
/// filters by what is kept).
pub(crate) const GROUP_LINE: usize = 200;

/// The failures of one error line.
pub(crate) struct ErrorGroup {
    pub(crate) line: String,
    pub(crate) count: u64,
    pub(crate) newest: DateTime<Utc>,
}

/// The failures `filter` picks, grouped by their error line (`error_line`), most
/// frequent first: the first `shown` groups, how many groups there are, how many
/// failures were read, and whether reading stopped at `ATTEMPTS_READ` with more kept.
pub(crate) struct ErrorGroups {
    pub(crate) groups: Vec<ErrorGroup>,
    pub(crate) distinct: usize,
    pub(crate) read: u64,
    pub(crate) bounded: bool,
}

pub(crate) fn error_groups(
    config: &Config,
    filter: &FailureFilter,
    shown: usize,
) -> Result<ErrorGroups, Error> {
    let query = filter.query(1).map_err(Error::Usage)?;
    let mut store = crate::operate::inspected(config)?;
    let text = ErrorText::new(&filter.error_contains);
    let mut by_line: std::collections::HashMap<String, ErrorGroup> = Default::default();
    let mut read = 0u64;
    let bounded = attempts_holding(store.as_mut(), &query, &text, &mut |_, a| {
        read += 1;
        let line = cut_at(error_line(&a), GROUP_LINE);
        // Newest first: a group's first failure is its newest.
        by_line
            .entry(line.to_string())
            .or_insert_with(|| ErrorGroup {
                line: line.to_string(),
                count: 0,
                newest: a.started,
            })
            .count += 1;
        Ok(true)
    })?;
    let distinct = by_line.len();
    let mut groups: Vec<ErrorGroup> = by_line.into_values().collect();
    groups.sort_by(|a, b| b.count.cmp(&a.count).then(b.newest.cmp(&a.newest)));
    groups.truncate(shown);
    Ok(ErrorGroups {
        groups,
        distinct,
        read,
        bounded,
    })
}

/// `text`'s first `most` characters.
fn cut_at(text: &str, most: usize) -> &str {
    text.char_indices()
        .nth(most)
        .map_or(text, |(at, _)| &text[..at])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed(detail: &str, output: &str) -> Attempt {
        Attempt {
            record_id: "1".into(),
            run_id: 1,
            window_secs: 86_400,
            started: Utc::now(),
            took_ms: 1,
            status: "ERROR".into(),
            outcome: "error".into(),
            code: Some(1),
            signal: None,
            detail: detail.into(),
            output: output.into(),
        }
    }

    #[test]
    fn a_failure_is_named_by_the_last_line_its_handler_wrote() {
        let traceback = "[stderr] Traceback (most recent call last):\n[stderr]   File \"h.py\"\n[stderr] ConnectionError: refused\n\n";
        assert_eq!(
            error_line(&failed("exit 1", traceback)),
            "ConnectionError: refused"
        );
        assert_eq!(error_line(&failed("exit 3", "")), "exit 3");
        assert_eq!(error_line(&failed("exit 3", "[stdout]  \n")), "exit 3");
        assert_eq!(cut_at("ééé", 2), "éé");
        assert_eq!(cut_at("ab", 5), "ab");
    }
}

//! The `[history]` section: how long the tool keeps the attempts of each record (what
//! a handler said when it failed), and how many.

use std::time::Duration;

use serde::Deserialize;

use super::KeyError;
use crate::duration::{self, Range};

/// The most attempts kept of one record.
pub const MAX_PER_RECORD: u32 = 10_000;

/// `history.keep`: none (off) up to 100 years.
pub const KEEP: Range = Range::up_to(duration::LONGEST);

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawHistory {
    keep: Option<String>,
    max_per_record: Option<i64>,
    record: Option<HistoryRecord>,
}

/// Which attempts are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum HistoryRecord {
    /// Only those that did not succeed: what a person on call asks about. A tick of
    /// successes writes nothing more than its marks.
    Failures,
    /// Every attempt, successes too (one more row a record, in the marks' transaction).
    All,
}

/// The `[history]` section, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct HistoryConfig {
    /// How long an attempt is kept; zero keeps none (no attempts are written).
    pub keep: Duration,
    /// The newest this many attempts of a record are kept.
    pub max_per_record: u32,
    /// Whether failures only, or every attempt, are kept.
    pub record: HistoryRecord,
}

impl Default for HistoryConfig {
    fn default() -> Self {
        HistoryConfig {
            keep: Duration::from_secs(30 * 86_400),
            max_per_record: 20,
            record: HistoryRecord::Failures,
        }
    }
}

impl HistoryConfig {
    /// Whether attempts are written at all.
    pub fn on(&self) -> bool {
        !self.keep.is_zero()
    }
}

pub(super) fn resolve(raw: Option<RawHistory>) -> Result<HistoryConfig, KeyError> {
    let mut history = HistoryConfig::default();
    let Some(raw) = raw else {
        return Ok(history);
    };
    if let Some(keep) = raw.keep {
        history.keep = KEEP
            .parse(&keep)
            .map_err(|e| format!("history.keep: {e}"))?;
    }
    match raw.max_per_record {
        Some(n) if (1..=i64::from(MAX_PER_RECORD)).contains(&n) => {
            history.max_per_record = n as u32
        }
        Some(n) => {
            return Err(KeyError::new(format!(
                "history.max_per_record: {n} is out of range; use 1 to {MAX_PER_RECORD} attempts a record"
            )));
        }
        None => {}
    }
    history.record = raw.record.unwrap_or(history.record);
    Ok(history)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(keep: Option<&str>, max: Option<i64>) -> Option<RawHistory> {
        Some(RawHistory {
            keep: keep.map(String::from),
            max_per_record: max,
            record: None,
        })
    }

    #[test]
    fn defaults_keep_failures_for_thirty_days_twenty_a_record() {
        let h = resolve(None).unwrap();
        assert_eq!(h.keep, Duration::from_secs(30 * 86_400));
        assert_eq!(h.max_per_record, 20);
        assert_eq!(h.record, HistoryRecord::Failures);
        assert!(h.on());
    }

    #[test]
    fn zero_keeps_none_and_bad_values_name_the_key() {
        assert!(!resolve(raw(Some("0"), None)).unwrap().on());
        let e = resolve(raw(None, Some(0))).unwrap_err().message;
        assert!(
            e.starts_with("history.max_per_record: 0 is out of range"),
            "{e}"
        );
        let e = resolve(raw(Some("forever"), None)).unwrap_err().message;
        assert!(e.starts_with("history.keep:"), "{e}");
    }
}

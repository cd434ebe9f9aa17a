//! Tiers, their age bands and cadences: what a tick of a given window selects.
//!
//! A `Schedule` is only ever built by `config` after validation, so tiers here are
//! sorted by strictly increasing window and every cadence parsed; nothing below checks
//! again.

use std::fmt;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::duration;

/// Whether tiers select disjoint age bands or everything younger than their window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum BandMode {
    /// Tier k covers ages in (window[k-1], window[k]]; tier 1 from age 0.
    #[default]
    Disjoint,
    /// Every tier covers ages in [0, window]: the literal reading of the schedule.
    Cumulative,
}

/// How often a tier fires.
#[derive(Debug, Clone)]
pub enum Cadence {
    /// A fixed interval (`every = "5m"`).
    Every(Duration),
    /// A crontab(5) expression (`cron = "0 * * * *"`), kept with its text.
    Cron(Box<croner::Cron>, String),
}

impl fmt::Display for Cadence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cadence::Every(d) => write!(f, "every {}", duration::compact(*d)),
            Cadence::Cron(_, text) => write!(f, "cron \"{text}\""),
        }
    }
}

/// Parses a crontab(5) expression: five fields, no seconds or years.
pub fn parse_cron(text: &str) -> Result<croner::Cron, String> {
    croner::parser::CronParser::builder()
        .seconds(croner::parser::Seconds::Disallowed)
        .year(croner::parser::Year::Disallowed)
        .build()
        .parse(text)
        .map_err(|e| format!("{text:?} is not a crontab(5) expression ({e}); write five fields like \"*/5 * * * *\" or an alias like \"@hourly\""))
}

/// One tier of the schedule.
#[derive(Debug, Clone)]
pub struct Tier {
    pub window: Duration,
    pub cadence: Cadence,
    /// The most records one tick of this tier hands over; the schedule's limit if absent.
    pub limit: Option<u64>,
}

/// A validated schedule.
#[derive(Debug, Clone)]
pub struct Schedule {
    /// Sorted by strictly increasing window.
    pub tiers: Vec<Tier>,
    pub bands: BandMode,
    /// The per-tick limit of tiers that set none.
    pub limit: u64,
}

/// An age band: records whose age is in `(younger, older]`, or `[0, older]` when
/// `younger` is zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Band {
    pub younger: Duration,
    pub older: Duration,
}

/// The inserted-at instants a band covers at a given `now`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    /// Inclusive: records inserted at or after this.
    pub from: DateTime<Utc>,
    /// Records inserted before this (at or before when `to_inclusive`).
    pub to: DateTime<Utc>,
    pub to_inclusive: bool,
}

impl Band {
    /// The instants this band covers at `now`. Age 0 is included in a band that starts
    /// at 0 so a record is tried from the moment it exists; a record stamped in the
    /// future (clock skew) waits until it is not.
    pub fn span(&self, now: DateTime<Utc>) -> Span {
        let back =
            |d: Duration| now - chrono::Duration::from_std(d).unwrap_or(chrono::Duration::MAX);
        Span {
            from: back(self.older),
            to: back(self.younger),
            to_inclusive: self.younger.is_zero(),
        }
    }
}

impl fmt::Display for Band {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.younger.is_zero() {
            write!(f, "ages 0 to {}", duration::compact(self.older))
        } else {
            write!(
                f,
                "ages over {} up to {}",
                duration::compact(self.younger),
                duration::compact(self.older)
            )
        }
    }
}

impl Schedule {
    /// The tier with this window and its 1-based number.
    pub fn tier(&self, window: Duration) -> Option<(usize, &Tier)> {
        self.tiers
            .iter()
            .enumerate()
            .find(|(_, t)| t.window == window)
            .map(|(i, t)| (i + 1, t))
    }

    /// The band a tick of `window` covers. A window that no tier has covers `[0, window]`.
    pub fn band(&self, window: Duration) -> Band {
        let younger = match (
            self.bands,
            self.tiers.iter().position(|t| t.window == window),
        ) {
            (BandMode::Disjoint, Some(i)) if i > 0 => self.tiers[i - 1].window,
            _ => Duration::ZERO,
        };
        Band {
            younger,
            older: window,
        }
    }

    /// The limit a tick of `window` uses.
    pub fn limit(&self, window: Duration) -> u64 {
        self.tier(window)
            .and_then(|(_, t)| t.limit)
            .unwrap_or(self.limit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schedule(bands: BandMode) -> Schedule {
        let tier = |d: u64| Tier {
            window: Duration::from_secs(d * 86_400),
            cadence: Cadence::Every(Duration::from_secs(300)),
            limit: None,
        };
        Schedule {
            tiers: vec![tier(1), tier(7), tier(14)],
            bands,
            limit: 100,
        }
    }

    #[test]
    fn disjoint_bands_start_at_the_previous_window() {
        let s = schedule(BandMode::Disjoint);
        assert_eq!(
            s.band(Duration::from_secs(86_400)).to_string(),
            "ages 0 to 1d"
        );
        assert_eq!(
            s.band(Duration::from_secs(7 * 86_400)).to_string(),
            "ages over 1d up to 7d"
        );
        assert_eq!(
            s.band(Duration::from_secs(10 * 86_400)).to_string(),
            "ages 0 to 10d"
        );
    }

    #[test]
    fn cumulative_bands_start_at_zero() {
        let s = schedule(BandMode::Cumulative);
        assert_eq!(
            s.band(Duration::from_secs(14 * 86_400)).to_string(),
            "ages 0 to 14d"
        );
    }

    #[test]
    fn a_span_includes_its_older_edge_and_excludes_its_younger_one() {
        let now = DateTime::parse_from_rfc3339("2026-11-21T12:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let span = schedule(BandMode::Disjoint)
            .band(Duration::from_secs(7 * 86_400))
            .span(now);
        assert_eq!(span.from.to_rfc3339(), "2026-11-14T12:00:00+00:00");
        assert_eq!(span.to.to_rfc3339(), "2026-11-20T12:00:00+00:00");
        assert!(!span.to_inclusive);
    }

    #[test]
    fn cron_expressions_are_five_field_crontab() {
        assert!(parse_cron("*/5 * * * *").is_ok());
        assert!(parse_cron("@hourly").is_ok());
        let e = parse_cron("0 */5 * * * *").unwrap_err();
        assert!(
            e.starts_with("\"0 */5 * * * *\" is not a crontab(5) expression"),
            "{e}"
        );
    }
}

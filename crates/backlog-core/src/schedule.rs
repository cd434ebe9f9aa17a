//! Tiers, their age bands and cadences: what a tick of a given window selects.
//!
//! A `Schedule` is only ever built by `config` after validation, so tiers here are
//! sorted by strictly increasing window and every cadence parsed; nothing below checks
//! again. Cadences, and the slots that say when a tier is due, are in
//! `schedule/cadence.rs`.

use std::fmt;
use std::time::Duration;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use serde::{Deserialize, Serialize};

use crate::duration;

mod cadence;

pub use cadence::Cadence;
pub use cadence::CronLine;
pub use cadence::{CadenceError, due_slack, parse_cron};

/// Whether tiers select disjoint age bands or everything younger than their window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, Default)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum BandMode {
    /// Tier k covers ages in `(window[k-1], window[k]]`; tier 1 from age 0.
    #[default]
    Disjoint,
    /// Every tier covers ages in [0, window]: the literal reading of the schedule.
    Cumulative,
}

/// The per-tick limit when neither the tier nor the schedule sets one.
pub const DEFAULT_LIMIT: u64 = 10_000;

/// One tier of the schedule.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Tier {
    /// How far back the tier reaches: records up to this age are in its band.
    pub window: Duration,
    /// When its ticks come: every so often, or a cron expression.
    pub cadence: Cadence,
    /// The most records one tick of this tier hands over; the schedule's limit if absent.
    pub limit: Option<u64>,
    /// The daemon waits a random delay up to this before each tick, so hosts sharing a
    /// schedule do not all fire in the same second.
    pub jitter: Duration,
    /// Each tick takes the records of its band whose id hashes to the tick's share:
    /// 1/`spread` of the band per tick, the same records on the same ticks, so records
    /// that failed together are retried apart, with no column to remember it.
    pub spread: u32,
}

impl Tier {
    /// A tier of `window` whose ticks come at `cadence`: no limit of its own, no
    /// jitter, no spread (change those fields after).
    pub fn new(window: Duration, cadence: Cadence) -> Tier {
        Tier {
            window,
            cadence,
            limit: None,
            jitter: Duration::ZERO,
            spread: 1,
        }
    }

    /// Whether a tick of this tier at `now` takes record `id` (always, without spread).
    pub fn takes(&self, id: impl fmt::Display, now: DateTime<Utc>) -> bool {
        self.takes_all()
            || share(id, self.spread) == self.cadence.tick_number(now) % u64::from(self.spread)
    }

    /// Whether its ticks take every record of their band: no spread.
    pub fn takes_all(&self) -> bool {
        self.spread <= 1
    }
}

/// Which of `k` shares a record id falls in: FNV-1a over the id's text, stable across
/// processes, hosts and releases (std's hasher is none of these). The text is hashed as
/// it is formatted: a tick asks this of every record, and a `String` each cost more
/// than the hash.
pub fn share(id: impl fmt::Display, k: u32) -> u64 {
    struct Fnv(u64);
    impl fmt::Write for Fnv {
        fn write_str(&mut self, s: &str) -> fmt::Result {
            for b in s.bytes() {
                self.0 ^= u64::from(b);
                self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
            }
            Ok(())
        }
    }
    let mut hash = Fnv(0xcbf2_9ce4_8422_2325);
    fmt::Write::write_fmt(&mut hash, format_args!("{id}")).expect("hashing never fails");
    hash.0 % u64::from(k.max(1))
}

/// A validated schedule.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Schedule {
    /// Sorted by strictly increasing window.
    pub tiers: Vec<Tier>,
    /// Whether each tier's band starts where the previous tier's window ends (disjoint),
    /// or at age 0 (cumulative).
    pub bands: BandMode,
    /// The per-tick limit of tiers that set none.
    pub limit: u64,
    /// The time zone cron expressions are read in.
    pub timezone: Tz,
}

/// An age band: records whose age is in `(younger, older]`, or `[0, older]` when
/// `younger` is zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Band {
    /// Records older than this (or from age 0 when it is zero).
    pub younger: Duration,
    /// Records up to this age, inclusive.
    pub older: Duration,
}

/// The inserted-at instants a band covers at a given `now`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    /// Inclusive: records inserted at or after this.
    pub from: DateTime<Utc>,
    /// Records inserted before this (at or before when `to_inclusive`).
    pub to: DateTime<Utc>,
    /// Set when the band starts at age 0, so a record is in it from the moment it exists.
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

/// "1 tier", "6 tiers".
pub fn tiers(n: usize) -> String {
    crate::plural::count(n, "tier", "tiers")
}

impl Schedule {
    /// A schedule of `tiers` (sorted by strictly increasing window, as a schedule
    /// file's are checked to be), in disjoint bands, with the file's default limit per
    /// tick and cron expressions read in UTC (change those fields after).
    pub fn new(tiers: Vec<Tier>) -> Schedule {
        Schedule {
            tiers,
            bands: BandMode::Disjoint,
            limit: DEFAULT_LIMIT,
            timezone: Tz::UTC,
        }
    }

    /// The tiers' windows as the file writes them, in order: `1d`, `7d`, `30d`. For
    /// the messages and pages that name the windows a user may give.
    pub fn windows(&self) -> Vec<String> {
        (self.tiers.iter())
            .map(|t| duration::compact(t.window))
            .collect()
    }

    /// `; did you mean 7d?` after a message about a `window` that is no tier's: the
    /// tier's window nearest it, within a factor of two (8d means 7d, 30h means 1d; 3d
    /// between 1d and 7d means neither), or nothing.
    pub fn did_you_mean_window(&self, window: Duration) -> String {
        let ratio = |t: &Tier| (window.as_secs_f64() / t.window.as_secs_f64()).ln().abs();
        self.tiers
            .iter()
            .filter(|t| !t.window.is_zero() && !window.is_zero() && ratio(t) < 2f64.ln())
            .min_by(|a, b| ratio(a).total_cmp(&ratio(b)))
            .map_or_else(String::new, |t| {
                format!("; did you mean {}?", duration::compact(t.window))
            })
    }

    /// "1 tier", "6 tiers": how many tiers, for messages.
    pub fn tier_count(&self) -> String {
        tiers(self.tiers.len())
    }

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

/// The first tick at or after `from` that tries a record inserted at `inserted`, and
/// its tier's number. With an `id`, a spread tier only counts the ticks that take it.
pub fn next_attempt(
    schedule: &Schedule,
    inserted: DateTime<Utc>,
    id: Option<&str>,
    from: DateTime<Utc>,
) -> Option<(usize, DateTime<Utc>)> {
    let to = |d: Duration| chrono::Duration::from_std(d).unwrap_or(chrono::Duration::MAX);
    let ms = chrono::Duration::milliseconds(1);
    let mut best: Option<(usize, DateTime<Utc>)> = None;
    for (i, tier) in schedule.tiers.iter().enumerate() {
        let band = schedule.band(tier.window);
        // In the band while its age is in (younger, older], or [0, older].
        let enters = if band.younger.is_zero() {
            inserted
        } else {
            inserted + to(band.younger) + ms
        };
        let leaves = inserted + to(band.older);
        let mut slot = tier.cadence.next_slot(enters.max(from) - ms);
        // A spread tier takes a given record once every `spread` ticks.
        for _ in 0..=tier.spread {
            let Some(t) = slot.filter(|t| *t <= leaves) else {
                break;
            };
            if id.is_none_or(|id| tier.takes(id, t)) {
                if best.is_none_or(|(_, b)| t < b) {
                    best = Some((i + 1, t));
                }
                break;
            }
            slot = tier.cadence.next_slot(t);
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schedule(bands: BandMode) -> Schedule {
        let tier = |d: u64| Tier {
            window: Duration::from_secs(d * 86_400),
            cadence: Cadence::Every(Duration::from_secs(300)),
            limit: None,
            jitter: Duration::ZERO,
            spread: 1,
        };
        Schedule {
            tiers: vec![tier(1), tier(7), tier(14)],
            bands,
            limit: 100,
            timezone: Tz::UTC,
        }
    }

    #[test]
    fn a_spread_tier_takes_each_record_on_one_tick_in_k() {
        let tier = Tier {
            spread: 4,
            ..schedule(BandMode::Disjoint).tiers[0].clone()
        };
        let start = at("2026-11-21T10:00:00Z");
        for id in ["1", "2", "42", "order-9"] {
            let ticks: Vec<bool> = (0..8)
                .map(|i| tier.takes(id, start + chrono::Duration::minutes(5 * i)))
                .collect();
            assert_eq!(
                ticks.iter().filter(|t| **t).count(),
                2,
                "{id}: twice in eight 5-minute ticks"
            );
            assert_eq!(ticks[..4], ticks[4..], "{id}: the same ticks every cycle");
        }
        let shares: std::collections::BTreeSet<u64> = (0..100).map(|i| share(i, 4)).collect();
        assert_eq!(shares.len(), 4, "ids spread over every share");
        // FNV-1a of the id's text: these values must never change between releases, or
        // upgrading would move records to other ticks.
        // (The figures are Python's: FNV-1a 64 of the text, modulo k.)
        assert_eq!(share("42", u32::MAX), 3_164_606_506);
        assert_eq!(
            share(crate::record::Scalar::Int(42), u32::MAX),
            3_164_606_506
        );
        assert_eq!(share("order-9", u32::MAX), 329_470_837);
        assert_eq!(share("order-9", 4), 1);
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

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }
}

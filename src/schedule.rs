//! Tiers, their age bands and cadences: what a tick of a given window selects.
//!
//! A `Schedule` is only ever built by `config` after validation, so tiers here are
//! sorted by strictly increasing window and every cadence parsed; nothing below checks
//! again.

use std::fmt;
use std::time::Duration;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use serde::{Deserialize, Serialize};

use crate::duration;

/// Whether tiers select disjoint age bands or everything younger than their window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum BandMode {
    /// Tier k covers ages in `(window[k-1], window[k]]`; tier 1 from age 0.
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
    /// A crontab(5) expression (`cron = "0 * * * *"`), kept with its text, read in
    /// the schedule's time zone (UTC unless the file names one).
    Cron(Box<croner::Cron>, String, Tz),
}

impl fmt::Display for Cadence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cadence::Every(d) => write!(f, "every {}", duration::compact(*d)),
            Cadence::Cron(_, text, Tz::UTC) => write!(f, "cron \"{text}\""),
            Cadence::Cron(_, text, tz) => write!(f, "cron \"{text}\" ({tz})"),
        }
    }
}

/// The first time `cron` fires after `t` (at `t` too when `inclusive`), read in `tz`.
fn cron_after(
    cron: &croner::Cron,
    tz: Tz,
    t: DateTime<Utc>,
    inclusive: bool,
) -> Option<DateTime<Utc>> {
    cron.find_next_occurrence(&t.with_timezone(&tz), inclusive)
        .ok()
        .map(|n| n.with_timezone(&Utc))
}

/// The last time `cron` fired at or before `t`, read in `tz`.
fn cron_before(cron: &croner::Cron, tz: Tz, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
    cron.find_previous_occurrence(&t.with_timezone(&tz), true)
        .ok()
        .map(|n| n.with_timezone(&Utc))
}

/// How early a tick may come and still count for its slot: cron starts a job a moment
/// after the minute, so one tick's clock is that moment later than the next one's slot
/// would suggest, and a clock a little ahead must not make a tier skip its slot.
pub const DUE_SLACK: Duration = Duration::from_secs(30);

/// `DUE_SLACK` as chrono counts spans.
pub fn due_slack() -> chrono::Duration {
    chrono::Duration::seconds(DUE_SLACK.as_secs() as i64)
}

/// The periods cron states exactly that a check for a due tick can run at, largest
/// first (minutes). Each divides an hour, so a check line is a plain `*/m` line.
const CHECK_PERIODS_MIN: [u64; 12] = [60, 30, 20, 15, 12, 10, 6, 5, 4, 3, 2, 1];

/// How a tier is written as a crontab(5) line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CronLine {
    /// Cron fires the tier exactly: the line runs the tick itself.
    Exact(String),
    /// Cron cannot state the cadence: the line runs at this expression and the tick
    /// runs with `--if-due`, which exits at once unless the tier is due.
    IfDue(String),
}

impl Cadence {
    /// Whether a tick is due at `now` when the tier's previous tick ran at `last`: its
    /// next slot after the one that tick belonged to has come (less `DUE_SLACK`). A
    /// tier that never ran is due. See `next_due`.
    pub fn is_due(&self, last: Option<DateTime<Utc>>, now: DateTime<Utc>) -> bool {
        let Some(last) = last else { return true };
        self.next_due(last)
            .is_some_and(|due| due <= now + due_slack())
    }

    /// When the tier is next due after a tick at `last`: the first of its slots after
    /// the slot that tick belonged to. The one answer `--if-due`, `status`, `explain`
    /// and the daemon all give: slots are the cron times, or for an interval its
    /// multiples from the Unix epoch (as cron's own `*/5` lines fire), so a tick that
    /// ran late, or by hand, does not move the tier's later ticks. A tick up to
    /// `DUE_SLACK` before a slot (a clock a little ahead) counts for that slot.
    pub fn next_due(&self, last: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let slot = self.previous_slot(last + due_slack())?;
        self.next_slot(slot)
    }

    /// The first time the tier fires strictly after `t`. Intervals are anchored to the
    /// Unix epoch, so a restart does not shift them and every host agrees.
    pub fn next_slot(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match self {
            Cadence::Every(d) => {
                let step = d.as_millis().max(1) as i64;
                let ms = t.timestamp_millis();
                DateTime::from_timestamp_millis((ms.div_euclid(step) + 1) * step)
            }
            Cadence::Cron(cron, _, tz) => cron_after(cron, *tz, t, false),
        }
    }

    /// The last time the tier fired at or before `t`.
    pub fn previous_slot(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match self {
            Cadence::Every(d) => {
                let step = d.as_millis().max(1) as i64;
                DateTime::from_timestamp_millis(t.timestamp_millis().div_euclid(step) * step)
            }
            Cadence::Cron(cron, _, tz) => cron_before(cron, *tz, t),
        }
    }

    /// The number of the tick at `now`: slots counted from the Unix epoch for an interval;
    /// minutes since the epoch for a cron expression (its ticks fall on whole minutes).
    pub fn tick_number(&self, now: DateTime<Utc>) -> u64 {
        match self {
            Cadence::Every(d) => {
                (now.timestamp_millis().max(0) as u64) / (d.as_millis().max(1) as u64)
            }
            Cadence::Cron(..) => now.timestamp().max(0) as u64 / 60,
        }
    }

    /// The crontab(5) line for this cadence. Intervals that divide an hour or a day
    /// are exact; others are checked at the largest period that divides them (so the
    /// period stays exact) and at most an hour apart (so a host that was down catches up
    /// within the hour). Cron expressions are checked every minute so they are read in
    /// UTC, whatever time zone the host's cron runs in.
    pub fn cron_line(&self) -> Result<CronLine, String> {
        let d = match self {
            Cadence::Every(d) => *d,
            Cadence::Cron(..) => return Ok(CronLine::IfDue("* * * * *".into())),
        };
        let secs = d.as_secs();
        if d.subsec_nanos() != 0 || !secs.is_multiple_of(60) {
            return Err(format!(
                "every {} is not a whole number of minutes, the smallest step cron has; run `backlog daemon` instead",
                duration::compact(d)
            ));
        }
        let minutes = secs / 60;
        let exact = match minutes {
            1 => Some("* * * * *".to_string()),
            m if m < 60 && 60 % m == 0 => Some(format!("*/{m} * * * *")),
            60 => Some("0 * * * *".to_string()),
            m if m % 60 == 0 && m < 1440 && 1440 % m == 0 => Some(format!("0 */{} * * *", m / 60)),
            1440 => Some("0 0 * * *".to_string()),
            _ => None,
        };
        Ok(match exact {
            Some(line) => CronLine::Exact(line),
            None => {
                let check = CHECK_PERIODS_MIN
                    .iter()
                    .find(|p| minutes.is_multiple_of(**p))
                    .expect("1 divides every whole number of minutes");
                CronLine::IfDue(if *check == 60 {
                    "0 * * * *".to_string()
                } else if *check == 1 {
                    "* * * * *".to_string()
                } else {
                    format!("*/{check} * * * *")
                })
            }
        })
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
    if n == 1 {
        "1 tier".to_string()
    } else {
        format!("{n} tiers")
    }
}

impl Schedule {
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

    fn cron(text: &str) -> Cadence {
        Cadence::Cron(Box::new(parse_cron(text).unwrap()), text.into(), Tz::UTC)
    }

    /// The next `n` times an expression fires after `from`, as `Www dd HH:MM`.
    fn fires(text: &str, from: &str, n: usize) -> Vec<String> {
        let c = parse_cron(text).unwrap();
        let mut t = at(from);
        (0..n)
            .map(|_| {
                t = c.find_next_occurrence(&t, false).unwrap();
                t.format("%a %d %H:%M").to_string()
            })
            .collect()
    }

    // 2026-11-21 is a Saturday.
    #[test]
    fn weekdays_zero_and_seven_are_both_sunday() {
        assert_eq!(
            fires("0 9 * * 0", "2026-11-21T00:00:00Z", 2),
            ["Sun 22 09:00", "Sun 29 09:00"]
        );
        assert_eq!(
            fires("0 9 * * 7", "2026-11-21T00:00:00Z", 2),
            ["Sun 22 09:00", "Sun 29 09:00"]
        );
    }

    #[test]
    fn weekday_ranges_and_names_count_from_monday_as_1() {
        assert_eq!(
            fires("0 9 * * 1-5", "2026-11-21T00:00:00Z", 3),
            ["Mon 23 09:00", "Tue 24 09:00", "Wed 25 09:00"]
        );
        assert_eq!(
            fires("0 9 * * mon-fri", "2026-11-21T00:00:00Z", 1),
            ["Mon 23 09:00"]
        );
        assert_eq!(
            fires("30 7 1 jan *", "2026-11-21T00:00:00Z", 1),
            ["Fri 01 07:30"]
        );
    }

    #[test]
    fn aliases_are_accepted() {
        assert_eq!(
            fires("@hourly", "2026-11-21T10:30:00Z", 2),
            ["Sat 21 11:00", "Sat 21 12:00"]
        );
        assert_eq!(fires("@daily", "2026-11-21T10:30:00Z", 1), ["Sun 22 00:00"]);
        assert_eq!(
            fires("@weekly", "2026-11-21T10:30:00Z", 1),
            ["Sun 22 00:00"]
        );
    }

    #[test]
    fn day_of_month_or_day_of_week_when_both_are_restricted() {
        // The 13th of a month, and every Friday: not only Fridays the 13th.
        assert_eq!(
            fires("0 0 13 * 5", "2026-11-21T00:00:00Z", 4),
            [
                "Fri 27 00:00",
                "Fri 04 00:00",
                "Fri 11 00:00",
                "Sun 13 00:00"
            ]
        );
    }

    #[test]
    fn steps_and_lists() {
        assert_eq!(
            fires("*/20 8,17 * * *", "2026-11-21T08:10:00Z", 3),
            ["Sat 21 08:20", "Sat 21 08:40", "Sat 21 17:00"]
        );
    }

    #[test]
    fn a_named_time_zone_moves_cron_times_and_follows_daylight_saving() {
        let paris = Cadence::Cron(
            Box::new(parse_cron("0 8 * * *").unwrap()),
            "0 8 * * *".into(),
            "Europe/Paris".parse().unwrap(),
        );
        // 08:00 in Paris is 07:00 UTC in winter and 06:00 UTC in summer.
        assert_eq!(
            paris.next_slot(at("2026-11-21T00:00:00Z")),
            Some(at("2026-11-21T07:00:00Z"))
        );
        assert_eq!(
            paris.next_slot(at("2026-07-01T00:00:00Z")),
            Some(at("2026-07-01T06:00:00Z"))
        );
        assert_eq!(paris.to_string(), "cron \"0 8 * * *\" (Europe/Paris)");
    }

    #[test]
    fn intervals_are_due_at_their_next_epoch_slot_give_or_take_the_slack() {
        // 96-hour slots from the Unix epoch fall on 2026-11-19 and 2026-11-23 at midnight.
        let every = Cadence::Every(Duration::from_secs(96 * 3600));
        let last = at("2026-11-19T00:00:01Z");
        assert!(every.is_due(None, last));
        assert!(!every.is_due(Some(last), at("2026-11-22T23:00:00Z")));
        assert!(
            every.is_due(Some(last), at("2026-11-22T23:59:40Z")),
            "within the slack of cron's start-up"
        );
        assert_eq!(every.next_due(last), Some(at("2026-11-23T00:00:00Z")));
        assert_eq!(
            every.next_due(at("2026-11-21T15:00:00Z")),
            Some(at("2026-11-23T00:00:00Z")),
            "a tick that ran late, or by hand, does not move the next one"
        );
        assert_eq!(
            every.next_due(at("2026-11-22T23:59:50Z")),
            Some(at("2026-11-27T00:00:00Z")),
            "a clock a little ahead counts for the coming slot"
        );
        // The same instant as `explain` and the daemon name: the next slot.
        assert_eq!(every.next_due(last), every.next_slot(last));
    }

    #[test]
    fn a_cron_tier_is_due_once_after_a_missed_time() {
        let c = cron("0 8 * * *");
        assert!(!c.is_due(Some(at("2026-11-21T08:00:00Z")), at("2026-11-21T20:00:00Z")));
        assert!(
            c.is_due(Some(at("2026-11-18T08:00:00Z")), at("2026-11-21T07:00:00Z")),
            "down for days: due"
        );
    }

    #[test]
    fn interval_slots_are_anchored_to_the_epoch() {
        let every = Cadence::Every(Duration::from_secs(96 * 3600));
        // 96h slots: the epoch plus multiples of four days (2026-11-19 is day 20776 = 4 × 5194).
        assert_eq!(
            every.next_slot(at("2026-11-21T10:00:00Z")),
            Some(at("2026-11-23T00:00:00Z"))
        );
        assert_eq!(
            every.previous_slot(at("2026-11-21T10:00:00Z")),
            Some(at("2026-11-19T00:00:00Z"))
        );
        let five = Cadence::Every(Duration::from_secs(300));
        assert_eq!(
            five.next_slot(at("2026-11-21T10:05:00Z")),
            Some(at("2026-11-21T10:10:00Z"))
        );
        assert_eq!(
            five.previous_slot(at("2026-11-21T10:05:00Z")),
            Some(at("2026-11-21T10:05:00Z"))
        );
        assert_eq!(
            cron("0 8 * * *").previous_slot(at("2026-11-21T07:00:00Z")),
            Some(at("2026-11-20T08:00:00Z"))
        );
    }

    #[test]
    fn cron_lines_of_intervals() {
        let line = |secs: u64| Cadence::Every(Duration::from_secs(secs)).cron_line();
        assert_eq!(line(60), Ok(CronLine::Exact("* * * * *".into())));
        assert_eq!(line(300), Ok(CronLine::Exact("*/5 * * * *".into())));
        assert_eq!(line(3600), Ok(CronLine::Exact("0 * * * *".into())));
        assert_eq!(line(12 * 3600), Ok(CronLine::Exact("0 */12 * * *".into())));
        assert_eq!(line(86_400), Ok(CronLine::Exact("0 0 * * *".into())));
        assert_eq!(line(96 * 3600), Ok(CronLine::IfDue("0 * * * *".into())));
        assert_eq!(line(90 * 60), Ok(CronLine::IfDue("*/30 * * * *".into())));
        assert_eq!(line(7 * 60), Ok(CronLine::IfDue("* * * * *".into())));
        assert_eq!(line(45 * 60), Ok(CronLine::IfDue("*/15 * * * *".into())));
        assert!(
            line(30)
                .unwrap_err()
                .starts_with("every 30s is not a whole number of minutes")
        );
        assert_eq!(
            cron("0 8 * * mon-fri").cron_line(),
            Ok(CronLine::IfDue("* * * * *".into()))
        );
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

//! Cadences: when a tier's ticks come, as an interval anchored to the Unix epoch or a
//! crontab(5) expression read in the schedule's time zone, and how each is written as a
//! crontab line. One notion of a slot answers when a tier is next due, so `--if-due`,
//! `status`, `explain` and the daemon all agree.

use std::fmt;
use std::time::Duration;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;

use crate::duration;

/// How often a tier fires.
#[derive(Debug, Clone)]
#[non_exhaustive]
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
    pub fn cron_line(&self) -> Result<CronLine, CadenceError> {
        let d = match self {
            Cadence::Every(d) => *d,
            Cadence::Cron(..) => return Ok(CronLine::IfDue("* * * * *".into())),
        };
        let secs = d.as_secs();
        if d.subsec_nanos() != 0 || !secs.is_multiple_of(60) {
            return Err(CadenceError::NotWholeMinutes(d));
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

/// Why a cadence cannot be read, or written as a crontab line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CadenceError {
    /// Not a crontab(5) expression: the text and croner's reason.
    #[error(
        "{text:?} is not a crontab(5) expression ({why}); write five fields like \"*/5 * * * *\" or an alias like \"@hourly\""
    )]
    NotCron {
        /// The expression as written.
        text: String,
        /// croner's reason.
        why: String,
    },
    /// An interval cron cannot fire at: not whole minutes.
    #[error("every {} is not a whole number of minutes, the smallest step cron has; run `backlog daemon` instead", duration::compact(*.0))]
    NotWholeMinutes(Duration),
}

/// Parses a crontab(5) expression: five fields, no seconds or years.
pub fn parse_cron(text: &str) -> Result<croner::Cron, CadenceError> {
    croner::parser::CronParser::builder()
        .seconds(croner::parser::Seconds::Disallowed)
        .year(croner::parser::Year::Disallowed)
        .build()
        .parse(text)
        .map_err(|e| CadenceError::NotCron {
            text: text.into(),
            why: e.to_string(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

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
                .to_string()
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
            e.to_string()
                .starts_with("\"0 */5 * * * *\" is not a crontab(5) expression"),
            "{e}"
        );
    }
}

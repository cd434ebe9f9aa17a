//! Durations as people write them in a schedule file (`5m`, `1h`, `7d`, `96h`) and as
//! the tool prints them back.
//!
//! Parsing goes through humantime so every unit it knows is accepted; printing uses the
//! largest unit that divides the duration exactly, so `168h` prints as `7d` and a
//! window always reads the same in `explain`, the summary line and the run log.

use std::time::Duration;

/// Why a text is not a duration a key or an option takes; its words fit after the
/// key's name (`tier 2: window: "99999999d" is out of range; use at most 36500d`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DurationError {
    /// Not a number and a unit.
    #[error(
        "{0:?} is not a duration; write a number and a unit (s, m, h, d), like 30s, 5m, 1h, 7d or 96h"
    )]
    Unreadable(String),
    /// Past what a `Duration` holds.
    #[error(
        "{0:?} is out of range: far longer than any key takes (docs/ranges.md gives each key's range)"
    )]
    Overflow(String),
    /// Zero where the range starts above it.
    #[error("must be longer than 0s")]
    Zero,
    /// Outside a range that starts above zero.
    #[error("{text:?} is out of range; use {} to {}", compact(*min), compact(*max))]
    Outside {
        /// The text as written.
        text: String,
        /// The range's ends.
        min: Duration,
        /// The range's longest.
        max: Duration,
    },
    /// Longer than a range's longest.
    #[error("{text:?} is out of range; use at most {}", compact(*max))]
    TooLong {
        /// The text as written.
        text: String,
        /// The range's longest.
        max: Duration,
    },
}

/// Parses `text` as a duration, or says why not.
pub fn parse(text: &str) -> Result<Duration, DurationError> {
    // humantime's own reason ("expected number at 10") points into the text by byte
    // offset, which says little to a person: say what a duration looks like instead.
    humantime::parse_duration(text.trim()).map_err(|e| match e {
        humantime::DurationError::NumberOverflow => DurationError::Overflow(text.into()),
        _ => DurationError::Unreadable(text.into()),
    })
}

/// The longest window, cadence, jitter or age the tool takes: 100 years. Every span
/// in a schedule meets clock arithmetic (`now - window`, `last tick + every`), which
/// has limits of its own; bounding spans here keeps that arithmetic far from them.
pub const LONGEST: Duration = Duration::from_secs(36_500 * 86_400);

/// The range a duration of the schedule file or the command line must lie in.
#[derive(Debug, Clone, Copy)]
pub struct Range {
    /// The shortest, inclusive; zero lets `0s` through.
    pub min: Duration,
    /// The longest, inclusive.
    pub max: Duration,
}

impl Range {
    /// Longer than zero, up to `max`.
    pub const fn positive(max: Duration) -> Range {
        Range {
            min: Duration::from_millis(1),
            max,
        }
    }

    /// Zero, or longer up to `max`.
    pub const fn up_to(max: Duration) -> Range {
        Range {
            min: Duration::ZERO,
            max,
        }
    }

    /// Checks `d`, parsed from `text`, or says what the range is.
    pub fn check(&self, text: &str, d: Duration) -> Result<Duration, DurationError> {
        if d.is_zero() && !self.min.is_zero() {
            return Err(DurationError::Zero);
        }
        let text = text.trim().to_string();
        if d < self.min || (d > self.max && self.min > Duration::from_millis(1)) {
            let (min, max) = (self.min, self.max);
            return Err(DurationError::Outside { text, min, max });
        }
        if d > self.max {
            let max = self.max;
            return Err(DurationError::TooLong { text, max });
        }
        Ok(d)
    }

    /// Parses `text` and checks it.
    pub fn parse(&self, text: &str) -> Result<Duration, DurationError> {
        self.check(text, parse(text)?)
    }
}

/// A span on the command line (`--age`, `--horizon`): up to [`LONGEST`].
pub fn parse_span(text: &str) -> Result<Duration, DurationError> {
    Range::up_to(LONGEST).parse(text)
}

/// Prints a duration in the largest unit that divides it exactly: `7d`, `96h` → `4d`,
/// `90m`, `1500ms`.
pub fn compact(d: Duration) -> String {
    const UNITS: [(u64, &str); 4] = [(86_400, "d"), (3_600, "h"), (60, "m"), (1, "s")];
    let ms = d.as_millis();
    if ms == 0 {
        return "0s".to_string();
    }
    if !ms.is_multiple_of(1000) {
        return format!("{ms}ms");
    }
    let secs = d.as_secs();
    for (size, unit) in UNITS {
        if secs.is_multiple_of(size) {
            return format!("{}{unit}", secs / size);
        }
    }
    unreachable!("every whole number of seconds is divisible by 1")
}

/// Prints a measured span (an age, a wait, a gap) in two units at most: `400d 1h`,
/// `2d 13h`, `3h 12m`, `5m 30s`, `42s`.
pub fn rough(d: Duration) -> String {
    let s = d.as_secs();
    let (big, small) = match s {
        s if s >= 86_400 => ((s / 86_400, "d"), (s % 86_400 / 3_600, "h")),
        s if s >= 3_600 => ((s / 3_600, "h"), (s % 3_600 / 60, "m")),
        s if s >= 60 => ((s / 60, "m"), (s % 60, "s")),
        s => return format!("{s}s"),
    };
    if small.0 == 0 {
        format!("{}{}", big.0, big.1)
    } else {
        format!("{}{} {}{}", big.0, big.1, small.0, small.1)
    }
}

/// Prints a handler's time: milliseconds under a second (`12ms`), `rough` above.
pub fn handler_time(ms: u64) -> String {
    match ms {
        0..1000 => format!("{ms}ms"),
        ms => rough(Duration::from_millis(ms)),
    }
}

/// The name of a tier by its window in seconds, as attempts and metrics say it: `7d`,
/// or `retry` for window 0, which `backlog retry` writes.
pub fn tier_name(window_secs: u64) -> String {
    match window_secs {
        0 => "retry".into(),
        w => compact(Duration::from_secs(w)),
    }
}

/// An instant as the tool shows it to a person: RFC 3339 in UTC, to the second.
pub fn instant(t: chrono::DateTime<chrono::Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_forms_a_schedule_uses() {
        for (text, secs) in [
            ("5m", 300),
            ("1h", 3600),
            ("7d", 604_800),
            ("96h", 345_600),
            ("30s", 30),
        ] {
            assert_eq!(parse(text).unwrap(), Duration::from_secs(secs), "{text}");
        }
    }

    #[test]
    fn rejects_what_is_not_a_duration() {
        assert_eq!(
            parse("1000000000000000000000s").unwrap_err().to_string(),
            "\"1000000000000000000000s\" is out of range: far longer than any key takes (docs/ranges.md gives each key's range)"
        );
        for text in ["7 dayz", "ten seconds", "5", ""] {
            assert_eq!(
                parse(text).unwrap_err().to_string(),
                format!(
                    "{text:?} is not a duration; write a number and a unit (s, m, h, d), like 30s, 5m, 1h, 7d or 96h"
                )
            );
        }
    }

    #[test]
    fn ranges_name_the_value_and_the_bounds() {
        let window = Range::positive(LONGEST);
        assert_eq!(window.parse("36500d"), Ok(LONGEST));
        assert_eq!(
            window.parse("99999999d").unwrap_err().to_string(),
            "\"99999999d\" is out of range; use at most 36500d"
        );
        assert_eq!(
            window.parse("0s").unwrap_err().to_string(),
            "must be longer than 0s"
        );
        let lease = Range {
            min: Duration::from_secs(1),
            max: Duration::from_secs(86_400),
        };
        assert_eq!(
            lease.parse("100ms").unwrap_err().to_string(),
            "\"100ms\" is out of range; use 1s to 1d"
        );
        assert_eq!(
            lease.parse("2d").unwrap_err().to_string(),
            "\"2d\" is out of range; use 1s to 1d"
        );
        assert_eq!(Range::up_to(LONGEST).parse("0s"), Ok(Duration::ZERO));
    }

    #[test]
    fn rough_spans_keep_a_sensible_precision() {
        assert_eq!(rough(Duration::from_secs(400 * 86_400 + 5_000)), "400d 1h");
        assert_eq!(
            rough(Duration::from_secs(2 * 86_400 + 13 * 3600 + 600)),
            "2d 13h"
        );
        assert_eq!(rough(Duration::from_secs(3 * 3600 + 12 * 60 + 7)), "3h 12m");
        assert_eq!(rough(Duration::from_secs(7200)), "2h");
        assert_eq!(rough(Duration::from_secs(42)), "42s");
    }

    #[test]
    fn prints_in_the_largest_exact_unit() {
        assert_eq!(compact(Duration::from_secs(604_800)), "7d");
        assert_eq!(compact(Duration::from_secs(345_600)), "4d");
        assert_eq!(compact(Duration::from_secs(43_200)), "12h");
        assert_eq!(compact(Duration::from_secs(5_400)), "90m");
        assert_eq!(compact(Duration::from_secs(61)), "61s");
        assert_eq!(compact(Duration::from_millis(1500)), "1500ms");
        assert_eq!(compact(Duration::ZERO), "0s");
    }
}

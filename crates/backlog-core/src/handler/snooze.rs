//! "Not before": a handler's answer that a record may be tried again only later (an
//! HTTP 429 with `Retry-After`), and `backlog snooze`. The record stays pending; no
//! tick hands it out before then, on any runner, through the same keep as a failure
//! kept until its slot ends (`store::Mark::keep_until`), for as long as asked.

use std::time::Duration;

use chrono::{DateTime, Utc};

/// The exit code with which a per-record handler asks for a later try, together with
/// a `retry-after:` line on its stdout: `EX_TEMPFAIL` of sysexits.h.
pub const SNOOZE_EXIT: i32 = 75;

/// The longest a snooze keeps a record: a year. A handler's answer beyond it (an
/// epoch in milliseconds given as seconds, a typo) is no snooze: the record fails as
/// answered, rather than leave the schedule for ages (or past what a database's time
/// column holds).
pub const LONGEST_SNOOZE: Duration = Duration::from_secs(366 * 86_400);

/// When a record may be tried again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Snooze {
    /// This long after the tick's clock when the record was handled.
    For(Duration),
    /// Not before this time (by the tick's clock).
    Until(DateTime<Utc>),
}

/// Why a handler's "not before" is no snooze; the record's attempt says it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SnoozeError {
    /// Neither whole seconds nor an RFC 3339 time.
    #[error("{0} is neither seconds nor an RFC 3339 time")]
    Unreadable(String),
    /// A `Retry-After` header that is neither seconds nor an HTTP date.
    #[error("{0} is neither seconds nor an HTTP date")]
    NoHttpDate(String),
    /// A JSON number that is no count of seconds (negative).
    #[error("{0} is no number of seconds")]
    NotSeconds(String),
    /// Past `LONGEST_SNOOZE`: the snooze as `describe` says it.
    #[error("{0} is more than a year ahead (366d at most)")]
    TooFar(String),
}

impl Snooze {
    /// A `retry-after` value as a handler writes it: whole seconds (`3600`), or an RFC
    /// 3339 time (`2026-11-26T14:00:00Z`); for anything else, or a time more than a
    /// year ahead, why it is no snooze (the record's attempt says it).
    pub fn parse(text: &str) -> Result<Snooze, SnoozeError> {
        let text = text.trim();
        if let Ok(seconds) = text.parse::<u64>() {
            return Snooze::For(Duration::from_secs(seconds)).within_reach();
        }
        match DateTime::parse_from_rfc3339(text) {
            Ok(t) => Snooze::Until(t.with_timezone(&Utc)).within_reach(),
            Err(_) => Err(SnoozeError::Unreadable(format!("{text:?}"))),
        }
    }

    /// The snooze, if it ends within `LONGEST_SNOOZE` of now (the real clock: a
    /// handler answers in real time).
    fn within_reach(self) -> Result<Snooze, SnoozeError> {
        let reach = chrono::Duration::from_std(LONGEST_SNOOZE).expect("a year fits");
        let far = match self {
            Snooze::For(d) => d > LONGEST_SNOOZE,
            Snooze::Until(t) => t > Utc::now() + reach,
        };
        match far {
            true => Err(SnoozeError::TooFar(self.describe())),
            false => Ok(self),
        }
    }

    /// A batch answer's `retry_after`: a number of seconds, or a string `parse` reads.
    pub fn of_json(value: &serde_json::Value) -> Result<Snooze, SnoozeError> {
        match value {
            serde_json::Value::Number(n) => n
                .as_u64()
                .or_else(|| n.as_f64().filter(|f| *f >= 0.0).map(|f| f.ceil() as u64))
                .ok_or_else(|| SnoozeError::NotSeconds(n.to_string()))
                .and_then(|s| Snooze::For(Duration::from_secs(s)).within_reach()),
            serde_json::Value::String(s) => Snooze::parse(s),
            other => Err(SnoozeError::Unreadable(other.to_string())),
        }
    }

    /// The last `retry-after: …` line of a handler's stdout (the name in any case),
    /// read; none without one.
    pub fn of_stdout(stdout: &str) -> Option<Result<Snooze, SnoozeError>> {
        stdout.lines().rev().find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.trim()
                .eq_ignore_ascii_case("retry-after")
                .then(|| Snooze::parse(value))
        })
    }

    /// The time it ends, for a record handled at `now` (the tick's clock), at most
    /// `LONGEST_SNOOZE` past it.
    pub fn until(self, now: DateTime<Utc>) -> DateTime<Utc> {
        let reach = now + chrono::Duration::from_std(LONGEST_SNOOZE).expect("a year fits");
        match self {
            Snooze::Until(t) => t.min(reach),
            Snooze::For(d) => chrono::Duration::from_std(d)
                .ok()
                .and_then(|d| now.checked_add_signed(d))
                .map_or(reach, |t| t.min(reach)),
        }
    }

    /// As a handler's detail says it: `retry after 1h`, `retry after 2026-…Z`.
    pub fn describe(self) -> String {
        match self {
            Snooze::For(d) => format!("retry after {}", crate::duration::compact(d)),
            Snooze::Until(t) => format!(
                "retry after {}",
                t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_and_times_are_read_and_anything_else_is_not() {
        assert_eq!(
            Snooze::parse(" 3600 "),
            Ok(Snooze::For(Duration::from_secs(3600)))
        );
        assert_eq!(
            Snooze::parse("2026-11-26T14:00:00+01:00"),
            Ok(Snooze::Until("2026-11-26T13:00:00Z".parse().unwrap()))
        );
        for bad in [
            "",
            "-5",
            "1h",
            "tomorrow",
            "2026-11-26",
            "1764165600000",
            "9999-01-01T00:00:00Z",
        ] {
            assert!(Snooze::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(
            Snooze::parse("1764165600000").unwrap_err().to_string(),
            "retry after 490046000h is more than a year ahead (366d at most)"
        );
        assert_eq!(
            Snooze::parse("soon").unwrap_err().to_string(),
            "\"soon\" is neither seconds nor an RFC 3339 time"
        );
        assert_eq!(
            Snooze::of_json(&serde_json::json!(1.5)),
            Ok(Snooze::For(Duration::from_secs(2)))
        );
        assert_eq!(
            Snooze::of_json(&serde_json::json!(-1))
                .unwrap_err()
                .to_string(),
            "-1 is no number of seconds"
        );
        assert!(Snooze::of_json(&serde_json::json!(true)).is_err());
    }

    #[test]
    fn the_last_retry_after_line_of_stdout_counts() {
        let out = "sending\nRetry-After: 60\nstill 429\nretry-after: 120\n";
        assert_eq!(
            Snooze::of_stdout(out),
            Some(Ok(Snooze::For(Duration::from_secs(120))))
        );
        // The last line counts, read or not: an earlier one is not taken instead.
        assert!(matches!(
            Snooze::of_stdout("retry-after: 60\nretry-after: soon"),
            Some(Err(_))
        ));
        assert_eq!(Snooze::of_stdout("no such line"), None);
    }
}

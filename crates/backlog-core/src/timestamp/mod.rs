//! The formats an inserted-at column can hold, detection of the one in use, and the
//! encoding of band bounds in that format.
//!
//! The invariant: a bound is bound in the column's own format and compared with the
//! bare column, never through a function around it, so selection stays an index range.
//! For text columns that means the bound must sort like the stored values, which is why
//! a text layout (separator, fraction digits, offset) is read off real values and
//! reproduced exactly.

use std::fmt;

use chrono::{DateTime, TimeZone, Timelike, Utc};
use serde::Deserialize;

use crate::record::{Cell, Scalar};

mod text;

pub use text::offsets_problem;
use text::parse_text;

/// What the schedule file says about the inserted-at column (`table.inserted_at_format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum FormatSetting {
    /// Read the newest and oldest values and decide.
    #[default]
    Auto,
    /// SQLite's `CURRENT_TIMESTAMP` text: `YYYY-MM-DD HH:MM:SS`, UTC.
    Sqlite,
    /// RFC 3339 text with an offset: `2026-11-21T08:30:00Z`.
    Rfc3339,
    /// Integer seconds since the Unix epoch.
    Unix,
    /// Integer milliseconds since the Unix epoch.
    UnixMs,
    /// The column's own timestamp type (PostgreSQL `timestamptz`, or `timestamp` read
    /// in `table.inserted_at_timezone`, UTC by default). `auto` picks it for such a
    /// column.
    Native,
}

/// A sample of the column, as the store read it.
#[derive(Debug, Clone, PartialEq)]
pub enum Sample {
    /// An integer value: Unix milliseconds from 10¹¹ up (1973 in milliseconds, the
    /// year 5138 in seconds), Unix seconds below.
    Int(i64),
    /// A text value, SQLite's layout or RFC 3339.
    Text(String),
    /// A value of another type (real, blob), named by its type.
    Other(String),
}

/// How a text timestamp is laid out, so that bounds sort like the stored values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TextLayout {
    /// `' '` or `'T'` between date and time.
    pub separator: char,
    /// Digits after the decimal point of the seconds (0 for none).
    pub fraction_digits: usize,
    /// `None` for naive text taken as UTC (SQLite's form), else the offset written.
    pub offset: Option<Offset>,
}

/// The offset a text timestamp carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offset {
    /// `Z`
    Zulu,
    /// `+hh:mm`, in seconds east of UTC.
    Numeric(i32),
}

/// The resolved format of an inserted-at column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimestampFormat {
    /// Text, laid out so that bounds written in it sort like the stored values.
    Text(TextLayout),
    /// Integer seconds since the Unix epoch.
    UnixSeconds,
    /// Integer milliseconds since the Unix epoch.
    UnixMillis,
    /// A `timestamptz` column: bounds are bound as instants.
    Timestamptz,
    /// A `timestamp` column: bounds are bound as wall-clock times in this zone.
    Timestamp(chrono_tz::Tz),
}

/// SQLite's `CURRENT_TIMESTAMP` layout.
pub const SQLITE_LAYOUT: TextLayout = TextLayout {
    separator: ' ',
    fraction_digits: 0,
    offset: None,
};
/// The RFC 3339 layout used when a column declared RFC 3339 holds no value yet.
pub const RFC3339_LAYOUT: TextLayout = TextLayout {
    separator: 'T',
    fraction_digits: 0,
    offset: Some(Offset::Zulu),
};

impl fmt::Display for TimestampFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TimestampFormat::UnixSeconds => f.write_str("unix (integer seconds)"),
            TimestampFormat::UnixMillis => f.write_str("unix_ms (integer milliseconds)"),
            TimestampFormat::Timestamptz => f.write_str("native (timestamp with time zone)"),
            TimestampFormat::Timestamp(tz) => {
                write!(f, "native (timestamp without time zone, read in {tz})")
            }
            TimestampFormat::Text(l) if l.offset.is_none() => {
                write!(
                    f,
                    "sqlite (text like \"{}\", UTC)",
                    TimestampFormat::Text(*l).example()
                )
            }
            TimestampFormat::Text(l) => write!(
                f,
                "rfc3339 (text like \"{}\")",
                TimestampFormat::Text(*l).example()
            ),
        }
    }
}

impl TimestampFormat {
    /// The setting name this format answers to in the schedule file.
    pub fn setting_name(&self) -> &'static str {
        match self {
            TimestampFormat::UnixSeconds => "unix",
            TimestampFormat::UnixMillis => "unix_ms",
            TimestampFormat::Timestamptz | TimestampFormat::Timestamp(_) => "native",
            TimestampFormat::Text(l) if l.offset.is_none() => "sqlite",
            TimestampFormat::Text(_) => "rfc3339",
        }
    }

    fn example(&self) -> String {
        let t = Utc.with_ymd_and_hms(2026, 11, 21, 8, 30, 0).unwrap();
        self.encode(t).to_string()
    }

    /// The value that stands for instant `t` in this format.
    pub fn encode(&self, t: DateTime<Utc>) -> Scalar {
        // Native times to the microsecond, as the servers keep them: a bound of a band
        // with nanoseconds would compare here, where reaches are stepped over, unlike
        // where the server compares it (the drivers drop them).
        let micros = || {
            t.with_nanosecond(t.nanosecond() / 1_000 * 1_000)
                .unwrap_or(t)
        };
        match self {
            TimestampFormat::UnixSeconds => Scalar::Int(t.timestamp()),
            TimestampFormat::UnixMillis => Scalar::Int(t.timestamp_millis()),
            TimestampFormat::Text(layout) => Scalar::Text(layout.format(t)),
            TimestampFormat::Timestamptz => Scalar::Time(micros()),
            TimestampFormat::Timestamp(tz) => {
                Scalar::Naive(micros().with_timezone(tz).naive_local())
            }
        }
    }

    /// The instant a stored value stands for, if it is in this format.
    pub fn decode(&self, value: &Scalar) -> Option<DateTime<Utc>> {
        match (self, value) {
            (_, Scalar::Int(i)) => self.decode_cell(Cell::Int(*i)),
            (_, Scalar::Text(s)) => self.decode_cell(Cell::Text(s)),
            (TimestampFormat::Timestamptz, Scalar::Time(t)) => Some(*t),
            // A wall-clock time the zone skips (spring forward) reads as the instant
            // after the gap; one it repeats (fall back), as the earlier instant.
            (TimestampFormat::Timestamp(tz), Scalar::Naive(n)) => tz
                .from_local_datetime(n)
                .earliest()
                .or_else(|| {
                    tz.from_local_datetime(&(*n + chrono::Duration::hours(1)))
                        .earliest()
                })
                .map(|t| t.with_timezone(&Utc)),
            _ => None,
        }
    }
}

impl TimestampFormat {
    /// The UTC offset the column's text is written in (`Z`, `-05:00`), if it is text
    /// with one.
    pub fn offset_written(&self) -> Option<String> {
        match self {
            TimestampFormat::Text(layout) => layout.offset.map(Offset::written),
            _ => None,
        }
    }

    /// Whether `value` is RFC 3339 text in another UTC offset than the column's.
    pub fn other_offset(&self, value: &Scalar) -> bool {
        let (TimestampFormat::Text(layout), Scalar::Text(text)) = (self, value) else {
            return false;
        };
        match (layout.offset, parse_text(text).and_then(|(_, l)| l.offset)) {
            (Some(ours), Some(theirs)) => ours.seconds() != theirs.seconds(),
            _ => false,
        }
    }

    /// Reads a value where a row buffer holds it, without copying it out.
    pub fn decode_cell(&self, value: Cell<'_>) -> Option<DateTime<Utc>> {
        match (self, value) {
            (TimestampFormat::UnixSeconds, Cell::Int(s)) => DateTime::from_timestamp(s, 0),
            (TimestampFormat::UnixMillis, Cell::Int(ms)) => DateTime::from_timestamp_millis(ms),
            (TimestampFormat::Text(_), Cell::Text(s)) => parse_text(s).map(|(t, _)| t),
            _ => None,
        }
    }
}

/// Why a column's values are not timestamps the tool reads as the file says; the
/// words follow the column's name (`table.inserted_at "created" holds …`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TimestampError {
    /// A value in none of the accepted formats: the value, or its kind.
    #[error("holds {0}, which is not a timestamp (backlog reads {ACCEPTED})")]
    NotATimestamp(String),
    /// Values of two formats.
    #[error("mixes formats: {0} and {1} (one column must hold one format)")]
    MixedFormats(&'static str, &'static str),
    /// Text with two UTC offsets (the message of `text::offsets_problem`).
    #[error("{0}")]
    MixedOffsets(String),
    /// `native` on a column whose values are not a server's timestamps.
    #[error(
        "is declared native, which is for PostgreSQL timestamp columns; set table.inserted_at_format = \"auto\""
    )]
    NativeDeclared,
    /// Values of another format than the one declared.
    #[error(
        "is declared {declared} but holds {found} values (set table.inserted_at_format = \"{found}\", or \"auto\")"
    )]
    NotAsDeclared {
        /// The declared format's name.
        declared: &'static str,
        /// The found format's name.
        found: &'static str,
    },
}

/// Classifies one sample, or says what it holds instead.
fn classify(sample: &Sample) -> Result<TimestampFormat, TimestampError> {
    match sample {
        // 1e11 seconds is the year 5138; 1e11 milliseconds is 1973.
        Sample::Int(v) if v.unsigned_abs() >= 100_000_000_000 => Ok(TimestampFormat::UnixMillis),
        Sample::Int(_) => Ok(TimestampFormat::UnixSeconds),
        Sample::Text(s) => parse_text(s)
            .map(|(_, layout)| TimestampFormat::Text(layout))
            .ok_or_else(|| TimestampError::NotATimestamp(format!("{s:?}"))),
        Sample::Other(kind) => Err(TimestampError::NotATimestamp(format!("a {kind} value"))),
    }
}

/// Reads a value in any of the accepted formats, whichever it is in.
pub fn read_any(value: &Scalar) -> Option<DateTime<Utc>> {
    let sample = match value {
        Scalar::Int(i) => Sample::Int(*i),
        Scalar::Text(t) => Sample::Text(t.clone()),
        Scalar::Time(t) => return Some(*t),
        Scalar::Naive(n) => return Some(n.and_utc()),
    };
    classify(&sample).ok()?.decode(value)
}

/// The accepted formats, for messages.
pub const ACCEPTED: &str =
    "SQLite \"YYYY-MM-DD HH:MM:SS\" text, RFC 3339 text, or integer unix seconds or milliseconds";

/// Decides the column's format from the setting and a few real values (the newest and
/// the oldest). An error says what was found; the caller adds which column it was.
pub fn detect(
    setting: FormatSetting,
    samples: &[Sample],
) -> Result<TimestampFormat, TimestampError> {
    let mut found: Option<TimestampFormat> = None;
    for sample in samples {
        let format = classify(sample)?;
        if let Some(prev) = found
            && !same_kind(prev, format)
        {
            let (a, b) = (prev.setting_name(), format.setting_name());
            return Err(TimestampError::MixedFormats(a, b));
        }
        if let (Some(TimestampFormat::Text(prev)), TimestampFormat::Text(this)) = (found, format)
            && let (Some(a), Some(b)) = (prev.offset, this.offset)
            && let Some(problem) = offsets_problem(a, b)
        {
            return Err(TimestampError::MixedOffsets(problem));
        }
        found = found.or(Some(format));
    }
    let declared = match setting {
        FormatSetting::Auto => return Ok(found.unwrap_or(TimestampFormat::Text(SQLITE_LAYOUT))),
        FormatSetting::Sqlite => TimestampFormat::Text(SQLITE_LAYOUT),
        FormatSetting::Rfc3339 => TimestampFormat::Text(RFC3339_LAYOUT),
        FormatSetting::Unix => TimestampFormat::UnixSeconds,
        FormatSetting::UnixMs => TimestampFormat::UnixMillis,
        FormatSetting::Native => return Err(TimestampError::NativeDeclared),
    };
    match found {
        None => Ok(declared),
        Some(f) if f.setting_name() == declared.setting_name() => Ok(f),
        Some(f) => Err(TimestampError::NotAsDeclared {
            declared: declared.setting_name(),
            found: f.setting_name(),
        }),
    }
}

fn same_kind(a: TimestampFormat, b: TimestampFormat) -> bool {
    match (a, b) {
        (TimestampFormat::Text(x), TimestampFormat::Text(y)) => {
            x.offset.is_none() == y.offset.is_none()
        }
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The instant RFC 3339 text `s` names.
    pub(super) fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn detects_each_format_from_a_sample() {
        let cases = [
            (
                Sample::Text("2026-11-21 08:30:00".into()),
                "sqlite",
                "2026-11-21 08:30:00",
            ),
            (
                Sample::Text("2026-11-21T08:30:00Z".into()),
                "rfc3339",
                "2026-11-21T08:30:00Z",
            ),
            (
                Sample::Text("2026-11-21T09:30:00.123+01:00".into()),
                "rfc3339",
                "2026-11-21T09:30:00.000+01:00",
            ),
            (Sample::Int(1_795_249_800), "unix", "1795249800"),
            (Sample::Int(1_795_249_800_000), "unix_ms", "1795249800000"),
        ];
        for (sample, name, encoded) in cases {
            let f = detect(FormatSetting::Auto, std::slice::from_ref(&sample)).unwrap();
            assert_eq!(f.setting_name(), name, "{sample:?}");
            assert_eq!(
                f.encode(at("2026-11-21T08:30:00Z")).to_string(),
                encoded,
                "{sample:?}"
            );
        }
    }

    #[test]
    fn decodes_what_it_encodes() {
        let t = at("2026-11-21T08:30:00Z");
        for s in [
            "2026-11-21 08:30:00",
            "2026-11-21T10:30:00+02:00",
            "2026-11-21T08:30:00.000000Z",
        ] {
            let f = detect(FormatSetting::Auto, &[Sample::Text(s.into())]).unwrap();
            assert_eq!(f.decode(&Scalar::Text(s.into())), Some(t), "{s}");
            assert_eq!(f.decode(&f.encode(t)), Some(t), "{s}");
        }
    }

    #[test]
    fn native_times_are_encoded_to_the_microsecond_as_the_servers_keep_them() {
        let t = at("2026-11-21T08:30:00.123456789Z");
        let micros = at("2026-11-21T08:30:00.123456Z");
        assert_eq!(TimestampFormat::Timestamptz.encode(t), Scalar::Time(micros));
        assert_eq!(
            TimestampFormat::Timestamp(chrono_tz::UTC).encode(t),
            Scalar::Naive(micros.naive_utc())
        );
    }

    #[test]
    fn rejects_what_is_not_a_timestamp() {
        let e = detect(FormatSetting::Auto, &[Sample::Text("yesterday".into())]).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("holds \"yesterday\", which is not a timestamp (backlog reads {ACCEPTED})")
        );
        let e = detect(
            FormatSetting::Auto,
            &[Sample::Int(5), Sample::Text("2026-01-01 00:00:00".into())],
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "mixes formats: unix and sqlite (one column must hold one format)"
        );
        let e = detect(
            FormatSetting::Unix,
            &[Sample::Text("2026-01-01 00:00:00".into())],
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "is declared unix but holds sqlite values (set table.inserted_at_format = \"sqlite\", or \"auto\")"
        );
    }

    #[test]
    fn text_bounds_sort_like_the_values() {
        let f = detect(
            FormatSetting::Auto,
            &[Sample::Text("2026-11-21T08:30:00.250Z".into())],
        )
        .unwrap();
        let lo = f.encode(at("2026-11-21T08:30:00Z")).to_string();
        assert!(lo.as_str() < "2026-11-21T08:30:00.250Z");
        assert!(lo.as_str() > "2026-11-21T08:29:59.999Z");
    }
}

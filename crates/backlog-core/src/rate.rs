//! A rate of handler starts, as `[handler] rate` writes it: `20/s`, `100/m`, `3/h`.
//!
//! A rate is kept as the interval between two starts, because that is how a tick
//! applies it: starts are spaced evenly, never bunched into bursts at the top of each
//! second, so a counterpart that allows 20 calls a second sees one every 50 ms.

use std::fmt;
use std::time::Duration;

/// Starts per unit of time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate {
    count: f64,
    unit: Unit,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unit {
    Second,
    Minute,
    Hour,
}

impl Unit {
    fn seconds(self) -> f64 {
        match self {
            Unit::Second => 1.0,
            Unit::Minute => 60.0,
            Unit::Hour => 3600.0,
        }
    }
}

/// The fastest rate that means anything: one start a microsecond.
const FASTEST: f64 = 1_000_000.0;
/// The slowest: one start a day.
const SLOWEST: f64 = 1.0 / 86_400.0;

/// How a rate is written, for the errors.
const HOW: &str = "write starts per second, minute or hour, like \"20/s\", \"100/m\" or \"3/h\"";

/// Why a text is not a rate; its words fit after the key's name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RateError {
    /// No `/` between a count and a unit.
    #[error("{0:?} is not a rate; {HOW}")]
    NoUnit(String),
    /// A unit other than s, m, h.
    #[error("{text:?}: {unit:?} is not a unit; {HOW}")]
    Unit {
        /// The rate as written.
        text: String,
        /// The unit as written.
        unit: String,
    },
    /// A count that is no positive number.
    #[error("{text:?}: {count:?} is not a positive number; {HOW}")]
    Count {
        /// The rate as written.
        text: String,
        /// The count as written.
        count: String,
    },
    /// Slower than one start a day, or faster than `FASTEST`.
    #[error(
        "{0:?} is out of range; a rate is between one start a day (\"24/h\" is one an hour) and 1,000,000/s"
    )]
    OutOfRange(String),
}

impl Rate {
    /// Reads `N/s`, `N/m` or `N/h` (N a positive number, `sec`, `min`, `hour` also
    /// accepted).
    pub fn parse(text: &str) -> Result<Rate, RateError> {
        let Some((count, unit)) = text.split_once('/') else {
            return Err(RateError::NoUnit(text.into()));
        };
        let unit = match unit.trim() {
            "s" | "sec" | "second" => Unit::Second,
            "m" | "min" | "minute" => Unit::Minute,
            "h" | "hour" => Unit::Hour,
            other => {
                let (text, unit) = (text.into(), other.into());
                return Err(RateError::Unit { text, unit });
            }
        };
        let count: f64 = (count.trim().parse().ok())
            .filter(|c: &f64| c.is_finite() && *c > 0.0)
            .ok_or_else(|| RateError::Count {
                text: text.into(),
                count: count.trim().into(),
            })?;
        let rate = Rate { count, unit };
        if !(SLOWEST..=FASTEST).contains(&rate.per_second()) {
            return Err(RateError::OutOfRange(text.into()));
        }
        Ok(rate)
    }

    /// Starts per second, whatever unit the rate was written in.
    pub fn per_second(&self) -> f64 {
        self.count / self.unit.seconds()
    }

    /// The time between two starts.
    pub fn interval(&self) -> Duration {
        Duration::from_secs_f64(1.0 / self.per_second())
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let unit = match self.unit {
            Unit::Second => "s",
            Unit::Minute => "m",
            Unit::Hour => "h",
        };
        write!(f, "{}/{unit}", self.count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_read_as_the_interval_between_starts() {
        for (text, interval_ms, shown) in [
            ("20/s", 50, "20/s"),
            ("100/m", 600, "100/m"),
            ("3 / h", 1_200_000, "3/h"),
            ("0.5/sec", 2000, "0.5/s"),
        ] {
            let rate = Rate::parse(text).unwrap();
            assert_eq!(
                rate.interval(),
                Duration::from_millis(interval_ms),
                "{text}"
            );
            assert_eq!(rate.to_string(), shown);
        }
    }

    #[test]
    fn bad_rates_say_how_to_write_one() {
        for (text, message) in [
            ("20", "\"20\" is not a rate; write starts per second"),
            (
                "20/d",
                "\"20/d\": \"d\" is not a unit; write starts per second",
            ),
            ("0/s", "\"0/s\": \"0\" is not a positive number"),
            ("-1/s", "\"-1/s\": \"-1\" is not a positive number"),
            ("inf/s", "\"inf/s\": \"inf\" is not a positive number"),
            ("2000000/s", "\"2000000/s\" is out of range"),
            ("0.01/h", "\"0.01/h\" is out of range"),
        ] {
            let e = Rate::parse(text).unwrap_err();
            assert!(e.to_string().starts_with(message), "{text}: {e}");
        }
    }
}

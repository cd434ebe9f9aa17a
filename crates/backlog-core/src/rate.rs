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

impl Rate {
    /// Reads `N/s`, `N/m` or `N/h` (N a positive number, `sec`, `min`, `hour` also
    /// accepted); the error says what is wrong and how to write it.
    pub fn parse(text: &str) -> Result<Rate, String> {
        let how = "write starts per second, minute or hour, like \"20/s\", \"100/m\" or \"3/h\"";
        let Some((count, unit)) = text.split_once('/') else {
            return Err(format!("{text:?} is not a rate; {how}"));
        };
        let unit = match unit.trim() {
            "s" | "sec" | "second" => Unit::Second,
            "m" | "min" | "minute" => Unit::Minute,
            "h" | "hour" => Unit::Hour,
            other => return Err(format!("{text:?}: {other:?} is not a unit; {how}")),
        };
        let count: f64 = count
            .trim()
            .parse()
            .ok()
            .filter(|c: &f64| c.is_finite() && *c > 0.0)
            .ok_or_else(|| {
                format!(
                    "{text:?}: {:?} is not a positive number; {how}",
                    count.trim()
                )
            })?;
        let rate = Rate { count, unit };
        let per_second = rate.per_second();
        if !(SLOWEST..=FASTEST).contains(&per_second) {
            return Err(format!(
                "{text:?} is out of range; a rate is between one start a day (\"24/h\" is one an hour) and 1,000,000/s"
            ));
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
            assert!(e.starts_with(message), "{text}: {e}");
        }
    }
}

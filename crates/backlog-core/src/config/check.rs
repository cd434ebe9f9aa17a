//! The `[check]` section: the thresholds `status --check` and the daemon's `/readyz`
//! judge the backlog by, beside the tiers' ticks: how long new work
//! waits for its first try (the age of the oldest record never tried), how many
//! records are pending, how many attempts failed in the last 24 hours. Each is off
//! unless set; the command line's flags override them one by one.
//!
//! A warning comes before the page: where both of a pair are set, the warning's
//! threshold must be below the critical one, or it would never be seen.

use std::time::Duration;

use serde::Deserialize;

use super::KeyError;
use crate::duration::Range;

/// `check.warn_waiting`, `check.critical_waiting`: a second up to a year (a record
/// older than the last tier's window is not waiting any more: no tier tries it).
pub const WAITING: Range = Range {
    min: Duration::from_secs(1),
    max: Duration::from_secs(366 * 86_400),
};

/// The most records or failures a count threshold takes.
pub const MAX_COUNT: u64 = 1_000_000_000_000;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCheck {
    warn_waiting: Option<String>,
    critical_waiting: Option<String>,
    warn_pending: Option<i64>,
    critical_pending: Option<i64>,
    warn_failures: Option<i64>,
    critical_failures: Option<i64>,
}

/// The `[check]` section, resolved: every threshold none (off) unless the file sets it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CheckConfig {
    /// Warn once a record never tried has waited longer than this.
    pub warn_waiting: Option<Duration>,
    /// Critical once a record never tried has waited longer than this.
    pub critical_waiting: Option<Duration>,
    /// Warn above this many pending records in the tiers' bands.
    pub warn_pending: Option<u64>,
    /// Critical above this many pending records in the tiers' bands.
    pub critical_pending: Option<u64>,
    /// Warn above this many failed attempts in the last 24 hours.
    pub warn_failures: Option<u64>,
    /// Critical above this many failed attempts in the last 24 hours.
    pub critical_failures: Option<u64>,
}

impl CheckConfig {
    /// Whether a waiting threshold is set: the check then reads the oldest record
    /// never tried of each tier.
    pub fn watches_waiting(&self) -> bool {
        self.warn_waiting.is_some() || self.critical_waiting.is_some()
    }
}

pub(super) fn resolve(raw: Option<RawCheck>) -> Result<CheckConfig, KeyError> {
    let raw = raw.unwrap_or_default();
    let waiting = |key: &str, text: Option<String>| {
        text.map(|t| WAITING.parse(&t).map_err(|e| format!("check.{key}: {e}")))
            .transpose()
    };
    let count = |key: &str, unit: &str, n: Option<i64>| match n {
        Some(n) if !(0..=MAX_COUNT as i64).contains(&n) => Err(KeyError::new(format!(
            "check.{key}: {n} is out of range; use 0 to {MAX_COUNT} {unit} (0: any at all)"
        ))),
        n => Ok(n.map(|n| n as u64)),
    };
    let check = CheckConfig {
        warn_waiting: waiting("warn_waiting", raw.warn_waiting)?,
        critical_waiting: waiting("critical_waiting", raw.critical_waiting)?,
        warn_pending: count("warn_pending", "records", raw.warn_pending)?,
        critical_pending: count("critical_pending", "records", raw.critical_pending)?,
        warn_failures: count("warn_failures", "failures", raw.warn_failures)?,
        critical_failures: count("critical_failures", "failures", raw.critical_failures)?,
    };
    if let (Some(w), Some(c)) = (check.warn_waiting, check.critical_waiting)
        && w >= c
    {
        return Err(KeyError::new(format!(
            "check.warn_waiting {} is not below check.critical_waiting {}; the warning comes first: lower it, or leave it out",
            crate::duration::compact(w),
            crate::duration::compact(c)
        )));
    }
    for (name, warn, critical) in [
        ("pending", check.warn_pending, check.critical_pending),
        ("failures", check.warn_failures, check.critical_failures),
    ] {
        if let (Some(w), Some(c)) = (warn, critical)
            && w >= c
        {
            return Err(KeyError::new(format!(
                "check.warn_{name} {w} is not below check.critical_{name} {c}; the warning comes first: lower it, or leave it out"
            )));
        }
    }
    Ok(check)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<CheckConfig, String> {
        resolve(Some(toml::from_str(text).map_err(|e| e.to_string())?)).map_err(|e| e.message)
    }

    #[test]
    fn every_threshold_is_off_unless_set() {
        assert_eq!(resolve(None).unwrap(), CheckConfig::default());
        let c = parse("warn_waiting = \"10m\"\ncritical_pending = 0").unwrap();
        assert_eq!(c.warn_waiting, Some(Duration::from_secs(600)));
        assert_eq!(c.critical_waiting, None);
        assert_eq!(c.critical_pending, Some(0));
        assert!(c.watches_waiting());
        assert!(!CheckConfig::default().watches_waiting());
    }

    #[test]
    fn bad_values_name_the_key_and_the_fix() {
        for (text, message) in [
            (
                "warn_waiting = \"0s\"",
                "check.warn_waiting: must be longer than 0s",
            ),
            (
                "critical_waiting = \"400d\"",
                "check.critical_waiting: \"400d\" is out of range; use 1s to 366d",
            ),
            ("warn_waiting = \"soon\"", "check.warn_waiting: "),
            (
                "warn_pending = -1",
                "check.warn_pending: -1 is out of range; use 0 to 1000000000000 records (0: any at all)",
            ),
            (
                "warn_waiting = \"2h\"\ncritical_waiting = \"1h\"",
                "check.warn_waiting 2h is not below check.critical_waiting 1h; the warning comes first: lower it, or leave it out",
            ),
            (
                "warn_pending = 100\ncritical_pending = 100",
                "check.warn_pending 100 is not below check.critical_pending 100; the warning comes first",
            ),
            (
                "warn_failures = 9\ncritical_failures = 3",
                "check.warn_failures 9 is not below check.critical_failures 3",
            ),
        ] {
            let e = parse(text).unwrap_err();
            assert!(e.starts_with(message), "{text}: {e}");
        }
    }
}

//! Durations as people write them in a schedule file (`5m`, `1h`, `7d`, `96h`) and as
//! the tool prints them back.
//!
//! Parsing goes through humantime so every unit it knows is accepted; printing uses the
//! largest unit that divides the duration exactly, so `168h` prints as `7d` and a
//! window always reads the same in `explain`, the summary line and the run log.

use std::time::Duration;

/// Parses `text` as a duration, or says why not in words that fit after a key name.
pub fn parse(text: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(text.trim()).map_err(|e| {
        format!("{text:?} is not a duration ({e}); write it like 5m, 1h, 7d or 96h")
    })?;
    Ok(d)
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
        let e = parse("7 dayz").unwrap_err();
        assert!(e.starts_with("\"7 dayz\" is not a duration"), "{e}");
        assert!(e.ends_with("write it like 5m, 1h, 7d or 96h"), "{e}");
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

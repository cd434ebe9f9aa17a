//! A healthchecks-style ping URL that may name its tier: healthchecks.io wants one
//! check per job, and each tier is a job of its own (its own cadence, its own
//! grace). `{window}` becomes the tier's window (`1d`, `90m`) and `{tier}` its number,
//! so `ping = "https://hc-ping.com/KEY/backlog-{window}"` is a check per tier under
//! one ping key. A `ping` in a `[[tier]]` section overrides `[alert]`'s for its ticks.
//!
//! The template is checked as the file loads: a placeholder it does not know is
//! refused naming the key and the known ones, and the URL with sample values must be
//! an http(s) address. The values put in are letters and digits, so every tier's URL
//! is as valid as the sample.

use std::fmt;
use std::time::Duration;

use super::KeyError;
use super::alert::{AlertUrl, url};

/// The placeholders a ping URL may hold, and what each becomes.
pub const PLACEHOLDERS: [(&str, &str); 2] = [
    ("{window}", "the tier's window, like 1d"),
    ("{tier}", "its number, like 1"),
];

/// A ping URL, maybe with placeholders: the URL of one tier's ticks by [`for_tier`].
///
/// [`for_tier`]: PingUrl::for_tier
#[derive(Clone, PartialEq, Eq)]
pub struct PingUrl {
    /// The text as the file writes it (after `${VAR}` expansion).
    template: String,
    /// The URL of tier 1 of window 1d: what messages about the key show.
    sample: AlertUrl,
}

impl PingUrl {
    /// Checks `text`, the value of `key` (`alert.ping`, `tier 2: ping`).
    pub fn parse(key: &str, text: &str) -> Result<PingUrl, KeyError> {
        let mut rest = text;
        while let Some(open) = rest.find('{') {
            let after = &rest[open..];
            let name = match after.find('}') {
                Some(close) => &after[..=close],
                None => after,
            };
            if !PLACEHOLDERS.iter().any(|(p, _)| *p == name) {
                let known: Vec<String> = PLACEHOLDERS
                    .iter()
                    .map(|(p, what)| format!("{p} ({what})"))
                    .collect();
                return Err(KeyError::new(format!(
                    "{key}: {name} is no placeholder of a ping URL; use {}",
                    known.join(" or ")
                )));
            }
            rest = &after[name.len()..];
        }
        let filled = fill(text, "1", "1d");
        // A URL that does not parse is shown as written, not with the sample's values.
        let sample = url(key, &filled).map_err(|e| {
            KeyError::new(
                e.message
                    .replace(&format!("{filled:?}"), &format!("{text:?}")),
            )
        })?;
        Ok(PingUrl {
            template: text.to_string(),
            sample,
        })
    }

    /// The URL the ticks of tier `tier` (of `window`) ping; `{tier}` becomes the
    /// window where no tier has it (`run --ad-hoc`).
    pub fn for_tier(&self, tier: Option<usize>, window: Duration) -> AlertUrl {
        let window = crate::duration::compact(window);
        let tier = tier.map_or_else(|| window.clone(), |n| n.to_string());
        // Letters and digits in place of the sample's: as valid as it was.
        url("ping", &fill(&self.template, &tier, &window)).unwrap_or_else(|_| self.sample.clone())
    }

    /// Whether the URL is the same for every tier.
    pub fn is_plain(&self) -> bool {
        !PLACEHOLDERS.iter().any(|(p, _)| self.template.contains(p))
    }
}

fn fill(template: &str, tier: &str, window: &str) -> String {
    template.replace("{tier}", tier).replace("{window}", window)
}

/// Shown as tier 1's URL, without its token (see [`AlertUrl`]).
impl fmt::Display for PingUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.sample.fmt(f)
    }
}

/// Written by hand: a `Debug` of the config must not print a token.
impl fmt::Debug for PingUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PingUrl({})", self.sample)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: Duration = Duration::from_secs(86_400);

    #[test]
    fn placeholders_become_the_tiers_window_and_number() {
        let p = PingUrl::parse(
            "alert.ping",
            "https://hc.example/k3y/backlog-{window}?t={tier}",
        )
        .unwrap();
        assert!(!p.is_plain());
        assert_eq!(
            p.for_tier(Some(2), 7 * DAY).as_str(),
            "https://hc.example/k3y/backlog-7d?t=2"
        );
        assert_eq!(
            p.for_tier(None, Duration::from_secs(5400)).as_str(),
            "https://hc.example/k3y/backlog-90m?t=90m"
        );
        assert_eq!(
            format!("{p:?}"),
            "PingUrl(https://hc.example/k3y/backlog-1d)"
        );
        let plain = PingUrl::parse("alert.ping", "http://127.0.0.1:9/ping").unwrap();
        assert!(plain.is_plain());
        assert_eq!(
            plain.for_tier(Some(1), DAY).as_str(),
            "http://127.0.0.1:9/ping"
        );
    }

    #[test]
    fn an_unknown_placeholder_is_refused_naming_the_key_and_the_known_ones() {
        for (text, name) in [
            ("https://hc.example/{foo}", "{foo}"),
            ("https://hc.example/{Window}", "{Window}"),
            ("https://hc.example/x{window", "{window"),
        ] {
            assert_eq!(
                PingUrl::parse("tier 2: ping", text).unwrap_err().message,
                format!(
                    "tier 2: ping: {name} is no placeholder of a ping URL; use {{window}} (the tier's window, like 1d) or {{tier}} (its number, like 1)"
                )
            );
        }
        let e = PingUrl::parse("alert.ping", "hc.example/{window}")
            .unwrap_err()
            .message;
        assert!(
            e.starts_with("alert.ping: \"hc.example/{window}\" is not a URL"),
            "{e}"
        );
    }
}

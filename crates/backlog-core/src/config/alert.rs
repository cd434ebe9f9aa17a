//! The `[alert]` section: where a tick's failures are pushed to a person (a command,
//! a webhook, healthchecks-style pings) and how often at most.
//!
//! A webhook's or a ping's URL often carries a token (in its userinfo, its path or
//! its query): the resolved [`AlertUrl`] keeps it, and shows only the scheme, host and
//! path, so no log line or error message prints the query or a password.

use std::fmt;
use std::time::Duration;

use serde::Deserialize;

use super::KeyError;
use super::ping::PingUrl;
use super::ranges::{ALERT_COMMAND_TIMEOUT, ALERT_EVERY, span};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAlert {
    command: Option<Vec<String>>,
    command_timeout: Option<String>,
    webhook: Option<String>,
    ping: Option<String>,
    alert_every: Option<String>,
}

/// A URL alerts are sent to: the whole of it for the request, a shown form for
/// messages.
#[derive(Clone, PartialEq, Eq)]
pub struct AlertUrl {
    url: url::Url,
}

impl AlertUrl {
    /// The URL to send to, token and all.
    pub fn as_str(&self) -> &str {
        self.url.as_str()
    }

    /// The URL with `suffix` appended to its path (`/start`, `/fail`, `/4`), its query
    /// kept: healthchecks.io's convention.
    pub fn with_path_suffix(&self, suffix: &str) -> AlertUrl {
        let mut url = self.url.clone();
        let path = format!("{}{suffix}", url.path().trim_end_matches('/'));
        url.set_path(&path);
        AlertUrl { url }
    }
}

/// The URL without its userinfo, query and fragment: what messages show.
impl fmt::Display for AlertUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut shown = self.url.clone();
        // Both succeed on an http(s) URL, which every AlertUrl is.
        let _ = shown.set_username("");
        let _ = shown.set_password(None);
        shown.set_query(None);
        shown.set_fragment(None);
        f.write_str(shown.as_str())
    }
}

/// Written by hand, as `Display`: a `Debug` of the config must not print a token.
impl fmt::Debug for AlertUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AlertUrl({self})")
    }
}

/// The `[alert]` section, resolved. Without the section nothing is sent.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AlertConfig {
    /// A program and its arguments, run once per alert with the event on its stdin.
    pub command: Option<Vec<String>>,
    /// How long the command may run before its process group is ended.
    pub command_timeout: Duration,
    /// Where each alert is POSTed as JSON.
    pub webhook: Option<AlertUrl>,
    /// A healthchecks.io check: `/start` as a tick starts, then its outcome; `{window}`
    /// and `{tier}` in it make a check per tier.
    pub ping: Option<PingUrl>,
    /// The `ping` of each `[[tier]]` that sets one, by window: its ticks ping it
    /// instead of `ping`.
    pub tier_pings: Vec<(Duration, PingUrl)>,
    /// At most one alert of a tier and kind in this time, across every runner.
    pub every: Duration,
}

/// `alert.alert_every` when the file does not set it.
pub const DEFAULT_EVERY: Duration = Duration::from_secs(15 * 60);
/// `alert.command_timeout` when the file does not set it.
pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(30);

impl Default for AlertConfig {
    fn default() -> Self {
        AlertConfig {
            command: None,
            command_timeout: DEFAULT_COMMAND_TIMEOUT,
            webhook: None,
            ping: None,
            tier_pings: Vec::new(),
            every: DEFAULT_EVERY,
        }
    }
}

impl AlertConfig {
    /// Whether alerts go anywhere (pings are not alerts: they go whatever happened).
    pub fn sends(&self) -> bool {
        self.command.is_some() || self.webhook.is_some()
    }

    /// The URL the ticks of tier `tier` (of `window`) ping, if any: the tier's own
    /// `ping`, else `alert.ping`, placeholders filled.
    pub fn ping_for(&self, tier: Option<usize>, window: Duration) -> Option<AlertUrl> {
        self.tier_pings
            .iter()
            .find(|(w, _)| *w == window)
            .map(|(_, p)| p)
            .or(self.ping.as_ref())
            .map(|p| p.for_tier(tier, window))
    }
}

pub(super) fn resolve(raw: Option<RawAlert>) -> Result<AlertConfig, KeyError> {
    let mut alert = AlertConfig::default();
    let Some(raw) = raw else {
        return Ok(alert);
    };
    if let Some(command) = raw.command {
        if command
            .first()
            .is_none_or(|program| program.trim().is_empty())
        {
            return Err(
                "alert.command: the command is empty; name a program and its arguments, like command = [\"./notify.sh\", \"ops\"]"
                    .into(),
            );
        }
        alert.command = Some(command);
    }
    if let Some(timeout) = raw.command_timeout {
        alert.command_timeout = span("alert.command_timeout", &timeout, ALERT_COMMAND_TIMEOUT)?;
    }
    alert.webhook = raw.webhook.map(|u| url("alert.webhook", &u)).transpose()?;
    alert.ping = raw
        .ping
        .map(|u| PingUrl::parse("alert.ping", &u))
        .transpose()?;
    if let Some(every) = raw.alert_every {
        alert.every = span("alert.alert_every", &every, ALERT_EVERY)?;
    }
    Ok(alert)
}

/// An http(s) URL with a host; the message shows what was written only when it does
/// not parse (a token in it is then not recognisable as one anyway).
pub(super) fn url(key: &str, text: &str) -> Result<AlertUrl, KeyError> {
    let fix = "write a full http:// or https:// address, like \"https://hooks.example/backlog\"";
    let url =
        url::Url::parse(text).map_err(|e| format!("{key}: {text:?} is not a URL ({e}); {fix}"))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none_or(str::is_empty) {
        let shown = AlertUrl { url: url.clone() };
        return Err(KeyError::new(format!(
            "{key}: {shown} is not an http:// or https:// address; {fix}"
        )));
    }
    Ok(AlertUrl { url })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(webhook: &str) -> Option<RawAlert> {
        Some(RawAlert {
            command: None,
            command_timeout: None,
            webhook: Some(webhook.into()),
            ping: None,
            alert_every: None,
        })
    }

    #[test]
    fn a_url_is_shown_without_its_password_and_query() {
        let a = resolve(raw("https://ops:s3cret@hooks.example/h/T0K3N?token=abc#x")).unwrap();
        let url = a.webhook.unwrap();
        assert_eq!(url.to_string(), "https://hooks.example/h/T0K3N");
        assert_eq!(
            format!("{url:?}"),
            "AlertUrl(https://hooks.example/h/T0K3N)"
        );
        assert!(url.as_str().contains("token=abc"));
        let ping = url.with_path_suffix("/fail");
        assert_eq!(
            ping.as_str(),
            "https://ops:s3cret@hooks.example/h/T0K3N/fail?token=abc#x"
        );
        assert_eq!(a.every, DEFAULT_EVERY);
    }

    #[test]
    fn bad_values_name_the_key_and_the_fix() {
        let e = resolve(raw("hooks.example/x")).unwrap_err().message;
        assert!(
            e.starts_with("alert.webhook: \"hooks.example/x\" is not a URL"),
            "{e}"
        );
        let e = resolve(raw("ftp://hooks.example/x")).unwrap_err().message;
        assert!(
            e.starts_with("alert.webhook: ftp://hooks.example/x is not an http"),
            "{e}"
        );
        let e = resolve(Some(RawAlert {
            command: Some(vec![]),
            command_timeout: None,
            webhook: None,
            ping: None,
            alert_every: None,
        }))
        .unwrap_err()
        .message;
        assert!(e.starts_with("alert.command: the command is empty"), "{e}");
    }
}

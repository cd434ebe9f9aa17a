//! What is wrong with the alert channels, as the ticks find it: a key of `[alert]` that
//! a variable not set leaves out, a channel whose delivery failed. Each is a WARN line
//! of the tick that finds it, and is kept in `backlog_alerts` (rows of window 0) for
//! `status --check`, which warns of it: the environment the ticks run in (cron's, the
//! unit's) is what sends, not the shell of whoever runs the check, so the check reads
//! what the ticks found rather than judging its own environment. A tick that finds a
//! channel right again clears it.

use std::time::Duration;

use chrono::{DateTime, Utc};

use backlog_core::config::Config;
use backlog_core::store::{AlertTrouble, Store};

/// How long a failed delivery is news to `status --check`: a day, as the check's
/// failures are counted over a day.
const UNDELIVERED_NEWS: Duration = Duration::from_secs(86_400);

/// One thing wrong, as `backlog_alerts` names it (its `kind`).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Trouble {
    /// `unset alert.ping HC_UUID`: the key is left out, the variable not set.
    Unset { key: String, name: String },
    /// `undelivered webhook`: the channel's last delivery failed.
    Undelivered { channel: String },
}

impl Trouble {
    fn what(&self) -> String {
        match self {
            Trouble::Unset { key, name } => format!("unset {key} {name}"),
            Trouble::Undelivered { channel } => format!("undelivered {channel}"),
        }
    }

    fn parse(what: &str) -> Option<Trouble> {
        let mut words = what.split(' ');
        match (words.next()?, words.next()?, words.next(), words.next()) {
            ("unset", key, Some(name), None) => Some(Trouble::Unset {
                key: key.to_string(),
                name: name.to_string(),
            }),
            ("undelivered", channel, None, None) => Some(Trouble::Undelivered {
                channel: channel.to_string(),
            }),
            _ => None,
        }
    }
}

/// One WARN line per key of `[alert]` that a variable not set leaves out: once per
/// tick, the tick goes on.
pub(super) fn warn_unset(config: &Config) {
    for unset in config.alert_unset() {
        tracing::warn!("{unset}");
    }
}

/// At a tick's end: keeps which keys of `[alert]` a variable not set left out of it,
/// and clears those the tick had again. Reads first, so a tick with nothing wrong
/// writes nothing. A store that cannot say is left alone (debug): alerts never fail
/// a tick.
pub(super) fn keep_unset(config: &Config, store: &mut dyn Store, now: DateTime<Utc>) {
    let kept = match store.alert_troubles() {
        Ok(kept) => kept,
        Err(e) => {
            tracing::debug!("cannot read the alert channels' troubles: {e}");
            return;
        }
    };
    let found: Vec<String> = config
        .alert_unset()
        .iter()
        .map(|u| {
            Trouble::Unset {
                key: u.key.clone(),
                name: u.name.clone(),
            }
            .what()
        })
        .collect();
    let gone = kept
        .iter()
        .filter(|t| matches!(Trouble::parse(&t.what), Some(Trouble::Unset { .. })))
        .filter(|t| !found.contains(&t.what))
        .map(|t| (t.what.as_str(), false));
    let wrong = found.iter().map(|w| (w.as_str(), true));
    for (what, wrong) in wrong.chain(gone) {
        if let Err(e) = store.note_alert_trouble(what, now, wrong) {
            tracing::debug!("cannot keep the alert channels' troubles: {e}");
            return;
        }
    }
}

/// After a delivery through `channel` (`webhook`, `command`): notes a failure, or
/// clears an earlier one, where the database can be reached.
pub(super) fn keep_delivery(
    store: Option<&mut (dyn Store + '_)>,
    channel: &str,
    delivered: bool,
    now: DateTime<Utc>,
) {
    let Some(store) = store else { return };
    let what = Trouble::Undelivered {
        channel: channel.to_string(),
    }
    .what();
    if let Err(e) = store.note_alert_trouble(&what, now, !delivered) {
        tracing::debug!("cannot keep how alert {channel} went: {e}");
    }
}

/// What `status --check` says of the alert channels at `now`: a warning for each key
/// of `[alert]` the last tick had to leave out, and for each channel whose deliveries
/// failed in the last day with none delivered since. Empty when the tool's tables are
/// not there.
pub fn check_findings(
    store: &mut dyn Store,
    now: DateTime<Utc>,
) -> Result<Vec<String>, backlog_core::store::StoreError> {
    let troubles = store.alert_troubles()?;
    Ok(troubles.iter().filter_map(|t| finding(t, now)).collect())
}

fn finding(trouble: &AlertTrouble, now: DateTime<Utc>) -> Option<String> {
    let ago = DateTime::from_timestamp_millis(trouble.last_ms)
        .and_then(|last| (now - last).to_std().ok())
        .unwrap_or_default();
    let ago = backlog_core::duration::rough(ago);
    match Trouble::parse(&trouble.what)? {
        Trouble::Unset { key, name } => Some(format!(
            "{key} names ${{{name}}}, which was not set where the last tick ran ({ago} ago), so nothing goes out through it; set {name} where the ticks run (cron: `backlog crontab --install --env {name}`; the daemon: its environment file)"
        )),
        Trouble::Undelivered { channel } => {
            let last = DateTime::from_timestamp_millis(trouble.last_ms)?;
            if (now - last)
                .to_std()
                .is_ok_and(|age| age > UNDELIVERED_NEWS)
            {
                return None;
            }
            let alerts = match trouble.count {
                1 => "its last alert".to_string(),
                n => format!("its last {n} alerts"),
            };
            Some(format!(
                "the alert {channel} could not deliver {alerts}, the last {ago} ago (the ticks' log says why); the next alert tries again"
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trouble_reads_back_as_written() {
        for t in [
            Trouble::Unset {
                key: "alert.ping".into(),
                name: "HC_UUID".into(),
            },
            Trouble::Undelivered {
                channel: "webhook".into(),
            },
        ] {
            assert_eq!(Trouble::parse(&t.what()), Some(t));
        }
        assert_eq!(Trouble::parse("tick_failed"), None);
        assert_eq!(Trouble::parse("unset alert.ping"), None);
    }

    #[test]
    fn a_failed_delivery_is_news_for_a_day() {
        let now = Utc::now();
        let trouble = |hours: i64, count| AlertTrouble {
            what: "undelivered webhook".into(),
            last_ms: (now - chrono::Duration::hours(hours)).timestamp_millis(),
            count,
        };
        assert_eq!(
            finding(&trouble(2, 3), now).unwrap(),
            "the alert webhook could not deliver its last 3 alerts, the last 2h ago (the ticks' log says why); the next alert tries again"
        );
        assert_eq!(finding(&trouble(25, 1), now), None);
    }
}

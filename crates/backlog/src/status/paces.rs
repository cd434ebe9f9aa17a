//! The paces `rate = "auto"` found for a table (`backlog_paces`): what `backlog status`
//! lists and the metrics gauge `backlog_pace_per_second{tier,key}` shows.

use serde::Serialize;

use crate::config::Config;
use crate::duration;
use crate::store::{Store, StoreError};

/// A pace the fleet adapted, as `backlog_paces` holds it.
#[derive(Debug, Clone, Serialize)]
pub struct AdaptedPace {
    /// The rate's name: its table and tier, or group, and counterpart.
    pub name: String,
    /// The tier it paces (`1d`, `retry`), or `group NAME` for a `rate_group`'s.
    pub tier: String,
    /// The `rate_key` value it is for; none without a `rate_key` (empty: a NULL).
    pub key: Option<String>,
    /// Starts a second now.
    pub per_second: f64,
    /// Whether it is still in slow start (no overload seen yet).
    pub slow_start: bool,
    /// Seconds since the counterpart last was overloaded and the pace cut, if ever.
    pub cut_seconds_ago: Option<u64>,
}

/// The adapted paces of `config`'s table: those named by its table, or by its group.
pub(super) fn of(config: &Config, store: &mut dyn Store) -> Result<Vec<AdaptedPace>, StoreError> {
    if config.handler.auto_rate.is_none() {
        return Ok(Vec::new());
    }
    let prefix = match &config.handler.rate_group {
        Some(group) => format!("group {group}"),
        None => format!("table {}, tier ", config.table.name),
    };
    Ok(store
        .paces()?
        .into_iter()
        .filter_map(|p| {
            let (tier, key) = parts(p.name.strip_prefix(&prefix)?, &config.handler.rate_group)?;
            Some(AdaptedPace {
                tier,
                key,
                per_second: p.per_second,
                slow_start: p.slow_start,
                cut_seconds_ago: p.cut_ago.map(|d| d.as_secs()),
                name: p.name,
            })
        })
        .collect())
}

/// The tier and the key of a pace's name past its table's prefix (`86400s, counterpart
/// acme`), or past its group's (`, counterpart acme`, or nothing); none for another
/// table's or group's whose name merely begins the same.
fn parts(rest: &str, group: &Option<String>) -> Option<(String, Option<String>)> {
    let (tier, rest) = match group {
        Some(group) => (format!("group {group}"), rest),
        None => {
            let end = rest.find('s')?;
            let secs: u64 = rest[..end].parse().ok()?;
            (duration::tier_name(secs), &rest[end + 1..])
        }
    };
    let key = match rest {
        "" => None,
        ", no counterpart" => Some(String::new()),
        _ => Some(rest.strip_prefix(", counterpart ")?.to_string()),
    };
    Some((tier, key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_gives_its_tier_and_key() {
        let key = |s: &str| Some(s.to_string());
        assert_eq!(parts("86400s", &None), Some(("1d".into(), None)));
        assert_eq!(
            parts("0s, counterpart acme", &None),
            Some(("retry".into(), key("acme")))
        );
        assert_eq!(
            parts("3600s, no counterpart", &None),
            Some(("1h".into(), key("")))
        );
        let api = Some("api".to_string());
        assert_eq!(
            parts(", counterpart 7", &api),
            Some(("group api".into(), key("7")))
        );
        assert_eq!(parts("", &api), Some(("group api".into(), None)));
        assert_eq!(parts("-2, counterpart 7", &api), None, "group api-2's");
    }
}

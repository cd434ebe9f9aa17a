//! The paces `rate = "auto"` found for a table (`backlog_paces`): what `backlog status`
//! lists and the metrics gauge `backlog_pace_per_second{tier,key}` shows.
//!
//! With `rate_key` a tier has a pace per counterpart, thousands of them perhaps: a
//! person is shown a few of each tier, those the counterparts hold back most, which is
//! what they look for, and how many more there are (`by_tier`), the same in `status`
//! and on the dashboard; the JSON keeps each, the metrics each tier's 100 held back
//! most (and a count of them all). Held back most: the paces that were cut, slowest
//! first, before those still in slow start, which are low because they are new (a
//! counterpart seen for the first time), not because their counterpart refused.

use std::time::Duration;

use serde::Serialize;

use backlog_core::config::Config;
use backlog_core::duration;
use backlog_core::store::{Store, StoreError};

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
    let mut paces: Vec<(u64, AdaptedPace)> = store
        .paces()?
        .into_iter()
        .filter_map(|p| {
            let (order, tier, key) =
                parts(p.name.strip_prefix(&prefix)?, &config.handler.rate_group)?;
            let pace = AdaptedPace {
                tier,
                key,
                per_second: p.per_second,
                slow_start: p.slow_start,
                cut_seconds_ago: p.cut_ago.map(|d| d.as_secs()),
                name: p.name,
            };
            Some((order, pace))
        })
        .collect();
    // By tier as the schedule sorts them (the names sort `604800s` before `86400s`),
    // retries last; within a tier by name still (a stable sort).
    paces.sort_by_key(|(order, _)| *order);
    Ok(paces.into_iter().map(|(_, p)| p).collect())
}

/// How many paces of one tier a person is shown, those held back most first.
pub const SHOWN_PER_TIER: usize = 10;

/// One tier's (or group's) paces as a person is shown them.
#[derive(Debug)]
pub struct TierPaces<'a> {
    /// The tier (`1d`, `retry`) or `group NAME`.
    pub tier: &'a str,
    /// Its paces held back most, at most `SHOWN_PER_TIER`: those cut, slowest first,
    /// then those in slow start, slowest first.
    pub slowest: Vec<&'a AdaptedPace>,
    /// How many of its paces are not shown: each is faster, or in slow start.
    pub more: usize,
}

/// `paces` (as `of` orders them) by tier, each tier's held back most first (cut before
/// slow start, then slowest first; ties by name) and cut to `most`.
pub fn by_tier(paces: &[AdaptedPace], most: usize) -> Vec<TierPaces<'_>> {
    let mut tiers: Vec<TierPaces<'_>> = Vec::new();
    for p in paces {
        match tiers.last_mut() {
            Some(t) if t.tier == p.tier => t.slowest.push(p),
            _ => tiers.push(TierPaces {
                tier: &p.tier,
                slowest: vec![p],
                more: 0,
            }),
        }
    }
    for t in &mut tiers {
        t.slowest.sort_by(|a, b| {
            (a.slow_start.cmp(&b.slow_start)).then(a.per_second.total_cmp(&b.per_second))
        });
        t.more = t.slowest.len().saturating_sub(most);
        t.slowest.truncate(most);
    }
    tiers
}

impl AdaptedPace {
    /// Its starts a second in a few digits, as `status` prints a pace: `13.3`, `0.0167`.
    pub fn starts_a_second(&self) -> String {
        if self.per_second >= 10.0 {
            format!("{:.1}", self.per_second)
        } else {
            format!("{:.3}", self.per_second)
        }
    }

    /// Where it is: `in slow start, no overload yet`, `last cut 2m ago`.
    pub fn state(&self) -> String {
        match (self.slow_start, self.cut_seconds_ago) {
            (true, _) => "in slow start, no overload yet".to_string(),
            (false, Some(s)) => format!("last cut {} ago", duration::rough(Duration::from_secs(s))),
            (false, None) => "cut".to_string(),
        }
    }
}

/// Where a pace's tier sorts (its window; retries, window 0, last), the tier and the
/// key of a pace's name past its table's prefix (`86400s, counterpart acme`), or past
/// its group's (`, counterpart acme`, or nothing); none for another table's or group's
/// whose name merely begins the same.
fn parts(rest: &str, group: &Option<String>) -> Option<(u64, String, Option<String>)> {
    let (order, tier, rest) = match group {
        Some(group) => (0, format!("group {group}"), rest),
        None => {
            let end = rest.find('s')?;
            let secs: u64 = rest[..end].parse().ok()?;
            let order = if secs == 0 { u64::MAX } else { secs };
            (order, duration::tier_name(secs), &rest[end + 1..])
        }
    };
    let key = match rest {
        "" => None,
        ", no counterpart" => Some(String::new()),
        _ => Some(rest.strip_prefix(", counterpart ")?.to_string()),
    };
    Some((order, tier, key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_gives_its_tier_and_key() {
        let key = |s: &str| Some(s.to_string());
        assert_eq!(parts("86400s", &None), Some((86_400, "1d".into(), None)));
        assert_eq!(
            parts("0s, counterpart acme", &None),
            Some((u64::MAX, "retry".into(), key("acme")))
        );
        assert_eq!(
            parts("3600s, no counterpart", &None),
            Some((3_600, "1h".into(), key("")))
        );
        let api = Some("api".to_string());
        assert_eq!(
            parts(", counterpart 7", &api),
            Some((0, "group api".into(), key("7")))
        );
        assert_eq!(parts("", &api), Some((0, "group api".into(), None)));
        assert_eq!(parts("-2, counterpart 7", &api), None, "group api-2's");
    }

    fn pace(tier: &str, key: &str, per_second: f64) -> AdaptedPace {
        AdaptedPace {
            name: format!("{tier}, counterpart {key}"),
            tier: tier.into(),
            key: Some(key.into()),
            per_second,
            slow_start: false,
            cut_seconds_ago: Some(12),
        }
    }

    #[test]
    fn each_tier_shows_those_held_back_most() {
        let mut paces = vec![
            pace("1d", "a", 5.0),
            pace("1d", "b", 0.5),
            pace("1d", "c", 2.0),
            pace("1d", "new", 0.1),
            pace("7d", "a", 9.0),
        ];
        paces[3].slow_start = true;
        let tiers = by_tier(&paces, 2);
        let shown: Vec<(&str, Vec<&str>, usize)> = tiers
            .iter()
            .map(|t| {
                let keys = t
                    .slowest
                    .iter()
                    .map(|p| p.key.as_deref().unwrap())
                    .collect();
                (t.tier, keys, t.more)
            })
            .collect();
        assert_eq!(
            shown,
            vec![("1d", vec!["b", "c"], 2), ("7d", vec!["a"], 0)],
            "the slowest, 0.1 a second, is in slow start: new, not held back"
        );
        assert_eq!(paces[3].state(), "in slow start, no overload yet");
        assert_eq!(paces[1].starts_a_second(), "0.500");
        assert_eq!(paces[0].state(), "last cut 12s ago");
    }
}

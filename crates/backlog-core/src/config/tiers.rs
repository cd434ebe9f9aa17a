//! The `[[tier]]` sections and the top-level keys around them (`bands`, `limit`,
//! `timezone`), resolved into the `Schedule` the rest of the program trusts: tiers
//! sorted by strictly increasing window, one cadence each, every cron expression
//! parsed in the file's time zone.

use std::time::Duration;

use serde::Deserialize;

use super::KeyError;
use super::ping::PingUrl;
use super::ranges::{JITTER, MAX_SPREAD, SPAN, check_limit, span};
use crate::duration;
use crate::schedule::{BandMode, Cadence, DEFAULT_LIMIT, Schedule, Tier, parse_cron};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTier {
    window: String,
    every: Option<String>,
    cron: Option<String>,
    limit: Option<u64>,
    jitter: Option<String>,
    spread: Option<u32>,
    ping: Option<String>,
}

pub(super) fn resolve_schedule(
    bands: BandMode,
    limit: Option<u64>,
    timezone: Option<String>,
    raw: Vec<RawTier>,
) -> Result<(Schedule, Vec<(Duration, PingUrl)>), KeyError> {
    let timezone: chrono_tz::Tz = match timezone {
        None => chrono_tz::Tz::UTC,
        Some(name) => name.parse().map_err(|_| {
            format!("timezone: {name:?} is not a time zone name; use an IANA name like \"Europe/Paris\" or \"UTC\"")
        })?,
    };
    if raw.is_empty() {
        return Err("no [[tier]] sections; a schedule needs at least one tier, like schedules/progressive.toml".into());
    }
    let limit = check_limit("limit", limit)?;
    let mut tiers: Vec<Tier> = Vec::with_capacity(raw.len());
    let mut pings = Vec::new();
    for (i, t) in raw.into_iter().enumerate() {
        let n = i + 1;
        let window = span(&format!("tier {n}: window"), &t.window, SPAN)?;
        if let Some(prev) = tiers.last() {
            if window == prev.window {
                return Err(KeyError::new(format!(
                    "tier {n}: window {} repeats tier {}'s window (each tier needs a window of its own)",
                    duration::compact(window),
                    n - 1
                )));
            }
            if window < prev.window {
                return Err(KeyError::new(format!(
                    "tier {n}: window {} is not larger than tier {}'s window {} (tiers must be sorted by window)",
                    duration::compact(window),
                    n - 1,
                    duration::compact(prev.window)
                )));
            }
        }
        let cadence = match (t.every, t.cron) {
            (Some(every), None) => Cadence::Every(span(&format!("tier {n}: every"), &every, SPAN)?),
            (None, Some(cron)) => Cadence::Cron(
                Box::new(parse_cron(&cron).map_err(|e| format!("tier {n}: cron: {e}"))?),
                cron,
                timezone,
            ),
            (Some(_), Some(_)) => {
                return Err(KeyError::new(format!(
                    "tier {n}: both every and cron are set; keep one"
                )));
            }
            (None, None) => {
                return Err(KeyError::new(format!(
                    "tier {n}: no cadence; set every = \"1h\" or cron = \"0 * * * *\""
                )));
            }
        };
        let tier_limit = check_limit(&format!("tier {n}: limit"), t.limit)?;
        let jitter = match t.jitter {
            Some(j) => span(&format!("tier {n}: jitter"), &j, JITTER)?,
            None => Duration::ZERO,
        };
        if let Some(k) = t.spread.filter(|k| !(1..=MAX_SPREAD).contains(k)) {
            return Err(KeyError::new(format!(
                "tier {n}: spread: {k} is out of range; use 1 (the whole band every tick) to {MAX_SPREAD}"
            )));
        }
        if let Some(ping) = t.ping {
            pings.push((window, PingUrl::parse(&format!("tier {n}: ping"), &ping)?));
        }
        tiers.push(Tier {
            window,
            cadence,
            limit: tier_limit,
            jitter,
            spread: t.spread.unwrap_or(1),
        });
    }
    let schedule = Schedule {
        tiers,
        bands,
        limit: limit.unwrap_or(DEFAULT_LIMIT),
        timezone,
    };
    Ok((schedule, pings))
}

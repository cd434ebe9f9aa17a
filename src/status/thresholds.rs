//! The thresholds `status --check` and `/readyz` judge the backlog by, beside the
//! tiers' ticks (`[check]`, each overridden by its flag): failed attempts of the last
//! 24 hours, pending records, and how long new work waits for its first try.
//!
//! Waiting is Sidekiq's latency: the age of the oldest record never tried. The tool
//! keeps no column in the user's table, so "never tried" is read from the status a
//! tick writes: a record still in a pending status no try writes (not `table.error`,
//! not a status of `handler.exit_codes`: `Config::untried_statuses`) has not been
//! tried to its end. It is read per tier, the oldest of its band, one indexed query a
//! status (`Survey::oldest_in`), so the cost follows the bands, not the table. A
//! record past the last tier's window is not waiting (no tier tries it: `status`
//! lists it), nor one stamped in the future.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::{Status, check::CheckLevel};
use backlog_core::config::{CheckConfig, Config};
use backlog_core::duration;
use backlog_core::plural::count;
use backlog_core::store::{Store, StoreError};

/// The thresholds of a check; each none (off) unless `[check]` or a flag sets it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Thresholds {
    /// Warn above this many failed attempts in the last 24 hours.
    pub warn_failures: Option<u64>,
    /// Critical above this many failed attempts in the last 24 hours.
    pub critical_failures: Option<u64>,
    /// Warn once a record never tried has waited longer than this.
    pub warn_waiting: Option<Duration>,
    /// Critical once a record never tried has waited longer than this.
    pub critical_waiting: Option<Duration>,
    /// Warn above this many pending records in the tiers' bands.
    pub warn_pending: Option<u64>,
    /// Critical above this many pending records in the tiers' bands.
    pub critical_pending: Option<u64>,
}

impl Thresholds {
    /// The schedule file's `[check]`.
    pub fn of(check: &CheckConfig) -> Thresholds {
        Thresholds {
            warn_failures: check.warn_failures,
            critical_failures: check.critical_failures,
            warn_waiting: check.warn_waiting,
            critical_waiting: check.critical_waiting,
            warn_pending: check.warn_pending,
            critical_pending: check.critical_pending,
        }
    }

    /// Whether a waiting threshold is set: the check then reads each tier's oldest
    /// record never tried.
    pub fn watches_waiting(&self) -> bool {
        self.warn_waiting.is_some() || self.critical_waiting.is_some()
    }

    /// Whether any threshold is set.
    pub fn any(&self) -> bool {
        self.watches_waiting()
            || self.warn_pending.is_some()
            || self.critical_pending.is_some()
            || self.warn_failures.is_some()
            || self.critical_failures.is_some()
    }
}

/// The oldest record never tried, of the tier whose band holds it.
#[derive(Debug, Clone)]
pub struct Waiting {
    /// The tier's 1-based number.
    pub tier: usize,
    /// Its window, compact (`1d`).
    pub window: String,
    /// The record's inserted-at time.
    pub since: DateTime<Utc>,
    /// How long it has waited at the check's `now`.
    pub age: Duration,
}

/// The oldest record never tried of any tier's band at `now`, if one is there: a
/// query a tier and status (`statuses`: `Config::untried_statuses`).
pub fn oldest_waiting(
    config: &Config,
    store: &mut dyn Store,
    now: DateTime<Utc>,
    statuses: &[String],
) -> Result<Option<Waiting>, StoreError> {
    let format = store.inspect()?;
    let windows: Vec<Duration> = config.schedule.tiers.iter().map(|t| t.window).collect();
    let mut oldest: Option<Waiting> = None;
    for (_, tier, range) in super::age_ranges(&windows, format, now) {
        let Some(tier) = tier else { continue };
        let Some(since) = store.oldest_in(statuses, &range)? else {
            continue;
        };
        if oldest.as_ref().is_none_or(|o| since < o.since) {
            oldest = Some(Waiting {
                tier,
                window: duration::compact(windows[tier - 1]),
                since,
                age: (now - since).to_std().unwrap_or_default(),
            });
        }
    }
    Ok(oldest)
}

/// The records of the tiers' bands in a `pending` status, from the status's counts.
pub fn pending(status: &Status, pending: &[String]) -> u64 {
    status
        .ages
        .iter()
        .filter(|row| row.tier.is_some())
        .flat_map(|row| row.counts.iter())
        .filter(|(s, _)| pending.contains(*s))
        .map(|(_, n)| n)
        .sum()
}

/// What the thresholds say of `status` and the oldest record never tried: a finding
/// for each threshold passed, critical before warning (one per measure).
pub fn findings(
    status: &Status,
    pending_statuses: &[String],
    waiting: Option<&Waiting>,
    t: &Thresholds,
) -> Vec<(CheckLevel, String)> {
    let mut findings = Vec::new();
    let level_of = |over_critical: bool, over_warn: bool| match (over_critical, over_warn) {
        (true, _) => Some(CheckLevel::Critical),
        (false, true) => Some(CheckLevel::Warning),
        _ => None,
    };
    let failures: u64 = status.failures_24h.values().sum();
    let over = |limit: Option<u64>, n: u64| limit.is_some_and(|l| n > l);
    if let Some(level) = level_of(
        over(t.critical_failures, failures),
        over(t.warn_failures, failures),
    ) {
        let limit = match level {
            CheckLevel::Critical => t.critical_failures,
            _ => t.warn_failures,
        };
        findings.push((
            level,
            format!(
                "{} in the last 24 hours, over {}",
                count(failures, "failed attempt", "failed attempts"),
                limit.unwrap_or_default()
            ),
        ));
    }
    let n = pending(status, pending_statuses);
    if let Some(level) = level_of(over(t.critical_pending, n), over(t.warn_pending, n)) {
        let limit = match level {
            CheckLevel::Critical => t.critical_pending,
            _ => t.warn_pending,
        };
        findings.push((
            level,
            format!(
                "{} in the tiers' bands, over {}",
                count(n, "pending record", "pending records"),
                limit.unwrap_or_default()
            ),
        ));
    }
    if let Some(w) = waiting {
        let past = |limit: Option<Duration>| limit.is_some_and(|l| w.age > l);
        if let Some(level) = level_of(past(t.critical_waiting), past(t.warn_waiting)) {
            let limit = match level {
                CheckLevel::Critical => t.critical_waiting,
                _ => t.warn_waiting,
            };
            findings.push((
                level,
                format!(
                    "new records wait for their first try: the oldest never tried, in tier {} ({}), has waited {}, over {}; is the tier ticking, and reaching its whole band?",
                    w.tier,
                    w.window,
                    duration::rough(w.age),
                    duration::compact(limit.unwrap_or_default())
                ),
            ));
        }
    }
    findings
}

/// What the thresholds `t` say of the backlog of `config` at `now`, whose status is
/// `status`: each tier's oldest record of the `untried` statuses is read only where a
/// waiting threshold is set.
pub fn judge(
    config: &Config,
    store: &mut dyn Store,
    status: &Status,
    untried: &[String],
    t: &Thresholds,
) -> Result<Vec<(CheckLevel, String)>, StoreError> {
    let waiting = match t.watches_waiting() {
        true => oldest_waiting(config, store, status.now, untried)?,
        false => None,
    };
    Ok(findings(status, &config.table.pending, waiting.as_ref(), t))
}

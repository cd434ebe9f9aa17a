//! The daemon's watch on its own schedule: a tier that `status` finds late raises
//! `tier_overdue` (the alert), read beside the ticks, so a person hears of a tier
//! that went quiet without a tick to fail.

use std::time::Duration;

use chrono::{DateTime, Utc};

use backlog_core::config::Config;
use backlog_core::store::Store;

/// For the daemon: raises `tier_overdue` for each tier `status` finds late at `now`
/// (a paused tier is not late, nor one of the windows `running`: a daemon started
/// after a gap ticks its late tiers at once), and pings `URL/fail` with each one sent.
pub(super) fn check_overdue(
    config: &Config,
    store: &mut dyn Store,
    now: DateTime<Utc>,
    running: &[Duration],
) {
    // Late ticks are what healthchecks.io's own schedule sees: a file that only
    // pings leaves them to it.
    if !config.alert.sends() {
        return;
    }
    let tiers = match crate::status::tiers(config, store, now) {
        Ok(tiers) => tiers,
        Err(e) => {
            tracing::warn!("cannot check whether a tier is overdue: {e}");
            return;
        }
    };
    for (tier, window) in tiers
        .iter()
        .zip(config.schedule.tiers.iter().map(|t| t.window))
    {
        let (Some(secs), Some(due)) = (tier.overdue_seconds, tier.next_due) else {
            continue;
        };
        if running.contains(&window) {
            continue;
        }
        let message = format!(
            "tier {} ({} {}) was due at {}, {} ago; is its crontab line or daemon running?",
            tier.tier,
            tier.window,
            tier.cadence,
            backlog_core::duration::instant(due),
            backlog_core::duration::rough(Duration::from_secs(secs))
        );
        crate::alert::tier_overdue(config, store, window, now, message);
    }
}

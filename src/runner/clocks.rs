//! The daemon's clocks: when each tier fires next, by the time the runners share (the
//! database server's where there is one), and the clocks at start, where a tier that
//! missed its slot, or whose tick ended early, fires at once.

use std::time::Duration;

use chrono::{DateTime, Utc};

use backlog_core::Error;
use backlog_core::config::Config;
use backlog_core::duration;
use backlog_core::schedule::Tier;
use backlog_core::tick::open_store;

/// When each tier fires next.
pub(super) struct Clock {
    pub(super) window: Duration,
    pub(super) next: DateTime<Utc>,
}

/// The time by the clock the runners share: this host's, corrected by how far the
/// database server's was found from it.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Shared {
    /// The server's clock minus this host's (zero on SQLite, whose runners share the
    /// host).
    offset: chrono::Duration,
}

impl Shared {
    /// Measures the offset on `store`, halving the round trip.
    pub(super) fn measure(
        config: &Config,
        store: &mut dyn backlog_core::Store,
    ) -> Result<Shared, Error> {
        if !config.database.url.is_server() {
            return Ok(Shared::default());
        }
        let before = Utc::now();
        let server = store.clock().map_err(Error::store(store.describe()))?;
        let after = Utc::now();
        Ok(Shared {
            offset: server - (before + (after - before) / 2),
        })
    }

    pub(super) fn now(self) -> DateTime<Utc> {
        Utc::now() + self.offset
    }
}

/// The next time `tier` fires after `now`, its jitter added.
pub(super) fn next_fire(tier: &Tier, now: DateTime<Utc>, rng: &mut fastrand::Rng) -> DateTime<Utc> {
    let slot = tier
        .cadence
        .next_slot(now)
        .unwrap_or(DateTime::<Utc>::MAX_UTC);
    let jitter_ms = tier.jitter.as_millis() as u64;
    slot + chrono::Duration::milliseconds(rng.u64(0..=jitter_ms) as i64)
}

/// The clocks at start: a tier whose last slot passed with no tick in the run log fires
/// at once (once, however many slots were missed).
pub(super) fn clocks_at_start(
    config: &Config,
    rng: &mut fastrand::Rng,
) -> Result<(Vec<Clock>, Shared), Error> {
    let mut store = open_store(config)?;
    let shared = Shared::measure(config, store.as_mut())?;
    let now = shared.now();
    let store_err = Error::store(store.describe());
    let unfinished = store
        .unfinished_runs(config.database.claim_lease)
        .map_err(&store_err)?;
    let mut clocks = Vec::new();
    for tier in &config.schedule.tiers {
        let last = store.last_tick(tier.window).map_err(&store_err)?;
        let missed = match (last, tier.cadence.previous_slot(now)) {
            (None, _) => true,
            (Some(last), Some(slot)) => last < slot,
            (Some(_), None) => false,
        };
        let stopped = unfinished
            .iter()
            .find(|r| r.window_secs == tier.window.as_secs());
        if let Some(run) = stopped {
            tracing::info!(
                "tier {}: its tick of {} ended early ({}); taking the rest of its band now",
                duration::compact(tier.window),
                duration::instant(run.clock),
                run.outcome
            );
        } else if missed {
            tracing::info!(
                "tier {}: missed its last slot, ticking now",
                duration::compact(tier.window)
            );
        }
        clocks.push(Clock {
            window: tier.window,
            next: if missed || stopped.is_some() {
                now
            } else {
                next_fire(tier, now, rng)
            },
        });
    }
    Ok((clocks, shared))
}

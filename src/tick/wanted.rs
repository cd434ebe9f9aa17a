//! Which records of its band a tick wants: the tier's `spread` share of this tick, and
//! under a `[retry]` strategy only the records whose delay has passed. The others are
//! left untouched for later ticks and counted as deferred.

use chrono::{DateTime, Utc};

use crate::backoff::Strategy;
use crate::config::{RetryConfig, TableConfig};
use crate::error::Error;
use crate::record::{Record, Scalar};
use crate::schedule::Tier;

/// What a tick takes of the records it reads.
pub(super) struct Wants<'s> {
    /// The tier whose spread share the tick takes; none for a window no tier has.
    tier: Option<&'s Tier>,
    /// The `[retry]` section and its strategy, built once a tick.
    retry: Option<(&'s RetryConfig, Box<dyn Strategy>)>,
    now: DateTime<Utc>,
}

impl<'s> Wants<'s> {
    /// What a tick of `tier` at `now` wants of the records of `table`.
    pub(super) fn new(
        tier: Option<&'s Tier>,
        table: &'s TableConfig,
        now: DateTime<Utc>,
    ) -> Result<Self, Error> {
        let retry = table
            .retry
            .as_ref()
            .map(|r| {
                crate::backoff::catalog::build(&r.strategy, &r.params, 1.0)
                    .map(|built| (r, built.strategy))
                    .map_err(|e| Error::Usage(format!("retry: {e}")))
            })
            .transpose()?;
        Ok(Wants { tier, retry, now })
    }

    /// Whether the tick takes `record`: its spread share, and its `[retry]` delay over.
    pub(super) fn takes(&self, record: &Record) -> bool {
        self.tier.is_none_or(|t| t.takes(&record.id, self.now))
            && self.retry.as_ref().is_none_or(|(config, strategy)| {
                retry_due(record, config, strategy.as_ref(), self.now)
            })
    }

    /// Whether it takes every record of its band (no spread, no `[retry]`).
    pub(super) fn all(&self) -> bool {
        self.tier.is_none_or(|t| t.takes_all()) && self.retry.is_none()
    }
}

/// Whether a record's `[retry]` delay has passed: its attempt count picks the delay,
/// its `since` column says from when. A record never tried (count 0 or NULL, or no
/// readable time) is due; one its strategy gave up on never is.
fn retry_due(
    record: &Record,
    retry: &RetryConfig,
    strategy: &dyn Strategy,
    now: DateTime<Utc>,
) -> bool {
    use crate::backoff::{Delay, FAILURE};
    let column = |name: &str| record.columns.get_ignore_case(name);
    let count = column(&retry.count)
        .and_then(serde_json::Value::as_i64)
        .unwrap_or(0)
        .max(0) as usize;
    let since = column(&retry.since).and_then(|v| match v {
        serde_json::Value::Number(n) => n.as_i64().map(Scalar::Int),
        serde_json::Value::String(s) => Some(Scalar::Text(s.clone())),
        _ => None,
    });
    let Some(since) = since
        .as_ref()
        .and_then(crate::timestamp::read_any)
        .filter(|_| count > 0)
    else {
        return true;
    };
    // The record's own random stream, so a jittered delay is the same at every tick.
    let mut rng = fastrand::Rng::with_seed(crate::schedule::share(&record.id, u32::MAX));
    match strategy.delays(&vec![FAILURE; count], &mut rng).last() {
        Some(Delay::Wait(s)) => since + chrono::Duration::milliseconds((s * 1000.0) as i64) <= now,
        _ => false,
    }
}

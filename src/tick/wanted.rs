//! Which records of its band a tick wants: the tier's `spread` share of this tick, and
//! under a `[retry]` strategy only the records whose delay has passed. The others are
//! left untouched for later ticks and counted as deferred.

use chrono::{DateTime, Utc};

use crate::record::{Record, Scalar};

/// Whether a record's `[retry]` delay has passed: its attempt count picks the delay,
/// its `since` column says from when. A record never tried (count 0 or NULL, or no
/// readable time) is due; one its strategy gave up on never is.
pub(super) fn retry_due(
    record: &Record,
    retry: &crate::config::RetryConfig,
    strategy: &dyn crate::backoff::Strategy,
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

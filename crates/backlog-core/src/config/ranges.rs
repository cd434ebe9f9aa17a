//! The ranges of the file's durations and counts (docs/ranges.md) that more than one
//! section or the command line use, and the checks that hold a value to its range
//! with a message naming the key. `handler.concurrency` and the `[history]` keys keep
//! their ranges in their own files. Public, so that what documents the file
//! (backlog.toml(5)) says the ranges the checks hold values to.

use std::time::Duration;

use super::KeyError;
use crate::duration::{self, Range};

/// Windows and cadences: longer than zero, up to 100 years.
pub const SPAN: Range = Range::positive(duration::LONGEST);
/// `database.busy_timeout`: a write that waits an hour for a lock waits for nothing.
pub const BUSY_TIMEOUT: Range = Range::positive(Duration::from_secs(3_600));
/// `database.claim_lease`: heartbeats come every quarter lease, so a second is the
/// least that leaves them time; past a day, a killed tick's records wait too long.
pub const CLAIM_LEASE: Range = Range {
    min: Duration::from_secs(1),
    max: Duration::from_secs(86_400),
};
/// `handler.timeout`: one record's handler, up to a day.
pub const HANDLER_TIMEOUT: Range = Range::positive(Duration::from_secs(86_400));
/// `handler.stop_grace`: none (a stop ends handlers at once) up to an hour; a stop
/// that waits longer is no stop a deploy or systemd waits out.
pub const STOP_GRACE: Range = Range::up_to(Duration::from_secs(3_600));
/// `handler.breaker_cooldown`: a second up to a day (a counterpart down longer is a
/// person's to look at, `backlog pause`).
pub const BREAKER_COOLDOWN: Range = Range {
    min: Duration::from_secs(1),
    max: Duration::from_secs(86_400),
};
/// `jitter`: none, up to 100 years (a tier's ticks are delayed by up to that).
pub const JITTER: Range = Range::up_to(duration::LONGEST);

/// `alert.alert_every`: a second (tests, a noisy drill) up to 30 days; past that an
/// alert held back is news no more.
pub const ALERT_EVERY: Range = Range {
    min: Duration::from_secs(1),
    max: Duration::from_secs(30 * 86_400),
};
/// `alert.command_timeout`: a second up to ten minutes; an alert a tick waits on
/// longer keeps the tick's end (and cron's, and the daemon's next tick of the tier).
pub const ALERT_COMMAND_TIMEOUT: Range = Range {
    min: Duration::from_secs(1),
    max: Duration::from_secs(600),
};

/// The most records one tick selects (`limit`, a tier's `limit`, `--limit`).
pub const MAX_LIMIT: u64 = 1_000_000_000;
/// The most records a batch handler gets at once: they are held in memory.
pub const MAX_BATCH_SIZE: usize = 10_000;
/// The most ticks a spread tier divides its band over.
pub const MAX_SPREAD: u32 = 1_000;

pub(super) fn span(key: &str, text: &str, range: Range) -> Result<Duration, KeyError> {
    range
        .parse(text)
        .map_err(|e| KeyError::new(format!("{key}: {e}")))
}

/// A record count of the file: `limit` or a tier's `limit`.
pub(super) fn check_limit(key: &str, n: Option<u64>) -> Result<Option<u64>, KeyError> {
    match n {
        Some(n) if !(1..=MAX_LIMIT).contains(&n) => Err(KeyError::new(format!(
            "{key}: {n} is out of range; use 1 to {MAX_LIMIT} records a tick"
        ))),
        n => Ok(n),
    }
}

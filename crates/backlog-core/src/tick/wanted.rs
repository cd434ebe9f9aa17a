//! Which records of its band a tick wants: the tier's `spread` share of this tick, and
//! under a `[retry]` strategy only the records whose delay has passed. The others are
//! left untouched for later ticks and counted as deferred.

use chrono::{DateTime, Utc};

use crate::config::TableConfig;
use crate::curve::Curve;
use crate::error::Error;
use crate::record::Record;
use crate::schedule::Tier;

/// What a tick takes of the records it reads.
pub(super) struct Wants<'s> {
    /// The tier whose spread share the tick takes; none for a window no tier has.
    tier: Option<&'s Tier>,
    /// The `[retry]` section's curve, built once a tick.
    retry: Option<Curve<'s>>,
    now: DateTime<Utc>,
}

impl<'s> Wants<'s> {
    /// What a tick of `tier` at `now` wants of the records of `table`.
    pub(super) fn new(
        tier: Option<&'s Tier>,
        table: &'s TableConfig,
        now: DateTime<Utc>,
    ) -> Result<Self, Error> {
        Ok(Wants {
            tier,
            retry: Curve::of(table)?,
            now,
        })
    }

    /// Whether the tick takes `record`: its spread share, and its `[retry]` wait over
    /// (a record never tried is due; one its strategy gave up on never is).
    pub(super) fn takes(&self, record: &Record) -> bool {
        self.tier.is_none_or(|t| t.takes(&record.id, self.now))
            && self
                .retry
                .as_ref()
                .is_none_or(|curve| curve.due(record).at(self.now))
    }

    /// Why it may leave records of its band to later ticks, as the summary names it.
    pub(super) fn reasons(&self) -> Vec<&'static str> {
        let mut why = Vec::new();
        if self.tier.is_some_and(|t| !t.takes_all()) {
            why.push("spread");
        }
        if self.retry.is_some() {
            why.push("retry");
        }
        why
    }

    /// Whether it takes every record of its band (no spread, no `[retry]`).
    pub(super) fn all(&self) -> bool {
        self.tier.is_none_or(|t| t.takes_all()) && self.retry.is_none()
    }
}

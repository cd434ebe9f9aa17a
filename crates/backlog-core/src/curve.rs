//! The `[retry]` section's strategy applied to one record: its count column picks the
//! wait, its since column says from when. Written once, so the tick that decides
//! whether to take a record and `show`, `explain --id` and the dashboard that say when
//! it is tried next read the same curve the same way.

use chrono::{DateTime, Utc};

use crate::backoff::{Delay, FAILURE, Strategy, catalog};
use crate::config::{RetryConfig, TableConfig};
use crate::error::Error;
use crate::record::{Record, Scalar};

/// When the curve lets a record be tried again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Due {
    /// Now: never tried (a count of 0 or NULL, or no readable time), or its wait is over
    /// at any time from this one.
    From(Option<DateTime<Utc>>),
    /// The strategy gave up on it: no tick takes it again.
    Never,
}

impl Due {
    /// Whether a tick at `now` may take the record.
    pub fn at(self, now: DateTime<Utc>) -> bool {
        match self {
            Due::From(from) => from.is_none_or(|f| f <= now),
            Due::Never => false,
        }
    }
}

/// The `[retry]` strategy, built once, with the columns it reads.
pub struct Curve<'c> {
    config: &'c RetryConfig,
    strategy: Box<dyn Strategy>,
}

impl<'c> Curve<'c> {
    /// The curve of a `[retry]` section (checked when the file loaded; an error here
    /// names the strategy's parameter).
    pub fn new(config: &'c RetryConfig) -> Result<Self, crate::backoff::catalog::StrategyError> {
        let built = catalog::build(&config.strategy, &config.params, 1.0)?;
        Ok(Curve {
            config,
            strategy: built.strategy,
        })
    }

    /// The curve of a table's `[retry]` section, if it has one.
    pub fn of(table: &'c TableConfig) -> Result<Option<Self>, Error> {
        table
            .retry
            .as_ref()
            .map(|r| Curve::new(r).map_err(|e| Error::Usage(format!("retry: {e}"))))
            .transpose()
    }

    /// When `record` may be tried again, by its count and since columns.
    pub fn due(&self, record: &Record) -> Due {
        let column = |name: &str| record.columns.get_ignore_case(name);
        let count = column(&self.config.count)
            .and_then(serde_json::Value::as_i64)
            .unwrap_or(0)
            .max(0) as usize;
        let since = column(&self.config.since).and_then(|v| match v {
            serde_json::Value::Number(n) => n.as_i64().map(Scalar::Int),
            serde_json::Value::String(s) => Some(Scalar::Text(s.clone())),
            _ => None,
        });
        match since.as_ref().and_then(crate::timestamp::read_any) {
            Some(since) if count > 0 => self.after(&record.id, count, since),
            _ => Due::From(None),
        }
    }

    /// When a record that failed `count` times, the last at `since`, may be tried
    /// again. The record's own random stream draws a jittered wait, so it is the same
    /// at every tick and in every report.
    pub fn after(&self, id: &Scalar, count: usize, since: DateTime<Utc>) -> Due {
        match self.waits(id, count).last() {
            Some(Delay::Wait(s)) => Due::From(Some(
                since + chrono::Duration::milliseconds((s * 1000.0) as i64),
            )),
            Some(Delay::GiveUp) => Due::Never,
            None => Due::From(None),
        }
    }

    /// The waits after each of `n` failures in a row of the record `id`, drawn from its
    /// own random stream (the wait after the k-th is the k-th).
    pub fn waits(&self, id: &Scalar, n: usize) -> Vec<Delay> {
        let mut rng = fastrand::Rng::with_seed(crate::schedule::share(id, u32::MAX));
        self.strategy.delays(&vec![FAILURE; n], &mut rng)
    }
}

//! How a tick runs beyond what the schedule says, and what it reports as it goes.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::handler::Handled;
use crate::rate::Rate;
use crate::record::Record;

/// What `TickOptions::hold_wait` adds to the handler's timeout: the mark's write, a
/// group's interval, and the wait between two asks.
const HOLD_WAIT_SLACK: Duration = Duration::from_secs(5);

/// How a tick runs, beyond what the schedule says.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct TickOptions {
    /// The window of the tier to run.
    pub window: Duration,
    /// The clock the band is computed from (`--now`, or the real time).
    pub now: DateTime<Utc>,
    /// Overrides the tier's limit.
    pub limit: Option<u64>,
    /// Select and report, without claiming, handling or writing anything.
    pub dry_run: bool,
    /// Set from outside (a signal) to stop taking records; those in their handlers
    /// finish and are marked.
    pub stop: Arc<AtomicBool>,
    /// How long the handlers in flight when `stop` is set may go on before the tick
    /// stops them (`handler.stop_grace`); their records stay pending, for the next tick.
    pub stop_grace: Duration,
    /// How long a claim lives without a heartbeat; a killed tick's records wait this long.
    pub lease: Duration,
    /// Records read (and held) per query, at most. A tick asks for fewer while its
    /// handlers are slow: it holds only what it will start soon (see `pager`).
    pub page_size: usize,
    /// Marks written per transaction, at most; none for the store's own size
    /// (`Store::mark_group`). `mark_interval` bounds how long a mark waits, so with
    /// slower handlers a group is smaller, and a crash re-hands at most one group, at
    /// most a second of handling.
    pub mark_group: Option<usize>,
    /// The longest a handled record waits for its mark to be written.
    pub mark_interval: Duration,
    /// Records (batch mode: batches) in their handlers at once. Above 1 the handler
    /// must offer workers (`Handler::worker`).
    pub concurrency: usize,
    /// Handler starts per unit of time, spaced evenly, for every runner of the table
    /// and tier together (their starts reserved in the database).
    pub rate: Option<Rate>,
    /// `rate = "auto"`: the rate the fleet adapts to the counterpart's answers, within
    /// these bounds, in place of `rate`.
    pub auto_rate: Option<crate::config::AutoRate>,
    /// The name of a rate shared by tiers or tables that call the same counterpart
    /// (`handler.rate_group`), in place of the table and tier's own.
    pub rate_group: Option<String>,
    /// A column whose every value gets a rate of its own (`handler.rate_key`): records
    /// whose counterpart is at its rate wait while the others go.
    pub rate_key: Option<String>,
    /// After this many failures in a row (error, timeout, crash, a status mapped to the
    /// error status; not another mapped status) the tick hands out no more records:
    /// the breaker trips.
    pub stop_after_failures: Option<u32>,
    /// How long every runner of the tier stops once the breaker tripped, before one
    /// tries a record again (`handler.breaker_cooldown`).
    pub breaker_cooldown: Duration,
    /// A URL handler whose host comes from the record: without `rate_key`, each host
    /// is a counterpart of its own, whose breaker counts apart.
    pub counterpart_url: Option<crate::config::Template>,
    /// The most records of one counterpart (as `rate_key` or `counterpart_url` tells
    /// it) in their handlers at once (`handler.concurrency_per_key`).
    pub concurrency_per_key: Option<usize>,
    /// Whether the answers' codes are counted in `backlog_answers` (a URL handler's,
    /// for `backlog_http_responses_total`).
    pub count_answers: bool,
    /// Take records that failed earlier in this tier's slot too (`--retry-failed`); a
    /// failure is otherwise kept from every tick until its slot ends.
    pub retry_failed: bool,
    /// Which attempts are kept in `backlog_attempts`, and for how long.
    pub history: crate::config::HistoryConfig,
    /// How long a person's action (`backlog retry`, `snooze`, `give-up`) waits for the
    /// records a tick has in a handler, asking again every 200 ms: a handler ends by
    /// its timeout and its mark follows within a second or so, so the file's
    /// `handler.timeout` and 5 s. Those still held then are named, not taken.
    pub hold_wait: Duration,
}

impl TickOptions {
    /// Options for a tick of the tier with `window` at the clock `now`, with the
    /// defaults of a schedule file that sets nothing: a 60 s lease, pages of 1000, one
    /// record at a time, no rate, no breaker. A tick of a window no tier has covers
    /// `[0, window]`.
    pub fn new(window: Duration, now: DateTime<Utc>) -> Self {
        TickOptions {
            window,
            now,
            limit: None,
            dry_run: false,
            stop: Arc::new(AtomicBool::new(false)),
            stop_grace: crate::config::DEFAULT_STOP_GRACE,
            lease: Duration::from_secs(60),
            page_size: 1000,
            mark_group: None,
            mark_interval: Duration::from_secs(1),
            concurrency: 1,
            rate: None,
            auto_rate: None,
            rate_group: None,
            rate_key: None,
            counterpart_url: None,
            concurrency_per_key: None,
            count_answers: false,
            stop_after_failures: None,
            breaker_cooldown: Duration::from_secs(60),
            retry_failed: false,
            history: Default::default(),
            hold_wait: crate::config::HandlerConfig::new(Vec::new()).timeout + HOLD_WAIT_SLACK,
        }
    }

    /// The options a schedule file sets: the lease, and how the handler is paced.
    pub fn for_config(config: &crate::Config, window: Duration, now: DateTime<Utc>) -> Self {
        TickOptions {
            lease: config.database.claim_lease,
            concurrency: config.handler.concurrency,
            stop_grace: config.handler.stop_grace,
            rate: config.handler.rate,
            auto_rate: config.handler.auto_rate.clone(),
            rate_group: config.handler.rate_group.clone(),
            rate_key: config.handler.rate_key.clone(),
            counterpart_url: config
                .handler
                .http
                .as_ref()
                .filter(|h| h.host_from_record)
                .map(|h| h.url.clone()),
            concurrency_per_key: config.handler.concurrency_per_key,
            count_answers: config.handler.http.is_some(),
            stop_after_failures: config.handler.stop_after_failures,
            breaker_cooldown: config.handler.breaker_cooldown,
            history: config.history.clone(),
            hold_wait: config.handler.timeout + HOLD_WAIT_SLACK,
            ..TickOptions::new(window, now)
        }
    }
}

/// What a tick reports as it goes, for progress bars and listings.
#[derive(Debug)]
#[non_exhaustive]
pub enum Event<'a> {
    /// A record was handled and will be marked with `status`.
    Handled {
        /// The record handed over.
        record: &'a Record,
        /// What its handler answered: the outcome, its detail and output, how it ended.
        handled: &'a Handled,
        /// The status the mark will write: the success or error status, or one that
        /// `handler.exit_codes` maps an exit code to.
        status: &'a str,
    },
    /// A dry run would hand this record over.
    WouldHandle {
        /// The record it would hand over.
        record: &'a Record,
    },
}

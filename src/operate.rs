//! What a person on call does, as the library does it: read one record with its
//! attempts, retry records now, pause and resume tiers. `backlog show|retry|pause|
//! resume` and the web dashboard both go through here, so an action is the same
//! wherever it is taken.

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::error::Error;
use backlog::explain::NextTry;
use backlog_core::config::Config;
use backlog_core::duration;
use backlog_core::record::Record;
use backlog_core::store::{Attempt, AttemptQuery, Held, Pause, Store, StoreError};
use backlog_core::tick::{RetrySummary, TickOptions, open_store};

mod kept;
mod select;

pub use kept::Kept;
pub use select::{ATTEMPTS_READ, ErrorText, Filter, RetryPlan, Selection, attempts_holding, plan};

/// A store ready for reading records: opened and its table inspected.
pub fn inspected(config: &Config) -> Result<Box<dyn Store>, Error> {
    let mut store = open_store(config)?;
    store.inspect().map_err(Error::store(store.describe()))?;
    Ok(store)
}

/// One record as `backlog show` tells it.
#[derive(Debug, Clone)]
pub struct RecordView {
    /// The record as the table holds it now.
    pub record: Record,
    /// Its age at the `now` asked about; none when its inserted-at value cannot be read.
    pub age: Option<Duration>,
    /// Its status is one of `table.pending`.
    pub pending: bool,
    /// When a tier tries it next (pending records whose age can be read).
    pub next: Option<NextTry>,
    /// Who holds it now, if anyone.
    pub held: Option<Held>,
    /// Its attempts, newest first.
    pub attempts: Vec<Attempt>,
}

impl RecordView {
    /// As `show --json` prints it.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "id": self.record.id,
            "status": &*self.record.status,
            "pending": self.pending,
            "inserted_at": self.record.inserted_at().to_string(),
            "age": self.age.map(duration::rough),
            "age_seconds": self.age.map(|a| a.as_secs()),
            "columns": serde_json::to_value(&self.record.columns).unwrap_or_default(),
            "next_try": self.next,
            "held": self.held,
            "attempts": self.attempts,
        })
    }
}

/// The record with this id; none when the table has none. An id no record could have
/// (`abc` for integer ids) is a usage error that says so, not a record missing.
pub fn find_record(store: &mut dyn Store, id: &str) -> Result<Option<Record>, Error> {
    match store.find(id) {
        Err(e @ StoreError::NotAnId { .. }) => Err(Error::Usage(e.to_string())),
        found => found.map_err(Error::store(store.describe())),
    }
}

/// The record with this id, at `now`, with its newest `attempts` attempts; a usage
/// error when the table has none.
pub fn record_view(
    config: &Config,
    store: &mut dyn Store,
    id: &str,
    now: DateTime<Utc>,
    attempts: usize,
) -> Result<RecordView, Error> {
    let record = find_record(store, id)?.ok_or_else(|| {
        Error::Usage(format!(
            "table {} has no record with {} = {id:?}",
            config.table.name, config.table.id
        ))
    })?;
    view_of(config, store, record, now, attempts)
}

/// `record` at `now`, with its newest `attempts` attempts.
pub fn view_of(
    config: &Config,
    store: &mut dyn Store,
    record: Record,
    now: DateTime<Utc>,
    attempts: usize,
) -> Result<RecordView, Error> {
    let store_err = Error::store(store.describe());
    let age = record.age(now).and_then(|a| a.to_std().ok());
    let pending = config.table.is_pending(&record.status);
    // A keep left from before the record stopped being pending (given up, marked
    // done by hand) holds nothing back any more.
    let held = store
        .holder(&record)
        .map_err(&store_err)?
        .filter(|h| pending || h.owner.is_some());
    let curve = backlog_core::curve::Curve::of(&config.table)?;
    let next = pending
        .then(|| next_try(config, curve.as_ref(), &record, held.as_ref(), now))
        .flatten();
    let attempts = store
        .attempts(&AttemptQuery {
            record_id: Some(record.id.to_string()),
            limit: attempts,
            successes: true,
            ..AttemptQuery::default()
        })
        .map_err(&store_err)?;
    Ok(RecordView {
        record,
        age,
        pending,
        next,
        held,
        attempts,
    })
}

/// When the pending `record`, kept or held as `held` says, is tried next: as `show`
/// and the dashboard's record and records pages say it.
pub fn next_try(
    config: &Config,
    curve: Option<&backlog_core::curve::Curve>,
    record: &Record,
    held: Option<&Held>,
    now: DateTime<Utc>,
) -> Option<NextTry> {
    // A record kept from the ticks is tried at the first slot from the keep's end: a
    // failure's ends `DUE_SLACK` before its next slot (a tick a moment early counts for
    // it), a snooze's at the time asked.
    let from = match held {
        Some(h) if h.owner.is_none() => h.until.max(now),
        _ => now,
    };
    backlog::explain::next_try_of(&config.schedule, curve, record, now, from)
}

/// The file's config as a retry reads it: a record given up on (`table.given_up`) is
/// taken like a pending one, so that `backlog retry` brings it back (to the success
/// status, or the error status and the schedule again).
pub fn for_retry(mut config: Config) -> Config {
    if let Some(given_up) = config.table.given_up.clone()
        && !config.table.is_pending(&given_up)
    {
        config.table.pending.push(given_up);
    }
    config
}

/// Hands the planned records to the schedule file's handler now (see
/// [`backlog_core::tick::retry_records`]); `stop` ends it early when set.
pub fn run_retry(
    config: &Config,
    store: &mut dyn Store,
    records: Vec<Record>,
    now: DateTime<Utc>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> Result<RetrySummary, Error> {
    let mut handler =
        backlog_core::handler::from_config(&config.handler, &config.dir, &config.table.name)
            .map_err(|source| backlog_core::Error::Handler {
                file: Some(config.path.display().to_string()),
                source,
            })?;
    let opts = action_options(config, now, stop);
    Ok(backlog_core::tick::retry_records(
        &config.table,
        store,
        handler.as_mut(),
        records,
        &opts,
        &mut |_| {},
    )?)
}

/// The options of a person's action on records: the file's, at `now`, outside any
/// tier (window 0), ended early once `stop` is set.
fn action_options(
    config: &Config,
    now: DateTime<Utc>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> TickOptions {
    let mut opts = TickOptions::for_config(config, Duration::ZERO, now);
    opts.stop = stop;
    opts
}

/// Snoozes the planned records until `until`: they stay pending, and no tick takes
/// them before then (see [`backlog_core::tick::snooze_records`]); their attempts say
/// `snoozed by {by}` (a person and why).
pub fn snooze_by(
    config: &Config,
    store: &mut dyn Store,
    records: Vec<Record>,
    until: DateTime<Utc>,
    now: DateTime<Utc>,
    by: &str,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> Result<RetrySummary, Error> {
    let opts = action_options(config, now, stop);
    Ok(backlog_core::tick::snooze_records(
        &config.table,
        store,
        records,
        until,
        by,
        &opts,
    )?)
}

/// Gives up on the planned records (`table.given_up`, which must be set); `why` goes
/// in each record's attempt (see [`backlog_core::tick::give_up_records`]).
pub fn give_up(
    config: &Config,
    store: &mut dyn Store,
    records: Vec<Record>,
    why: &str,
    now: DateTime<Utc>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> Result<RetrySummary, Error> {
    let opts = action_options(config, now, stop);
    Ok(backlog_core::tick::give_up_records(
        &config.table,
        store,
        records,
        why,
        &opts,
    )?)
}

/// The window of a tier of the file in seconds, or a usage error listing them.
pub fn tier_window(config: &Config, window: Duration) -> Result<u64, Error> {
    if config.schedule.tier(window).is_some() {
        return Ok(window.as_secs());
    }
    Err(Error::Usage(format!(
        "--window {} is no tier's window in {} (its windows: {}{})",
        duration::compact(window),
        config.path.display(),
        config.schedule.windows().join(", "),
        config.schedule.did_you_mean_window(window)
    )))
}

/// `tier 2 (7d)` for a pause of one tier, `every tier` for a pause of all.
pub fn pause_target(config: &Config, window_secs: u64) -> String {
    match config.schedule.tier(Duration::from_secs(window_secs)) {
        Some((n, tier)) if window_secs > 0 => {
            format!("tier {n} ({})", duration::compact(tier.window))
        }
        _ => "every tier".to_string(),
    }
}

/// Pauses a tier of the file (`None`: every tier) on every runner.
pub fn pause(
    config: &Config,
    store: &mut dyn Store,
    window: Option<Duration>,
    until: Option<DateTime<Utc>>,
    reason: Option<String>,
    by: String,
) -> Result<Pause, Error> {
    let window_secs = window
        .map(|w| tier_window(config, w))
        .transpose()?
        .unwrap_or(0);
    let pause = Pause {
        window_secs,
        since: Utc::now(),
        until,
        reason: reason.filter(|r| !r.trim().is_empty()),
        by,
    };
    store
        .pause(&pause)
        .map_err(Error::store(store.describe()))?;
    Ok(pause)
}

/// Lifts the pause of a tier of the file (`None`: every pause of the table); returns
/// how many were lifted and the pauses left.
pub fn resume(
    config: &Config,
    store: &mut dyn Store,
    window: Option<Duration>,
) -> Result<(u64, Vec<Pause>), Error> {
    let window_secs = window.map(|w| tier_window(config, w)).transpose()?;
    let store_err = Error::store(store.describe());
    let lifted = store.resume(window_secs).map_err(&store_err)?;
    Ok((lifted, store.pauses().map_err(&store_err)?))
}

/// Why a person's snooze cannot end at `until`, asked at `now`: it is not after now,
/// or more than a year ahead (what a handler's "not before" may ask, at most).
pub fn snooze_refused(now: DateTime<Utc>, until: DateTime<Utc>) -> Option<&'static str> {
    let longest = chrono::Duration::from_std(backlog_core::handler::LONGEST_SNOOZE).ok()?;
    if until <= now {
        Some("is not after now")
    } else if until - now > longest {
        Some("is more than a year ahead")
    } else {
        None
    }
}

/// A time the command line or a form gives that cannot be taken.
#[derive(Debug, thiserror::Error)]
pub enum TimeError {
    /// Not a time where only a time is taken (`--now`).
    #[error("{0:?} is not an RFC 3339 time ({1}); write it like 2026-11-21T08:30:00Z")]
    NotATime(String, chrono::ParseError),
    /// A span from now past the last time there is.
    #[error("{0:?} is too far ahead")]
    TooFarAhead(String),
    /// Neither, where a time or a span from now is taken (`--until`).
    #[error("{0:?} is neither a time nor a span; write 2026-11-21T18:00:00Z or 2h")]
    Neither(String),
}

/// An RFC 3339 time, as `--now` takes it.
pub fn parse_time(text: &str) -> Result<DateTime<Utc>, TimeError> {
    DateTime::parse_from_rfc3339(text)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| TimeError::NotATime(text.to_string(), e))
}

/// When a pause is meant to end: an RFC 3339 time, or a span from now (`2h`).
pub fn parse_until(text: &str) -> Result<DateTime<Utc>, TimeError> {
    if let Ok(span) = duration::parse_span(text) {
        return chrono::Duration::from_std(span)
            .ok()
            .and_then(|span| Utc::now().checked_add_signed(span))
            .ok_or_else(|| TimeError::TooFarAhead(text.to_string()));
    }
    parse_time(text.trim()).map_err(|_| TimeError::Neither(text.to_string()))
}

/// Who is acting: user@host.
pub fn whoami() -> String {
    let user = crate::account::Account::current()
        .map(|a| a.name)
        .unwrap_or_else(|_| "unknown".into());
    let host = hostname::get()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "localhost".into());
    format!("{user}@{host}")
}

//! The breaker: after `handler.stop_after_failures` failures in a row, a tick hands
//! out no more records, and neither does any runner of its tier, on any host, for
//! `handler.breaker_cooldown`; then one runner tries one record (half-open), whose
//! success closes the breaker for all and whose failure opens it again. The fleet
//! counts its failures in a row together (`store::breakers`), so four runners against
//! a dead counterpart make the limit's calls and at most one more each, not four
//! times the limit.
//!
//! A counterpart that is down fails every record: without the breaker a tick would
//! call it once for each record of its band, every tick. With it, the tick stops after
//! a few calls, leaves the rest of the band as it was (no status is written for a
//! record that was not tried) and the next tick tries again. Failures are errors,
//! timeouts and crashes; a status the user mapped from an exit code is an answer (the
//! counterpart is up and said something about that record) and ends a run of failures
//! like a success does. A handler the tick stopped because its hold lapsed says nothing
//! about the counterpart either way: it is neither counted nor ends a run.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::counterparts::KeyOf;
use crate::duration;
use crate::handler::{Ending, Handled, Outcome};
use crate::plural::count;
use crate::record::Record;
use crate::store::{Store, StoreError};

/// How often a tick whose runners see no failures reads the fleet's breaker.
const READ_EVERY: Duration = Duration::from_secs(1);

pub(super) struct Breaker {
    limit: Option<u32>,
    in_a_row: u32,
    /// The account the failures of the current run share, while they share one.
    same: Option<std::borrow::Cow<'static, str>>,
    /// Why it tripped, once it has.
    pub(super) tripped: Option<String>,
    /// The breaker every runner of the tier shares (`store::breakers`); none where the
    /// tick has no limit, or no tool's tables to share it in (a dry run).
    fleet: Option<Fleet>,
    /// What an open breaker keeps waiting, as its messages end: the rest of the band,
    /// or one counterpart's records.
    waits: &'static str,
}

/// The fleet's part of a tick's breaker.
struct Fleet {
    /// Its name in `backlog_breakers`.
    name: String,
    /// How long it stays open once it tripped (`handler.breaker_cooldown`).
    cooldown: Duration,
    /// The fleet's failures in a row when last read or written.
    failures: u64,
    /// When it was last read; none before the first time.
    read_at: Option<Instant>,
    /// Where this tick's trial of a half-open breaker is.
    trial: Trial,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Trial {
    None,
    /// Its record is out: nothing more goes out until it is answered.
    Out,
}

impl Breaker {
    /// Trips the breaker for `why`: an event of the tick's span too.
    fn trip(&mut self, why: String) {
        super::trace::event(
            "backlog.breaker.tripped",
            vec![opentelemetry::KeyValue::new("backlog.reason", why.clone())],
        );
        self.tripped = Some(why);
    }

    /// A breaker of `limit` failures in a row, shared by every runner of `fleet`'s name
    /// (cooling down for its duration once tripped).
    pub(super) fn new(limit: Option<u32>, fleet: Option<(String, Duration)>) -> Self {
        Breaker {
            limit,
            in_a_row: 0,
            same: None,
            tripped: None,
            waits: "the rest of the band waits",
            fleet: fleet
                .filter(|_| limit.is_some())
                .map(|(name, cooldown)| Fleet {
                    name,
                    cooldown,
                    failures: 0,
                    read_at: None,
                    trial: Trial::None,
                }),
        }
    }

    /// How many of the next `n` records may go out now: all, one (the trial of a
    /// half-open breaker), or none (the breaker is open, `tripped` says why; or this
    /// tick's trial is out and unanswered). The fleet's breaker the database cannot
    /// read is said once, and the tick's own goes on alone.
    pub(super) fn allow(&mut self, n: usize, store: &mut dyn Store) -> usize {
        self.allow_shared(n, store, true)
            .unwrap_or_else(|e| self.alone(e, n))
    }

    /// Whether the breaker holds every record back now (as `allow` would say none),
    /// claiming nothing: a tick asks before it reserves starts of its rate, so that an
    /// open breaker spends none of them and a half-open one's trial is claimed only
    /// once its start is due.
    pub(super) fn holds(&mut self, store: &mut dyn Store) -> bool {
        self.allow_shared(1, store, false)
            .unwrap_or_else(|e| self.alone(e, 1))
            == 0
    }

    /// Whether this tick's trial of a half-open breaker is out: its answer is the
    /// breaker's to count, whatever else would leave it be.
    pub(super) fn trial_out(&self) -> bool {
        self.fleet.as_ref().is_some_and(|f| f.trial == Trial::Out)
    }

    /// Says why the fleet's breaker is not counted any more, and counts alone.
    fn alone(&mut self, e: StoreError, n: usize) -> usize {
        tracing::warn!(
            "cannot read or write the breaker the tier's runners share ({e}); this tick counts its failures alone"
        );
        self.fleet = None;
        n
    }

    fn allow_shared(
        &mut self,
        n: usize,
        store: &mut dyn Store,
        claim: bool,
    ) -> Result<usize, StoreError> {
        if self.tripped.is_some() {
            return Ok(0);
        }
        let Some(fleet) = &mut self.fleet else {
            return Ok(n);
        };
        if fleet.trial == Trial::Out {
            return Ok(0);
        }
        // Read while the fleet fails, and once a second while it does not.
        if fleet.failures == 0 && fleet.read_at.is_some_and(|t| t.elapsed() < READ_EVERY) {
            return Ok(n);
        }
        fleet.read_at = Some(Instant::now());
        let Some(state) = store.breaker(&fleet.name)? else {
            self.fleet = None;
            return Ok(n);
        };
        fleet.failures = state.failures;
        match state.open_for {
            None => Ok(n),
            Some(d) if d.is_zero() && !claim => Ok(n),
            Some(d) if d.is_zero() && store.try_breaker(&fleet.name, fleet.cooldown)? => {
                fleet.trial = Trial::Out;
                Ok(1)
            }
            Some(d) => {
                let open_for = duration::compact(Duration::from_secs(d.as_secs().max(1)));
                self.trip(format!(
                    "finding the breaker of this tier open (handler.stop_after_failures: {} in a row among its runners) for {open_for} more, or another runner trying a record; {}",
                    count(state.failures, "failure", "failures"),
                    self.waits
                ));
                Ok(0)
            }
        }
    }

    /// Counts an outcome, in the order the answers came back, and the fleet's with it.
    pub(super) fn count(&mut self, handled: &Handled, store: &mut dyn Store) {
        // A handler the tick stopped says nothing of the counterpart.
        if handled.ending == Ending::Stopped {
            return;
        }
        self.count_here(handled);
        if let Err(e) = self.count_shared(handled, store) {
            self.alone(e, 0);
        }
    }

    /// Counts an outcome in the fleet's breaker.
    fn count_shared(&mut self, handled: &Handled, store: &mut dyn Store) -> Result<(), StoreError> {
        let failed = handled.outcome == Outcome::Error;
        let Some(fleet) = &mut self.fleet else {
            return Ok(());
        };
        let trial = std::mem::replace(&mut fleet.trial, Trial::None);
        if !failed {
            if fleet.failures > 0 || trial == Trial::Out {
                store.breaker_succeeded(&fleet.name)?;
                fleet.failures = 0;
            }
            return Ok(());
        }
        let limit = u64::from(self.limit.unwrap_or(u32::MAX));
        let trip = self.tripped.is_some() || trial == Trial::Out;
        let Some(state) = store.breaker_failed(&fleet.name, limit, trip, fleet.cooldown)? else {
            return Ok(());
        };
        fleet.failures = state.failures;
        if self.tripped.is_none() && (trial == Trial::Out || state.open_for.is_some()) {
            let why = if trial == Trial::Out {
                "the one record tried past the breaker's cool-down failed:".to_string()
            } else {
                format!(
                    "{} in a row among this tier's runners (handler.stop_after_failures), the last:",
                    count(state.failures, "failure", "failures")
                )
            };
            let why = format!(
                "{why} {}{}; the breaker is open for {} (handler.breaker_cooldown), and {}",
                handled.detail,
                super::marks::tail_for_log(&handled.output),
                duration::compact(fleet.cooldown),
                self.waits
            );
            self.trip(why);
        }
        Ok(())
    }

    /// Counts an outcome of this tick's own.
    fn count_here(&mut self, handled: &Handled) {
        if handled.ending == Ending::Stopped {
            return;
        }
        if handled.outcome != Outcome::Error {
            self.in_a_row = 0;
            return;
        }
        self.in_a_row += 1;
        if self.in_a_row == 1 {
            self.same = Some(handled.detail.clone());
        } else if self.same.as_deref() != Some(&*handled.detail) {
            self.same = None;
        }
        if let Some(limit) = self.limit
            && self.in_a_row >= limit
            && self.tripped.is_none()
        {
            let which = match (limit, &self.same) {
                (1, _) => "it",
                (_, Some(_)) => "each",
                (_, None) => "the last",
            };
            // This tick's own count: what waits, waits for the next tick.
            let waits = match self.waits {
                "the rest of the band waits" => "the rest of the band waits for the next tick",
                other => other,
            };
            self.trip(format!(
                "{} in a row (handler.stop_after_failures), {which}: {}{}; {waits}",
                count(limit, "failure", "failures"),
                handled.detail,
                super::marks::tail_for_log(&handled.output)
            ));
        }
    }
}

/// A breaker for each counterpart (`handler.rate_key`'s value, or the host of a URL a
/// record gives): one counterpart that is down gets `stop_after_failures` calls and a
/// cool-down, shared by the fleet under the tier's name and its own, while the records
/// of the others go on. A record whose counterpart's breaker holds it back is not
/// handed out: it keeps its status and its next slot tries it.
pub(super) struct Breakers {
    limit: u32,
    /// The tier's breaker name; a counterpart's is this and its key.
    name: String,
    cooldown: Duration,
    key: KeyOf,
    breakers: HashMap<Option<String>, Breaker>,
    /// Records held back so far, for the summary.
    pub(super) held_back: u64,
}

/// The most counterparts whose breakers a tick keeps; past it, those not failing are
/// let go (their state lives in the database).
const BREAKERS_MOST: usize = 10_000;

impl Breakers {
    /// The counterparts' breakers of a tick with a limit and a way to tell a record's
    /// counterpart; none without both.
    pub(super) fn new(
        limit: Option<u32>,
        name: String,
        cooldown: Duration,
        key: Option<KeyOf>,
    ) -> Option<Self> {
        Some(Breakers {
            limit: limit?,
            name,
            cooldown,
            key: key?,
            breakers: HashMap::new(),
            held_back: 0,
        })
    }

    fn breaker(&mut self, key: Option<String>) -> &mut Breaker {
        if self.breakers.len() >= BREAKERS_MOST && !self.breakers.contains_key(&key) {
            self.breakers
                .retain(|_, b| b.in_a_row > 0 || b.tripped.is_some() || b.trial_out());
        }
        let (limit, cooldown) = (self.limit, self.cooldown);
        let name = match &key {
            Some(k) => format!("{}:{k}", self.name),
            None => self.name.clone(),
        };
        self.breakers.entry(key).or_insert_with(|| {
            let mut breaker = Breaker::new(Some(limit), Some((name, cooldown)));
            breaker.waits = "this counterpart's records wait, the others' go on";
            breaker
        })
    }

    /// Whether `record` may go out now; where its counterpart's breaker holds it
    /// back, it is counted and says why once.
    pub(super) fn allow(&mut self, record: &Record, store: &mut dyn Store) -> bool {
        let key = self.key.of(record);
        let breaker = self.breaker(key.clone());
        let was_tripped = breaker.tripped.is_some();
        if breaker.allow(1, store) == 1 {
            return true;
        }
        if !was_tripped && let Some(why) = &breaker.tripped {
            tracing::warn!("counterpart {}: {why}", key.as_deref().unwrap_or("(none)"));
        }
        self.held_back += 1;
        false
    }

    /// Counts an answer for `record` in its counterpart's breaker (`trial`: whether
    /// only a trial's answer counts, the pace having taken the answer as its own).
    pub(super) fn count(
        &mut self,
        record: &Record,
        handled: &Handled,
        absorbed: bool,
        store: &mut dyn Store,
    ) {
        let key = self.key.of(record);
        let breaker = self.breaker(key.clone());
        if absorbed && !breaker.trial_out() {
            return;
        }
        let was_tripped = breaker.tripped.is_some();
        breaker.count(handled, store);
        if !was_tripped && let Some(why) = &breaker.tripped {
            tracing::warn!("counterpart {}: {why}", key.as_deref().unwrap_or("(none)"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trips_after_the_limit_of_failures_in_a_row() {
        let error = Handled::new(Outcome::Error, "exit 1");
        let mapped = Handled::new(Outcome::Status("DEAD".into()), "exit 3");
        let mut breaker = Breaker::new(Some(3), None);
        for h in [&error, &error, &mapped, &error, &error] {
            breaker.count_here(h);
        }
        assert!(breaker.tripped.is_none(), "a mapped status ends the run");
        breaker.count_here(&error);
        assert_eq!(
            breaker.tripped.as_deref(),
            Some(
                "3 failures in a row (handler.stop_after_failures), each: exit 1; the rest of the band waits for the next tick"
            )
        );
    }

    #[test]
    fn names_the_last_failure_when_they_differ_and_its_output() {
        let mut breaker = Breaker::new(Some(2), None);
        breaker.count_here(&Handled::new(Outcome::Error, "exit 1"));
        breaker.count_here(&Handled::new(Outcome::Error, "exit 2").with_output("\nboom\n"));
        assert_eq!(
            breaker.tripped.as_deref(),
            Some(
                "2 failures in a row (handler.stop_after_failures), the last: exit 2: boom; the rest of the band waits for the next tick"
            )
        );
    }

    #[test]
    fn a_handler_the_tick_stopped_is_not_counted() {
        let error = Handled::new(Outcome::Error, "exit 1");
        let stopped = Handled::new(Outcome::Error, "stopped").ended(Ending::Stopped);
        let mut breaker = Breaker::new(Some(2), None);
        for h in [&stopped, &stopped, &error, &stopped] {
            breaker.count_here(h);
        }
        assert!(breaker.tripped.is_none(), "only one failure counted");
        breaker.count_here(&error);
        assert!(
            breaker.tripped.is_some(),
            "a stop does not end the run either"
        );
    }

    #[test]
    fn without_a_limit_it_never_trips() {
        let mut breaker = Breaker::new(None, None);
        for _ in 0..1000 {
            breaker.count_here(&Handled::new(Outcome::Error, "exit 1"));
        }
        assert!(breaker.tripped.is_none());
    }
}

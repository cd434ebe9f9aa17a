//! `rate = "auto"` in a tick: the fleet's adapted pace (`backlog_paces`), fed with this
//! tick's outcomes and read back as the interval its starts keep to.
//!
//! A tick does not write the row at each answer: it gathers the calls that went
//! through and sends them at most every `SYNC` (as it reserves its starts), and an
//! overload at once, so that the pace falls first and every runner spaces its next
//! starts wider. A refusal of a busy counterpart is the pace's to answer, not the
//! breaker's: the breaker leaves it be while the pace can still fall and calls still
//! go through between cuts. A refusal at `rate_min`, one that follows a cut with
//! nothing through since, and a timeout, say the counterpart is down: the breaker
//! counts those as any failure. A tick whose database refuses the row (no tables, a
//! grant missing) moves a pace of its own, said once.

use std::time::{Duration, Instant};

use crate::config::AutoRate;
use crate::handler::{Ending, Handled, Outcome, SNOOZE_EXIT};
use crate::pace::{Pace, Rule};
use crate::store::{PaceNews, Store};

/// How often a tick sends the calls that went through: ten times a second, so that the
/// pace grows with the fleet's calls and the row costs the database little.
const SYNC: Duration = Duration::from_millis(100);

/// How often a tick with no news reads the fleet's pace (another runner's cut).
const READ_EVERY: Duration = Duration::from_secs(1);

/// How long after a cut the fleet's starts may still go out at the pace before it:
/// starts reserved ahead (`spacing::RESERVE_AHEAD`) and a sync's lag, with room to spare.
const CUT_LAG: Duration = Duration::from_millis(300);

/// The fewest seconds between two log lines of a pace that halves, per pace and
/// process (a daemon's ticks of one tier share it).
const LOG_EVERY: Duration = Duration::from_secs(60);

/// Where a pace of its own starts, where the fleet's cannot be had.
const START: f64 = 1.0;

/// The adapted pace of one rate (a table and tier, a group, a counterpart).
pub(super) struct Adapted {
    name: String,
    min: f64,
    max: f64,
    /// The overload signals beyond the ones every pace reads.
    signals: AutoRate,
    /// Starts a second, as last read.
    per_second: f64,
    /// Calls that went through since the last sync.
    went_through: u64,
    /// When the latest overloaded call since the last sync started.
    overloaded: Option<Instant>,
    /// What said so, for the log line of a cut.
    why: String,
    synced: Option<Instant>,
    /// Whether the pace, as last read, answers an overload by itself.
    absorbs: bool,
    /// The tick's own pace, once the database refused the fleet's.
    alone: Option<Pace>,
}

impl Adapted {
    /// The fleet's pace `name`, within `bounds`; the tick's own where it has no name
    /// (the database refused the rates already).
    pub(super) fn new(auto: AutoRate, name: Option<String>) -> Self {
        let (min, max) = (auto.min.per_second(), auto.max.per_second());
        let start = START.clamp(min, max);
        Adapted {
            alone: name
                .is_none()
                .then(|| Pace::new(Rule::AUTO, start, min, max)),
            name: name.unwrap_or_default(),
            min,
            max,
            signals: auto,
            per_second: start,
            went_through: 0,
            overloaded: None,
            why: String::new(),
            synced: None,
            absorbs: false,
        }
    }

    /// The time between two starts at the pace as it is now, sending what this tick
    /// saw if a sync is due: news every `SYNC`, and the fleet's pace read at least
    /// every `READ_EVERY` while the tick has none (a tick that waits for its next
    /// start asks every 50 ms).
    pub(super) fn interval(&mut self, store: &mut dyn Store) -> Duration {
        let since = self.synced.map(|at| at.elapsed());
        let due = self.overloaded.is_some()
            || since.is_none_or(|since| {
                since >= READ_EVERY || (self.went_through > 0 && since >= SYNC)
            });
        if due {
            self.sync(store);
        }
        Duration::from_secs_f64(1.0 / self.per_second.max(1e-9))
    }

    /// Counts a handler's outcome: an overload signal moves the pace at once; a call
    /// that went through waits for the next sync. A handler the tick stopped, or
    /// that crashed, says nothing of the counterpart. Says whether the pace took a
    /// failure on itself (a busy counterpart's refusal, not a timeout): the breaker
    /// leaves it be. A success, however slow, is the breaker's to count as one.
    pub(super) fn outcome(
        &mut self,
        handled: &Handled,
        took: Duration,
        ended: Instant,
        store: &mut dyn Store,
    ) -> bool {
        if let Some(why) = overloaded(handled, took, &self.signals) {
            // A cut holds for a round trip, as TCP's does: a refusal is news only for a
            // call that started a call's time (and the starts still reserved at the
            // old pace) after the last cut, so it is counted as starting that much
            // earlier. Else the calls already on their way when the pace fell, which
            // meet a counterpart still drained by the burst, cut it again and again.
            // Dated from when the answer came, not when the tick read it.
            let started = ended.checked_sub(took + took + CUT_LAG).unwrap_or(ended);
            self.overloaded = Some(self.overloaded.map_or(started, |o| o.max(started)));
            self.why = why;
            self.sync(store);
            return self.absorbs
                && handled.outcome == Outcome::Error
                && handled.ending != Ending::TimedOut;
        }
        if handled.ending == Ending::Answered {
            self.went_through += 1;
        }
        false
    }

    /// Sends what this tick saw since the last sync, if anything: as the tick ends, so
    /// that a short tick's calls still move the fleet's pace.
    pub(super) fn flush(&mut self, store: &mut dyn Store) {
        if !self.quiet() {
            self.sync(store);
        }
    }

    /// Whether it holds no news the fleet's row lacks.
    pub(super) fn quiet(&self) -> bool {
        self.went_through == 0 && self.overloaded.is_none()
    }

    /// Sends the news and reads the pace back.
    fn sync(&mut self, store: &mut dyn Store) {
        let news = PaceNews::new(
            std::mem::take(&mut self.went_through),
            self.overloaded.take().map(|at| at.elapsed()),
        );
        self.synced = Some(Instant::now());
        let cut = match &mut self.alone {
            Some(pace) => alone(pace, news),
            None => match store.sync_pace(&self.name, self.min, self.max, news) {
                Ok(Some(now)) => {
                    self.per_second = now.per_second;
                    self.absorbs = now.absorbs_overload;
                    now.cut
                }
                Ok(None) => self.go_alone(news),
                Err(e) => {
                    tracing::warn!(
                        "cannot share the adapted pace {:?} with the other runners ({e}); this tick adapts its rate alone",
                        self.name
                    );
                    self.go_alone(news)
                }
            },
        };
        if let Some(pace) = &self.alone {
            self.per_second = pace.per_second();
            self.absorbs = pace.absorbs_overload();
        }
        if cut {
            super::trace::event(
                "backlog.pace.cut",
                vec![
                    opentelemetry::KeyValue::new("backlog.pace", self.name.clone()),
                    opentelemetry::KeyValue::new("backlog.reason", self.why.clone()),
                    opentelemetry::KeyValue::new("backlog.pace.per_second", self.per_second),
                ],
            );
        }
        if cut && log_due(&self.name) {
            tracing::warn!(
                "the counterpart of {} was overloaded ({}): its adapted pace halved to {:.3}/s",
                super::spacing::readable(&self.name),
                self.why,
                self.per_second
            );
        }
    }

    fn go_alone(&mut self, news: PaceNews) -> bool {
        let mut pace = Pace::new(Rule::AUTO, self.per_second, self.min, self.max);
        let cut = alone(&mut pace, news);
        self.alone = Some(pace);
        cut
    }
}

/// Moves a tick's own pace by `news`, on this process's clock; says whether it cut.
fn alone(pace: &mut Pace, news: PaceNews) -> bool {
    for _ in 0..news.went_through {
        pace.went_through();
    }
    let now = PROCESS_START.elapsed().as_secs_f64();
    news.overloaded
        .is_some_and(|ago| pace.overloaded(now - ago.as_secs_f64(), now))
}

static PROCESS_START: std::sync::LazyLock<Instant> = std::sync::LazyLock::new(Instant::now);

/// When this process last logged a cut of each pace.
static LOGGED: std::sync::Mutex<Vec<(String, Instant)>> = std::sync::Mutex::new(Vec::new());

/// Whether a cut of the pace `name` may be logged now (none was this past minute),
/// noting it if so. The list keeps only the paces logged within the minute.
fn log_due(name: &str) -> bool {
    let mut logged = LOGGED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    logged.retain(|(_, at)| at.elapsed() < LOG_EVERY);
    if logged.iter().any(|(n, _)| n == name) {
        return false;
    }
    logged.push((name.to_string(), Instant::now()));
    true
}

/// Whether an outcome says the counterpart is overloaded, and what said so: a
/// `retry_after` answer (a snooze), exit 75 (`EX_TEMPFAIL`) with or without one, or a
/// handler that ran past its timeout; and `handler.overload`'s codes (a status listed
/// there stands for its codes), and a call that took longer than
/// `handler.target_latency`, whatever it answered.
pub(super) fn overloaded(handled: &Handled, took: Duration, signals: &AutoRate) -> Option<String> {
    if handled.snooze.is_some() {
        return Some(format!("{}, a retry_after answer", handled.detail));
    }
    if handled.ending == Ending::TimedOut {
        return Some(handled.detail.to_string());
    }
    if let Some(code) = handled.code {
        if code == i64::from(SNOOZE_EXIT) {
            return Some(format!("{}, EX_TEMPFAIL", handled.detail));
        }
        if signals.overload_codes.contains(&code) {
            return Some(format!("{}, in handler.overload", handled.detail));
        }
    }
    signals
        .target_latency
        .filter(|target| handled.ending == Ending::Answered && took > *target)
        .map(|target| {
            format!(
                "a call of {:.1}s, past handler.target_latency {}",
                took.as_secs_f64(),
                crate::duration::compact(target)
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handler::{Outcome, Snooze};

    const QUICK: Duration = Duration::from_millis(10);

    #[test]
    fn a_cut_is_logged_once_a_minute_per_pace_across_ticks() {
        assert!(log_due("table T, tier 60s"));
        assert!(
            !log_due("table T, tier 60s"),
            "a second tick of the process"
        );
        assert!(log_due("table T, tier 3600s"), "another pace");
    }

    /// Whether `overloaded` says `is`, naming what said so when it does.
    fn overloaded_(is: bool, handled: &Handled, took: Duration, signals: &AutoRate) -> bool {
        let why = overloaded(handled, took, signals);
        assert!(why.as_ref().is_none_or(|w| !w.is_empty()));
        why.is_some() == is
    }

    #[test]
    fn overload_signals_are_a_snooze_exit_75_and_a_timeout() {
        let none = AutoRate::new();
        let answer = Handled::new(Outcome::Error, "exit 1");
        assert!(overloaded_(false, &answer, QUICK, &none));
        let mut tempfail = Handled::new(Outcome::Error, "exit 75");
        tempfail.code = Some(75);
        assert!(overloaded_(true, &tempfail, QUICK, &none));
        let mut snoozed = Handled::new(Outcome::Error, "retry-after 1");
        snoozed.snooze = Some(Snooze::For(Duration::from_secs(1)));
        assert!(overloaded_(true, &snoozed, QUICK, &none));
        let timed_out = Handled::new(Outcome::Error, "timed out").ended(Ending::TimedOut);
        assert!(overloaded_(true, &timed_out, QUICK, &none));
    }

    #[test]
    fn the_listed_codes_and_statuses_and_a_slow_answer_are_overloads() {
        let mut signals = AutoRate::new();
        signals.overload_codes.insert(69);
        signals.overload_codes.insert(70);
        signals.target_latency = Some(Duration::from_secs(2));
        let mut unavailable = Handled::new(Outcome::Error, "exit 69");
        unavailable.code = Some(69);
        assert!(overloaded_(true, &unavailable, QUICK, &signals));
        let mut other = Handled::new(Outcome::Error, "exit 3");
        other.code = Some(3);
        assert!(overloaded_(false, &other, QUICK, &signals));
        let mut throttled = Handled::new(Outcome::Status("THROTTLED".into()), "exit 70");
        throttled.code = Some(70);
        assert!(overloaded_(true, &throttled, QUICK, &signals));
        let done = Handled::new(Outcome::Success, "exit 0");
        assert!(overloaded_(false, &done, QUICK, &signals));
        assert!(
            overloaded_(true, &done, Duration::from_secs(3), &signals),
            "a success past target_latency"
        );
        assert_eq!(
            overloaded(&done, Duration::from_secs(3), &signals).as_deref(),
            Some("a call of 3.0s, past handler.target_latency 2s")
        );
        assert_eq!(
            overloaded(&unavailable, QUICK, &signals).as_deref(),
            Some("exit 69, in handler.overload")
        );
        let crashed = Handled::new(Outcome::Error, "killed").ended(Ending::Crashed(Some(9)));
        assert!(
            overloaded_(false, &crashed, Duration::from_secs(3), &signals),
            "a crash says nothing of the counterpart's latency"
        );
    }
}

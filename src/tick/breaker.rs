//! The breaker: after `handler.stop_after_failures` failures in a row, a tick hands
//! out no more records.
//!
//! A counterpart that is down fails every record: without the breaker a tick would
//! call it once for each record of its band, every tick. With it, the tick stops after
//! a few calls, leaves the rest of the band as it was (no status is written for a
//! record that was not tried) and the next tick tries again. Failures are errors,
//! timeouts and crashes; a status the user mapped from an exit code is an answer (the
//! counterpart is up and said something about that record) and ends a run of failures
//! like a success does. A handler the tick stopped because its hold lapsed says nothing
//! about the counterpart either way: it is neither counted nor ends a run.

use crate::handler::{Ending, Handled, Outcome};

pub(super) struct Breaker {
    limit: Option<u32>,
    in_a_row: u32,
    /// The account the failures of the current run share, while they share one.
    same: Option<std::borrow::Cow<'static, str>>,
    /// Why it tripped, once it has.
    pub(super) tripped: Option<String>,
}

impl Breaker {
    pub(super) fn new(limit: Option<u32>) -> Self {
        Breaker {
            limit,
            in_a_row: 0,
            same: None,
            tripped: None,
        }
    }

    /// Counts an outcome, in the order the answers came back.
    pub(super) fn count(&mut self, handled: &Handled) {
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
            let which = if self.same.is_some() {
                "each"
            } else {
                "the last"
            };
            self.tripped = Some(format!(
                "{limit} failures in a row (handler.stop_after_failures), {which}: {}{}; the rest of the band waits for the next tick",
                handled.detail,
                super::marks::tail_for_log(&handled.output)
            ));
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
        let mut breaker = Breaker::new(Some(3));
        for h in [&error, &error, &mapped, &error, &error] {
            breaker.count(h);
        }
        assert!(breaker.tripped.is_none(), "a mapped status ends the run");
        breaker.count(&error);
        assert_eq!(
            breaker.tripped.as_deref(),
            Some(
                "3 failures in a row (handler.stop_after_failures), each: exit 1; the rest of the band waits for the next tick"
            )
        );
    }

    #[test]
    fn names_the_last_failure_when_they_differ_and_its_output() {
        let mut breaker = Breaker::new(Some(2));
        breaker.count(&Handled::new(Outcome::Error, "exit 1"));
        breaker.count(&Handled::new(Outcome::Error, "exit 2").with_output("\nboom\n"));
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
        let mut breaker = Breaker::new(Some(2));
        for h in [&stopped, &stopped, &error, &stopped] {
            breaker.count(h);
        }
        assert!(breaker.tripped.is_none(), "only one failure counted");
        breaker.count(&error);
        assert!(
            breaker.tripped.is_some(),
            "a stop does not end the run either"
        );
    }

    #[test]
    fn without_a_limit_it_never_trips() {
        let mut breaker = Breaker::new(None);
        for _ in 0..1000 {
            breaker.count(&Handled::new(Outcome::Error, "exit 1"));
        }
        assert!(breaker.tripped.is_none());
    }
}

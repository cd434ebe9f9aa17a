//! What a handler's answer counts as: a status it names is the outcome that status is.
//!
//! A handler may answer with a status of the table (`Outcome::Status`: a closure's
//! return, an exit code or a batch answer's code that `handler.exit_codes` maps). The
//! tick counts an answer by the status it writes, not by how the handler spelt it, so
//! the summary, the run log, the metrics, the breaker, the log lines and the attempts
//! agree with the row: `Status(success)` is a success and `Status(error)` an error,
//! each counted as `Success` and `Error` are. Any other status stays a mapped answer
//! (attempt outcome `mapped`), counted as failed and not by the breaker (the handler
//! chose it, the counterpart did not refuse): `table.given_up` gives the record up (no
//! tick takes it again), another pending status is tried again on schedule, and any
//! other status is final.

use crate::handler::{Ending, Handled, Outcome};

/// `handled` with a status answer that is the success or the error status turned into
/// that outcome. Only an answer is: a person's snooze or give-up names the status it
/// keeps or sets, and stays the action it is.
pub(super) fn resolve(mut handled: Handled, success: &str, error: &str) -> Handled {
    if handled.ending != Ending::Answered {
        return handled;
    }
    if let Outcome::Status(s) = &handled.outcome {
        if s == success {
            handled.outcome = Outcome::Success;
        } else if s == error {
            handled.outcome = Outcome::Error;
        }
    }
    handled
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_answer_counts_as_the_status_it_names() {
        let answer = |s: &str| Handled::new(Outcome::Status(s.into()), "returned status");
        let resolved = |s: &str| resolve(answer(s), "DONE", "RETRY").outcome;
        assert_eq!(resolved("DONE"), Outcome::Success);
        assert_eq!(resolved("RETRY"), Outcome::Error);
        assert_eq!(resolved("DEAD"), Outcome::Status("DEAD".into()));
        // Case matters, as it does to the table.
        assert_eq!(resolved("done"), Outcome::Status("done".into()));
        assert_eq!(resolve(answer("DONE"), "DONE", "RETRY").kind(), "success");
        // A person's action keeps the status it names.
        let snooze = answer("RETRY").ended(Ending::Snoozed);
        assert_eq!(
            resolve(snooze, "DONE", "RETRY").outcome,
            Outcome::Status("RETRY".into())
        );
    }
}

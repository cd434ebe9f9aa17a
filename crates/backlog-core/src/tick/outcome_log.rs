//! A tick's log lines of its records' outcomes: a failure at WARN, up to a cap, the
//! rest counted in one line at the tick's end; a success at DEBUG.

use super::tally::Tally;
use crate::handler::{Handled, Outcome};
use crate::record::Record;

/// How many failures a tick logs at WARN, one line each; the rest are counted in one
/// line at its end (the attempts keep them all).
const WARN_CAP: u64 = 10;

/// Logs a record's outcome: a failure at WARN (the first `WARN_CAP` of a tick; the
/// rest at DEBUG, counted in one line at the tick's end), so a crontab line's log and
/// a cron mail show why without `-v`; a success or a mapped status (an answer) at
/// DEBUG.
///
/// Each line carries `record`, `tier`, `outcome` (the attempt's: `success`, `error`,
/// `timeout`, `crash`…, as `backlog retry --outcome` names them) and `status` (the one
/// written) as fields, for log collectors (`--log-format json`); text lines say them in
/// words.
/// `label` is the status as people read it (`table.labels`), which the message says.
pub(super) fn log_outcome(
    record: &Record,
    handled: &Handled,
    status: &str,
    label: &str,
    warned: u64,
    tier: Option<usize>,
) {
    let id = &record.id;
    if handled.outcome == Outcome::Success {
        tracing::debug!(record = %id, tier, outcome = handled.kind(), status, "record {id}: {label} ({})", handled.detail);
    } else if handled.outcome == Outcome::Error && warned <= WARN_CAP {
        tracing::warn!(
            record = %id,
            tier,
            outcome = handled.kind(),
            status,
            "record {}: {label} ({}){}",
            record.id,
            handled.detail,
            tail_for_log(&handled.output)
        );
    } else {
        tracing::debug!(
            record = %id,
            tier,
            outcome = handled.kind(),
            status,
            "record {}: {label} ({}){}",
            record.id,
            handled.detail,
            tail_for_log(&handled.output)
        );
    }
    if !handled.output.is_empty() {
        tracing::trace!("record {} output:\n{}", record.id, handled.output);
    }
}

/// The last line of a failed handler's output (what a program that fails usually
/// says last is why), at most 200 characters, so a log line shows why without `-vv`.
pub(super) fn tail_for_log(output: &str) -> String {
    output
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .map(|l| {
            let l = l.trim();
            match l.char_indices().nth(200) {
                Some((cut, _)) => format!(": {}…", &l[..cut]),
                None => format!(": {l}"),
            }
        })
        .unwrap_or_default()
}

/// The line that ends a tick's failures at WARN, when there were more than it showed.
pub(super) fn log_unshown(tally: &Tally) {
    if tally.warned > WARN_CAP {
        tracing::warn!(
            "{} in this tick (not shown; `backlog show ID` lists a record's attempts)",
            crate::plural::count(
                tally.warned - WARN_CAP,
                "more record failed",
                "more records failed"
            )
        );
    }
}

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

    /// A closure through the library on a real SQLite file: the status it names is
    /// what the tick counts, writes and keeps.
    #[test]
    fn a_closure_answering_the_success_status_succeeds() {
        use crate::record::{Record, Scalar};
        use crate::schedule::{Cadence, Schedule, Tier};
        use crate::{BandMode, FnHandler, TableConfig, TickOptions, process_backlog};
        use std::time::Duration;

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("orders.db");
        let db = rusqlite::Connection::open(&path).unwrap();
        db.execute_batch(
            "CREATE TABLE orders (id INTEGER PRIMARY KEY, state TEXT NOT NULL, created_at INTEGER NOT NULL);
             CREATE INDEX orders_by_created_at ON orders (created_at);",
        )
        .unwrap();
        let now = chrono::Utc::now();
        for id in 1..=9_i64 {
            db.execute(
                "INSERT INTO orders VALUES (?1, 'NEW', ?2)",
                (id, now.timestamp() - id * 60),
            )
            .unwrap();
        }
        let day = Duration::from_secs(86_400);
        let schedule = Schedule {
            tiers: vec![Tier {
                window: day,
                cadence: Cadence::Every(Duration::from_secs(300)),
                limit: None,
                jitter: Duration::ZERO,
                spread: 1,
            }],
            bands: BandMode::Disjoint,
            limit: 1000,
            timezone: chrono_tz::Tz::UTC,
        };
        let mut table = TableConfig::new("orders", "id", "state", "created_at");
        table.given_up = Some("DEAD".into());
        let mut store =
            crate::store::SqliteStore::open(&path, Duration::from_secs(5), table.clone()).unwrap();
        // Ids 1 to 6 answer the success status by name, 7 the error status, 8 the
        // given-up status, 9 a status of its own.
        let mut handler = FnHandler(|record: &Record| match record.id {
            Scalar::Int(1..=6) => Outcome::Status("SUCCESS".into()),
            Scalar::Int(7) => Outcome::Status("ERROR".into()),
            Scalar::Int(8) => Outcome::Status("DEAD".into()),
            _ => Outcome::Status("HELD".into()),
        });
        let mut opts = TickOptions::new(day, now);
        opts.history.record = crate::config::HistoryRecord::All;
        let summary = process_backlog(
            &schedule,
            &table,
            &mut store,
            &mut handler,
            &opts,
            &mut |_| {},
        )
        .unwrap();
        assert_eq!(
            (summary.selected, summary.succeeded, summary.failed),
            (9, 6, 3)
        );
        let rows: Vec<(i64, String, String)> = db
            .prepare(
                "SELECT o.id, o.state, a.outcome FROM orders o
                 JOIN backlog_attempts a ON a.record_id = CAST(o.id AS TEXT) ORDER BY o.id",
            )
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        let expected: Vec<(i64, String, String)> = (1..=9)
            .map(|id| {
                let (state, outcome) = match id {
                    1..=6 => ("SUCCESS", "success"),
                    7 => ("ERROR", "error"),
                    8 => ("DEAD", "mapped"),
                    _ => ("HELD", "mapped"),
                };
                (id, state.to_string(), outcome.to_string())
            })
            .collect();
        assert_eq!(rows, expected);
        let run: (i64, i64) = db
            .query_row(
                "SELECT succeeded, failed FROM backlog_runs ORDER BY id DESC LIMIT 1",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert_eq!(run, (6, 3));
    }
}

//! Failures in a row, where `table.give_up_after` counts them: read with the records
//! a tick takes, written with their marks (`Mark::failures`).

use std::collections::HashMap;
use std::sync::Arc;

use crate::config::TableConfig;
use crate::handler::{Ending, Handled, Outcome};
use crate::record::Record;
use crate::store::{Store, StoreError};

/// Failures in a row, where `table.give_up_after` counts them: what the records of the
/// pages taken had, and the count each mark writes. The failure that reaches the
/// limit gives the record up (`table.given_up`) instead of marking it as failed.
pub(super) struct FailureCounts {
    /// The limit and the status of a record given up on; none: nothing is counted.
    limit: Option<(u32, Arc<str>)>,
    /// The counts read for the records taken, by id.
    read: HashMap<String, u32>,
}

impl FailureCounts {
    pub(super) fn of(table: &TableConfig) -> Self {
        FailureCounts {
            limit: table
                .give_up_after
                .zip(table.given_up.as_deref())
                .map(|(n, status)| (n, Arc::from(status))),
            read: HashMap::new(),
        }
    }

    /// Reads the counts of records just taken, before their handlers answer.
    pub(super) fn read(
        &mut self,
        records: &[Record],
        store: &mut dyn Store,
    ) -> Result<(), StoreError> {
        if self.limit.is_none() || records.is_empty() {
            return Ok(());
        }
        let ids: Vec<String> = records.iter().map(|r| r.id.to_string()).collect();
        self.read.extend(store.failure_counts(&ids)?);
        Ok(())
    }

    /// The status a handled record gets, and the count its mark writes (see
    /// `Mark::failures`): a try that failed and left the record pending counts one
    /// more, up to the limit, where it gives the record up; any other try, and giving
    /// up, clear it; what was no try (a person's snooze, a stop) leaves it. A handler's
    /// "not before" is a failed try, and counts.
    pub(super) fn count(
        &mut self,
        record: &Record,
        handled: &mut Handled,
        status: Arc<str>,
        pending: &[String],
    ) -> (Arc<str>, Option<u32>) {
        let Some((limit, given_up)) = &self.limit else {
            return (status, None);
        };
        if handled.ending == Ending::GivenUp {
            // Given up on: a retry that brings it back starts the count again.
            return (status, Some(0));
        }
        let a_try = matches!(
            handled.ending,
            Ending::Answered | Ending::TimedOut | Ending::Crashed(_)
        );
        if !a_try {
            return (status, None);
        }
        let id = record.id.to_string();
        let before = self.read.remove(&id).unwrap_or(0);
        if handled.outcome == Outcome::Success || !pending.iter().any(|p| **p == *status) {
            return (status, Some(0));
        }
        let now = before.saturating_add(1);
        if now < *limit {
            return (status, Some(now));
        }
        handled.detail = format!(
            "{}; given up after {} in a row",
            handled.detail,
            crate::plural::count(now, "failure", "failures")
        )
        .into();
        super::trace::event(
            "backlog.records.given_up",
            vec![
                opentelemetry::KeyValue::new("backlog.record.id", id),
                opentelemetry::KeyValue::new("backlog.reason", handled.detail.to_string()),
                opentelemetry::KeyValue::new("backlog.records", 1),
            ],
        );
        (Arc::clone(given_up), Some(0))
    }
}

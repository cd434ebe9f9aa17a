//! Why a record is kept from the ticks when no tick holds it: a person snoozed it, its
//! handler asked for a later try, or it failed in its tier's slot. Told from its
//! newest attempt, once, so `backlog show`, the record's page and the in-flight page
//! say the same.

use backlog_core::store::{Attempt, SNOOZED};

/// Why a record is kept from the ticks until its keep ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kept {
    /// A person snoozed it; the attempt's detail says who (`snoozed by root@vm`).
    Snoozed(String),
    /// Its handler asked for a later try (`exit 75, retry after 1h`).
    ByHandler(String),
    /// It failed in its tier's slot and waits for the next one.
    Failed,
}

impl Kept {
    /// Why the record with `newest` as its newest attempt is kept.
    pub fn of(newest: Option<&Attempt>) -> Kept {
        match newest {
            Some(a) if a.outcome == SNOOZED => Kept::Snoozed(a.detail.clone()),
            // What `Snooze::describe` wrote of a handler's "not before".
            Some(a) if a.detail.contains(", retry after ") => Kept::ByHandler(a.detail.clone()),
            _ => Kept::Failed,
        }
    }

    /// Whether a person or the handler asked for the wait (not the schedule's slot).
    pub fn is_snooze(&self) -> bool {
        !matches!(self, Kept::Failed)
    }

    /// As a clause: `snoozed by root@vm`, `snoozed by its handler (…)`, `failed in its
    /// tier's slot`.
    pub fn describe(&self) -> String {
        match self {
            Kept::Snoozed(detail) => detail.clone(),
            Kept::ByHandler(detail) => format!("snoozed by its handler ({detail})"),
            Kept::Failed => "failed in its tier's slot".to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attempt(outcome: &str, detail: &str) -> Attempt {
        Attempt {
            record_id: "1".into(),
            run_id: 1,
            window_secs: 0,
            started: chrono::Utc::now(),
            took_ms: 0,
            status: "ERROR".into(),
            outcome: outcome.into(),
            code: None,
            signal: None,
            detail: detail.into(),
            output: String::new(),
        }
    }

    #[test]
    fn a_keep_is_told_by_the_newest_attempt() {
        let person = Kept::of(Some(&attempt(SNOOZED, "snoozed by alice (dashboard)")));
        assert!(person.is_snooze());
        assert_eq!(person.describe(), "snoozed by alice (dashboard)");
        let handler = Kept::of(Some(&attempt("error", "exit 75, retry after 1h")));
        assert_eq!(
            handler.describe(),
            "snoozed by its handler (exit 75, retry after 1h)"
        );
        let failed = Kept::of(Some(&attempt("error", "exit 1")));
        assert!(!failed.is_snooze());
        assert_eq!(failed.describe(), "failed in its tier's slot");
        assert_eq!(Kept::of(None), Kept::Failed);
    }
}

//! What kind of failure a database error is, and the one place that tries a
//! transaction again.
//!
//! Each dialect classifies its own error codes into a [`Fault`] (MySQL's 1213 and
//! PostgreSQL's 40P01 are both a deadlock); the protocol decides from the fault alone
//! what to do. A deadlock or a lock wait that ran out rolls the transaction back, so
//! it is run again, `RETRIES` times at most, with a warning each: every transaction
//! of the tool, on the user's table and on its own, goes through [`retrying`].

use super::StoreError;

/// What kind of failure a database error is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Fault {
    /// The server chose this transaction to break a deadlock (or a serialization
    /// conflict) and rolled it back.
    Deadlock,
    /// A lock wait ran out (`database.busy_timeout`); the statement or transaction was
    /// rolled back.
    LockTimeout,
    /// The connection to the server was lost.
    Lost,
    /// The database has no room left.
    DiskFull,
    /// Anything else: a statement the tool does not try again.
    Other,
}

impl Fault {
    /// Whether the work that met this fault is worth running again as it was: the
    /// server rolled it back for the sake of another session, not for its content.
    pub fn retryable(self) -> bool {
        matches!(self, Fault::Deadlock | Fault::LockTimeout)
    }
}

/// A database's error as one line (never with a password), with its kind: what a
/// dialect gives the protocol.
#[derive(Debug)]
pub struct DbError {
    /// What kind of failure it is.
    pub fault: Fault,
    /// The error as one line, never with a password.
    pub message: String,
}

impl std::fmt::Display for DbError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for DbError {}

impl StoreError {
    /// What kind of failure this is: the dialect's classification of the database's
    /// error, or `Other` for the tool's own.
    pub fn fault(&self) -> Fault {
        let StoreError::Database { source, .. } = self else {
            return Fault::Other;
        };
        let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(source.as_ref());
        while let Some(e) = cause {
            if let Some(db) = e.downcast_ref::<DbError>() {
                return db.fault;
            }
            cause = e.source();
        }
        Fault::Other
    }
}

#[cfg(test)]
impl StoreError {
    /// A statement the database refused for lack of room, as a dialect reports one:
    /// for the tests of what meets it.
    pub fn disk_full(context: &str) -> StoreError {
        StoreError::Database {
            context: context.into(),
            source: Box::new(DbError {
                fault: Fault::DiskFull,
                message: "database or disk is full".into(),
            }),
        }
    }
}

/// How often a transaction is tried again after a deadlock or a lock wait timeout.
pub const RETRIES: usize = 5;

/// Runs `work`, a whole transaction (begun and committed inside it) or a statement
/// outside one, again while the database rolled it back for a deadlock or a lock
/// wait timeout: `RETRIES` times at most, a warning each, then its error.
pub fn retrying<T>(
    context: &str,
    work: impl FnMut() -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    retrying_on(context, Fault::retryable, work)
}

/// A heartbeat's renewal of a tick's holds, tried again as `retrying` does after a
/// deadlock (the marks and the takeovers of a fleet lock the claims' index and rows
/// in the other order), but not after a lock wait that ran out: the next beat, a
/// quarter lease later, is that retry. Retried here, a beat could wait out several
/// lock waits and renew holds that had run out meanwhile, as if nothing had happened.
pub fn renewing<T>(
    context: &str,
    work: impl FnMut() -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    retrying_on(context, |f| f == Fault::Deadlock, work)
}

/// As `retrying`, for the faults `retry` names only.
fn retrying_on<T>(
    context: &str,
    retry: impl Fn(Fault) -> bool,
    mut work: impl FnMut() -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    let mut tries = 0;
    loop {
        match work() {
            Err(e) if retry(e.fault()) && tries < RETRIES => {
                tries += 1;
                let said = e.to_string();
                let said = if said.starts_with(context) {
                    said
                } else {
                    format!("{context}: {said}")
                };
                tracing::warn!("{said}; trying the transaction again ({tries} of {RETRIES})");
            }
            other => return other,
        }
    }
}

/// The result of housekeeping that a later tick can do as well (dropping what ran
/// out, pruning old attempts): a deadlock or a lock wait is said in a warning and
/// left to that tick rather than tried again, or failing the tick that met it.
pub fn housekeeping(result: Result<(), StoreError>) -> Result<(), StoreError> {
    match result {
        Err(e) if e.fault().retryable() => {
            tracing::warn!("{e}; left to a later tick");
            Ok(())
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failing(fault: Fault) -> StoreError {
        StoreError::Database {
            context: "claiming records".into(),
            source: Box::new(DbError {
                fault,
                message: "it failed".into(),
            }),
        }
    }

    #[test]
    fn a_deadlock_is_tried_again_five_times_then_given_up() {
        let mut calls = 0;
        let result: Result<(), _> = retrying("claiming records", || {
            calls += 1;
            Err(failing(Fault::Deadlock))
        });
        assert_eq!(calls, 1 + RETRIES);
        assert_eq!(result.unwrap_err().fault(), Fault::Deadlock);
    }

    #[test]
    fn a_lock_wait_that_clears_goes_on_and_other_faults_are_not_retried() {
        let mut calls = 0;
        let result = retrying("claiming records", || {
            calls += 1;
            if calls < 3 {
                Err(failing(Fault::LockTimeout))
            } else {
                Ok(calls)
            }
        });
        assert_eq!(result.unwrap(), 3);
        for fault in [Fault::Lost, Fault::DiskFull, Fault::Other] {
            let mut calls = 0;
            let _ = retrying::<()>("x", || {
                calls += 1;
                Err(failing(fault))
            });
            assert_eq!(calls, 1, "{fault:?}");
        }
    }
}

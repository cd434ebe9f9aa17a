//! `backlog_breakers`: the breaker of `handler.stop_after_failures` for every runner of
//! a table and tier together, on every host: the failures in a row the fleet saw, and
//! until when the breaker is open.
//!
//! A row per breaker: `failures` in a row (any runner's success sets it back to 0), and
//! `open_until_us`, 0 while closed, else when its cool-down ends on the database's
//! clock. Past that time the breaker is half-open: the runner whose compare-and-set
//! moves `open_until_us` on by another cool-down tries one record (the others see it
//! open again); its success closes the breaker for all, its failure leaves it open. A
//! trial runner that dies leaves it open one cool-down more, then another runner tries.

use std::time::Duration;

use super::sql::{Sql, failed};
use super::{Store, StoreError};

/// The table: a row per breaker.
pub const TABLE: super::tables::Table = super::tables::Table {
    name: "backlog_breakers",
    columns: "name {key} NOT NULL,
        failures {bigint} NOT NULL,
        open_until_us {bigint} NOT NULL",
    key: Some("name"),
    indexes: &[],
    mark: "open_until_us",
};

/// Where a fleet's breaker stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BreakerState {
    /// Failures in a row, of every runner together.
    pub failures: u64,
    /// How long from now the breaker stays open; none while it is closed. Zero: its
    /// cool-down is over, it is half-open (see [`Store::try_breaker`]).
    pub open_for: Option<Duration>,
}

/// A breaker's row: its failures in a row and `open_until_us`.
type Row = (i64, i64);

/// How often a write reads again after other runners changed the row under it.
const TRIES: usize = 100;

fn micros(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

/// The row of `name`, if there is one.
fn read(sql: &mut dyn Sql, s: &str, name: &str) -> Result<Option<Row>, StoreError> {
    let rows = sql
        .query(
            &format!("SELECT failures, open_until_us FROM {s}backlog_breakers WHERE name = ?1"),
            &[name.into()],
        )
        .map_err(failed("reading backlog_breakers"))?;
    Ok(rows
        .first()
        .map(|r| (r[0].int().unwrap_or(0), r[1].int().unwrap_or(0))))
}

fn state(row: Option<Row>, now_us: i64) -> BreakerState {
    let Some((failures, open_until)) = row else {
        return BreakerState::default();
    };
    BreakerState {
        failures: failures.max(0) as u64,
        open_for: (open_until != 0)
            .then(|| Duration::from_micros(open_until.saturating_sub(now_us).max(0) as u64)),
    }
}

/// Sets the row of `name` by `change` (from its failures and `open_until_us`, none for
/// no row) with a compare-and-set, read again while other runners change it; `change`
/// answers the new values, or none to leave the row as it is. Returns the row as it
/// is now, and whether this call changed it.
fn update(
    sql: &mut dyn Sql,
    s: &str,
    name: &str,
    change: &dyn Fn(Option<Row>) -> Option<Row>,
) -> Result<(Option<Row>, bool), StoreError> {
    for _ in 0..TRIES {
        let row = read(sql, s, name)?;
        let Some((failures, open_until)) = change(row) else {
            return Ok((row, false));
        };
        let written = match row {
            // A second runner's insert fails on the key: it reads the row again.
            None => match sql.execute(
                &format!(
                    "INSERT INTO {s}backlog_breakers (name, failures, open_until_us) VALUES (?1, ?2, ?3)"
                ),
                &[name.into(), failures.into(), open_until.into()],
            ) {
                Ok(n) => n,
                // Another runner's row went in first: read it again. An insert that
                // failed on its own (a grant missing, a lock) is the error.
                Err(_) if read(sql, s, name)?.is_some() => 0,
                Err(e) => return Err(failed("writing backlog_breakers")(e)),
            },
            Some((was_failures, was_open)) => sql
                .execute(
                    &format!(
                        "UPDATE {s}backlog_breakers SET failures = ?2, open_until_us = ?3
                         WHERE name = ?1 AND failures = ?4 AND open_until_us = ?5"
                    ),
                    &[
                        name.into(),
                        failures.into(),
                        open_until.into(),
                        was_failures.into(),
                        was_open.into(),
                    ],
                )
                .map_err(failed("writing backlog_breakers"))?,
        };
        if written == 1 {
            return Ok((Some((failures, open_until)), true));
        }
    }
    Err(StoreError::Database {
        context: format!("writing the breaker {name:?} in backlog_breakers"),
        source: "other runners kept changing it".into(),
    })
}

impl dyn Store + '_ {
    /// Runs `work` on `backlog_breakers` (see `at_clock`); none while the tool's
    /// tables are not there: the tick's breaker is its own.
    fn on_breakers<T>(
        &mut self,
        work: impl Fn(&mut dyn Sql, &str, i64) -> Result<T, StoreError>,
    ) -> Result<Option<T>, StoreError> {
        self.at_clock("backlog_breakers", "writing backlog_breakers", work)
    }

    /// Where the breaker `name` stands.
    pub fn breaker(&mut self, name: &str) -> Result<Option<BreakerState>, StoreError> {
        let name = &super::rates::row_name(name);
        self.on_breakers(|sql, s, now| Ok(state(read(sql, s, name)?, now)))
    }

    /// Counts a failure; once the fleet's failures in a row reach `limit`, or `trip`
    /// says this runner's own breaker tripped, opens the breaker for `cooldown`.
    pub fn breaker_failed(
        &mut self,
        name: &str,
        limit: u64,
        trip: bool,
        cooldown: Duration,
    ) -> Result<Option<BreakerState>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        // A counterpart's breaker names its key too: long ones keep a digest (MySQL's
        // keys hold 255 characters).
        let name = &super::rates::row_name(name);
        self.on_breakers(|sql, s, now| {
            let (row, _) = update(sql, s, name, &|row| {
                let (failures, open_until) = row.unwrap_or((0, 0));
                let failures = failures.saturating_add(1);
                let open = open_until != 0 || trip || failures >= limit;
                let until = match open_until {
                    0 if open => now.saturating_add(micros(cooldown)),
                    other => other,
                };
                Some((failures, until))
            })?;
            Ok(state(row, now))
        })
    }

    /// Counts a success: the breaker closes for every runner, its failures back to 0.
    pub fn breaker_succeeded(&mut self, name: &str) -> Result<(), StoreError> {
        let name = &super::rates::row_name(name);
        self.on_breakers(|sql, s, _| {
            update(sql, s, name, &|row| match row {
                None | Some((0, 0)) => None,
                Some(_) => Some((0, 0)),
            })
            .map(drop)
        })
        .map(drop)
    }

    /// Claims the trial of a half-open breaker: true for the one runner that gets it,
    /// which then tries one record; the breaker stays open for the others another
    /// `cooldown` (and for all, if the trial's runner dies).
    pub fn try_breaker(&mut self, name: &str, cooldown: Duration) -> Result<bool, StoreError> {
        let name = &super::rates::row_name(name);
        let won = self.on_breakers(|sql, s, now| {
            let (_, won) = update(sql, s, name, &|row| match row {
                Some((failures, until)) if until != 0 && until <= now => {
                    Some((failures, now.saturating_add(micros(cooldown))))
                }
                _ => None,
            })?;
            Ok(won)
        })?;
        Ok(won.unwrap_or(false))
    }
}

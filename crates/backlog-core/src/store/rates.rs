//! `backlog_rates`: the next free start of each shared rate, so that `handler.rate` holds
//! for every runner of a table and tier (or of a `handler.rate_group`) together, on every
//! host, and not for each process apart.
//!
//! A rate is a row holding when its next start may be, in microseconds on the
//! database's clock (`Store::clock`: runners on hosts whose clocks disagree still space
//! their starts on one). A runner reserves `n` starts at once by moving that time on by
//! `n` intervals with a compare-and-set: of two runners that reserve at once, one moves
//! it and the other reads it again. The starts it reserved are its own, one interval
//! apart from the first; a time left in the past counts as now, so idle time is never
//! saved up into a burst. A rate's row is named with its interval too, so a rate changed
//! in the schedule file starts afresh instead of waiting out the old one's reservations
//! (and the tiers or tables of a `rate_group` share it when they give the same rate).

use std::time::Duration;

use super::sql::{Sql, failed};
use super::{Store, StoreError};

/// The table: a row per shared rate.
pub const TABLE: super::tables::Table = super::tables::Table {
    name: "backlog_rates",
    columns: "name {key} NOT NULL,
        next_us {bigint} NOT NULL",
    key: Some("name"),
    indexes: &[],
    mark: "next_us",
};

/// How often a reservation reads again after other runners moved the row under it:
/// each retry means another runner got its starts, so the fleet goes on meanwhile.
const TRIES: usize = 100;

/// The next free start of the rate `name`, if it has a row.
fn read_next(sql: &mut dyn Sql, s: &str, name: &str) -> Result<Option<i64>, StoreError> {
    let rows = sql
        .query(
            &format!("SELECT next_us FROM {s}backlog_rates WHERE name = ?1"),
            &[name.into()],
        )
        .map_err(failed("reading backlog_rates"))?;
    Ok(rows.first().map(|row| row[0].int().unwrap_or(0)))
}

/// Reserves `n` starts of the rate `name`, one `interval_us` apart, at `now_us` (the
/// database's clock); returns when the first of them is, on that clock.
fn reserve(
    sql: &mut dyn Sql,
    s: &str,
    name: &str,
    n: u64,
    interval_us: i64,
    now_us: i64,
) -> Result<i64, StoreError> {
    let span = interval_us.saturating_mul(n as i64);
    let mut last_error = None;
    for _ in 0..TRIES {
        let Some(next) = read_next(sql, s, name)? else {
            // The rate's first start: the runner whose row goes in has it; another's
            // insert fails on the key, and it reads the row again.
            let inserted = sql.execute(
                &format!("INSERT INTO {s}backlog_rates (name, next_us) VALUES (?1, ?2)"),
                &[name.into(), now_us.saturating_add(span).into()],
            );
            match inserted {
                Ok(_) => return Ok(now_us),
                // Another runner's row went in first, or the insert failed on its own
                // (a grant missing, a lock): only the first is worth reading again.
                Err(e) if read_next(sql, s, name)?.is_some() => last_error = Some(e),
                Err(e) => return Err(failed("writing backlog_rates")(e)),
            }
            continue;
        };
        let first = next.max(now_us);
        let changed = sql
            .execute(
                &format!(
                    "UPDATE {s}backlog_rates SET next_us = ?2 WHERE name = ?1 AND next_us = ?3"
                ),
                &[name.into(), first.saturating_add(span).into(), next.into()],
            )
            .map_err(failed("writing backlog_rates"))?;
        if changed == 1 {
            return Ok(first);
        }
    }
    Err(StoreError::Database {
        context: format!(
            "reserving starts of the rate {name:?} in backlog_rates (other runners kept changing it)"
        ),
        source: last_error.unwrap_or_else(|| "the row changed under every try".into()),
    })
}

/// The longest name a rate's row takes as it is: the key is 255 characters at most on
/// MySQL, and a long table name and a counterpart's value can pass it.
const NAME_SHOWN: usize = 200;

/// The name of a rate's row: the rate's own, or where that is too long, its start and
/// a digest of the whole.
pub(super) fn row_name(name: &str) -> String {
    if name.chars().count() <= NAME_SHOWN {
        return name.to_string();
    }
    let start: String = name.chars().take(NAME_SHOWN - 20).collect();
    format!("{start} #{:016x}", crate::digest::of(name.as_bytes()))
}

impl dyn Store + '_ {
    /// Reserves `n` handler starts of the shared rate `rate`, one `interval` apart, for
    /// every runner of it together; returns how long from now until the first of them.
    /// None where the tool's tables are not there (they are made as a tick begins; a
    /// library user's tick that skipped that): the caller spaces its starts alone.
    pub fn reserve_starts(
        &mut self,
        rate: &str,
        n: u64,
        interval: Duration,
    ) -> Result<Option<Duration>, StoreError> {
        let micros = i64::try_from(interval.as_micros()).unwrap_or(i64::MAX);
        self.reserve_named(&format!("{rate}, a start every {micros} us"), n, interval)
    }

    /// Reserves `n` starts of the adapted rate `rate` (`rate = "auto"`), one `interval`
    /// apart: as `reserve_starts`, under the rate's name alone, since its interval
    /// changes as the pace moves (`backlog_paces`).
    pub fn reserve_adapted_starts(
        &mut self,
        rate: &str,
        n: u64,
        interval: Duration,
    ) -> Result<Option<Duration>, StoreError> {
        self.reserve_named(&format!("{rate}, adapted"), n, interval)
    }

    fn reserve_named(
        &mut self,
        rate: &str,
        n: u64,
        interval: Duration,
    ) -> Result<Option<Duration>, StoreError> {
        let interval = i64::try_from(interval.as_micros()).unwrap_or(i64::MAX);
        let rate = row_name(rate);
        self.at_clock(
            "backlog_rates",
            "reserving handler starts",
            |sql, s, now| {
                let first = reserve(sql, s, &rate, n, interval, now)?;
                Ok(Duration::from_micros((first - now).max(0) as u64))
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_name_keeps_its_start_and_a_digest() {
        assert_eq!(row_name("group api"), "group api");
        let long = format!("group api, counterpart {}", "x".repeat(300));
        let name = row_name(&long);
        assert!(name.starts_with("group api, counterpart xxx"), "{name}");
        assert_eq!(name.chars().count(), NAME_SHOWN - 20 + 18);
        assert_ne!(name, row_name(&format!("{long}y")), "a digest of the whole");
    }
}

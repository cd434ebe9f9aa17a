//! `backlog_paces`: the adapted pace of each `rate = "auto"`, so that every runner of a
//! table and tier (or of a `rate_group`, and of each `rate_key` value) moves one pace,
//! and a runner that starts takes the fleet's pace instead of probing the counterpart
//! from a slow start of its own.
//!
//! A row holds a [`PaceState`]: the pace in micro-starts a second, its phase
//! (`slow_start`: 1 in slow start; past it, bit 2 once a call went through since the
//! last cut, so that cuts with nothing through between them keep AIMD's step, and bit
//! 8 where calls had gone through before the last cut: a busy counterpart), when it
//! was last cut on the database's clock (`Store::clock`, in
//! microseconds: runners on hosts whose clocks disagree still agree on which refusal
//! is news) and the pace it was cut from. Runners send what they saw since they last
//! looked ([`PaceNews`]: calls that went through, and the start of the latest
//! overloaded call) and the row moves by [`Rule::AUTO`] with a compare-and-set on a
//! version column, as `backlog_rates` does: of two runners that write at once, one
//! moves it and the other applies its news to the row as the first left it. A burst of
//! refusals seen by many runners cuts the pace once: a refusal of a call that started
//! before the last cut is not news (`Pace::overloaded`).

use std::time::Duration;

use super::sql::{Sql, failed};
use super::{Store, StoreError};
use crate::pace::{Pace, PaceState, Rule};

/// The table: a row per adapted pace.
pub const TABLE: super::tables::Table = super::tables::Table {
    name: "backlog_paces",
    columns: "name {key} NOT NULL,
        micro_per_second {bigint} NOT NULL,
        slow_start {int} NOT NULL,
        cut_at_us {bigint},
        cut_from_micro {bigint} NOT NULL,
        version {bigint} NOT NULL,
        moved_us {bigint} NOT NULL",
    key: Some("name"),
    indexes: &[],
    mark: "micro_per_second",
};

/// What a runner saw of a pace's calls since it last looked.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
#[non_exhaustive]
pub struct PaceNews {
    /// Calls that went through.
    pub went_through: u64,
    /// How long ago the latest call the counterpart found overloaded started, if one
    /// did: the store places it on the database's clock.
    pub overloaded: Option<Duration>,
}

impl PaceNews {
    /// News of `went_through` calls that went through and, if any, an overloaded
    /// call that started `overloaded` ago.
    pub fn new(went_through: u64, overloaded: Option<Duration>) -> Self {
        PaceNews {
            went_through,
            overloaded,
        }
    }
}

/// A pace as the fleet's row has it after a runner's news.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct PaceNow {
    /// Starts a second, within the runner's bounds.
    pub per_second: f64,
    /// Whether it is still in slow start.
    pub slow_start: bool,
    /// Whether this runner's news cut it (the log says so).
    pub cut: bool,
    /// Whether it answers an overload by itself (`Pace::absorbs_overload`).
    pub absorbs_overload: bool,
}

/// A pace's row as `backlog status` shows it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct PaceRow {
    /// The rate's name: its table and tier, or group, and counterpart.
    pub name: String,
    /// Starts a second.
    pub per_second: f64,
    /// Whether it is still in slow start.
    pub slow_start: bool,
    /// How long ago it was last cut, if ever.
    pub cut_ago: Option<Duration>,
}

/// Where a fresh pace starts: one a second (within the bounds), doubling each second
/// while calls go through, so a counterpart of 40/s is found in about five seconds.
const START: f64 = 1.0;

/// The most calls one piece of news moves the pace by: a runner that could not write
/// for a while does not send the pace to its bound in one step.
const NEWS_MOST: u64 = 100_000;

/// How often a write reads the row again after other runners moved it.
const TRIES: usize = 100;

const MICRO: f64 = 1_000_000.0;

/// The `slow_start` column's value in slow start; past it, the bits `WENT_THROUGH`
/// (a call went through since the last cut) and `TOOK_BEFORE` (calls had gone
/// through before it).
const SLOW_START: i64 = 1;
const WENT_THROUGH: i64 = 2;
const TOOK_BEFORE: i64 = 8;

/// The `slow_start` column's value for `state`.
fn phase(state: &PaceState) -> i64 {
    if state.slow_start {
        return SLOW_START;
    }
    let bit = |on: bool, bit: i64| if on { bit } else { 0 };
    bit(state.went_through_since_cut, WENT_THROUGH) | bit(state.took_before_cut, TOOK_BEFORE)
}

fn micro(per_second: f64) -> i64 {
    (per_second * MICRO).round() as i64
}

/// The pace `name` and its version, if it has a row.
fn read(sql: &mut dyn Sql, s: &str, name: &str) -> Result<Option<(PaceState, i64)>, StoreError> {
    let rows = sql
        .query(
            &format!(
                "SELECT micro_per_second, slow_start, cut_at_us, cut_from_micro, version FROM {s}backlog_paces WHERE name = ?1"
            ),
            &[name.into()],
        )
        .map_err(failed("reading backlog_paces"))?;
    Ok(rows.first().map(|row| {
        let phase = row[1].int().unwrap_or(SLOW_START);
        let slow_start = phase == SLOW_START;
        let state = PaceState {
            per_second: row[0].int().unwrap_or(0) as f64 / MICRO,
            slow_start,
            went_through_since_cut: !slow_start && phase & WENT_THROUGH != 0,
            took_before_cut: !slow_start && phase & TOOK_BEFORE != 0,
            cut_at: row[2]
                .int()
                .map_or(f64::NEG_INFINITY, |us| us as f64 / MICRO),
            cut_from: row[3].int().unwrap_or(0) as f64 / MICRO,
        };
        (state, row[4].int().unwrap_or(0))
    }))
}

/// Moves `pace` by `news` at `now_us`; says whether it cut.
fn apply(pace: &mut Pace, news: PaceNews, now_us: i64) -> bool {
    for _ in 0..news.went_through.min(NEWS_MOST) {
        pace.went_through();
    }
    news.overloaded.is_some_and(|ago| {
        let now = now_us as f64 / MICRO;
        pace.overloaded(now - ago.as_secs_f64(), now)
    })
}

/// The values of a row for `pace`, from the name on: as `INSERT` and `UPDATE` list them.
fn values(name: &str, pace: &Pace, version: i64, now_us: i64) -> Vec<super::sql::Value> {
    let state = pace.state();
    let cut_at = state
        .cut_at
        .is_finite()
        .then(|| (state.cut_at * MICRO).round() as i64);
    vec![
        name.into(),
        micro(state.per_second).into(),
        phase(&state).into(),
        super::sql::Value::Int(cut_at),
        micro(state.cut_from).into(),
        version.into(),
        now_us.into(),
    ]
}

/// Applies `news` to the pace `name` within [`min`, `max`], at `now_us` (the
/// database's clock), creating its row on first use.
fn sync(
    sql: &mut dyn Sql,
    s: &str,
    name: &str,
    (min, max): (f64, f64),
    news: PaceNews,
    now_us: i64,
) -> Result<PaceNow, StoreError> {
    let mut last_error = None;
    for _ in 0..TRIES {
        let Some((state, version)) = read(sql, s, name)? else {
            let mut pace = Pace::new(Rule::AUTO, START, min, max);
            let cut = apply(&mut pace, news, now_us);
            let inserted = sql.execute(
                &format!(
                    "INSERT INTO {s}backlog_paces (name, micro_per_second, slow_start, cut_at_us, cut_from_micro, version, moved_us) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"
                ),
                &values(name, &pace, 1, now_us),
            );
            match inserted {
                Ok(_) => return Ok(now(&pace, cut)),
                // Another runner's row went in first: apply the news to it.
                Err(e) if read(sql, s, name)?.is_some() => last_error = Some(e),
                Err(e) => return Err(failed("writing backlog_paces")(e)),
            }
            continue;
        };
        let mut pace = Pace::restore(Rule::AUTO, state, min, max);
        let cut = apply(&mut pace, news, now_us);
        if !cut && news.went_through == 0 {
            return Ok(now(&pace, false));
        }
        let mut args = values(name, &pace, version + 1, now_us);
        args.push(version.into());
        let changed = sql
            .execute(
                &format!(
                    "UPDATE {s}backlog_paces SET micro_per_second = ?2, slow_start = ?3, cut_at_us = ?4, cut_from_micro = ?5, version = ?6, moved_us = ?7 WHERE name = ?1 AND version = ?8"
                ),
                &args,
            )
            .map_err(failed("writing backlog_paces"))?;
        if changed == 1 {
            return Ok(now(&pace, cut));
        }
    }
    Err(StoreError::Database {
        context: format!(
            "moving the pace {name:?} in backlog_paces (other runners kept changing it)"
        ),
        source: last_error.unwrap_or_else(|| "the row changed under every try".into()),
    })
}

fn now(pace: &Pace, cut: bool) -> PaceNow {
    PaceNow {
        per_second: pace.per_second(),
        slow_start: pace.in_slow_start(),
        cut,
        absorbs_overload: pace.absorbs_overload(),
    }
}

impl dyn Store + '_ {
    /// Applies a runner's `news` to the fleet's adapted pace `rate` (within `min` and
    /// `max` starts a second) and returns the pace as it is now. None where the tool's
    /// tables are not there: the caller paces alone.
    pub fn sync_pace(
        &mut self,
        rate: &str,
        min: f64,
        max: f64,
        news: PaceNews,
    ) -> Result<Option<PaceNow>, StoreError> {
        let name = super::rates::row_name(rate);
        self.at_clock("backlog_paces", "moving an adapted pace", |sql, s, now| {
            sync(sql, s, &name, (min, max), news, now)
        })
    }

    /// Every adapted pace, by name: what `backlog status` shows.
    pub fn paces(&mut self) -> Result<Vec<PaceRow>, StoreError> {
        let rows = self.at_clock("backlog_paces", "reading the adapted paces", |sql, s, now| {
            let rows = sql
                .query(
                    &format!(
                        "SELECT name, micro_per_second, slow_start, cut_at_us FROM {s}backlog_paces ORDER BY name"
                    ),
                    &[],
                )
                .map_err(failed("reading backlog_paces"))?;
            Ok(rows
                .iter()
                .map(|row| PaceRow {
                    name: row[0].text().unwrap_or_default(),
                    per_second: row[1].int().unwrap_or(0) as f64 / MICRO,
                    slow_start: row[2].int().unwrap_or(SLOW_START) == SLOW_START,
                    cut_ago: row[3]
                        .int()
                        .map(|us| Duration::from_micros(now.saturating_sub(us).max(0) as u64)),
                })
                .collect())
        })?;
        Ok(rows.unwrap_or_default())
    }
}

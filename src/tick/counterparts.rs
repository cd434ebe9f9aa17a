//! `handler.rate_key`: a rate for each counterpart. Where a table names the counterpart
//! of each record in a column (a merchant, a tenant, a partner's API), every value of
//! that column gets `handler.rate` of its own, shared with every runner as the tick's
//! one rate is (`Store::reserve_starts`, under the rate's name and the value). A record
//! whose counterpart is at its rate waits in the tick's queue while records for the
//! others go out, so one slow counterpart does not hold the rest back.
//!
//! The tick reads its band as usual; while every record it holds waits for its
//! counterpart, it reads on (up to `HELD_MOST` records held), so that records for the
//! other counterparts further down the band are found.

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::Duration;

use super::pace::{Pace, STOP_CHECK};
use crate::rate::Rate;
use crate::record::Record;
use crate::store::Store;

/// The most records a tick holds while all of them wait for their counterparts: past
/// this it waits for the first of them rather than read on.
pub(super) const HELD_MOST: usize = 10_000;

/// The longest value that goes into a rate's name as it is (a name is a key of
/// `backlog_rates`, 255 characters at most on MySQL); a longer one goes by a digest.
const VALUE_SHOWN: usize = 100;

/// Paces kept for counterparts at most: past this, those that hold nothing (their
/// rate lives in the database) are let go.
const PACES_MOST: usize = 10_000;

/// The rates of a tick's counterparts.
pub(super) struct Counterparts {
    rate: Rate,
    /// The tick's rate's name (`pace::rate_name`): a counterpart's is this and its value.
    name: String,
    /// The column naming each record's counterpart.
    column: String,
    paces: HashMap<Option<String>, Pace>,
}

impl Counterparts {
    /// The counterparts' rates of a tick with `handler.rate_key` and a rate; none
    /// without either.
    pub(super) fn new(rate: Option<Rate>, name: &str, column: Option<&str>) -> Option<Self> {
        Some(Counterparts {
            rate: rate?,
            name: name.to_string(),
            column: column?.to_string(),
            paces: HashMap::new(),
        })
    }

    /// The counterpart of `record`: its value of the column, as text; none where it is
    /// NULL (records without a counterpart share one rate).
    fn of(&self, record: &Record) -> Option<String> {
        let value = record
            .columns
            .get(&self.column)
            .or_else(|| record.columns.get_ignore_case(&self.column))?;
        match value {
            serde_json::Value::Null => None,
            serde_json::Value::String(s) => Some(s.clone()),
            other => Some(other.to_string()),
        }
    }

    /// The pace of the counterpart of `record`.
    pub(super) fn pace_for(&mut self, record: &Record) -> &mut Pace {
        let counterpart = self.of(record);
        self.pace(&counterpart)
    }

    /// The pace of `counterpart`, made on first use.
    fn pace(&mut self, counterpart: &Option<String>) -> &mut Pace {
        if !self.paces.contains_key(counterpart) {
            if self.paces.len() >= PACES_MOST {
                self.paces.retain(|_, pace| !pace.idle());
            }
            let name = rate_name(&self.name, counterpart.as_deref());
            self.paces
                .insert(counterpart.clone(), Pace::new(Some(self.rate), Some(name)));
        }
        self.paces.get_mut(counterpart).expect("inserted above")
    }

    /// Whether a record of `queue` may start now (reserving its counterpart's starts);
    /// where none may, how long until the first may.
    pub(super) fn any_ready(
        &mut self,
        queue: &VecDeque<Record>,
        store: &mut dyn Store,
    ) -> Result<(), Duration> {
        let mut waiting = HashSet::new();
        let mut soonest = STOP_CHECK;
        for record in queue {
            let counterpart = self.of(record);
            if waiting.contains(&counterpart) {
                continue;
            }
            let wait = self.pace(&counterpart).delay(1, store);
            if wait.is_zero() {
                return Ok(());
            }
            soonest = soonest.min(wait);
            waiting.insert(counterpart);
        }
        Err(soonest)
    }

    /// Takes out of `queue` up to `n` records whose counterparts may start now, in the
    /// queue's order, and counts their starts: the records of a counterpart that may
    /// start go out together, counted as that many starts, as a batch is.
    pub(super) fn take(
        &mut self,
        queue: &mut VecDeque<Record>,
        n: usize,
        store: &mut dyn Store,
    ) -> Vec<Record> {
        let mut ready: HashMap<Option<String>, usize> = HashMap::new();
        let mut waiting = HashSet::new();
        let mut taken = Vec::new();
        let mut i = 0;
        while i < queue.len() && taken.len() < n {
            let counterpart = self.of(&queue[i]);
            if waiting.contains(&counterpart) {
                i += 1;
                continue;
            }
            if !ready.contains_key(&counterpart) {
                if !self.pace(&counterpart).delay(1, store).is_zero() {
                    waiting.insert(counterpart);
                    i += 1;
                    continue;
                }
                ready.insert(counterpart.clone(), 0);
            }
            *ready.get_mut(&counterpart).expect("inserted above") += 1;
            taken.push(queue.remove(i).expect("i is within the queue"));
        }
        for (counterpart, starts) in ready {
            let pace = self.pace(&counterpart);
            // Reserved for all of them (the first is due now), then counted.
            pace.delay(starts, store);
            pace.started(starts);
        }
        taken
    }
}

/// The name of the rate of `counterpart` under the tick's rate `name`.
fn rate_name(name: &str, counterpart: Option<&str>) -> String {
    match counterpart {
        None => format!("{name}, no counterpart"),
        Some(v) if v.chars().count() <= VALUE_SHOWN => format!("{name}, counterpart {v}"),
        Some(v) => format!("{name}, counterpart #{:016x}", fnv1a(v.as_bytes())),
    }
}

/// FNV-1a, 64 bits: a digest that stays the same in every build and on every host, so
/// that runners of different releases name a long value's rate alike.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_value_is_named_by_a_stable_digest() {
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        let long = "x".repeat(VALUE_SHOWN + 1);
        let name = rate_name("table t, tier 60s", Some(&long));
        assert!(
            name.starts_with("table t, tier 60s, counterpart #"),
            "{name}"
        );
        assert!(name.len() < 60, "{name}");
        assert_eq!(
            rate_name("group api", Some("acme")),
            "group api, counterpart acme"
        );
        assert_eq!(rate_name("group api", None), "group api, no counterpart");
    }
}

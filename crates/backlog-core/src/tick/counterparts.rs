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

use super::spacing::{STOP_CHECK, Spacer, Spacing};
use crate::record::Record;
use crate::store::Store;

/// The most records a tick holds while all of them wait for their counterparts: past
/// this it waits for the first of them rather than read on.
pub(super) const HELD_MOST: usize = 10_000;

/// Paces kept for counterparts before those that hold nothing (their rate lives in the
/// database) are let go.
const PACES_MOST: usize = 10_000;

/// How a tick tells a record's counterpart, for the counterparts' breakers and their
/// calls in flight: its `rate_key` value, else the host and port of the URL the record
/// gives (a URL handler's `url = "{endpoint}"`).
#[derive(Debug, Clone)]
pub(super) struct KeyOf {
    column: Option<String>,
    url: Option<crate::config::Template>,
}

impl KeyOf {
    /// The key of a tick with `rate_key` or a URL from the record; none without either.
    pub(super) fn new(
        column: Option<&str>,
        url: Option<&crate::config::Template>,
    ) -> Option<KeyOf> {
        (column.is_some() || url.is_some()).then(|| KeyOf {
            column: column.map(str::to_string),
            url: url.cloned(),
        })
    }

    /// The counterpart of `record`: the column's value as text, else the URL's host and
    /// port; none where it cannot be read (a NULL, a URL that does not parse): those
    /// records share one (rate, breaker, cap).
    pub(super) fn of(&self, record: &Record) -> Option<String> {
        if let Some(column) = &self.column {
            let value = record
                .columns
                .get(column)
                .or_else(|| record.columns.get_ignore_case(column))?;
            return match value {
                serde_json::Value::Null => None,
                serde_json::Value::String(s) => Some(s.clone()),
                other => Some(other.to_string()),
            };
        }
        let url = self
            .url
            .as_ref()?
            .fill(|column, out| match record.columns.get(column) {
                Some(serde_json::Value::String(s)) => out.push_str(s),
                Some(other) => out.push_str(&other.to_string()),
                None => {}
            });
        let url = url::Url::parse(&url).ok()?;
        Some(format!(
            "{}:{}",
            url.host_str()?,
            url.port_or_known_default()?
        ))
    }
}

/// The rates of a tick's counterparts.
pub(super) struct Counterparts {
    /// Each counterpart's rate: fixed, or a pace adapted for each (`rate = "auto"`).
    rate: Spacing,
    /// The tick's rate's name (`spacing::rate_name`): a counterpart's is this and its value.
    name: String,
    /// How a record's counterpart is told: the `rate_key` column's value.
    key: KeyOf,
    /// Whether the rates are shared with the other runners: once the database refuses
    /// one, each counterpart keeps to its rate in this tick alone (said once, by the
    /// pace that found it).
    shared: bool,
    paces: HashMap<Option<String>, Spacer>,
    /// How many paces make the next clear-out worth its scan.
    clear_at: usize,
}

impl Counterparts {
    /// The counterparts' rates of a tick with `handler.rate_key` and a rate; none
    /// without either.
    pub(super) fn new(rate: Option<Spacing>, name: &str, column: Option<&str>) -> Option<Self> {
        Some(Counterparts {
            rate: rate?,
            name: name.to_string(),
            key: KeyOf::new(Some(column?), None)?,
            shared: true,
            paces: HashMap::new(),
            clear_at: PACES_MOST,
        })
    }

    /// The pace of the counterpart of `record`.
    pub(super) fn pace_for(&mut self, record: &Record) -> &mut Spacer {
        let counterpart = self.key.of(record);
        self.pace(&counterpart)
    }

    /// The pace of `counterpart`, made on first use.
    fn pace(&mut self, counterpart: &Option<String>) -> &mut Spacer {
        if !self.paces.contains_key(counterpart) {
            if self.paces.len() >= self.clear_at {
                self.paces.retain(|_, pace| !pace.idle());
                self.clear_at = PACES_MOST.max(2 * self.paces.len());
            }
            let name = match counterpart {
                Some(value) => format!("{}, counterpart {value}", self.name),
                None => format!("{}, no counterpart", self.name),
            };
            let pace = Spacer::new(Some(self.rate.clone()), self.shared.then_some(name));
            self.paces.insert(counterpart.clone(), pace);
        }
        self.paces.get_mut(counterpart).expect("inserted above")
    }

    /// Sends the adapted paces' unsent news (as the tick ends).
    pub(super) fn flush(&mut self, store: &mut dyn Store) {
        for pace in self.paces.values_mut() {
            pace.flush(store);
        }
    }

    /// How long until `counterpart` may start a record (reserving its starts).
    fn delay(&mut self, counterpart: &Option<String>, store: &mut dyn Store) -> Duration {
        let pace = self.pace(counterpart);
        let wait = pace.delay(1, store);
        if !pace.is_shared() {
            self.shared = false;
        }
        wait
    }

    /// Takes out of `queue` up to `n` records whose counterparts may start now, in the
    /// queue's order, and counts their starts: the records of a counterpart that may
    /// start go out together, counted as that many starts, as a batch is. Where none
    /// may start, how long until the first may.
    pub(super) fn take(
        &mut self,
        queue: &mut VecDeque<Record>,
        n: usize,
        store: &mut dyn Store,
    ) -> Result<Vec<Record>, Duration> {
        let mut ready: HashMap<Option<String>, usize> = HashMap::new();
        let mut waiting = HashSet::new();
        let mut soonest = STOP_CHECK;
        let mut taken = Vec::new();
        let mut i = 0;
        while i < queue.len() && taken.len() < n {
            let counterpart = self.key.of(&queue[i]);
            if waiting.contains(&counterpart) {
                i += 1;
                continue;
            }
            if !ready.contains_key(&counterpart) {
                let wait = self.delay(&counterpart, store);
                if !wait.is_zero() {
                    soonest = soonest.min(wait);
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
        if taken.is_empty() {
            return Err(soonest);
        }
        Ok(taken)
    }
}

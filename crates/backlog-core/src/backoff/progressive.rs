//! The progressive schedule as a retry strategy: the waits between the tries of a record
//! inserted at a given moment that keeps failing, on the tiers' own ticks (spread
//! included). Its delays are not chosen per record: they follow from the record's age
//! and the tick slots, which is what lets the schedule do without extra columns.

use chrono::{DateTime, Utc};

use super::{Delay, Outcome, Strategy};
use crate::schedule::Schedule;
use crate::schedule::next_attempt;

/// The progressive schedule seen as a retry strategy for one record, so that
/// `backoff delays --schedule` answers for it as for the other strategies.
pub struct Progressive<'a> {
    /// The schedule whose tiers' ticks try the record.
    pub schedule: &'a Schedule,
    /// When the record was inserted.
    pub inserted: DateTime<Utc>,
    /// Its id, for tiers with a spread.
    pub id: String,
}

impl Progressive<'_> {
    /// The moments the record is tried, from its first try on (at most `n`).
    pub fn tries(&self, n: usize) -> Vec<DateTime<Utc>> {
        let mut out = Vec::new();
        let mut from = self.inserted;
        while out.len() < n {
            let Some((_, at)) = next_attempt(self.schedule, self.inserted, Some(&self.id), from)
            else {
                break;
            };
            out.push(at);
            from = at + chrono::Duration::milliseconds(1);
        }
        out
    }
}

impl Strategy for Progressive<'_> {
    /// After a failure, the wait until the next try; -1 once no tier tries the record
    /// again, and after a success (a record marked successful is not pending any more).
    fn delays(&self, outcomes: &[Outcome], _rng: &mut fastrand::Rng) -> Vec<Delay> {
        let tries = self.tries(outcomes.len() + 1);
        let mut done = false;
        outcomes
            .iter()
            .enumerate()
            .map(|(i, ok)| {
                done |= *ok;
                match (done, tries.get(i), tries.get(i + 1)) {
                    (false, Some(a), Some(b)) => {
                        Delay::Wait((*b - *a).num_milliseconds() as f64 / 1000.0)
                    }
                    _ => Delay::GiveUp,
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use chrono::TimeZone;

    /// A record inserted at 11:58 on the default schedule: tried every 5 minutes for a
    /// day, then hourly, and never after 360 days.
    #[test]
    fn the_default_schedule_as_delays() {
        let config = Config::parse(
            include_str!("../../../../schedules/progressive.toml"),
            std::path::Path::new("/srv/b.toml"),
        )
        .unwrap();
        let p = Progressive {
            schedule: &config.schedule,
            inserted: Utc.with_ymd_and_hms(2026, 11, 21, 11, 58, 0).unwrap(),
            id: "1".into(),
        };
        let tries = p.tries(2000);
        assert_eq!(
            tries[0],
            Utc.with_ymd_and_hms(2026, 11, 21, 12, 0, 0).unwrap(),
            "the first 5-minute tick"
        );
        let waits = p.delays(&vec![false; 300], &mut fastrand::Rng::with_seed(1));
        assert_eq!(waits[0], Delay::Wait(300.0));
        assert!(waits[..287].iter().all(|d| *d == Delay::Wait(300.0)));
        assert_eq!(waits[288], Delay::Wait(3600.0), "past a day: hourly");
        let last = *tries.last().unwrap();
        assert!(
            last <= p.inserted + chrono::Duration::days(360) && tries.len() < 2000,
            "{} tries, the last at {last}",
            tries.len()
        );
        assert_eq!(
            p.delays(&[false, true, false], &mut fastrand::Rng::with_seed(1))[1..],
            [Delay::GiveUp, Delay::GiveUp]
        );
    }
}

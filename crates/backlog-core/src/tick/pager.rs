//! The pager: reads (or takes) a band a page at a time, newest first, each page after
//! where the last ended, and sizes each page to what the tick will start soon.
//!
//! A page taken is held for the tick until its records are marked, so its size is how
//! much of the band one runner keeps from the others. A page of 1,000 records taken
//! by the first of four runners whose handler takes 100 ms left the other three
//! nothing to do. So a page holds what the tick's handlers will start within about a
//! quarter of a second, by their observed latency: a few records while handlers are
//! slow, growing (at most doubling from page to page) for fast ones up to
//! `TickOptions::page_size`, where a fast in-process handler keeps its throughput.

use std::collections::VecDeque;
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::reach::{Fleet, Low, Position, Reach, Rules, Stretch, floor, step};
use crate::record::{Record, Scalar};
use crate::store::{BandQuery, Cursor, Page, Store, StoreError};

/// Reads (or takes) a band a page at a time, newest first: from its newest end, or,
/// for a runner that starts further down (`place::stagger`), from there down to the oldest
/// end and then from the newest end down to where it started. In a fleet it steps over
/// what the other runners have read (`reach`).
pub(super) struct Pager {
    /// The parts of the band still to read, in order; the first is being read.
    parts: VecDeque<BandQuery>,
    /// Each part's top as the band gave it: a step over another runner's stretch lowers
    /// the first part's `to`, not what this tick has read.
    tops: VecDeque<(Scalar, bool)>,
    /// The parts read to their end.
    ended: Vec<Stretch>,
    cursor: Option<Cursor>,
    fleet: Option<Fleet>,
    /// The rules it reads the band by, told with its reach, and its clock.
    rules: Rules,
    clock_ms: i64,
    /// The band is read to its end.
    pub(super) done: bool,
}

impl Pager {
    pub(super) fn new(query: &BandQuery) -> Self {
        Self::starting_at(query, None)
    }

    /// A pager that reads the band from `start` (an inserted-at value in the band)
    /// down, then from the band's newest end down to `start`: the two parts split the
    /// band exactly, `start` itself in the second.
    pub(super) fn starting_at(query: &BandQuery, start: Option<Scalar>) -> Self {
        let parts = match start {
            None => VecDeque::from([query.clone()]),
            Some(start) => VecDeque::from([
                BandQuery {
                    to: start.clone(),
                    to_inclusive: false,
                    ..query.clone()
                },
                BandQuery {
                    from: start,
                    ..query.clone()
                },
            ]),
        };
        Pager {
            tops: parts
                .iter()
                .map(|p| (p.to.clone(), p.to_inclusive))
                .collect(),
            parts,
            ended: Vec::new(),
            cursor: None,
            fleet: None,
            rules: Rules {
                take_tried: query.take_tried,
                wants_all: query.wants_all,
                slot: None,
                pending: 0,
            },
            clock_ms: query.clock.timestamp_millis(),
            done: false,
        }
    }

    /// The pager of a tick that shares its band with the other runners of its tier.
    pub(super) fn in_fleet(mut self, fleet: Fleet) -> Self {
        self.rules.slot = fleet.slot;
        self.rules.pending = fleet.pending;
        self.fleet = Some(fleet);
        self
    }

    /// The part read now ended: the next begins at its newest end.
    fn next_part(&mut self) {
        if let (Some(part), Some(top)) = (self.parts.pop_front(), self.tops.pop_front()) {
            self.ended.push(Stretch::part(top, &part));
        }
        self.cursor = None;
        self.done = self.parts.is_empty();
    }

    /// What this tick has read: the parts it ended, and the one it reads from its top
    /// down to its cursor (or to where a step took it), or, `whole`, down to its oldest
    /// end.
    fn read(&self, whole: bool) -> Vec<Stretch> {
        let mut read = self.ended.clone();
        if let (Some(part), Some(top)) = (self.parts.front(), self.tops.front()) {
            let low = match &self.cursor {
                _ if whole => Some(Low::Value(part.from.clone())),
                Some(cursor) => Some(Low::Row(cursor.clone())),
                None if part.to != top.0 => Some(Low::Value(part.to.clone())),
                None => None,
            };
            if let Some(low) = low {
                read.push(Stretch {
                    top: top.0.clone(),
                    top_inclusive: top.1,
                    low,
                });
            }
        }
        read
    }

    /// What this tick has read (`read`), as it tells the others.
    fn reach(&self, whole: bool) -> Option<Reach> {
        let read = self.read(whole);
        (!read.is_empty()).then_some(Reach {
            rules: self.rules,
            clock_ms: self.clock_ms,
            read,
        })
    }

    /// What this tick has read, as text, for the others not to step over when it ends
    /// before its band's end with records it took and did not hand out (`reach`): its
    /// reach, or, after a failed page (`failed`), with the part it reads taken whole
    /// down to its oldest end: that page lay below the cursor, its rows locked (and
    /// skipped by the others' pages) until its transaction rolled back. None outside a
    /// fleet.
    pub(super) fn withdrawal(&self, failed: bool) -> Option<String> {
        self.fleet.as_ref()?;
        self.reach(failed).map(|r| r.to_text())
    }

    /// Steps over what the other runners have read right below where this tick is,
    /// as far as their stretches reach, ending the parts it steps past.
    fn follow(&mut self, store: &mut dyn Store) -> Result<(), StoreError> {
        for _ in 0..16 {
            let Some(fleet) = self.fleet.as_mut() else {
                return Ok(());
            };
            let others = fleet.others(store)?;
            let Some(part) = self.parts.front() else {
                return Ok(());
            };
            let at = Position::of(part, self.cursor.as_ref());
            let Some(low) = step(others, at, (self.rules, self.clock_ms)).cloned() else {
                return Ok(());
            };
            let past = match &low {
                Low::Row(cursor) => cursor.inserted_at < part.from,
                Low::Value(value) => *value <= part.from,
            };
            match low {
                Low::Row(cursor) => self.cursor = Some(cursor),
                Low::Value(value) => {
                    let part = self.parts.front_mut().expect("a part is read");
                    part.to = value;
                    part.to_inclusive = false;
                    self.cursor = None;
                }
            }
            if past {
                self.next_part();
            }
        }
        Ok(())
    }

    /// The next page of at most `want` records; none once the band is read to its end
    /// (a page shorter than asked for ends its part).
    pub(super) fn next(
        &mut self,
        store: &mut dyn Store,
        want: usize,
    ) -> Result<Option<Vec<Record>>, StoreError> {
        if want == 0 {
            return Ok(None);
        }
        while let Some(part) = self.parts.front() {
            let page = store.select(part, self.cursor.as_ref(), want)?;
            if page.len() < want {
                self.next_part();
            } else if let Some(last) = page.last() {
                self.cursor = Some(Cursor::after(last));
            }
            if !page.is_empty() {
                return Ok(Some(page));
            }
        }
        Ok(None)
    }

    /// The next page taken for `owner` (see `Store::take`); none once the band is read
    /// to its end.
    pub(super) fn take(
        &mut self,
        store: &mut dyn Store,
        owner: &str,
        want: usize,
        lease_until: DateTime<Utc>,
        wanted: &dyn Fn(&Record) -> bool,
    ) -> Result<Option<Page>, StoreError> {
        if want == 0 {
            return Ok(None);
        }
        loop {
            self.follow(store)?;
            let Some(mut part) = self.parts.front().cloned() else {
                break;
            };
            // Down to the top of the next stretch another runner has read, at most:
            // the page then steps over it rather than scan its rows for pending ones.
            let floor = self.floor(store)?.filter(|f| *f > part.from);
            if let Some(floor) = &floor {
                part.from = floor.clone();
            }
            let page = store.take(
                owner,
                &part,
                self.cursor.as_ref(),
                want,
                lease_until,
                wanted,
            )?;
            let short = page.read < want;
            match floor {
                // Read down to the floor: every row from there up is read.
                Some(floor) if short => {
                    let part = self.parts.front_mut().expect("a part is read");
                    part.to = floor;
                    part.to_inclusive = false;
                    self.cursor = None;
                }
                None if short => self.next_part(),
                _ => self.cursor.clone_from(&page.cursor),
            }
            if self.fleet.is_some() {
                let reach = self.reach(false);
                if let Some(fleet) = &mut self.fleet {
                    fleet.write(store, reach, short)?;
                }
            }
            if page.cursor.is_some() {
                return Ok(Some(page));
            }
        }
        Ok(None)
    }

    /// The top of the nearest stretch another runner has read below where this tick is.
    fn floor(&mut self, store: &mut dyn Store) -> Result<Option<Scalar>, StoreError> {
        let Some(fleet) = self.fleet.as_mut() else {
            return Ok(None);
        };
        let others = fleet.others(store)?;
        let Some(part) = self.parts.front() else {
            return Ok(None);
        };
        let at = Position::of(part, self.cursor.as_ref());
        Ok(floor(others, at, (self.rules, self.clock_ms)))
    }
}

/// How far ahead a page reaches: the records the handlers will start in this time.
const HORIZON: Duration = Duration::from_millis(250);

/// How many records the next page asks for.
pub(super) struct PageSize {
    /// `TickOptions::page_size`.
    max: usize,
    /// Records the handlers take at once (concurrency times batch size): a page asks
    /// for at least these, so that no handler waits for a page.
    lanes: usize,
    concurrency: f64,
    /// The rate limit, in starts a second.
    rate: f64,
    /// Seconds a record spends in its handler, smoothed; none before the first answer.
    per_record: Option<f64>,
    last: usize,
}

impl PageSize {
    pub(super) fn new(max: usize, concurrency: usize, batch: usize, rate: Option<f64>) -> Self {
        let lanes = concurrency.saturating_mul(batch).clamp(1, max.max(1));
        PageSize {
            max: max.max(1),
            lanes,
            concurrency: concurrency.max(1) as f64,
            rate: rate.unwrap_or(f64::INFINITY),
            per_record: None,
            last: lanes,
        }
    }

    /// A batch of `records` came back `latency` after it was handed out.
    pub(super) fn observe(&mut self, records: usize, latency: Duration) {
        if records == 0 {
            return;
        }
        let sample = latency.as_secs_f64() / records as f64;
        self.per_record = Some(match self.per_record {
            None => sample,
            Some(avg) => avg * 0.8 + sample * 0.2,
        });
    }

    /// A page gave the tick `taken` records to hand out. None (other runners held its
    /// records, or the tick did not want them): the next reaches twice as far, up to the
    /// largest, so a tick that arrives behind others does not read the band a few
    /// records at a time, a read and a claim each, while it has seen no handler answer
    /// to size by. Some, before any answer: back to the lanes' worth, so that reaching
    /// far once does not take a large page for a handler that may be slow.
    pub(super) fn took(&mut self, taken: usize) {
        if taken == 0 {
            self.last = self.last.saturating_mul(2).min(self.max);
        } else if self.per_record.is_none() {
            self.last = self.lanes;
        }
    }

    /// The size of the next page.
    pub(super) fn next(&mut self) -> usize {
        let want = match self.per_record {
            None => self.last,
            Some(per_record) => {
                let per_second = (self.concurrency / per_record.max(1e-9)).min(self.rate);
                let soon = (per_second * HORIZON.as_secs_f64()).ceil();
                let soon = if soon >= self.max as f64 {
                    self.max
                } else {
                    soon as usize
                };
                soon.min(self.last.saturating_mul(2)).max(self.lanes)
            }
        };
        self.last = want.min(self.max);
        self.last
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slow_handlers_get_small_pages() {
        let mut size = PageSize::new(1000, 4, 1, None);
        assert_eq!(size.next(), 4, "first the lanes' worth");
        for _ in 0..20 {
            size.observe(1, Duration::from_millis(100));
        }
        // Four lanes at 100 ms a record start 40 a second: 10 in a quarter second.
        assert_eq!(size.next(), 8, "at most double the last page");
        assert_eq!(size.next(), 10);
        assert_eq!(size.next(), 10);
    }

    #[test]
    fn fast_handlers_grow_to_the_largest_page() {
        let mut size = PageSize::new(1000, 1, 1, None);
        let mut sizes = vec![size.next()];
        for _ in 0..12 {
            size.observe(100, Duration::from_micros(100));
            sizes.push(size.next());
        }
        assert_eq!(
            sizes,
            [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1000, 1000, 1000]
        );
    }

    #[test]
    fn a_rate_limit_keeps_pages_small() {
        let mut size = PageSize::new(1000, 8, 1, Some(20.0));
        size.next();
        size.observe(100, Duration::from_micros(100));
        // 20 starts a second: 5 in a quarter second, but never fewer than the lanes.
        assert_eq!(size.next(), 8);
    }

    #[test]
    fn pages_that_give_nothing_grow() {
        let mut size = PageSize::new(1000, 1, 1, None);
        assert_eq!(size.next(), 1);
        let mut sizes = Vec::new();
        for _ in 0..11 {
            size.took(0);
            sizes.push(size.next());
        }
        assert_eq!(
            sizes,
            [2, 4, 8, 16, 32, 64, 128, 256, 512, 1000, 1000],
            "before any answer too"
        );
        // A page that gives records before any answer: back to the lanes' worth.
        size.took(3);
        assert_eq!(size.next(), 1);
        // Once records come back slowly, their pace sizes the pages again (at most
        // doubling from page to page).
        for _ in 0..20 {
            size.observe(1, Duration::from_millis(100));
        }
        assert_eq!((size.next(), size.next()), (2, 3));
    }

    #[test]
    fn batches_fill_their_lanes() {
        let mut size = PageSize::new(1000, 4, 100, None);
        assert_eq!(size.next(), 400);
        let mut size = PageSize::new(1000, 64, 100, None);
        assert_eq!(size.next(), 1000, "never above the largest page");
    }
}

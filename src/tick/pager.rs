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

use super::begin::Begun;
use super::options::TickOptions;
use crate::record::{Record, Scalar};
use crate::schedule::Span;
use crate::store::{BandQuery, Cursor, Page, Store, StoreError};
use crate::timestamp::TimestampFormat;

/// Reads (or takes) a band a page at a time, newest first: from its newest end, or,
/// for a runner that starts further down (`stagger`), from there down to the oldest
/// end and then from the newest end down to where it started.
pub(super) struct Pager {
    /// The parts of the band still to read, in order; the first is being read.
    parts: VecDeque<BandQuery>,
    cursor: Option<Cursor>,
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
            parts,
            cursor: None,
            done: false,
        }
    }

    /// The part read now ended: the next begins at its newest end.
    fn next_part(&mut self) {
        self.parts.pop_front();
        self.cursor = None;
        self.done = self.parts.is_empty();
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
        while let Some(part) = self.parts.front() {
            let part = part.clone();
            let page = store.take(
                owner,
                &part,
                self.cursor.as_ref(),
                want,
                lease_until,
                wanted,
            )?;
            if page.read < want {
                self.next_part();
            } else {
                self.cursor.clone_from(&page.cursor);
            }
            if page.cursor.is_some() {
                return Ok(Some(page));
            }
        }
        Ok(None)
    }
}

/// Where tick `run_id` begins in its band (`stagger`), from the live runners of its
/// tier begun before it; none (the newest end) for the first, or when they cannot be
/// read.
pub(super) fn start_place(
    store: &mut dyn Store,
    begun: &Begun<'_>,
    run_id: i64,
    opts: &TickOptions,
) -> Option<Scalar> {
    match store.runners_before(opts.window, run_id, opts.lease) {
        Ok(0) => None,
        Ok(before) => {
            let span = pending_span(store, &begun.query, &begun.span);
            let start = stagger(&span, &begun.query, &begun.format, before);
            if let Some(start) = &start {
                tracing::debug!(
                    "{before} runners of this tier began before this tick: it reads its band from {start} down, then from the newest end"
                );
            }
            start
        }
        Err(e) => {
            tracing::debug!(
                "cannot read the live runners, so this tick reads its band from the newest end: {e}"
            );
            None
        }
    }
}

/// Where a runner of a fleet begins in its band, so that runners that share a band do
/// not all read its newest end and step over what the others hold there: the tick
/// with `before` live ticks of its tier begun before it starts at a fraction of the
/// band's span from its newest end, the van der Corput sequence (0, 1/2, 1/4, 3/4,
/// 1/8, …), spread evenly whatever the number of runners turns out to be (each knows
/// only those begun before it). The first runner, or one alone, reads from the
/// newest end as ever. The span (`pending_span`: up to the band's newest pending
/// record) is split by time, not by records: a runner whose part holds few goes on
/// into the next older one, then wraps to the newest end.
fn stagger(
    span: &Span,
    query: &BandQuery,
    format: &TimestampFormat,
    before: u64,
) -> Option<Scalar> {
    let fraction = van_der_corput(before);
    if fraction == 0.0 {
        return None;
    }
    let width = (span.to - span.from).num_milliseconds() as f64;
    let start = span.to - chrono::Duration::milliseconds((width * fraction) as i64);
    // Inside the band as the column compares its values: a wall-clock column's values
    // go back when its clocks do (the end of summer time), instants do not.
    Some(format.encode(start)).filter(|s| *s > query.from && *s < query.to)
}

/// The part of `span` below its newest pending record (a read of one record, the
/// band's first page), so that the runners' places split the records, not an empty
/// newest end (a tier's band reaches past its youngest records when they came in
/// bursts, or its shorter tiers took them). The oldest end is not read: from the old
/// end of a band an index on the inserted-at column can only walk up through the
/// records done long ago. The span as it is if the read fails or finds nothing.
fn pending_span(store: &mut dyn Store, query: &BandQuery, span: &Span) -> Span {
    let newest = store
        .select(query, None, 1)
        .ok()
        .and_then(|page| page.first().and_then(|r| r.inserted_time));
    match newest {
        Some(newest) if newest >= span.from => Span {
            // Past the newest, so that its own place is inside.
            to: (newest + chrono::Duration::milliseconds(1)).min(span.to),
            ..*span
        },
        _ => *span,
    }
}

/// The `n`th term of the base-2 van der Corput sequence: `n`'s bits reversed after
/// the binary point.
fn van_der_corput(mut n: u64) -> f64 {
    let (mut value, mut place) = (0.0, 0.5);
    while n > 0 {
        if n & 1 == 1 {
            value += place;
        }
        n >>= 1;
        place /= 2.0;
    }
    value
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
    fn runners_start_spread_over_the_band() {
        let starts: Vec<f64> = (0..8).map(van_der_corput).collect();
        assert_eq!(starts, [0.0, 0.5, 0.25, 0.75, 0.125, 0.625, 0.375, 0.875]);
        let to = chrono::DateTime::parse_from_rfc3339("2026-11-21T12:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let span = Span {
            from: to - chrono::Duration::hours(8),
            to,
            to_inclusive: true,
        };
        let format = TimestampFormat::UnixSeconds;
        let query = BandQuery {
            from: format.encode(span.from),
            to: format.encode(span.to),
            to_inclusive: true,
            take_tried: false,
            clock: to,
            wants_all: true,
        };
        assert!(
            stagger(&span, &query, &format, 0).is_none(),
            "the first reads from the newest end"
        );
        let start = |n| stagger(&span, &query, &format, n).unwrap();
        assert_eq!(
            start(1),
            Scalar::Int((to - chrono::Duration::hours(4)).timestamp())
        );
        assert_eq!(
            start(3),
            Scalar::Int((to - chrono::Duration::hours(6)).timestamp())
        );
    }

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

//! Where a tick begins in its band: the first runner of a tier, or one alone, at the
//! band's newest end; each further runner of a fleet somewhere else, so that runners
//! that share a band do not all read its newest end and step over what the others
//! hold there.

use super::begin::Begun;
use super::options::TickOptions;
use crate::record::Scalar;
use crate::schedule::Span;
use crate::store::{BandQuery, Store};
use crate::timestamp::TimestampFormat;

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
                    "{} of this tier began before this tick: it reads its band from {start} down, then from the newest end",
                    crate::plural::count(before, "runner", "runners")
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runners_start_spread_over_the_band() {
        let starts: Vec<f64> = (0..8).map(van_der_corput).collect();
        assert_eq!(starts, [0.0, 0.5, 0.25, 0.75, 0.125, 0.625, 0.375, 0.875]);
        let to = chrono::DateTime::parse_from_rfc3339("2026-11-21T12:00:00Z")
            .unwrap()
            .with_timezone(&chrono::Utc);
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
}

//! A dry run (`backlog run --dry-run`): what a tick would hand out, read as the tick
//! reads it and listed, nothing held or written.

use super::begin::Begun;
use super::pager::Pager;
use super::tally::Tally;
use super::{Event, TickOptions, TickSummary};
use crate::error::Error;
use crate::store::{Held, Store};

/// A dry run: the records the tick would hand out, read and listed, nothing held or
/// written. A record a live tick holds, or that a failure or a snooze keeps from
/// ticks at its clock (unless `--retry-failed`), is skipped, as the tick would.
pub(super) fn preview(
    store: &mut dyn Store,
    begun: Begun<'_>,
    opts: &TickOptions,
    on_event: &mut dyn FnMut(Event<'_>),
) -> Result<TickSummary, Error> {
    let store_err = Error::store(store.describe());
    let Begun {
        query,
        format,
        span: _,
        limit,
        wants,
        mut summary,
    } = begun;
    // Not read at all when nothing is held or kept.
    let (held_now, kept) = store.held_counts().map_err(&store_err)?;
    let any_held = held_now + kept > 0;
    let mut tally = Tally::default();
    let mut pager = Pager::new(&query);
    while tally.selected < limit {
        let want = opts.page_size.min((limit - tally.selected) as usize);
        let Some(page) = pager.next(store, want).map_err(&store_err)? else {
            break;
        };
        let mut candidates = Vec::new();
        for record in page.iter() {
            if !wants.takes(record) {
                tally.deferred += 1;
            } else if !tally.left_alone(record, &format) {
                candidates.push(record);
            }
        }
        // Who holds them, read for the page at once.
        let holders = match any_held {
            true => store.holders(&candidates).map_err(&store_err)?,
            false => vec![None; candidates.len()],
        };
        for (record, holder) in candidates.into_iter().zip(holders) {
            if skips(holder, opts) {
                tally.skipped += 1;
            } else {
                on_event(Event::WouldHandle { record });
                tally.selected += 1;
            }
        }
    }
    tally.into_summary(&mut summary);
    Ok(summary)
}

/// Whether a tick at `opts.now` skips a record held by `holder`: a live tick, or a
/// keep (a failure until its slot ends, a snooze) past that clock.
fn skips(holder: Option<Held>, opts: &TickOptions) -> bool {
    match holder {
        Some(Held { owner: Some(_), .. }) => true,
        Some(Held { owner: None, until }) => !opts.retry_failed && until > opts.now,
        None => false,
    }
}

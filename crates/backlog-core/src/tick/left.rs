//! What a tick that ended early left of its band: the pending records in it now, which
//! the next start takes at once (the tier is unfinished). Counted only then, so a
//! tick that read its band to the end pays nothing for it; a stopped tick pays one
//! count over its band, an index range on the inserted-at column.

use crate::config::TableConfig;
use crate::store::{BandQuery, Range, Store};

/// The pending records of `band` now; none if they cannot be counted (said at WARN:
/// the tick's own outcome matters more than this figure).
pub(super) fn pending_left(
    table: &TableConfig,
    store: &mut dyn Store,
    band: &BandQuery,
) -> Option<u64> {
    let range = Range {
        from: Some(band.from.clone()),
        to: Some(band.to.clone()),
        to_inclusive: band.to_inclusive,
        ..Default::default()
    };
    match store.count_by_status(&range) {
        Ok(counts) => Some(
            counts
                .iter()
                .filter(|(status, _)| table.pending.contains(status))
                .map(|(_, n)| n)
                .sum(),
        ),
        Err(e) => {
            tracing::warn!("cannot count what this tick left of its band: {e}");
            None
        }
    }
}

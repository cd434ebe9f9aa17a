//! The start of a tick: its name, its band as bounds in the inserted-at column's own
//! format, what it wants of the band, and the summary it begins with. Reads the
//! table's shape (`Store::inspect`) and nothing else.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

use chrono::Utc;

use super::options::TickOptions;
use super::summary::{BandSummary, TickSummary};
use super::wanted::Wants;
use crate::config::TableConfig;
use crate::duration;
use crate::error::Error;
use crate::schedule::{Schedule, Span};
use crate::store::{BandQuery, Store};
use crate::timestamp::{FormatSetting, TimestampFormat};

static TICKS_IN_PROCESS: AtomicU64 = AtomicU64::new(0);

/// A name for this tick in the tool's holds and claims: host, process, and a count for ticks run
/// by one process.
pub fn owner_name() -> String {
    let host = hostname::get()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "localhost".into());
    let n = TICKS_IN_PROCESS.fetch_add(1, Ordering::Relaxed);
    format!(
        "{host}/{}/{}/{n}",
        std::process::id(),
        Utc::now().timestamp_millis()
    )
}

/// A tick, begun.
pub(super) struct Begun<'s> {
    /// The band, in the column's format.
    pub(super) query: BandQuery,
    /// The band's instants, as the query's bounds encode them.
    pub(super) span: Span,
    /// The inserted-at column's format.
    pub(super) format: TimestampFormat,
    /// The most records the tick hands out.
    pub(super) limit: u64,
    pub(super) wants: Wants<'s>,
    /// The counts at zero, the rest filled in.
    pub(super) summary: TickSummary,
}

/// Begins a tick of `opts.window` of `schedule` over `store`.
pub(super) fn begin<'s>(
    schedule: &'s Schedule,
    table: &'s TableConfig,
    store: &mut dyn Store,
    opts: &TickOptions,
) -> Result<Begun<'s>, Error> {
    let tier = schedule.tier(opts.window);
    let band = schedule.band(opts.window);
    let limit = opts.limit.unwrap_or_else(|| schedule.limit(opts.window));
    let format = store.inspect().map_err(Error::store(store.describe()))?;
    // A spread tier takes only this tick's share of its band; a `[retry]` strategy
    // only the records whose delay has passed.
    let wants = Wants::new(tier.map(|(_, t)| t), table, opts.now)?;
    let span = band.span(opts.now);
    let query = BandQuery {
        from: format.encode(span.from),
        to: format.encode(span.to),
        to_inclusive: span.to_inclusive,
        take_tried: opts.retry_failed,
        clock: opts.now,
        wants_all: wants.all(),
    };
    tracing::debug!(
        "tick of window {} over {band} ({} ≤ {} {} {}), {} holds {format}",
        duration::compact(opts.window),
        query.from,
        table.inserted_at,
        if span.to_inclusive { "≤" } else { "<" },
        query.to,
        table.inserted_at,
    );
    let summary = TickSummary {
        window: duration::compact(opts.window),
        tier: tier.map(|(n, _)| n),
        cadence: tier.map(|(_, t)| t.cadence.to_string()),
        bands: schedule.bands,
        band: BandSummary {
            younger: duration::compact(band.younger),
            older: duration::compact(band.older),
            from: query.from.to_string(),
            to: query.to.to_string(),
        },
        now: opts.now,
        database: store.describe(),
        table: table.name.clone(),
        inserted_at_format: format.setting_name().to_string(),
        inserted_at_format_detected: table.inserted_at_format == FormatSetting::Auto,
        dry_run: opts.dry_run,
        run_id: None,
        selected: 0,
        succeeded: 0,
        failed: 0,
        not_yet: 0,
        skipped: 0,
        deferred: 0,
        deferred_by: wants.reasons(),
        lost: 0,
        given_up: 0,
        statuses: BTreeMap::new(),
        limit,
        limit_reached: false,
        stopped: false,
        left: None,
        breaker: None,
        lapsed: None,
        handler_broken: None,
        unreadable: 0,
        unreadable_sample: None,
        other_offset: 0,
        other_offset_sample: None,
        concurrency: opts.concurrency.max(1),
        seconds: 0.0,
        paused: None,
    };
    Ok(Begun {
        query,
        span,
        format,
        limit,
        wants,
        summary,
    })
}

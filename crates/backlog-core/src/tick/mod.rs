//! A tick: one run of one tier over its band.
//!
//! A tick takes the pending records of its band a page at a time, newest first: the
//! store reads each page and holds its records for the tick in the tool's own tables,
//! atomically, so a record another tick holds or just marked is not taken again. The
//! tick hands the records it took to its lanes (up to `concurrency` handlers at once,
//! at most `rate` starts a second), settles the answers as they come back, and writes
//! their statuses in groups. A heartbeat thread renews the holds while handlers run;
//! at the end the tick lets go of what it still holds.
//!
//! What this guarantees: a record is marked only after its handler returned, and only
//! where the tick still holds it; no two ticks hold a record at once, and a tick hands
//! a record out only while its holds are fresh; a tick that is killed leaves holds that
//! expire after one lease, so its unmarked records are tried again by a later tick
//! (at-least-once).
//!
//! Its parts, one file each: `process` (setup and cleanup), `hand_out` (the loop),
//! `pager` (pages and their size), `lanes` (inline, pipelined, a pool of workers),
//! `pace` (the rate), `breaker`, `heartbeat`, `outcome` (what an answer counts as),
//! `marks` (status writes), `tally` (counts), `wanted` (spread and `[retry]` delays),
//! `summary`, `options`, `span` (the tracing span its log lines are in), `trace` (its OpenTelemetry spans and metrics); `near_statuses` (pending statuses spelt in another case, after
//! a tick that took nothing); `retry` hands chosen records over outside the schedule
//! (`backlog retry`, `snooze`); `give_up` gives up on records past the last tier.

mod adapted;
mod begin;
mod breaker;
mod counterparts;
mod failure_counts;
mod give_up;
mod grace;
mod hand_out;
mod heartbeat;
mod lanes;
mod left;
mod mark_group;
mod mark_writer;
mod marks;
mod near_statuses;
mod options;
mod outcome;
mod outcome_log;
mod pager;
mod place;
mod preview;
mod process;
mod reach;
mod retry;
mod spacing;
mod span;
mod summary;
mod tally;
mod trace;
mod wanted;

pub use begin::owner_name;
pub use options::{Event, TickOptions};
pub use process::{open_store, process_backlog};
pub use retry::{RetrySummary, give_up_records, retry_records, snooze_records};
pub use span::{enter_tick_span, tick_span, tier_span};
pub use summary::{BandSummary, TickSummary};

//! The tick's OpenTelemetry spans and metrics, through the API's global providers: a
//! no-op until the program installs one (the command does when an `OTEL_*` variable
//! asks, `telemetry.rs`), so a tick that exports nothing pays a few calls.
//!
//! A tick is a span (`backlog.tick`), the child of the context current where
//! `process_backlog` is called (the command's: a `TRACEPARENT` it was started with);
//! each record's call is a child span of it (`backlog.record`), whose `traceparent`
//! the handler receives (`Context::traceparent`). A breaker's trip, a pace's cut and
//! a give-up are events of the tick's span (`event`), which is the context's active
//! span on the tick's thread while the tick runs. Where no span records (no provider,
//! or sampled out), no record span is made: the handlers receive the tick's context
//! as it came, a caller's trace passed through or none.

use std::collections::HashMap;
use std::time::Duration;

use opentelemetry::global::{self, BoxedSpan, BoxedTracer};
use opentelemetry::metrics::Histogram;
use opentelemetry::trace::{Span, SpanKind, Status, TraceContextExt, Tracer};
use opentelemetry::{Context, ContextGuard, KeyValue};

use super::options::TickOptions;
use super::summary::TickSummary;
use crate::duration;
use crate::error::Error;
use crate::handler::{Handled, Outcome};
use crate::record::{Record, Scalar};
use crate::schedule::Schedule;
use crate::trace_context::TraceParent;

/// The name the tool's spans and metrics are under.
const SCOPE: &str = "backlog";

/// A tick's span, its records' spans while they are out, and its instruments.
pub(super) struct TickTrace {
    cx: Context,
    tracer: BoxedTracer,
    /// Whether the tick's span records: only then are records' spans made.
    recording: bool,
    /// The records out, by id: their spans end as their answers are settled.
    out: HashMap<Scalar, BoxedSpan>,
    /// The tick's `tracestate`, passed on to the handlers.
    tracestate: Option<String>,
    /// The tier and window, on every span and measurement.
    tier: Vec<KeyValue>,
    handler_time: Histogram<f64>,
    /// On the tick's thread, the tick's span is the active one (`event`).
    _active: ContextGuard,
}

impl TickTrace {
    /// Starts the span of a tick of `opts.window`.
    pub(super) fn start(schedule: &Schedule, table: &str, opts: &TickOptions) -> TickTrace {
        let tracer = global::tracer(SCOPE);
        let mut tier = vec![KeyValue::new(
            "backlog.tier.window",
            duration::compact(opts.window),
        )];
        if let Some((n, _)) = schedule.tier(opts.window) {
            tier.push(KeyValue::new("backlog.tier", n as i64));
        }
        let parent = Context::current();
        let mut attributes = tier.clone();
        attributes.push(KeyValue::new("backlog.table", table.to_string()));
        attributes.push(KeyValue::new("backlog.dry_run", opts.dry_run));
        let span = tracer.build_with_context(
            tracer
                .span_builder("backlog.tick")
                .with_kind(SpanKind::Internal)
                .with_attributes(attributes),
            &parent,
        );
        let recording = span.is_recording();
        let header = span.span_context().trace_state().header();
        let cx = parent.with_span(span);
        let handler_time = global::meter(SCOPE)
            .f64_histogram("backlog.handler.duration")
            .with_unit("s")
            .with_description("The time a handler took on a record")
            .build();
        TickTrace {
            _active: cx.clone().attach(),
            cx,
            tracer,
            recording,
            out: HashMap::new(),
            tracestate: (!header.is_empty()).then_some(header),
            tier,
            handler_time,
        }
    }

    /// The `tracestate` the handlers pass on.
    pub(super) fn tracestate(&self) -> Option<&str> {
        self.tracestate.as_deref()
    }

    /// Starts the span of `record`'s call, and returns the `traceparent` its handler
    /// receives: that span's, or, where none records, the tick's context as it came.
    pub(super) fn record_out(&mut self, record: &Record) -> Option<TraceParent> {
        if !self.recording {
            return TraceParent::of(self.cx.span().span_context());
        }
        let span = self.tracer.build_with_context(
            self.tracer
                .span_builder("backlog.record")
                .with_kind(SpanKind::Client)
                .with_attributes([KeyValue::new("backlog.record.id", record.id.to_string())]),
            &self.cx,
        );
        let parent = TraceParent::of(span.span_context());
        self.out.insert(record.id.clone(), span);
        parent
    }

    /// Ends `record`'s span with its answer, and counts the handler's time.
    pub(super) fn record_back(&mut self, record: &Record, handled: &Handled, took: Duration) {
        self.handler_time.record(took.as_secs_f64(), &self.tier);
        let Some(mut span) = self.out.remove(&record.id) else {
            return;
        };
        span.set_attribute(KeyValue::new("backlog.record.outcome", handled.kind()));
        span.set_attribute(KeyValue::new("backlog.record.seconds", took.as_secs_f64()));
        if let Some(code) = handled.code {
            span.set_attribute(KeyValue::new("backlog.record.code", code));
        }
        if handled.outcome != Outcome::Success {
            span.set_status(Status::error(handled.detail.to_string()));
        }
        span.end();
    }

    /// Ends the tick's span with its counts and how it ended, the spans of records
    /// that never came back with it, and counts the tick in the metrics.
    pub(super) fn end(mut self, result: &Result<TickSummary, Error>, seconds: f64) {
        for (_, mut span) in self.out.drain() {
            span.set_status(Status::error("no answer: the tick ended first"));
            span.end();
        }
        let meter = global::meter(SCOPE);
        let mut attributes = self.tier.clone();
        let outcome = match result {
            Ok(summary) => outcome(summary),
            Err(_) => "failed",
        };
        attributes.push(KeyValue::new("backlog.tick.outcome", outcome));
        meter
            .f64_histogram("backlog.tick.duration")
            .with_unit("s")
            .with_description("The time a tick took, from its band to its run-log row")
            .build()
            .record(seconds, &attributes);
        let span = self.cx.span();
        span.set_attribute(KeyValue::new("backlog.tick.outcome", outcome));
        match result {
            Ok(summary) => {
                let records = meter
                    .u64_counter("backlog.records")
                    .with_unit("{record}")
                    .with_description("Records a tick selected, by what became of them")
                    .build();
                for (what, n) in [
                    ("selected", summary.selected),
                    ("succeeded", summary.succeeded),
                    ("failed", summary.failed),
                    ("skipped", summary.skipped),
                    ("given_up", summary.given_up),
                ] {
                    span.set_attribute(KeyValue::new(format!("backlog.tick.{what}"), n as i64));
                    let mut by = self.tier.clone();
                    by.push(KeyValue::new("backlog.records.state", what));
                    records.add(n, &by);
                }
                let why = (summary.handler_broken.as_ref())
                    .or(summary.lapsed.as_ref())
                    .or(summary.breaker.as_ref());
                if let Some(why) = why {
                    span.set_status(Status::error(why.clone()));
                }
            }
            Err(e) => span.set_status(Status::error(e.to_string())),
        }
        span.end();
    }
}

/// How a tick ended, in the run log's words (`backlog_runs.outcome`), and `paused`
/// for a tier a person paused.
fn outcome(summary: &TickSummary) -> &'static str {
    if summary.paused.is_some() {
        return "paused";
    }
    super::tally::ended(
        summary.handler_broken.is_some(),
        summary.lapsed.is_some(),
        summary.breaker.is_some(),
        summary.stopped,
    )
}

/// An event on the tick's span (a breaker's trip, a pace's cut, a give-up), on the
/// tick's thread; nothing elsewhere, or where no span records.
pub(super) fn event(name: &'static str, attributes: Vec<KeyValue>) {
    let cx = Context::current();
    let span = cx.span();
    if span.is_recording() {
        span.add_event(name, attributes);
    }
}

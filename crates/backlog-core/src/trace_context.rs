//! W3C Trace Context as a handler receives it: the `traceparent` of the span its call
//! is in (`TRACEPARENT` for a command, a batch line's field, an HTTP header), so the
//! counterpart's own spans join the tick's trace.

use std::fmt;

use opentelemetry::trace::{SpanContext, SpanId, TraceFlags, TraceId};

/// A `traceparent` value (version 00): a trace, the span a call is in, sampled or
/// not. Built from a valid span context only: there is none to give otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceParent {
    trace_id: TraceId,
    span_id: SpanId,
    flags: TraceFlags,
}

impl TraceParent {
    /// The traceparent of `span`, if it is valid (a no-op tracer's span with no parent
    /// is not).
    pub fn of(span: &SpanContext) -> Option<TraceParent> {
        span.is_valid().then(|| TraceParent {
            trace_id: span.trace_id(),
            span_id: span.span_id(),
            flags: span.trace_flags(),
        })
    }

    /// The trace this span is part of.
    pub fn trace_id(&self) -> TraceId {
        self.trace_id
    }
}

impl fmt::Display for TraceParent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "00-{:032x}-{:016x}-{:02x}",
            self.trace_id,
            self.span_id,
            self.flags.to_u8()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::trace::TraceState;

    #[test]
    fn a_traceparent_is_written_as_the_w3c_says() {
        let span = SpanContext::new(
            TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap(),
            SpanId::from_hex("00f067aa0ba902b7").unwrap(),
            TraceFlags::SAMPLED,
            false,
            TraceState::default(),
        );
        assert_eq!(
            TraceParent::of(&span).unwrap().to_string(),
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        );
        assert_eq!(TraceParent::of(&SpanContext::empty_context()), None);
    }
}

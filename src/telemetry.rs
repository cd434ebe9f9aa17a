//! Traces and metrics over OTLP, as the OpenTelemetry specification's environment
//! variables set them (docs/monitoring.md, "Traces"): off unless one of them asks.
//!
//! The SDK batches spans on a thread of its own and drops them past its queue
//! (`OTEL_BSP_MAX_QUEUE_SIZE`, 2,048), so a collector that is down or hangs costs a
//! tick neither time nor unbounded memory; its requests go out through ureq, which
//! says once (one WARN a process) that the collector cannot be reached. At the end,
//! the command waits for the last spans and metrics: up to `OTEL_EXPORTER_OTLP_TIMEOUT`
//! where the collector has answered during the run, else a twentieth of the run (at
//! least 50 ms), then drops them: a collector that is down or hangs delays no cron
//! line by more.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::{Context, KeyValue};
use opentelemetry_otlp::{MetricExporter, SpanExporter, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::metrics::SdkMeterProvider;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;

/// The export's providers while the command runs; `finish` flushes them.
pub struct Telemetry {
    tracer: Option<SdkTracerProvider>,
    meter: Option<SdkMeterProvider>,
    started: Instant,
    timeout: Duration,
    warned: Arc<AtomicBool>,
    /// Whether the collector has taken an export during the run.
    answered: Arc<AtomicBool>,
}

/// The variables' values that name the protocol this build sends.
const PROTOBUF: &str = "http/protobuf";

/// Starts the export the `OTEL_*` variables ask for (none: `None`, and nothing runs).
pub fn start() -> Option<Telemetry> {
    start_with(&|name| std::env::var(name).ok().filter(|v| !v.trim().is_empty()))
}

fn start_with(var: &dyn Fn(&str) -> Option<String>) -> Option<Telemetry> {
    if var("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true")) {
        return None;
    }
    let warned = Arc::new(AtomicBool::new(false));
    let answered = Arc::new(AtomicBool::new(false));
    let traces = wanted(var, "TRACES", &warned);
    let metrics = wanted(var, "METRICS", &warned);
    if !traces && !metrics {
        return None;
    }
    let timeout = var("OTEL_EXPORTER_OTLP_TIMEOUT")
        .and_then(|ms| ms.trim().parse::<u64>().ok())
        .map_or(Duration::from_secs(10), Duration::from_millis);
    let resource = resource(var);
    let client = || Ureq::new(timeout, Arc::clone(&warned), Arc::clone(&answered));
    let tracer = traces
        .then(|| {
            SpanExporter::builder()
                .with_http()
                .with_http_client(client())
                .build()
        })
        .and_then(|built| exporter_or_warn(built, "traces", &warned))
        .map(|exporter| {
            SdkTracerProvider::builder()
                .with_batch_exporter(exporter)
                .with_resource(resource.clone())
                .build()
        });
    let meter = metrics
        .then(|| {
            MetricExporter::builder()
                .with_http()
                .with_http_client(client())
                .build()
        })
        .and_then(|built| exporter_or_warn(built, "metrics", &warned))
        .map(|exporter| {
            SdkMeterProvider::builder()
                .with_periodic_exporter(exporter)
                .with_resource(resource)
                .build()
        });
    if let Some(tracer) = &tracer {
        opentelemetry::global::set_tracer_provider(tracer.clone());
    }
    if let Some(meter) = &meter {
        opentelemetry::global::set_meter_provider(meter.clone());
    }
    Some(Telemetry {
        tracer,
        meter,
        started: Instant::now(),
        timeout,
        warned,
        answered,
    })
}

/// Whether `signal` (`TRACES`, `METRICS`) is to be exported: an endpoint or the
/// `otlp` exporter named, not `none`, in a protocol this build sends.
fn wanted(var: &dyn Fn(&str) -> Option<String>, signal: &str, warned: &AtomicBool) -> bool {
    let exporter = var(&format!("OTEL_{signal}_EXPORTER"));
    match exporter.as_deref().map(str::trim) {
        Some("none") => return false,
        Some("otlp") | None => {}
        Some(other) => {
            warn_once(
                warned,
                format!(
                    "OTEL_{signal}_EXPORTER={other}: backlog exports over OTLP only; set it to otlp, or to none; no {} are sent",
                    signal.to_lowercase()
                ),
            );
            return false;
        }
    }
    let asked = exporter.is_some()
        || var("OTEL_EXPORTER_OTLP_ENDPOINT").is_some()
        || var(&format!("OTEL_EXPORTER_OTLP_{signal}_ENDPOINT")).is_some();
    if !asked {
        return false;
    }
    let name = format!("OTEL_EXPORTER_OTLP_{signal}_PROTOCOL");
    let protocol = var(&name).map(|p| (name, p)).or_else(|| {
        var("OTEL_EXPORTER_OTLP_PROTOCOL").map(|p| ("OTEL_EXPORTER_OTLP_PROTOCOL".into(), p))
    });
    match protocol {
        Some((name, p)) if p.trim() != PROTOBUF => {
            warn_once(
                warned,
                format!(
                    "{name}={p}: backlog sends {PROTOBUF} only; set it to {PROTOBUF} (the collector's port 4318); no {} are sent",
                    signal.to_lowercase()
                ),
            );
            false
        }
        _ => true,
    }
}

/// The resource the spans and metrics come from: what `OTEL_SERVICE_NAME` and
/// `OTEL_RESOURCE_ATTRIBUTES` say, `service.name` "backlog" where neither names one.
fn resource(var: &dyn Fn(&str) -> Option<String>) -> Resource {
    let named = var("OTEL_SERVICE_NAME").is_some()
        || var("OTEL_RESOURCE_ATTRIBUTES").is_some_and(|attributes| {
            attributes
                .split(',')
                .any(|pair| pair.split('=').next().map(str::trim) == Some("service.name"))
        });
    let mut builder = Resource::builder()
        .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")));
    if !named {
        builder = builder.with_service_name("backlog");
    }
    builder.build()
}

fn exporter_or_warn<E>(
    built: Result<E, opentelemetry_otlp::ExporterBuildError>,
    signal: &str,
    warned: &AtomicBool,
) -> Option<E> {
    built
        .map_err(|e| {
            warn_once(
                warned,
                format!("cannot export {signal} over OTLP ({e}); the ticks go on without them"),
            )
        })
        .ok()
}

/// The one WARN a process says of its export.
fn warn_once(warned: &AtomicBool, line: String) {
    if !warned.swap(true, Ordering::Relaxed) {
        tracing::warn!("{line}");
    }
}

/// The context the command's ticks are children of: the caller's span, where the
/// command was started with `TRACEPARENT` (and `TRACESTATE`), as the W3C Trace Context
/// and OpenTelemetry's environment carriers say; else none.
pub fn caller() -> Context {
    let carrier: std::collections::HashMap<String, String> =
        [("traceparent", "TRACEPARENT"), ("tracestate", "TRACESTATE")]
            .into_iter()
            .filter_map(|(key, var)| std::env::var(var).ok().map(|v| (key.to_string(), v)))
            .collect();
    TraceContextPropagator::new().extract(&carrier)
}

impl Telemetry {
    /// Sends what is left: waits up to the export's timeout for a collector that took
    /// an export during the run, else a twentieth of the run (at least 50 ms).
    pub fn finish(self) {
        let budget = match self.answered.load(Ordering::Relaxed) {
            true => self.timeout,
            false => (self.started.elapsed() / 20)
                .max(Duration::from_millis(50))
                .min(self.timeout),
        };
        let Telemetry {
            tracer,
            meter,
            warned,
            ..
        } = self;
        let (done, ended) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            if let Some(tracer) = tracer {
                let _ = tracer.shutdown();
            }
            if let Some(meter) = meter {
                let _ = meter.shutdown();
            }
            let _ = done.send(());
        });
        if ended.recv_timeout(budget).is_err() {
            warn_once(
                &warned,
                format!(
                    "the OpenTelemetry collector did not take the last spans and metrics within {} ms; they are dropped",
                    budget.as_millis()
                ),
            );
        }
    }
}

/// The exporter's HTTP client: ureq, blocking, on the SDK's export thread.
#[derive(Debug)]
struct Ureq {
    agent: ureq::Agent,
    warned: Arc<AtomicBool>,
    answered: Arc<AtomicBool>,
}

impl Ureq {
    fn new(timeout: Duration, warned: Arc<AtomicBool>, answered: Arc<AtomicBool>) -> Self {
        let agent = ureq::Agent::config_builder()
            .timeout_global(Some(timeout))
            .http_status_as_error(false)
            .build()
            .into();
        Ureq {
            agent,
            warned,
            answered,
        }
    }

    fn send(
        &self,
        request: http::Request<bytes::Bytes>,
    ) -> Result<http::Response<bytes::Bytes>, String> {
        let uri = request.uri().clone();
        let (parts, body) = request.into_parts();
        let request = http::Request::from_parts(parts, body.to_vec());
        let mut response = self
            .agent
            .run(request)
            .map_err(|e| format!("cannot send telemetry to {uri}: {e}"))?;
        let status = response.status();
        let body = response
            .body_mut()
            .with_config()
            .limit(1 << 20)
            .read_to_vec()
            .unwrap_or_default();
        if !status.is_success() {
            return Err(format!("the collector at {uri} answered HTTP {status}"));
        }
        self.answered.store(true, Ordering::Relaxed);
        let mut answer = http::Response::new(bytes::Bytes::from(body));
        *answer.status_mut() = status;
        Ok(answer)
    }
}

/// The future the trait's `async_trait` signature asks for.
type Sent<'a> = std::pin::Pin<
    Box<
        dyn std::future::Future<
                Output = Result<http::Response<bytes::Bytes>, opentelemetry_http::HttpError>,
            > + Send
            + 'a,
    >,
>;

impl opentelemetry_http::HttpClient for Ureq {
    // The trait is an `#[async_trait]`: its method written out, as that macro expands it.
    fn send_bytes<'life0, 'async_trait>(
        &'life0 self,
        request: http::Request<bytes::Bytes>,
    ) -> Sent<'async_trait>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        let sent = self.send(request).map_err(|why| {
            warn_once(
                &self.warned,
                format!(
                    "{why}; the ticks go on, and their spans and metrics are dropped while it lasts"
                ),
            );
            why.into()
        });
        Box::pin(std::future::ready(sent))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            pairs
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn export_is_off_unless_a_variable_asks() {
        let warned = AtomicBool::new(false);
        assert!(!wanted(&vars(&[]), "TRACES", &warned));
        assert!(!wanted(
            &vars(&[("OTEL_SERVICE_NAME", "x")]),
            "TRACES",
            &warned
        ));
        let endpoint = [("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")];
        assert!(wanted(&vars(&endpoint), "TRACES", &warned));
        assert!(wanted(&vars(&endpoint), "METRICS", &warned));
        let traces_only = [("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://c/v1/traces")];
        assert!(wanted(&vars(&traces_only), "TRACES", &warned));
        assert!(!wanted(&vars(&traces_only), "METRICS", &warned));
        let none = [endpoint[0], ("OTEL_METRICS_EXPORTER", "none")];
        assert!(!wanted(&vars(&none), "METRICS", &warned));
        assert!(!warned.load(Ordering::Relaxed));
    }

    #[test]
    fn a_protocol_this_build_cannot_send_turns_that_signal_off() {
        let warned = AtomicBool::new(false);
        let grpc = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ];
        assert!(!wanted(&vars(&grpc), "TRACES", &warned));
        assert!(warned.load(Ordering::Relaxed));
        let per_signal = [
            grpc[0],
            grpc[1],
            ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf"),
        ];
        assert!(wanted(&vars(&per_signal), "TRACES", &warned));
    }

    #[test]
    fn disabled_wins() {
        let vars = vars(&[
            ("OTEL_SDK_DISABLED", "true"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"),
        ]);
        assert!(start_with(&vars).is_none());
    }
}

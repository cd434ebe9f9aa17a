//! OpenTelemetry over OTLP/HTTP: a real receiver on loopback (axum, `Counterpart`)
//! takes what the binary exports, decoded with the OpenTelemetry project's own
//! protobuf messages (opentelemetry-proto); the handlers' trace context (W3C
//! `traceparent`) checked against the spans; a collector down or hanging.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;

use crate::counterpart::{self, Answer, Counterpart};
use crate::harness::{Env, NOW, Schedule};

/// The caller's span the tool is started under (`TRACEPARENT`).
const CALLER_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";

/// A command handler that logs `ID TRACEPARENT TRACESTATE` and fails every tenth record.
const TRACING_HANDLER: &str = "#!/bin/sh\ncat > /dev/null\necho \"$BACKLOG_RECORD_ID $TRACEPARENT ${TRACESTATE:--}\" >> traces.log\ncase \"$BACKLOG_RECORD_ID\" in\n  *0) exit 1 ;;\nesac\nexit 0\n";

fn collector() -> Counterpart {
    Counterpart::answering(|target| match target {
        "/v1/traces" | "/v1/metrics" => Answer::code(200).body(Vec::new()),
        _ => Answer::code(404),
    })
}

/// The spans the receiver decoded, with their resource's attributes.
fn exported(receiver: &Counterpart) -> (Vec<Span>, BTreeMap<String, String>) {
    let mut spans = Vec::new();
    let mut resource = BTreeMap::new();
    for call in receiver.calls() {
        assert_eq!(call.method, "POST");
        if call.target != "/v1/traces" {
            continue;
        }
        assert_eq!(
            call.headers.get("content-type").map(String::as_str),
            Some("application/x-protobuf")
        );
        let request = ExportTraceServiceRequest::decode(call.bytes.as_slice())
            .expect("an OTLP trace request");
        for resource_spans in request.resource_spans {
            if let Some(r) = resource_spans.resource {
                resource.extend(r.attributes.iter().map(|kv| (kv.key.clone(), text(kv))));
            }
            for scope in resource_spans.scope_spans {
                assert_eq!(scope.scope.map(|s| s.name).as_deref(), Some("backlog"));
                spans.extend(scope.spans);
            }
        }
    }
    (spans, resource)
}

fn text(kv: &KeyValue) -> String {
    match kv.value.as_ref().and_then(|v: &AnyValue| v.value.as_ref()) {
        Some(any_value::Value::StringValue(s)) => s.clone(),
        Some(any_value::Value::IntValue(i)) => i.to_string(),
        Some(any_value::Value::BoolValue(b)) => b.to_string(),
        Some(any_value::Value::DoubleValue(d)) => d.to_string(),
        other => format!("{other:?}"),
    }
}

fn attribute(span: &Span, key: &str) -> Option<String> {
    span.attributes.iter().find(|kv| kv.key == key).map(text)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// 50 records a minute apart, the tracing handler, its schedule.
fn fifty_records(env: &Env) {
    env.records_minutes_apart(50);
    env.write_handler("handler.sh", TRACING_HANDLER);
    env.write_schedule(&Schedule::default());
}

/// `backlog run` exporting to `endpoint`, under the caller's span. Spans and metrics
/// go out during the tick (every 20 ms, not every 5 s and 60 s): a collector that
/// answered is waited for at the end, however loaded the machine.
fn run_exporting(env: &Env, endpoint: &str) -> assert_cmd::assert::Assert {
    env.backlog(&["run", "--window", "1d", "--now", NOW])
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
        .env("OTEL_BSP_SCHEDULE_DELAY", "20")
        .env("OTEL_METRIC_EXPORT_INTERVAL", "20")
        .env("OTEL_SERVICE_NAME", "orders-backlog")
        .env("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=test")
        .env("TRACEPARENT", format!("00-{CALLER_TRACE}-{CALLER_SPAN}-01"))
        .env("TRACESTATE", "vendor=abc")
        .assert()
}

#[test]
fn a_tick_of_fifty_records_is_a_span_with_a_child_per_record_under_the_callers_trace() {
    let env = Env::new();
    fifty_records(&env);
    let receiver = collector();
    let out = run_exporting(&env, &receiver.url).success();
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(
        stdout.contains("selected 50, succeeded 45, failed 5"),
        "{stdout}"
    );
    let (spans, resource) = exported(&receiver);
    assert_eq!(
        resource.get("service.name").map(String::as_str),
        Some("orders-backlog")
    );
    assert_eq!(
        resource.get("deployment.environment").map(String::as_str),
        Some("test")
    );
    let ticks: Vec<&Span> = spans.iter().filter(|s| s.name == "backlog.tick").collect();
    let records: Vec<&Span> = spans
        .iter()
        .filter(|s| s.name == "backlog.record")
        .collect();
    assert_eq!(
        (ticks.len(), records.len(), spans.len()),
        (1, 50, 51),
        "{spans:#?}"
    );
    let tick = ticks[0];
    // The tick is the child of the caller's span, in its trace.
    assert_eq!(hex(&tick.trace_id), CALLER_TRACE);
    assert_eq!(hex(&tick.parent_span_id), CALLER_SPAN);
    assert_eq!(tick.trace_state, "vendor=abc");
    for (key, value) in [
        ("backlog.tier", "1"),
        ("backlog.tier.window", "1d"),
        ("backlog.table", "BACKLOG"),
        ("backlog.tick.outcome", "done"),
        ("backlog.tick.selected", "50"),
        ("backlog.tick.succeeded", "45"),
        ("backlog.tick.failed", "5"),
    ] {
        assert_eq!(
            attribute(tick, key).as_deref(),
            Some(value),
            "{key}: {tick:#?}"
        );
    }
    // Each record's call is a child of the tick, and says what came of it.
    let mut by_id = BTreeMap::new();
    for span in &records {
        assert_eq!(span.trace_id, tick.trace_id);
        assert_eq!(span.parent_span_id, tick.span_id);
        assert!(span.start_time_unix_nano >= tick.start_time_unix_nano);
        assert!(span.end_time_unix_nano <= tick.end_time_unix_nano);
        let id: i64 = attribute(span, "backlog.record.id")
            .unwrap()
            .parse()
            .unwrap();
        let failed = id % 10 == 0;
        assert_eq!(
            attribute(span, "backlog.record.outcome").as_deref(),
            Some(if failed { "error" } else { "success" }),
            "record {id}"
        );
        assert_eq!(
            attribute(span, "backlog.record.code").as_deref(),
            Some(if failed { "1" } else { "0" })
        );
        assert!(attribute(span, "backlog.record.seconds").is_some());
        // Status code 2 is ERROR in OTLP.
        assert_eq!(span.status.as_ref().is_some_and(|s| s.code == 2), failed);
        by_id.insert(id, hex(&span.span_id));
    }
    assert_eq!(
        by_id.keys().copied().collect::<Vec<_>>(),
        (1..=50).collect::<Vec<_>>()
    );
    // Each handler saw its record's span as its parent, in the tick's trace.
    let log = std::fs::read_to_string(env.path("traces.log")).unwrap();
    assert_eq!(log.lines().count(), 50);
    for line in log.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        let id: i64 = f[0].parse().unwrap();
        assert_eq!(
            f[1],
            format!("00-{CALLER_TRACE}-{}-01", by_id[&id]),
            "record {id}'s TRACEPARENT"
        );
        assert_eq!(f[2], "vendor=abc");
    }
    // The tick's metrics went too.
    let mut metrics = BTreeMap::new();
    for call in receiver
        .calls()
        .iter()
        .filter(|c| c.target == "/v1/metrics")
    {
        let request = ExportMetricsServiceRequest::decode(call.bytes.as_slice()).unwrap();
        for rm in request.resource_metrics {
            for sm in rm.scope_metrics {
                for m in sm.metrics {
                    metrics.insert(m.name.clone(), m);
                }
            }
        }
    }
    use opentelemetry_proto::tonic::metrics::v1::metric::Data;
    match metrics
        .get("backlog.handler.duration")
        .and_then(|m| m.data.as_ref())
    {
        Some(Data::Histogram(h)) => {
            assert_eq!(h.data_points.iter().map(|p| p.count).sum::<u64>(), 50)
        }
        other => panic!(
            "no handler histogram: {other:?}; metrics {:?}",
            metrics.keys()
        ),
    }
    match metrics.get("backlog.records").and_then(|m| m.data.as_ref()) {
        Some(Data::Sum(sum)) => {
            let of = |state: &str| {
                sum.data_points
                    .iter()
                    .find(|p| {
                        p.attributes
                            .iter()
                            .any(|kv| kv.key == "backlog.records.state" && text(kv) == state)
                    })
                    .map(|p| format!("{:?}", p.value))
            };
            assert_eq!(of("selected").as_deref(), Some("Some(AsInt(50))"));
            assert_eq!(of("failed").as_deref(), Some("Some(AsInt(5))"));
        }
        other => panic!("no records counter: {other:?}"),
    }
    assert!(metrics.contains_key("backlog.tick.duration"));
}

#[test]
fn batch_lines_and_http_calls_carry_their_records_traceparent() {
    let env = Env::new();
    env.records_minutes_apart(6);
    let receiver = collector();
    // A batch handler that logs the lines it reads.
    env.write_handler(
        "batch.sh",
        "#!/bin/sh\nwhile read -r line; do\n  echo \"$line\" >> lines.log\n  id=${line#*\\\"id\\\":}; id=${id%%,*}\n  echo \"{\\\"id\\\":$id,\\\"code\\\":0}\"\ndone\n",
    );
    env.write_schedule(&Schedule {
        command: r#"["./batch.sh"]"#,
        handler_extra: "mode = \"batch\"",
        ..Default::default()
    });
    run_exporting(&env, &receiver.url).success();
    let (spans, _) = exported(&receiver);
    let record_spans: BTreeMap<String, String> = spans
        .iter()
        .filter(|s| s.name == "backlog.record")
        .map(|s| (attribute(s, "backlog.record.id").unwrap(), hex(&s.span_id)))
        .collect();
    assert_eq!(record_spans.len(), 6);
    let lines = std::fs::read_to_string(env.path("lines.log")).unwrap();
    for line in lines.lines() {
        let line: serde_json::Value = serde_json::from_str(line).unwrap();
        let id = line["id"].to_string();
        assert_eq!(
            line["traceparent"].as_str(),
            Some(format!("00-{CALLER_TRACE}-{}-01", record_spans[&id]).as_str()),
            "{line}"
        );
    }

    // The URL handler sends it as a header (one the file sets gives way to it).
    let env = Env::new();
    env.records_minutes_apart(3);
    let api = Counterpart::start(|_| Answer::code(200));
    let text = Schedule::default().render_for(&env.url()).replace(
        "command = [\"./handler.sh\"]",
        &format!(
            "url = \"{}/r/{{ID}}\"\nheaders = {{ traceparent = \"00-ffffffffffffffffffffffffffffffff-ffffffffffffffff-01\" }}",
            api.url
        ),
    );
    std::fs::write(env.path("backlog.toml"), text).unwrap();
    let receiver = collector();
    run_exporting(&env, &receiver.url).success();
    let (spans, _) = exported(&receiver);
    let calls = api.calls();
    assert_eq!(calls.len(), 3);
    for call in calls {
        let id = call.target.strip_prefix("/r/").unwrap().to_string();
        let span = spans
            .iter()
            .find(|s| attribute(s, "backlog.record.id").as_deref() == Some(id.as_str()))
            .expect("a span per call");
        assert_eq!(
            call.headers.get("traceparent"),
            Some(&format!("00-{CALLER_TRACE}-{}-01", hex(&span.span_id)))
        );
        assert_eq!(
            call.headers.get("tracestate").map(String::as_str),
            Some("vendor=abc")
        );
        assert_eq!(
            attribute(span, "backlog.record.code").as_deref(),
            Some("200")
        );
    }
}

#[test]
fn without_otel_variables_nothing_is_exported_and_a_callers_trace_passes_through() {
    let env = Env::new();
    fifty_records(&env);
    let receiver = collector();
    env.backlog(&["run", "--window", "1d", "--now", NOW])
        .env("TRACEPARENT", format!("00-{CALLER_TRACE}-{CALLER_SPAN}-01"))
        .env("OTEL_SERVICE_NAME", "named-but-not-sent")
        .assert()
        .success();
    assert!(receiver.calls().is_empty());
    let log = std::fs::read_to_string(env.path("traces.log")).unwrap();
    assert!(
        log.lines()
            .all(|l| l.contains(&format!(" 00-{CALLER_TRACE}-{CALLER_SPAN}-01 "))),
        "{log}"
    );
    // OTEL_SDK_DISABLED wins over an endpoint.
    let env = Env::new();
    fifty_records(&env);
    env.backlog(&["run", "--window", "1d", "--now", NOW])
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.url)
        .env("OTEL_SDK_DISABLED", "true")
        .assert()
        .success();
    assert!(receiver.calls().is_empty());
    let log = std::fs::read_to_string(env.path("traces.log")).unwrap();
    // No trace kept, none passed: no TRACEPARENT.
    assert!(log.lines().all(|l| l.ends_with("  -")), "{log}");
}

/// A collector that refuses connections, or accepts them and never answers: the tick
/// goes as it would (its output and exit code), with one WARN, and the command ends
/// without waiting out the export's timeout (two minutes here).
#[test]
fn a_collector_down_or_hanging_changes_nothing_but_one_warning() {
    let refused = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", listener.local_addr().unwrap())
    };
    for endpoint in [refused, counterpart::hanging()] {
        let env = Env::new();
        fifty_records(&env);
        let started = Instant::now();
        let out = env
            .backlog(&["run", "--window", "1d", "--now", NOW])
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)
            .env("OTEL_EXPORTER_OTLP_TIMEOUT", "120000")
            .timeout(Duration::from_secs(100))
            .assert()
            .success();
        assert!(started.elapsed() < Duration::from_secs(100));
        let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
        assert!(
            stdout.contains("selected 50, succeeded 45, failed 5"),
            "{stdout}"
        );
        let warnings: Vec<&str> = stderr
            .lines()
            .filter(|l| l.contains("collector") || l.contains("telemetry"))
            .collect();
        assert_eq!(warnings.len(), 1, "{endpoint}: {stderr}");
        assert!(warnings[0].contains("WARN"), "{stderr}");
    }
}

#[test]
fn an_otlp_protocol_this_build_cannot_send_is_one_warning() {
    let env = Env::new();
    fifty_records(&env);
    let out = env
        .backlog(&["run", "--window", "1d", "--now", NOW])
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317")
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
        .assert()
        .success();
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert_eq!(
        stderr
            .lines()
            .filter(|l| l.contains("OTEL_EXPORTER_OTLP_PROTOCOL=grpc"))
            .count(),
        1,
        "{stderr}"
    );
    assert!(stderr.contains("set it to http/protobuf"), "{stderr}");
}

/// A tick a signal stops ends its span as it ends, and the command sends it first.
#[test]
fn a_tick_stopped_by_a_signal_ends_and_sends_its_span() {
    let env = Env::new();
    env.records_minutes_apart(4);
    env.write_schedule(&Schedule::default());
    env.write_handler(
        "handler.sh",
        "#!/bin/sh\ncat > /dev/null\necho \"$BACKLOG_RECORD_ID\" >> calls.log\nsleep 1\n",
    );
    let receiver = collector();
    let tick = crate::harness::Running::spawn(
        env.command()
            .args(["run", "--window", "1d", "--now", NOW])
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.url)
            .env("OTEL_BSP_SCHEDULE_DELAY", "20")
            .stdout(std::process::Stdio::piped()),
    );
    crate::tick::wait_for(|| std::fs::read_to_string(env.path("calls.log")).is_ok());
    let out = tick.terminate();
    assert_eq!(out.status.code(), Some(9), "{out:?}");
    let (spans, _) = exported(&receiver);
    let tick = spans
        .iter()
        .find(|s| s.name == "backlog.tick")
        .expect("the stopped tick's span");
    assert_eq!(
        attribute(tick, "backlog.tick.outcome").as_deref(),
        Some("stopped")
    );
    assert_eq!(
        attribute(tick, "backlog.tick.selected").as_deref(),
        Some("1")
    );
    let records: Vec<&Span> = spans
        .iter()
        .filter(|s| s.name == "backlog.record")
        .collect();
    assert_eq!(records.len(), 1, "{records:#?}");
    assert_eq!(records[0].parent_span_id, tick.span_id);
}

/// A breaker's trip and a give-up are events of the tick's span.
#[test]
fn a_breakers_trip_and_a_give_up_are_events_of_the_tick() {
    let events = |receiver: &Counterpart| {
        let (spans, _) = exported(receiver);
        let tick = spans
            .into_iter()
            .find(|s| s.name == "backlog.tick")
            .unwrap();
        tick.events
            .iter()
            .map(|e| {
                let attributes: BTreeMap<String, String> = e
                    .attributes
                    .iter()
                    .map(|kv| (kv.key.clone(), text(kv)))
                    .collect();
                (e.name.clone(), attributes)
            })
            .collect::<Vec<_>>()
    };
    let env = Env::new();
    env.records_minutes_apart(20);
    env.write_handler("handler.sh", "#!/bin/sh\ncat > /dev/null\nexit 1\n");
    env.write_schedule(&Schedule {
        handler_extra: "stop_after_failures = 3",
        ..Default::default()
    });
    let receiver = collector();
    run_exporting(&env, &receiver.url);
    let tripped = events(&receiver);
    assert_eq!(tripped.len(), 1, "{tripped:?}");
    assert_eq!(tripped[0].0, "backlog.breaker.tripped");
    assert!(
        tripped[0].1["backlog.reason"].contains("3 failures in a row"),
        "{tripped:?}"
    );

    let env = Env::new();
    env.records_minutes_apart(20);
    env.write_handler("handler.sh", TRACING_HANDLER);
    let file = Schedule::default().render_for(&env.url()).replacen(
        "inserted_at_format = \"auto\"",
        "inserted_at_format = \"auto\"\ngiven_up = \"DEAD\"\ngive_up_after = 1",
        1,
    );
    std::fs::write(env.path("backlog.toml"), file).unwrap();
    let receiver = collector();
    run_exporting(&env, &receiver.url).success();
    let given_up = events(&receiver);
    let ids: Vec<&str> = given_up
        .iter()
        .filter(|(name, _)| name == "backlog.records.given_up")
        .map(|(_, a)| a["backlog.record.id"].as_str())
        .collect();
    assert_eq!(ids, ["10", "20"], "{given_up:?}");
}

//! An HTTP call as the handler: one request per record, its answer's status code the
//! outcome (docs/http.md).
//!
//! One pooled client serves every lane of a tick: keep-alive connections per host, up
//! to `concurrency` of them, TLS by rustls over the system's roots (and
//! `handler.ca_file`), HTTPS_PROXY and NO_PROXY as curl reads them. Each lane blocks on
//! its call, as a command handler's lane waits for its process; the call's timeout
//! bounds it. Where a record gives the URL's host, the address is checked as it is
//! connected to (`Guard`), so neither a column nor a DNS answer can point a call at
//! this host's own network without `handler.allow_private`.

use std::collections::HashMap;
use std::io::Read;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use percent_encoding::{AsciiSet, CONTROLS, utf8_percent_encode};
use ureq::unversioned::resolver::{DefaultResolver, ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::{DefaultConnector, NextTimeout};

use super::{Context, Ending, Handled, Handler, HandlerError, Outcome, Snooze, SnoozeError};
use crate::config::{HandlerConfig, HttpBody, HttpConfig};
use crate::record::Record;

/// How much of an answer's body is kept with a failed attempt (`show`, the dashboard).
const KEPT_BODY: usize = 4096;

/// How much of a success's body is read, so that its connection goes back to the pool;
/// a longer body is left unread and its connection closed.
const DRAINED_BODY: u64 = 64 * 1024;

/// What a value in a URL's path or query is encoded as: all but unreserved characters.
const COMPONENT: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'$')
    .add(b'%')
    .add(b'&')
    .add(b'+')
    .add(b',')
    .add(b'/')
    .add(b':')
    .add(b';')
    .add(b'<')
    .add(b'=')
    .add(b'>')
    .add(b'?')
    .add(b'@')
    .add(b'[')
    .add(b'\\')
    .add(b']')
    .add(b'^')
    .add(b'`')
    .add(b'{')
    .add(b'|')
    .add(b'}');

/// Calls a URL per record.
#[derive(Clone)]
pub struct HttpHandler {
    shared: Arc<Shared>,
}

struct Shared {
    agent: ureq::Agent,
    http: HttpConfig,
    timeout: Duration,
    /// The table's name, in each call's message id.
    table: String,
    signing_key: Option<ring::hmac::Key>,
}

impl std::fmt::Debug for HttpHandler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpHandler")
            .field("url", &self.shared.http.url_text)
            .finish()
    }
}

impl HttpHandler {
    /// The handler of a schedule file whose `[handler]` has a `url`. Fails only on what
    /// keeps every call from being made: a `ca_file` that cannot be read.
    pub fn new(config: &HandlerConfig, table: &str) -> Result<Self, HandlerError> {
        let http = config
            .http
            .clone()
            .expect("a URL handler is built from a [handler] with a url");
        let roots = roots(&http)?;
        let proxy = proxy_of(&http)?;
        let lanes = config.concurrency.max(1);
        let agent_config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(config.timeout))
            .timeout_connect(Some(http.connect_timeout))
            .max_redirects(http.follow_redirects)
            .max_redirects_will_error(false)
            .max_idle_connections(lanes.max(8))
            .max_idle_connections_per_host(lanes)
            .proxy(proxy.clone())
            .user_agent(concat!("backlog/", env!("CARGO_PKG_VERSION")))
            .tls_config(ureq::tls::TlsConfig::builder().root_certs(roots).build())
            .build();
        let guard = Guard::new(
            http.host_from_record && !http.allow_private,
            proxy.map(|p| p.host().to_string()),
        );
        let agent = ureq::Agent::with_parts(agent_config, DefaultConnector::new(), guard);
        Ok(HttpHandler {
            shared: Arc::new(Shared {
                signing_key: http
                    .signing_key
                    .as_ref()
                    .map(|k| ring::hmac::Key::new(ring::hmac::HMAC_SHA256, k.bytes())),
                agent,
                http,
                timeout: config.timeout,
                table: table.to_string(),
            }),
        })
    }
}

/// What `backlog doctor` says of a URL handler's counterpart, without sending it a
/// record: its host resolved, connected to and, for https, its TLS handshake made
/// against the roots a call trusts. A URL whose host a record gives is not reached.
pub fn reach(config: &HandlerConfig) -> Result<String, String> {
    let http = config.http.as_ref().expect("a URL handler");
    if http.host_from_record {
        return Ok(format!(
            "{}: the host comes from each record, so it is reached per call (not checked here)",
            http.url_text
        ));
    }
    let sample = http.url.fill(|_, out| out.push('x'));
    let url = url::Url::parse(&sample).map_err(|e| format!("handler.url: {e}"))?;
    let host = url
        .host_str()
        .unwrap_or_default()
        .trim_matches(['[', ']'])
        .to_string();
    let port = url.port_or_known_default().unwrap_or(443);
    let proxy = proxy_of(http).map_err(|e| e.to_string())?;
    let uri: Option<ureq::http::Uri> = sample.parse().ok();
    if let Some(proxy) = proxy.filter(|p| uri.as_ref().is_none_or(|u| !p.is_no_proxy(u))) {
        return Ok(format!(
            "{host}:{port}: calls go through the proxy {}:{}, which doctor does not try",
            proxy.host(),
            proxy.port()
        ));
    }
    let started = std::time::Instant::now();
    let addrs: Vec<std::net::SocketAddr> =
        std::net::ToSocketAddrs::to_socket_addrs(&(host.as_str(), port))
            .map_err(|e| format!("handler.url: {host} cannot be resolved: {e}"))?
            .collect();
    let mut last = None;
    let stream = addrs.iter().find_map(|a| {
        std::net::TcpStream::connect_timeout(a, http.connect_timeout)
            .map_err(|e| last = Some(format!("{a}: {e}")))
            .ok()
    });
    let Some(mut stream) = stream else {
        return Err(format!(
            "handler.url: cannot connect to {host}:{port} ({}); is the counterpart up, and is this host allowed to reach it?",
            last.unwrap_or_else(|| "no address".into())
        ));
    };
    let connected = started.elapsed();
    let peer = stream
        .peer_addr()
        .map_or_else(|_| host.clone(), |a| a.to_string());
    if url.scheme() != "https" {
        return Ok(format!(
            "{host}:{port} reached ({peer}, connected in {} ms)",
            connected.as_millis()
        ));
    }
    let mut store = rustls::RootCertStore::empty();
    for root in root_ders(http).map_err(|e| e.to_string())? {
        let _ = store.add(root);
    }
    let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| format!("TLS: {e}"))?
    .with_root_certificates(store)
    .with_no_client_auth();
    let name = rustls::pki_types::ServerName::try_from(host.clone())
        .map_err(|e| format!("handler.url: {host}: {e}"))?;
    let mut client =
        rustls::ClientConnection::new(Arc::new(tls), name).map_err(|e| format!("TLS: {e}"))?;
    stream
        .set_read_timeout(Some(http.connect_timeout))
        .map_err(|e| e.to_string())?;
    while client.is_handshaking() {
        client.complete_io(&mut stream).map_err(|e| {
            format!("handler.url: the TLS handshake with {host}:{port} failed: {e}; a certificate of a CA of your own goes in handler.ca_file")
        })?;
    }
    Ok(format!(
        "{host}:{port} reached ({peer}, connected in {} ms), TLS verified",
        connected.as_millis()
    ))
}

impl Handler for HttpHandler {
    fn handle(&mut self, record: &Record, ctx: &Context<'_>) -> Result<Handled, HandlerError> {
        Ok(self.shared.call(record, ctx))
    }

    fn worker(&self) -> Option<Box<dyn Handler + Send + '_>> {
        Some(Box::new(self.clone()))
    }
}

impl Shared {
    /// One call for `record`, and what its answer (or its failure) says.
    fn call(&self, record: &Record, ctx: &Context<'_>) -> Handled {
        let url = match self.url(record) {
            Ok(url) => url,
            Err(why) => return Handled::new(Outcome::Error, why),
        };
        let mut request = ureq::http::Request::builder()
            .method(self.http.method.as_str())
            .uri(url.as_str());
        let mut typed = false;
        for (name, value) in &self.http.headers {
            typed |= name.eq_ignore_ascii_case("content-type");
            request = request.header(name.as_str(), value.expose());
        }
        let body = match &self.http.body {
            HttpBody::None => Vec::new(),
            HttpBody::Record => {
                if !typed {
                    request = request.header("content-type", "application/json");
                }
                record.to_json().into_bytes()
            }
            HttpBody::Template(template) => template
                .fill(|column, out| {
                    let value = record.columns.get(column).cloned().unwrap_or_default();
                    out.push_str(&value.to_string());
                })
                .into_bytes(),
        };
        // The same id at every try: a receiver that keeps the ids it took drops a
        // repeat (a try whose answer was lost).
        let id = self.message_id(record);
        if let Some(key) = &self.signing_key {
            // The real clock, not the tick's: receivers refuse a timestamp 5 minutes off.
            let timestamp = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs())
                .to_string();
            request = request
                .header("webhook-id", id.as_str())
                .header("webhook-timestamp", timestamp.as_str())
                .header("webhook-signature", sign(key, &id, &timestamp, &body));
        }
        request = request.header("idempotency-key", id);
        // The record's span, the parent of the receiver's (W3C Trace Context); a
        // `traceparent` the file's headers set gives way to it.
        if let Some(parent) = ctx.traceparent {
            if let Some(headers) = request.headers_mut() {
                headers.remove("traceparent");
                headers.remove("tracestate");
            }
            request = request.header("traceparent", parent.to_string());
            if let Some(state) = ctx.tracestate {
                request = request.header("tracestate", state);
            }
        }
        let request = match request.body(body) {
            Ok(r) => r,
            Err(e) => return Handled::new(Outcome::Error, format!("{url}: {e}")),
        };
        match self.agent.run(request) {
            Ok(response) => self.answer(response, record),
            Err(e) => self.failed(e),
        }
    }

    /// The id of a record's message, the same at each of its tries so that a receiver
    /// can drop a repeat: the table and the record's id, as header text.
    fn message_id(&self, record: &Record) -> String {
        let id = record.id.to_string();
        format!(
            "{}_{}",
            utf8_percent_encode(&self.table, COMPONENT),
            utf8_percent_encode(&id, COMPONENT)
        )
    }

    /// The record's URL: placeholders in the path and query percent-encoded, those
    /// before it (the scheme, the host) written as the column holds them and the
    /// result checked to be an http or https URL.
    fn url(&self, record: &Record) -> Result<String, String> {
        let mut missing = None;
        let url = self.http.url.fill(|column, out| {
            let text = match record.columns.get(column) {
                Some(serde_json::Value::String(s)) => s.clone(),
                Some(serde_json::Value::Null) | None => {
                    missing.get_or_insert_with(|| column.to_string());
                    return;
                }
                Some(other) => other.to_string(),
            };
            if in_path(out) {
                out.extend(utf8_percent_encode(&text, COMPONENT));
            } else {
                out.push_str(&text);
            }
        });
        if let Some(column) = missing {
            return Err(format!(
                "handler.url: column {column:?} is null for this record; no URL to call"
            ));
        }
        if self.http.host_from_record {
            let parsed = url::Url::parse(&url)
                .map_err(|e| format!("handler.url: {url:?} from this record is not a URL ({e})"))?;
            if !matches!(parsed.scheme(), "http" | "https") {
                return Err(format!(
                    "handler.url: {url:?} from this record is not an http or https URL"
                ));
            }
        }
        Ok(url)
    }

    /// What an answer says: 2xx a success, a code of `handler.statuses` its status,
    /// any other an error, snoozed where a 429 or 503 gives `Retry-After`.
    fn answer(&self, mut response: ureq::http::Response<ureq::Body>, record: &Record) -> Handled {
        let code = response.status().as_u16();
        let retry_after = response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let mapped = self.http.statuses.get(&code);
        let success = (200..300).contains(&code) && mapped.is_none();
        let mut reader = response.body_mut().as_reader();
        let mut kept = Vec::new();
        if success && let Some(done) = &self.http.done_when {
            let _ = (&mut reader).take(DRAINED_BODY).read_to_end(&mut kept);
            return poll(code, &kept, done, &record.status);
        }
        if success {
            let _ = std::io::copy(&mut reader.take(DRAINED_BODY), &mut std::io::sink());
            return Handled::new(Outcome::Success, format!("HTTP {code}")).with_code(code.into());
        }
        let _ = (&mut reader).take(KEPT_BODY as u64).read_to_end(&mut kept);
        let _ = std::io::copy(&mut reader.take(DRAINED_BODY), &mut std::io::sink());
        let output = String::from_utf8_lossy(&kept).into_owned();
        let snooze = match (&retry_after, code) {
            (Some(value), 429 | 503) => Some(retry_after_of(value)),
            _ => None,
        };
        let detail = match &snooze {
            Some(Ok(s)) => format!("HTTP {code}, {}", s.describe()),
            Some(Err(why)) => format!("HTTP {code}, Retry-After ignored: {why}"),
            None => format!("HTTP {code}"),
        };
        let outcome = match mapped {
            Some(status) => Outcome::Status(status.clone()),
            None => Outcome::Error,
        };
        let handled = Handled::new(outcome, detail)
            .with_code(code.into())
            .with_output(output);
        match snooze {
            Some(Ok(s)) => handled.snoozed(s),
            _ => handled,
        }
    }

    /// A call that got no answer: a timeout, a refused or reset connection, a TLS
    /// failure, an address refused.
    fn failed(&self, error: ureq::Error) -> Handled {
        match error {
            ureq::Error::Timeout(_) => Handled::new(
                Outcome::Error,
                format!("timed out after {}", crate::duration::compact(self.timeout)),
            )
            .ended(Ending::TimedOut),
            other => Handled::new(Outcome::Error, describe_error(&other)),
        }
    }
}

/// A poll's 2xx answer: done where the body's value at the pointer is one of
/// `done_when.in`, else not yet (the record keeps its status; the tick writes its own
/// back), with the body's start kept.
fn poll(code: u16, body: &[u8], done: &crate::config::DoneWhen, status: &str) -> Handled {
    let value = serde_json::from_slice::<serde_json::Value>(body);
    let found = value.as_ref().ok().and_then(|v| v.pointer(&done.pointer));
    let said = match (&value, found) {
        (Err(_), _) => "the body is not JSON".to_string(),
        (Ok(_), None) => format!("no {} in the body", done.pointer),
        (Ok(_), Some(v)) if done.values.contains(v) => {
            return Handled::new(
                Outcome::Success,
                format!("HTTP {code}, {} is {v}", done.pointer),
            )
            .with_code(code.into());
        }
        (Ok(_), Some(v)) => format!("{} is {v}", done.pointer),
    };
    let kept = &body[..body.len().min(KEPT_BODY)];
    Handled::new(
        Outcome::Status(status.to_string()),
        format!("HTTP {code}, not yet: {said}"),
    )
    .with_code(code.into())
    .with_output(String::from_utf8_lossy(kept).into_owned())
    .ended(Ending::NotYet)
}

/// A Standard Webhooks signature: `v1,` and the base64 of HMAC-SHA256 over
/// `id.timestamp.body`.
fn sign(key: &ring::hmac::Key, id: &str, timestamp: &str, body: &[u8]) -> String {
    use base64::Engine as _;
    let mut signed = Vec::with_capacity(id.len() + timestamp.len() + body.len() + 2);
    signed.extend_from_slice(id.as_bytes());
    signed.push(b'.');
    signed.extend_from_slice(timestamp.as_bytes());
    signed.push(b'.');
    signed.extend_from_slice(body);
    let tag = ring::hmac::sign(key, &signed);
    format!(
        "v1,{}",
        base64::engine::general_purpose::STANDARD.encode(tag.as_ref())
    )
}

/// Whether a placeholder written after `so_far` lies in the URL's path or query (and
/// is encoded), not in its scheme or host.
fn in_path(so_far: &str) -> bool {
    so_far
        .split_once("://")
        .is_some_and(|(_, rest)| rest.contains(['/', '?', '#']))
}

/// A call's failure as the attempt says it: `connection refused (http://…)`.
fn describe_error(error: &ureq::Error) -> String {
    match error {
        ureq::Error::Io(e) => match e.kind() {
            std::io::ErrorKind::ConnectionRefused => "connection refused".into(),
            std::io::ErrorKind::ConnectionReset => "connection reset".into(),
            std::io::ErrorKind::ConnectionAborted => "connection aborted".into(),
            std::io::ErrorKind::UnexpectedEof => "connection closed before an answer".into(),
            // rustls's refusals (an unknown issuer, a name mismatch) come as bad data.
            std::io::ErrorKind::InvalidData => format!("TLS: {e}"),
            _ => format!("{e}"),
        },
        ureq::Error::HostNotFound => "host not found".into(),
        ureq::Error::Rustls(e) => format!("TLS: {e}"),
        ureq::Error::Tls(e) => format!("TLS: {e}"),
        other => other.to_string(),
    }
}

/// A `Retry-After` value: seconds or an HTTP date (RFC 9110), as a snooze.
fn retry_after_of(value: &str) -> Result<Snooze, SnoozeError> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Snooze::parse(&seconds.to_string());
    }
    match httpdate::parse_http_date(value) {
        Ok(at) => Snooze::parse(&chrono::DateTime::<chrono::Utc>::from(at).to_rfc3339()),
        Err(_) => Err(SnoozeError::NoHttpDate(format!("{value:?}"))),
    }
}

/// The proxy the calls go through, as curl chooses it: for an https URL
/// `https_proxy` (or `HTTPS_PROXY`), for an http one `http_proxy` (lower case only, as
/// curl, so that a CGI's `Proxy:` header cannot set it), else `all_proxy` (or
/// `ALL_PROXY`); hosts that `no_proxy` (or `NO_PROXY`) lists go direct. Where a
/// record gives the scheme, any of them, https's first.
fn proxy_of(http: &HttpConfig) -> Result<Option<ureq::Proxy>, HandlerError> {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    let scheme = http
        .url
        .prefix()
        .split_once("://")
        .map(|(scheme, _)| scheme.to_ascii_lowercase());
    let names: &[&str] = match scheme.as_deref() {
        Some("https") => &["https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"],
        Some(_) => &["http_proxy", "all_proxy", "ALL_PROXY"],
        None => &[
            "https_proxy",
            "HTTPS_PROXY",
            "http_proxy",
            "all_proxy",
            "ALL_PROXY",
        ],
    };
    let Some((name, value)) = names.iter().find_map(|n| var(n).map(|v| (*n, v))) else {
        return Ok(None);
    };
    // Its user and password are never shown.
    let shown = value
        .rsplit_once('@')
        .map_or(value.clone(), |(_, host)| format!("…@{host}"));
    let bad = |why: &str| {
        HandlerError::Setup(format!(
            "{name}: {shown:?} is not a proxy URL ({why}); give one like http://proxy.example:3128, or unset {name}"
        ))
    };
    let with_scheme = match value.contains("://") {
        true => value.clone(),
        false => format!("http://{value}"),
    };
    let url = url::Url::parse(&with_scheme).map_err(|e| bad(&e.to_string()))?;
    let protocol =
        ureq::ProxyProtocol::try_from(url.scheme()).map_err(|_| bad("an unknown scheme"))?;
    let mut builder =
        ureq::Proxy::builder(protocol).host(url.host_str().ok_or_else(|| bad("no host"))?);
    if let Some(port) = url.port() {
        builder = builder.port(port);
    }
    if !url.username().is_empty() {
        builder = builder.username(url.username());
    }
    if let Some(password) = url.password() {
        builder = builder.password(password);
    }
    for entry in var("no_proxy")
        .or_else(|| var("NO_PROXY"))
        .iter()
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|e| !e.is_empty())
    {
        builder = builder.no_proxy(entry);
    }
    builder.build().map(Some).map_err(|e| bad(&e.to_string()))
}

/// The roots a call trusts, for the client.
fn roots(http: &HttpConfig) -> Result<ureq::tls::RootCerts, HandlerError> {
    let ders = root_ders(http)?;
    Ok(match ders.is_empty() {
        true => ureq::tls::RootCerts::WebPki,
        false => ureq::tls::RootCerts::Specific(Arc::new(
            ders.iter()
                .map(|c| ureq::tls::Certificate::from_der(c.as_ref()).to_owned())
                .collect(),
        )),
    })
}

/// The system's roots and `handler.ca_file`'s beside them; empty where the system has
/// none and no file is given (the client then takes Mozilla's).
fn root_ders(
    http: &HttpConfig,
) -> Result<Vec<rustls::pki_types::CertificateDer<'static>>, HandlerError> {
    use rustls::pki_types::pem::PemObject as _;
    let mut roots = rustls_native_certs::load_native_certs().certs;
    let Some(file) = &http.ca_file else {
        return Ok(roots);
    };
    let pem = std::fs::read(file).map_err(|e| {
        HandlerError::Setup(format!(
            "handler.ca_file: cannot read {}: {e}",
            file.display()
        ))
    })?;
    let before = roots.len();
    for cert in rustls::pki_types::CertificateDer::pem_slice_iter(&pem) {
        roots.push(cert.map_err(|e| {
            HandlerError::Setup(format!(
                "handler.ca_file: {} is not PEM ({e})",
                file.display()
            ))
        })?);
    }
    if roots.len() == before {
        return Err(HandlerError::Setup(format!(
            "handler.ca_file: {} holds no certificate; give a PEM file with BEGIN CERTIFICATE blocks",
            file.display()
        )));
    }
    Ok(roots)
}

/// Finds the addresses a call connects to, and refuses, where a record gives the host,
/// addresses of this host's own networks: as the call resolves them, so a name that
/// resolves there (or rebinds there) is refused as an address written in the column is.
///
/// The client asks before every call, a pooled connection's too, and its own resolver
/// starts a thread each time to bound the lookup by the timeout: an address in the URL
/// is taken as it is, and a name's addresses are kept a few seconds.
#[derive(Debug)]
struct Guard {
    check: bool,
    /// The proxy's host: the operator's, never refused (the target is then the
    /// proxy's to resolve).
    proxy: Option<String>,
    resolved: std::sync::Mutex<HashMap<(String, u16), (Instant, ResolvedSocketAddrs)>>,
}

/// How long a name's addresses are used before they are looked up again.
const RESOLVED_FOR: Duration = Duration::from_secs(5);

/// The most names whose addresses are kept (a URL from the records names many).
const RESOLVED_MOST: usize = 10_000;

impl Guard {
    fn new(check: bool, proxy: Option<String>) -> Guard {
        Guard {
            check,
            proxy,
            resolved: std::sync::Mutex::new(HashMap::new()),
        }
    }

    /// The addresses of `uri`'s host: an address as written, a name's from the
    /// lookups of the last few seconds, else looked up (within the timeout).
    fn lookup(
        &self,
        uri: &ureq::http::Uri,
        config: &ureq::config::Config,
        timeout: NextTimeout,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        let host = uri.host().unwrap_or_default();
        let port = uri
            .port_u16()
            .unwrap_or(if uri.scheme_str() == Some("https") {
                443
            } else {
                80
            });
        if let Ok(ip) = host.trim_matches(['[', ']']).parse::<IpAddr>() {
            let mut addrs = self.empty();
            addrs.push(std::net::SocketAddr::new(ip, port));
            return Ok(addrs);
        }
        let key = (host.to_string(), port);
        let cached = self
            .resolved
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
            .cloned();
        if let Some((_, addrs)) = cached.filter(|(at, _)| at.elapsed() < RESOLVED_FOR) {
            return Ok(addrs);
        }
        let addrs = DefaultResolver::default().resolve(uri, config, timeout)?;
        let mut resolved = self.resolved.lock().unwrap_or_else(|e| e.into_inner());
        if resolved.len() >= RESOLVED_MOST {
            resolved.retain(|_, (at, _)| at.elapsed() < RESOLVED_FOR);
        }
        resolved.insert(key, (Instant::now(), addrs.clone()));
        Ok(addrs)
    }
}

impl Resolver for Guard {
    fn resolve(
        &self,
        uri: &ureq::http::Uri,
        config: &ureq::config::Config,
        timeout: NextTimeout,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        let addrs = self.lookup(uri, config, timeout)?;
        let host = uri.host().unwrap_or_default();
        if !self.check || self.proxy.as_deref() == Some(host) {
            return Ok(addrs);
        }
        match addrs.iter().find(|a| !is_public(a.ip())) {
            Some(a) => Err(ureq::Error::Other(
                format!(
                    "{host} is {}, a private address; a URL from a record may not reach it unless handler.allow_private = true",
                    a.ip()
                )
                .into(),
            )),
            None => Ok(addrs),
        }
    }
}

/// Whether `ip` is on the public internet: not loopback, private, link-local (cloud
/// metadata's 169.254.169.254 among them), shared, unspecified, multicast or
/// documentation space, in IPv4 or IPv6 (an IPv4-mapped address as its IPv4).
pub fn is_public(ip: IpAddr) -> bool {
    match ip.to_canonical() {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            !(v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || v4.is_documentation()
                || a == 0
                || (a == 100 && (64..128).contains(&b))
                || (a == 192 && b == 0 && v4.octets()[2] == 0)
                || a >= 240)
        }
        IpAddr::V6(v6) => {
            let first = v6.segments()[0];
            !(v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (first & 0xfe00) == 0xfc00
                || (first & 0xffc0) == 0xfe80
                || first == 0x2001 && v6.segments()[1] == 0x0db8
                || first == 0x0064 && v6.segments()[1] == 0xff9b)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_and_metadata_addresses_are_not_public() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "::",
            "fd00:ec2::254",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
        ] {
            assert!(!is_public(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["93.184.215.14", "1.1.1.1", "2606:4700:4700::1111"] {
            assert!(is_public(ip.parse().unwrap()), "{ip}");
        }
    }

    #[test]
    fn retry_after_reads_seconds_and_http_dates() {
        assert_eq!(
            retry_after_of("120").unwrap(),
            Snooze::For(Duration::from_secs(120))
        );
        let later = chrono::Utc::now() + chrono::Duration::hours(1);
        let text = httpdate::fmt_http_date(later.into());
        match retry_after_of(&text).unwrap() {
            Snooze::Until(t) => assert!((t - later).num_seconds().abs() <= 1, "{t}"),
            other => panic!("{other:?}"),
        }
        assert!(retry_after_of("soon").is_err());
    }

    #[test]
    fn placeholders_after_the_host_are_in_the_path() {
        assert!(!in_path("https://"));
        assert!(!in_path("https://shop-"));
        assert!(in_path("https://h.example/orders/"));
        assert!(in_path("https://h.example?x="));
        assert!(!in_path(""));
    }
}

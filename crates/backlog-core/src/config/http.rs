//! `[handler] url = …`: an HTTP call per record, its request and how its answer is
//! read (docs/http.md).
//!
//! Everything about the call that the file can get wrong is checked here, once: the
//! URL's scheme and shape, the method, header names and values, the answer table's
//! codes. Header values are kept as [`Secret`]s, which print as `<hidden>`, so a token
//! in `Authorization` never reaches a log, `explain` or `--json`.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use super::KeyError;
use super::ranges::{HANDLER_TIMEOUT, span};
use super::template::Template;

/// A value kept out of every output: its `Debug` and `Display` say `<hidden>`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a value.
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }

    /// The value itself, for the request that needs it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<hidden>")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<hidden>")
    }
}

/// The key of `sign = "standard-webhooks"`: bytes, printed as `<hidden>`.
#[derive(Clone, PartialEq, Eq)]
pub struct SigningKey(Vec<u8>);

impl SigningKey {
    /// The key's bytes, for the signature.
    pub fn bytes(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<hidden>")
    }
}

/// What a call sends as its body.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Body {
    /// The record's columns as a JSON object, as a command handler reads it on stdin
    /// (`Content-Type: application/json` unless the headers say otherwise).
    Record,
    /// No body (`body = "none"`; the default for GET and DELETE).
    None,
    /// A text with `{column}` placeholders, each value written as JSON.
    Template(Template),
}

/// The `[handler]` keys of a URL handler, resolved.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct HttpConfig {
    /// `handler.url` as written (after `${VAR}`), for what people read.
    pub url_text: String,
    /// `handler.url`, its placeholders read.
    pub url: Template,
    /// Whether a record's column gives the URL's scheme or host (a placeholder before
    /// its path): then the address it reaches is checked (`allow_private`).
    pub host_from_record: bool,
    /// `handler.method`, upper case.
    pub method: String,
    /// `handler.headers`, in the file's order of names (sorted).
    pub headers: Vec<(String, Secret)>,
    /// `handler.body`.
    pub body: Body,
    /// `handler.connect_timeout`: resolving the host, connecting and TLS.
    pub connect_timeout: Duration,
    /// `handler.statuses`: answer codes that set a status of their own.
    pub statuses: BTreeMap<u16, String>,
    /// `handler.ca_file`: certificates trusted beside the system's (relative to the
    /// schedule file's folder).
    pub ca_file: Option<PathBuf>,
    /// `handler.allow_private`: a record's URL may reach loopback, private,
    /// link-local and cloud-metadata addresses.
    pub allow_private: bool,
    /// `handler.follow_redirects`: how many redirects a call follows (0: none; a 3xx
    /// is then an answer like any other).
    pub follow_redirects: u32,
    /// `sign = "standard-webhooks"` with `secret`: the key each call is signed with.
    pub signing_key: Option<SigningKey>,
    /// `handler.done_when`: a poll, done when a 2xx JSON body says so.
    pub done_when: Option<DoneWhen>,
}

/// `done_when = { pointer = "/state", in = ["shipped"] }`: the value at a JSON
/// pointer (RFC 6901) of a 2xx answer's body that says the record's work is done;
/// any other 2xx is "not yet".
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct DoneWhen {
    /// The pointer, like `/order/state`.
    pub pointer: String,
    /// The values that mean done, as JSON values (`"shipped"`, `true`, `3`).
    pub values: Vec<serde_json::Value>,
}

/// `handler.done_when` as the file gives it.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawDoneWhen {
    pointer: String,
    #[serde(rename = "in")]
    values: Vec<toml::Value>,
}

/// The codes every URL handler reads as "the counterpart is overloaded" when its rate
/// is `"auto"`: 408 Request Timeout, 429 Too Many Requests, 503 Service Unavailable.
pub const OVERLOAD_STATUSES: [u16; 3] = [408, 429, 503];

/// `handler.connect_timeout` when the file gives none.
const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The most redirects `handler.follow_redirects` allows.
pub const MAX_REDIRECTS: u32 = 20;

/// The methods a URL handler calls with.
const METHODS: [&str; 5] = ["POST", "PUT", "PATCH", "GET", "DELETE"];

/// The URL handler's keys as the file gives them.
#[derive(Debug, Default)]
pub(super) struct RawHttp {
    pub url: String,
    pub method: Option<String>,
    pub headers: BTreeMap<String, String>,
    pub body: Option<String>,
    pub connect_timeout: Option<String>,
    pub statuses: BTreeMap<String, String>,
    pub ca_file: Option<String>,
    pub allow_private: Option<bool>,
    pub follow_redirects: Option<i64>,
    pub sign: Option<String>,
    pub secret: Option<String>,
    pub done_when: Option<RawDoneWhen>,
}

/// Checks a URL handler's keys; `dir` is the schedule file's folder.
pub(super) fn resolve(raw: RawHttp, dir: &std::path::Path) -> Result<HttpConfig, KeyError> {
    let url = Template::parse(&raw.url);
    let host_from_record = check_url(&raw.url, &url)?;
    let method = match raw.method.as_deref() {
        None => "POST".to_string(),
        Some(m) if METHODS.contains(&m.to_ascii_uppercase().as_str()) => m.to_ascii_uppercase(),
        Some(m) => {
            return Err(KeyError::new(format!(
                "handler.method: {m:?} is not a method a handler calls with; use one of {}",
                METHODS.join(", ")
            )));
        }
    };
    let mut headers = Vec::new();
    for (name, value) in raw.headers {
        let token = !name.is_empty()
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
        if !token {
            return Err(KeyError::new(format!(
                "handler.headers: {name:?} is not a header name; use letters, digits and dashes, like \"X-Api-Key\""
            )));
        }
        if value.bytes().any(|b| b == b'\r' || b == b'\n' || b == 0) {
            // The value is never shown: it may be the token itself.
            return Err(KeyError::new(format!(
                "handler.headers.{name}: the value holds a line break; give it on one line (a variable's value too)"
            )));
        }
        if ["host", "content-length", "transfer-encoding"]
            .contains(&name.to_ascii_lowercase().as_str())
        {
            return Err(KeyError::new(format!(
                "handler.headers: {name} is set by the call itself; leave it out"
            )));
        }
        headers.push((name, Secret::new(value)));
    }
    let body = match raw.body.as_deref() {
        None if ["GET", "DELETE"].contains(&method.as_str()) => Body::None,
        None | Some("record") => Body::Record,
        Some("none") => Body::None,
        Some(text) => Body::Template(Template::parse(text)),
    };
    let connect_timeout = match &raw.connect_timeout {
        Some(t) => span("handler.connect_timeout", t, HANDLER_TIMEOUT)?,
        None => DEFAULT_CONNECT_TIMEOUT,
    };
    let mut statuses = BTreeMap::new();
    for (code, status) in raw.statuses {
        let n = code
            .parse::<u16>()
            .ok()
            .filter(|n| (100..=599).contains(n))
            .ok_or_else(|| {
                format!(
                    "handler.statuses: {code:?} is not an HTTP status code; use codes from 100 to 599, like statuses = {{ 410 = \"GONE\" }}"
                )
            })?;
        statuses.insert(n, status);
    }
    let follow_redirects = match raw.follow_redirects {
        None => 0,
        Some(n) if (0..=i64::from(MAX_REDIRECTS)).contains(&n) => n as u32,
        Some(n) => {
            return Err(KeyError::new(format!(
                "handler.follow_redirects: {n} is out of range; use 0 (a redirect is an answer, the default) to {MAX_REDIRECTS}"
            )));
        }
    };
    let signing_key = signing_key(raw.sign.as_deref(), raw.secret.as_deref())?;
    let done_when = raw.done_when.map(done_when).transpose()?;
    Ok(HttpConfig {
        done_when,
        signing_key,
        url_text: raw.url,
        url,
        host_from_record,
        method,
        headers,
        body,
        connect_timeout,
        statuses,
        ca_file: raw.ca_file.map(|f| crate::config::beside(dir, f)),
        allow_private: raw.allow_private.unwrap_or(false),
        follow_redirects,
    })
}

/// Checks `handler.done_when`: a JSON pointer, and at least one value that means done.
fn done_when(raw: RawDoneWhen) -> Result<DoneWhen, KeyError> {
    let escapes_ok = raw
        .pointer
        .match_indices('~')
        .all(|(i, _)| matches!(raw.pointer.as_bytes().get(i + 1), Some(b'0' | b'1')));
    if !(raw.pointer.is_empty() || raw.pointer.starts_with('/')) || !escapes_ok {
        return Err(KeyError::new(format!(
            "handler.done_when.pointer: {:?} is not a JSON pointer; start it with / and name the keys on the way, like pointer = \"/order/state\" (~1 for a / in a key, ~0 for a ~)",
            raw.pointer
        )));
    }
    if raw.values.is_empty() {
        return Err(
            "handler.done_when.in is empty; list the values that mean done, like in = [\"shipped\", \"delivered\"]".into(),
        );
    }
    let values = raw
        .values
        .into_iter()
        .map(|v| serde_json::to_value(&v).map_err(|e| format!("handler.done_when.in: {e}")))
        .collect::<Result<_, _>>()?;
    Ok(DoneWhen {
        pointer: raw.pointer,
        values,
    })
}

/// `handler.sign` and `handler.secret`: the Standard Webhooks key, `whsec_` and the
/// key's bytes in base64, as the specification writes it. The secret's text is never
/// in a message.
fn signing_key(sign: Option<&str>, secret: Option<&str>) -> Result<Option<SigningKey>, KeyError> {
    use base64::Engine as _;
    match (sign, secret) {
        (None, None) => Ok(None),
        (None, Some(_)) => Err(
            "handler.secret signs the calls, but handler.sign is not set; add sign = \"standard-webhooks\", or leave secret out".into(),
        ),
        (Some("standard-webhooks"), None) => Err(
            "handler.sign = \"standard-webhooks\" needs the signing key; add secret = \"${WEBHOOK_SECRET}\" (whsec_ and the key in base64)".into(),
        ),
        (Some("standard-webhooks"), Some(secret)) => {
            let encoded = secret.strip_prefix("whsec_").unwrap_or(secret);
            let engine = base64::engine::general_purpose::GeneralPurposeConfig::new()
                .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent);
            let key = base64::engine::GeneralPurpose::new(&base64::alphabet::STANDARD, engine)
                .decode(encoded.trim())
                .ok()
                .filter(|k| !k.is_empty())
                .ok_or_else(|| {
                    "handler.secret is not a Standard Webhooks secret; give whsec_ and the key in base64, like secret = \"${WEBHOOK_SECRET}\" set to whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".to_string()
                })?;
            Ok(Some(SigningKey(key)))
        }
        (Some(other), _) => Err(KeyError::new(format!(
            "handler.sign: {other:?} is not a signing scheme; use sign = \"standard-webhooks\""
        ))),
    }
}

/// Checks `handler.url`'s shape; returns whether a record gives its scheme or host.
fn check_url(text: &str, url: &Template) -> Result<bool, KeyError> {
    let example = "like \"https://hooks.example.com/orders/{id}\"";
    if text.trim().is_empty() {
        return Err(KeyError::new(format!(
            "handler.url is empty; give the URL to call, {example}"
        )));
    }
    let prefix = url.prefix();
    let Some((scheme, rest)) = prefix.split_once("://") else {
        if prefix.is_empty() {
            // The whole URL, or its scheme, from a column: checked per record.
            return Ok(true);
        }
        return Err(KeyError::new(format!(
            "handler.url: {text:?} has no scheme; write the whole URL, {example}"
        )));
    };
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        return Err(KeyError::new(format!(
            "handler.url: {text:?} is not an http or https URL; a URL handler calls http:// or https://, {example}"
        )));
    }
    let host_from_record = !rest.contains(['/', '?', '#']) && !url.columns().is_empty();
    // The URL with each placeholder as a plain word must parse, so that a typo in the
    // host or the port is found now, not at the first record.
    let sample = url.fill(|_, out| out.push('x'));
    let parsed = url::Url::parse(&sample)
        .map_err(|e| format!("handler.url: {text:?} is not a URL ({e}); {example}"))?;
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(KeyError::new(format!(
            "handler.url: {text:?} has no host; {example}"
        )));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(KeyError::new(format!(
            "handler.url: {text:?} holds a user or password; give it in handler.headers instead, like headers = {{ Authorization = \"Basic ${{CREDENTIALS}}\" }}"
        )));
    }
    Ok(host_from_record)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn http(url: &str) -> Result<HttpConfig, String> {
        resolve(
            RawHttp {
                url: url.into(),
                ..RawHttp::default()
            },
            std::path::Path::new("/srv"),
        )
        .map_err(|e| e.message)
    }

    #[test]
    fn a_url_is_checked_and_its_host_source_known() {
        let c = http("https://hooks.example.com/orders/{id}").unwrap();
        assert!(!c.host_from_record);
        assert_eq!((c.method.as_str(), &c.body), ("POST", &Body::Record));
        assert!(http("{endpoint}").unwrap().host_from_record);
        assert!(
            http("https://{shop}.example.com/x")
                .unwrap()
                .host_from_record
        );
        assert!(!http("http://127.0.0.1:8080").unwrap().host_from_record);
        for (url, message) in [
            (
                "ftp://h.example/{id}",
                "handler.url: \"ftp://h.example/{id}\" is not an http or https URL; a URL handler calls http:// or https://, like \"https://hooks.example.com/orders/{id}\"",
            ),
            (
                "hooks.example.com/{id}",
                "handler.url: \"hooks.example.com/{id}\" has no scheme; write the whole URL, like \"https://hooks.example.com/orders/{id}\"",
            ),
            (
                "https://h.example:99999/x",
                "handler.url: \"https://h.example:99999/x\" is not a URL (invalid port number); like \"https://hooks.example.com/orders/{id}\"",
            ),
            (
                "https://u:p@h.example/x",
                "handler.url: \"https://u:p@h.example/x\" holds a user or password; give it in handler.headers instead, like headers = { Authorization = \"Basic ${CREDENTIALS}\" }",
            ),
            (
                " ",
                "handler.url is empty; give the URL to call, like \"https://hooks.example.com/orders/{id}\"",
            ),
        ] {
            assert_eq!(http(url).unwrap_err(), message, "{url}");
        }
    }

    #[test]
    fn keys_out_of_range_name_the_key_and_the_fix() {
        let with = |f: &dyn Fn(&mut RawHttp)| {
            let mut raw = RawHttp {
                url: "https://h.example/{id}".into(),
                ..RawHttp::default()
            };
            f(&mut raw);
            resolve(raw, std::path::Path::new("/srv"))
                .unwrap_err()
                .message
        };
        assert_eq!(
            with(&|r| {
                r.statuses.insert("700".into(), "GONE".into());
            }),
            "handler.statuses: \"700\" is not an HTTP status code; use codes from 100 to 599, like statuses = { 410 = \"GONE\" }"
        );
        assert_eq!(
            with(&|r| r.method = Some("FETCH".into())),
            "handler.method: \"FETCH\" is not a method a handler calls with; use one of POST, PUT, PATCH, GET, DELETE"
        );
        assert_eq!(
            with(&|r| {
                r.headers.insert("X Key".into(), "v".into());
            }),
            "handler.headers: \"X Key\" is not a header name; use letters, digits and dashes, like \"X-Api-Key\""
        );
        let secret = with(&|r| {
            r.headers
                .insert("Authorization".into(), "Bearer s3cr3t\nX: y".into());
        });
        assert!(!secret.contains("s3cr3t"), "{secret}");
        assert_eq!(
            with(&|r| r.follow_redirects = Some(21)),
            "handler.follow_redirects: 21 is out of range; use 0 (a redirect is an answer, the default) to 20"
        );
    }

    #[test]
    fn a_secret_never_prints() {
        let s = Secret::new("Bearer s3cr3t");
        assert_eq!(format!("{s} {s:?}"), "<hidden> <hidden>");
        assert_eq!(s.expose(), "Bearer s3cr3t");
    }
}

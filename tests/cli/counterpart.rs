//! A real HTTP server on loopback that stands for a counterpart's API (axum on a
//! runtime of its own): it answers `/r/ID` as the test's closure says for that record
//! (a code, headers, a body, after a delay), and records each request with the peer
//! that sent it, so a test can count the connections a tick used. Beside it, raw
//! sockets for what no server does on purpose: one that never answers, one that resets.

use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the counterpart answers for a record.
#[derive(Debug, Clone)]
pub struct Answer {
    pub code: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
    pub delay: Duration,
}

impl Answer {
    /// `code` with a short body naming it.
    pub fn code(code: u16) -> Answer {
        Answer {
            code,
            headers: Vec::new(),
            body: format!("answer {code}").into_bytes(),
            delay: Duration::ZERO,
        }
    }

    pub fn header(mut self, name: &'static str, value: impl Into<String>) -> Answer {
        self.headers.push((name, value.into()));
        self
    }

    pub fn body(mut self, body: Vec<u8>) -> Answer {
        self.body = body;
        self
    }

    pub fn after(mut self, delay: Duration) -> Answer {
        self.delay = delay;
        self
    }
}

/// One request the counterpart got.
#[derive(Debug, Clone)]
pub struct Call {
    pub method: String,
    /// The path and query, as sent.
    pub target: String,
    pub headers: BTreeMap<String, String>,
    pub body: String,
    /// The body as it came (a protobuf's bytes are no text).
    pub bytes: Vec<u8>,
    pub peer: SocketAddr,
}

pub struct Counterpart {
    pub url: String,
    calls: Arc<Mutex<Vec<Call>>>,
    /// Requests being answered now, and the most at once so far.
    load: Arc<(AtomicUsize, AtomicUsize)>,
    _runtime: tokio::runtime::Runtime,
}

/// The answer to a request, by its path and query.
type Answers = Arc<dyn Fn(&str) -> Answer + Send + Sync>;

impl Counterpart {
    /// Listens on a free loopback port; `answer` decides each record's answer (`/r/ID`;
    /// any other path is a 404).
    pub fn start(answer: impl Fn(i64) -> Answer + Send + Sync + 'static) -> Counterpart {
        Counterpart::answering(move |target| {
            let id = target
                .strip_prefix("/r/")
                .and_then(|rest| rest.split(['?', '/']).next())
                .and_then(|id| id.parse().ok());
            match id {
                Some(id) => answer(id),
                None => Answer::code(404),
            }
        })
    }

    /// Listens on a free loopback port; `answer` decides the answer to each path.
    pub fn answering(answer: impl Fn(&str) -> Answer + Send + Sync + 'static) -> Counterpart {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a runtime for the counterpart");
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        listener.set_nonblocking(true).unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let calls = Arc::new(Mutex::new(Vec::new()));
        let answers: Answers = Arc::new(answer);
        let seen = Arc::clone(&calls);
        let load = Arc::new((AtomicUsize::new(0), AtomicUsize::new(0)));
        let counted = Arc::clone(&load);
        runtime.spawn(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            let app = axum::Router::new().fallback(
                move |axum::extract::ConnectInfo(peer): axum::extract::ConnectInfo<SocketAddr>,
                      request: axum::extract::Request| {
                    let seen = Arc::clone(&seen);
                    let answers = Arc::clone(&answers);
                    let load = Arc::clone(&counted);
                    async move {
                        let now = load.0.fetch_add(1, Ordering::SeqCst) + 1;
                        load.1.fetch_max(now, Ordering::SeqCst);
                        let response = respond(peer, request, &seen, &answers).await;
                        load.0.fetch_sub(1, Ordering::SeqCst);
                        response
                    }
                },
            );
            axum::serve(
                listener,
                app.into_make_service_with_connect_info::<SocketAddr>(),
            )
            .await
            .unwrap();
        });
        Counterpart {
            url,
            calls,
            load,
            _runtime: runtime,
        }
    }

    /// Every request so far.
    pub fn calls(&self) -> Vec<Call> {
        self.calls.lock().unwrap().clone()
    }

    /// The most requests it answered at once.
    pub fn most_at_once(&self) -> usize {
        self.load.1.load(Ordering::SeqCst)
    }

    /// The records called, in the order the calls came.
    pub fn ids(&self) -> Vec<i64> {
        self.calls()
            .iter()
            .filter_map(|c| c.target.strip_prefix("/r/")?.parse().ok())
            .collect()
    }
}

async fn respond(
    peer: SocketAddr,
    request: axum::extract::Request,
    seen: &Mutex<Vec<Call>>,
    answers: &Answers,
) -> axum::response::Response {
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, 1 << 24)
        .await
        .unwrap_or_default();
    let target = parts
        .uri
        .path_and_query()
        .map_or(String::new(), |p| p.to_string());
    seen.lock().unwrap().push(Call {
        method: parts.method.to_string(),
        target: target.clone(),
        headers: parts
            .headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or_default().to_string()))
            .collect(),
        body: String::from_utf8_lossy(&body).into_owned(),
        bytes: body.to_vec(),
        peer,
    });
    let answer = answers(&target);
    if !answer.delay.is_zero() {
        tokio::time::sleep(answer.delay).await;
    }
    let mut response = axum::response::Response::builder().status(answer.code);
    for (name, value) in &answer.headers {
        response = response.header(*name, value);
    }
    response.body(axum::body::Body::from(answer.body)).unwrap()
}

/// A loopback port that accepts connections and reads them, but never answers: a
/// counterpart that hangs. Its sockets stay open until the test ends.
pub fn hanging() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().flatten() {
            held.push(stream);
        }
    });
    url
}

/// A loopback port that reads each request, then resets its connection (a close with
/// SO_LINGER 0 sends RST): a counterpart that drops calls.
pub fn resetting() -> String {
    use std::io::Read as _;
    use std::os::fd::AsRawFd as _;
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
            let linger = libc::linger {
                l_onoff: 1,
                l_linger: 0,
            };
            // SAFETY: a valid socket, and a linger struct of the size passed.
            unsafe {
                libc::setsockopt(
                    stream.as_raw_fd(),
                    libc::SOL_SOCKET,
                    libc::SO_LINGER,
                    &linger as *const libc::linger as *const libc::c_void,
                    std::mem::size_of::<libc::linger>() as libc::socklen_t,
                );
            }
            drop(stream);
        }
    });
    url
}

//! A loopback HTTP server that stands for a webhook receiver and healthchecks.io: it
//! records each request's method, path (with its query) and body, and answers 200;
//! or, to stand for a receiver that is briefly down, answers its first POSTs 503.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// One request the server got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    pub path: String,
    pub body: String,
}

/// The server: its address, and what it got so far.
pub struct Hooks {
    pub url: String,
    got: Arc<Mutex<Vec<Request>>>,
    refused: Arc<AtomicUsize>,
}

impl Hooks {
    /// Listens on 127.0.0.1 on a free port, answering on a thread of its own (it ends
    /// with the test process).
    pub fn start() -> Hooks {
        Hooks::refusing(0)
    }

    /// As `start`, but answers the first `refuse` POSTs `503 Service Unavailable` (and
    /// does not record them): a receiver down for a moment.
    pub fn refusing(refuse: usize) -> Hooks {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        let url = format!("http://{}", listener.local_addr().unwrap());
        let got = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&got);
        let refused = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&refused);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut line = String::new();
                if reader.read_line(&mut line).is_err() {
                    continue;
                }
                let mut parts = line.split_whitespace();
                let (method, path) = (parts.next().unwrap_or_default(), parts.next());
                let mut length = 0;
                loop {
                    let mut header = String::new();
                    if reader.read_line(&mut header).unwrap_or(0) == 0 || header == "\r\n" {
                        break;
                    }
                    if let Some((name, value)) = header.split_once(':')
                        && name.eq_ignore_ascii_case("content-length")
                    {
                        length = value.trim().parse().unwrap_or(0);
                    }
                }
                let mut body = vec![0; length];
                let _ = reader.read_exact(&mut body);
                if method == "POST" && counted.load(Ordering::SeqCst) < refuse {
                    counted.fetch_add(1, Ordering::SeqCst);
                    let _ = stream.write_all(
                        b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                    );
                    continue;
                }
                seen.lock().unwrap().push(Request {
                    method: method.to_string(),
                    path: path.unwrap_or_default().to_string(),
                    body: String::from_utf8_lossy(&body).into_owned(),
                });
                let _ = stream.write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                );
            }
        });
        Hooks { url, got, refused }
    }

    /// How many POSTs were refused.
    pub fn refused(&self) -> usize {
        self.refused.load(Ordering::SeqCst)
    }

    /// The requests got since the last call, in order.
    pub fn take(&self) -> Vec<Request> {
        std::mem::take(&mut *self.got.lock().unwrap())
    }
}

/// An address where nothing listens, kept so while the test holds it: a loopback
/// port bound and never listened on, which refuses every connection and which no
/// other test's listener can be given meanwhile (a port merely free a moment ago was
/// given to another test's hooks, which then received this test's deliveries).
pub struct Refused {
    pub url: String,
    _socket: tokio::net::TcpSocket,
}

pub fn refused() -> Refused {
    let socket = tokio::net::TcpSocket::new_v4().expect("a socket");
    socket
        .bind("127.0.0.1:0".parse().unwrap())
        .expect("a loopback port");
    Refused {
        url: format!("http://{}", socket.local_addr().unwrap()),
        _socket: socket,
    }
}

/// The JSON bodies of the POSTs among `got`: the events a webhook received.
pub fn posted(got: &[Request]) -> Vec<serde_json::Value> {
    got.iter()
        .filter(|r| r.method == "POST")
        .map(|r| serde_json::from_str(&r.body).expect("a JSON event"))
        .collect()
}

/// Appends an `[alert]` section with a webhook to `url` to the schedule file at `path`.
pub fn add_webhook(path: &std::path::Path, url: &str) {
    let text = std::fs::read_to_string(path).unwrap();
    std::fs::write(path, format!("{text}\n[alert]\nwebhook = \"{url}/hook\"\n")).unwrap();
}

//! A TCP link of the tests' own between runners and a database server (this kernel
//! has no netem): it forwards each connection made to it, delivers each chunk it
//! reads a fixed delay later (each way: a round trip costs twice the delay), and now
//! and then stalls one connection, both ways, for a while, as a congested or lossy
//! path does. What a stalled connection sent waits, in order, and goes on after.
//! With no delay and no stalls it is a plain relay (the partition tests' host reaches
//! the loopback servers through one). Its threads end with their connections.
//!
//! Shared, as a file, by the servers' tests (`partition`, `slow_link`) and
//! `examples/bench_fleet.rs`: std only.

use std::io::{Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, Weak};
use std::thread;
use std::time::{Duration, Instant, SystemTime};

/// What the link does to the bytes it forwards.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    /// Added to every chunk, each way.
    pub delay: Duration,
    /// How often one live connection, picked at random, stalls; `None`: never.
    pub stall_every: Option<Duration>,
    /// How long a stall holds its connection.
    pub stall_for: Duration,
}

impl Shape {
    /// A plain relay: no delay, no stall.
    pub const DIRECT: Shape = Shape {
        delay: Duration::ZERO,
        stall_every: None,
        stall_for: Duration::ZERO,
    };
}

/// One forwarded connection: until when it is stalled.
struct Connection {
    stalled_until: Mutex<Option<Instant>>,
}

impl Connection {
    /// Waits out `until`, then any stall; returns when the chunk may go.
    fn wait(&self, until: Instant) {
        loop {
            let now = Instant::now();
            let stall = *self.stalled_until.lock().unwrap();
            let until = match stall {
                Some(s) if s > until => s,
                _ => until,
            };
            if until <= now {
                return;
            }
            thread::sleep((until - now).min(Duration::from_millis(20)));
        }
    }
}

/// A running link; it takes no new connection once dropped.
pub struct SlowLink {
    /// Where runners connect instead of the server.
    pub at: SocketAddr,
    stop: Arc<AtomicBool>,
    stalls: Arc<AtomicU64>,
}

impl SlowLink {
    /// Listens on `bind` (any free port) and forwards to `server`, shaped by `shape`.
    pub fn start(bind: IpAddr, server: SocketAddr, shape: Shape) -> SlowLink {
        let listener = TcpListener::bind((bind, 0)).expect("the link binds");
        let at = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let stalls = Arc::new(AtomicU64::new(0));
        let live: Arc<Mutex<Vec<Weak<Connection>>>> = Arc::default();
        if let Some(every) = shape.stall_every {
            let (stop, stalls, live) = (Arc::clone(&stop), Arc::clone(&stalls), Arc::clone(&live));
            thread::spawn(move || {
                stall_now_and_then(every, shape.stall_for, &stop, &stalls, &live)
            });
        }
        let stopped = Arc::clone(&stop);
        thread::spawn(move || {
            for client in listener.incoming() {
                if stopped.load(Ordering::Relaxed) {
                    return;
                }
                let Ok(client) = client else { continue };
                let Ok(upstream) = TcpStream::connect(server) else {
                    continue;
                };
                let _ = (client.set_nodelay(true), upstream.set_nodelay(true));
                let connection = Arc::new(Connection {
                    stalled_until: Mutex::new(None),
                });
                let mut connections = live.lock().unwrap();
                connections.retain(|c| c.strong_count() > 0);
                connections.push(Arc::downgrade(&connection));
                drop(connections);
                for (from, to) in [
                    (client.try_clone().unwrap(), upstream.try_clone().unwrap()),
                    (upstream, client),
                ] {
                    forward(from, to, shape.delay, Arc::clone(&connection));
                }
            }
        });
        SlowLink { at, stop, stalls }
    }

    /// `text` (a database URL, a schedule file) with the server of `url` replaced by
    /// the link: its runners connect through it.
    pub fn instead_of(&self, text: &str, url: &str) -> String {
        text.replacen(authority(url), &self.at.to_string(), 1)
    }

    /// How many stalls the link has made so far.
    pub fn stalls(&self) -> u64 {
        self.stalls.load(Ordering::Relaxed)
    }
}

impl Drop for SlowLink {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = TcpStream::connect_timeout(&self.at, Duration::from_millis(200));
    }
}

/// The host and port of a server URL (`…@127.0.0.1:5432/db…`), as it writes them.
pub fn authority(url: &str) -> &str {
    url.split('@')
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .expect("a URL of user@host:port/database")
}

/// The address of the server a URL names.
pub fn server_of(url: &str) -> SocketAddr {
    authority(url)
        .to_socket_addrs()
        .ok()
        .and_then(|mut addresses| addresses.next())
        .unwrap_or_else(|| panic!("{}: no address", authority(url)))
}

/// One way of a connection: a thread reads and stamps each chunk, another delivers
/// it once its delay (and any stall) is over, so that the delay adds to each chunk's
/// way without cutting the link's throughput. The end of what `from` sends ends
/// what goes to `to`.
fn forward(mut from: TcpStream, mut to: TcpStream, delay: Duration, connection: Arc<Connection>) {
    let (chunks, delivered) = mpsc::channel::<(Instant, Vec<u8>)>();
    thread::spawn(move || {
        let mut buffer = vec![0; 64 * 1024];
        loop {
            match from.read(&mut buffer) {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    if chunks
                        .send((Instant::now() + delay, buffer[..n].to_vec()))
                        .is_err()
                    {
                        return;
                    }
                }
            }
        }
    });
    thread::spawn(move || {
        for (due, chunk) in delivered {
            connection.wait(due);
            if to.write_all(&chunk).is_err() {
                break;
            }
        }
        let _ = to.shutdown(Shutdown::Write);
    });
}

/// Every `every`, stalls one live connection, picked at random, for `stall_for`.
fn stall_now_and_then(
    every: Duration,
    stall_for: Duration,
    stop: &AtomicBool,
    stalls: &AtomicU64,
    live: &Mutex<Vec<Weak<Connection>>>,
) {
    // xorshift, seeded from the clock: no crate for a pick.
    let mut seed = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    while !stop.load(Ordering::Relaxed) {
        thread::sleep(every);
        let connections: Vec<Arc<Connection>> = live
            .lock()
            .unwrap()
            .iter()
            .filter_map(Weak::upgrade)
            .collect();
        if connections.is_empty() {
            continue;
        }
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let picked = &connections[(seed % connections.len() as u64) as usize];
        *picked.stalled_until.lock().unwrap() = Some(Instant::now() + stall_for);
        stalls.fetch_add(1, Ordering::Relaxed);
    }
}

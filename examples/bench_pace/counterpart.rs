//! The loopback counterpart: a token bucket on 127.0.0.1 holding a second's worth of
//! its capacity, which may be raised at a given second of the run; a call beyond it is
//! answered `429` with `Retry-After: 1`. It counts what it took and refused in 1 s
//! buckets from the run's start, the trace the follow time is read from.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Capacities by time: `(from second, calls a second)`, the first from 0; with
/// `after_refusal`, the later ones count their seconds from the first call refused
/// (once the fleet found the first capacity) instead of from the run's start.
#[derive(Debug, Clone)]
pub struct Capacities {
    pub steps: Vec<(f64, f64)>,
    pub after_refusal: bool,
}

impl Capacities {
    /// One capacity for the whole run.
    pub fn fixed(per_second: f64) -> Capacities {
        Capacities {
            steps: vec![(0.0, per_second)],
            after_refusal: false,
        }
    }
}

/// Calls taken and refused in one second of the run.
#[derive(Debug, Clone, Copy, Default)]
pub struct Second {
    pub took: u32,
    pub refused: u32,
}

struct State {
    capacities: Capacities,
    started: Instant,
    tokens: f64,
    at: Instant,
    trace: Vec<Second>,
    /// The second of the run the first call was refused.
    first_refusal: Option<f64>,
}

impl State {
    fn capacity_at(&self, second: f64) -> f64 {
        let steps = &self.capacities.steps;
        let origin = match self.capacities.after_refusal {
            false => Some(0.0),
            true => self.first_refusal,
        };
        origin
            .and_then(|origin| {
                steps[1..]
                    .iter()
                    .rev()
                    .find(|(from, _)| second >= origin + *from)
            })
            .map_or(steps[0].1, |(_, c)| *c)
    }

    /// The second of the run each capacity took over, as far as known.
    fn raised_at(&self) -> Vec<f64> {
        let origin = match self.capacities.after_refusal {
            false => Some(0.0),
            true => self.first_refusal,
        };
        self.capacities.steps[1..]
            .iter()
            .filter_map(|(from, _)| origin.map(|o| o + from))
            .collect()
    }

    /// Whether a call arriving now is taken; counted in its second either way.
    fn call(&mut self) -> bool {
        let now = Instant::now();
        let second = now.duration_since(self.started).as_secs_f64();
        let capacity = self.capacity_at(second);
        let gained = now.duration_since(self.at).as_secs_f64() * capacity;
        self.tokens = (self.tokens + gained).min(capacity);
        self.at = now;
        let taken = self.tokens >= 1.0;
        if taken {
            self.tokens -= 1.0;
        }
        let index = second as usize;
        if self.trace.len() <= index {
            self.trace.resize(index + 1, Second::default());
        }
        let bucket = &mut self.trace[index];
        if taken {
            bucket.took += 1;
        } else {
            bucket.refused += 1;
            self.first_refusal.get_or_insert(second);
        }
        taken
    }
}

/// The counterpart's address and its state, shared with its thread.
pub struct Counterpart {
    pub url: String,
    state: Arc<Mutex<State>>,
}

impl Counterpart {
    /// Listens on a loopback port; each call is answered after `call` (on a thread of
    /// its own when `call` is not zero), its fate decided when it arrives.
    pub fn start(call: Duration) -> Counterpart {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        let url = format!("http://{}/", listener.local_addr().unwrap());
        let state = Arc::new(Mutex::new(State {
            capacities: Capacities::fixed(1.0),
            started: Instant::now(),
            tokens: 1.0,
            at: Instant::now(),
            trace: Vec::new(),
            first_refusal: None,
        }));
        let shared = Arc::clone(&state);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                }
                let taken = shared.lock().unwrap().call();
                let answer: &'static [u8] = if taken {
                    b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                } else {
                    b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                };
                if call.is_zero() {
                    let _ = stream.write_all(answer);
                } else {
                    std::thread::spawn(move || {
                        std::thread::sleep(call);
                        let _ = stream.write_all(answer);
                    });
                }
            }
        });
        Counterpart { url, state }
    }

    /// Starts a run: the clock from now, the bucket full at the first capacity, the
    /// trace empty; returns the run's start.
    pub fn reset(&self, capacities: Capacities) -> Instant {
        let mut state = self.state.lock().unwrap();
        state.tokens = capacities.steps[0].1;
        state.first_refusal = None;
        state.capacities = capacities;
        state.started = Instant::now();
        state.at = state.started;
        state.trace.clear();
        state.started
    }

    /// The run's trace so far, a bucket a second.
    pub fn trace(&self) -> Vec<Second> {
        self.state.lock().unwrap().trace.clone()
    }

    /// The second of the run the first call was refused, if one was.
    pub fn first_refusal(&self) -> Option<f64> {
        self.state.lock().unwrap().first_refusal
    }

    /// The second of the run each later capacity took over, those that did.
    pub fn raised_at(&self) -> Vec<f64> {
        let state = self.state.lock().unwrap();
        let now = state.started.elapsed().as_secs_f64();
        state
            .raised_at()
            .into_iter()
            .filter(|&at| at <= now)
            .collect()
    }
}

//! The lanes: where a tick's records are handled, and how many at once.
//!
//! Three shapes, one interface (`free`, `send`, `receive`) so the tick's loop is the
//! same for all:
//! - inline: the tick's own thread calls the handler, one record (or batch) at a time.
//!   With `concurrency = 1` this is the whole cost of handing a record over, and an
//!   in-process handler keeps the engine's throughput;
//! - pipelined: a batch process that works beside the tick, two batches out at once;
//! - a pool: `concurrency` workers on scoped threads, each with a handler of its own
//!   (`Handler::worker`: a command handler's copy, a batch handler with its own
//!   process, a closure by reference). The tick sends a batch only to an idle worker,
//!   so no record waits in a worker's queue: a record taken is a record started.
//!
//! Answers come back as they are ready, in any order; the tick marks and counts each
//! once, on its own thread.

use std::collections::VecDeque;
use std::sync::mpsc;
use std::thread::Scope;
use std::time::{Duration, Instant};

use crate::handler::{Context, Handled, Handler, HandlerError};
use crate::record::Record;

/// How many batches a pipelined handler holds at once: one it works on, one waiting
/// in its pipe, so it never waits for the tick and the tick rarely waits for it.
const PIPELINE_DEPTH: usize = 2;

/// A batch that came back: its records and their results (or why the handler could
/// not run at all), how long it was out, and when it came back (the tick may read it
/// later: an adapted pace dates a refusal by it).
pub(super) struct Done {
    pub(super) records: Vec<Record>,
    pub(super) results: Result<Vec<Handled>, HandlerError>,
    pub(super) latency: Duration,
    pub(super) ended: Instant,
}

/// A batch for a worker.
struct Job<'c> {
    records: Vec<Record>,
    contexts: Vec<Context<'c>>,
}

pub(super) enum Lanes<'h, 'c> {
    Inline {
        handler: &'h mut dyn Handler,
        done: Option<Done>,
    },
    Pipelined {
        handler: &'h mut dyn Handler,
        out: VecDeque<(Vec<Record>, Instant)>,
    },
    Pool(Pool<'c>),
}

/// Handles one batch on the calling thread. A panic in the handler (a library user's
/// closure) becomes an error that stops the tick, instead of a worker that never
/// answers while the others wait on it.
fn handle(handler: &mut dyn Handler, records: &[Record], contexts: &[Context<'_>]) -> Done {
    let started = Instant::now();
    let results = catch_panic(|| match (records, contexts) {
        ([one], [ctx]) => handler.handle(one, ctx).map(|h| vec![h]),
        _ => {
            let refs: Vec<&Record> = records.iter().collect();
            handler.handle_batch(&refs, contexts)
        }
    });
    Done {
        records: Vec::new(),
        results,
        latency: started.elapsed(),
        ended: Instant::now(),
    }
}

/// Runs `f`, turning a panic into `HandlerError::Panicked` with its message.
pub(super) fn catch_panic<T>(
    f: impl FnOnce() -> Result<T, HandlerError>,
) -> Result<T, HandlerError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|panic| {
        let message = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "(no message)".into());
        Err(HandlerError::Panicked(message))
    })
}

impl<'h, 'c> Lanes<'h, 'c> {
    /// The lanes for `concurrency`: a pool of that many workers on `scope`, or the
    /// tick's own thread. A handler that offers no workers runs inline, with a warning.
    pub(super) fn new<'scope>(
        handler: &'h mut dyn Handler,
        concurrency: usize,
        scope: &'scope Scope<'scope, 'c>,
    ) -> Self
    where
        'h: 'c,
    {
        if concurrency > 1 {
            if handler.worker().is_some() {
                let shared: &'h dyn Handler = handler;
                let workers = (0..concurrency)
                    .map(|_| shared.worker().expect("the handler offered a worker"))
                    .collect();
                return Lanes::Pool(Pool::start(scope, workers));
            }
            tracing::warn!(
                "this handler takes one record at a time (it offers no workers); concurrency {concurrency} is ignored"
            );
        }
        if handler.pipelined().is_some() {
            Lanes::Pipelined {
                handler,
                out: VecDeque::new(),
            }
        } else {
            Lanes::Inline {
                handler,
                done: None,
            }
        }
    }

    /// How many batches can be sent now.
    pub(super) fn free(&self) -> usize {
        match self {
            Lanes::Inline { done, .. } => usize::from(done.is_none()),
            Lanes::Pipelined { out, .. } => PIPELINE_DEPTH - out.len().min(PIPELINE_DEPTH),
            Lanes::Pool(pool) => pool.idle.len(),
        }
    }

    /// How many batches can be out at once.
    pub(super) fn capacity(&self) -> usize {
        match self {
            Lanes::Inline { .. } => 1,
            Lanes::Pipelined { .. } => PIPELINE_DEPTH,
            Lanes::Pool(pool) => pool.workers.len(),
        }
    }

    /// The handler's own thread, when records are handled on the tick's thread one at
    /// a time: the tick then calls it directly, with no vectors.
    pub(super) fn inline(&mut self) -> Option<&mut dyn Handler> {
        match self {
            Lanes::Inline {
                handler,
                done: None,
            } if handler.batch_size() <= 1 => Some(*handler),
            _ => None,
        }
    }

    /// Records a batch of the handler takes at once.
    pub(super) fn batch_size(&mut self) -> usize {
        match self {
            Lanes::Inline { handler, .. } | Lanes::Pipelined { handler, .. } => {
                handler.batch_size().max(1)
            }
            Lanes::Pool(pool) => pool.batch_size,
        }
    }

    /// Hands a batch over (only when `free` says a lane is). An error means the batch
    /// was not handed over: its records were not tried.
    pub(super) fn send(
        &mut self,
        records: Vec<Record>,
        contexts: Vec<Context<'c>>,
    ) -> Result<(), HandlerError> {
        match self {
            Lanes::Inline { handler, done } => {
                let mut d = handle(*handler, &records, &contexts);
                d.records = records;
                *done = Some(d);
                Ok(())
            }
            Lanes::Pipelined { handler, out } => {
                let refs: Vec<&Record> = records.iter().collect();
                handler
                    .pipelined()
                    .expect("a pipelined lane's handler is pipelined")
                    .send(&refs, &contexts)?;
                out.push_back((records, Instant::now()));
                Ok(())
            }
            Lanes::Pool(pool) => {
                pool.send(Job { records, contexts });
                Ok(())
            }
        }
    }

    /// The next batch to come back, waiting for it; none when no batch is out. A
    /// pipelined handler answers its batches in order; a pool as they finish.
    pub(super) fn receive(&mut self) -> Option<Done> {
        match self {
            Lanes::Inline { done, .. } => done.take(),
            Lanes::Pipelined { handler, out } => {
                let (records, sent) = out.pop_front()?;
                let results = handler
                    .pipelined()
                    .expect("a pipelined lane's handler is pipelined")
                    .receive();
                Some(Done {
                    records,
                    results,
                    latency: sent.elapsed(),
                    ended: Instant::now(),
                })
            }
            Lanes::Pool(pool) => pool.receive(),
        }
    }

    /// A batch that came back already, without waiting: a pool's answers as they
    /// finish (a pipelined handler's wait for `receive`, in order).
    pub(super) fn ready(&mut self) -> Option<Done> {
        match self {
            Lanes::Pool(pool) => pool.ready(),
            _ => None,
        }
    }
}

/// Workers on threads of the tick's scope, each with its own handler.
pub(super) struct Pool<'c> {
    /// One queue per worker; a worker ends when its queue is dropped.
    workers: Vec<mpsc::Sender<Job<'c>>>,
    idle: Vec<usize>,
    done: mpsc::Receiver<(usize, Done)>,
    batch_size: usize,
}

impl<'c> Pool<'c> {
    fn start<'scope>(
        scope: &'scope Scope<'scope, 'c>,
        handlers: Vec<Box<dyn Handler + Send + 'c>>,
    ) -> Self {
        let batch_size = handlers.first().map_or(1, |h| h.batch_size().max(1));
        let (done_tx, done) = mpsc::channel();
        let mut workers = Vec::with_capacity(handlers.len());
        for (i, mut handler) in handlers.into_iter().enumerate() {
            let (tx, jobs) = mpsc::channel::<Job<'c>>();
            let done_tx = done_tx.clone();
            // The tick's span, so that what a worker logs names its tier.
            let span = tracing::Span::current();
            scope.spawn(move || {
                let _in_span = span.enter();
                for job in jobs {
                    let mut d = handle(handler.as_mut(), &job.records, &job.contexts);
                    d.records = job.records;
                    // A handler that panicked may be in any state: this worker ends,
                    // and the tick, told so, hands out no more.
                    let panicked = matches!(d.results, Err(HandlerError::Panicked(_)));
                    if done_tx.send((i, d)).is_err() || panicked {
                        return;
                    }
                }
            });
            workers.push(tx);
        }
        let idle = (0..workers.len()).rev().collect();
        Pool {
            workers,
            idle,
            done,
            batch_size,
        }
    }

    fn send(&mut self, job: Job<'c>) {
        let worker = self
            .idle
            .pop()
            .expect("a batch goes only to an idle worker");
        self.workers[worker]
            .send(job)
            .expect("a worker lives as long as its queue");
    }

    fn ready(&mut self) -> Option<Done> {
        let (worker, done) = self.done.try_recv().ok()?;
        self.idle.push(worker);
        Some(done)
    }

    fn receive(&mut self) -> Option<Done> {
        if self.idle.len() == self.workers.len() {
            return None;
        }
        // Every worker answers each batch it took, a panic included (see `handle`).
        let (worker, done) = self.done.recv().ok()?;
        self.idle.push(worker);
        Some(done)
    }
}

//! A Rust closure as a handler, for users who embed the library.
//!
//! The closure is `Fn + Sync`, not `FnMut`: with `concurrency` above 1 the tick calls
//! it from several threads at once, by reference, so it can borrow what the caller
//! has (a client, a connection pool) without an `Arc` or a `'static` bound. State it
//! changes goes behind a `Mutex` or an atomic, as with rayon or a thread pool. A type
//! that must own per-thread state (a connection each) implements `Handler` and hands
//! out its own `worker`s instead.

use super::{Context, Handled, Handler, HandlerError, Outcome};
use crate::record::Record;

/// Wraps `Fn(&Record) -> Outcome`: the closure's outcome is the record's.
pub struct FnHandler<F>(pub F);

/// A worker of an `FnHandler`: the same closure, borrowed.
struct FnWorker<'f, F>(&'f F);

fn call<F: Fn(&Record) -> Outcome>(f: &F, record: &Record) -> Handled {
    let outcome = f(record);
    let detail: std::borrow::Cow<'static, str> = match &outcome {
        Outcome::Success => "returned success".into(),
        Outcome::Error => "returned error".into(),
        Outcome::Status(s) => format!("returned status {s}").into(),
    };
    Handled::new(outcome, detail)
}

impl<F: Fn(&Record) -> Outcome + Sync> Handler for FnHandler<F> {
    fn handle(&mut self, record: &Record, _ctx: &Context<'_>) -> Result<Handled, HandlerError> {
        Ok(call(&self.0, record))
    }

    fn worker(&self) -> Option<Box<dyn Handler + Send + '_>> {
        Some(Box::new(FnWorker(&self.0)))
    }
}

impl<F: Fn(&Record) -> Outcome + Sync> Handler for FnWorker<'_, F> {
    fn handle(&mut self, record: &Record, _ctx: &Context<'_>) -> Result<Handled, HandlerError> {
        Ok(call(self.0, record))
    }

    fn worker(&self) -> Option<Box<dyn Handler + Send + '_>> {
        Some(Box::new(FnWorker(self.0)))
    }
}

//! A Rust closure as a handler, for users who embed the library.

use super::{Context, Handled, Handler, HandlerError, Outcome};
use crate::record::Record;

/// Wraps `FnMut(&Record) -> Outcome`: the closure's outcome is the record's.
pub struct FnHandler<F>(pub F);

impl<F: FnMut(&Record) -> Outcome> Handler for FnHandler<F> {
    fn handle(&mut self, record: &Record, _ctx: &Context<'_>) -> Result<Handled, HandlerError> {
        let outcome = (self.0)(record);
        let detail = match &outcome {
            Outcome::Success => "returned success".to_string(),
            Outcome::Error => "returned error".to_string(),
            Outcome::Status(s) => format!("returned status {s}"),
        };
        Ok(Handled::new(outcome, detail))
    }
}

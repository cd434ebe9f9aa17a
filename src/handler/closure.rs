//! A Rust closure as a handler, for users who embed the library.

use super::{Context, Handled, Handler, HandlerError, Outcome};
use crate::record::Record;

/// Wraps `FnMut(&Record) -> Outcome`: the closure's outcome is the record's.
pub struct FnHandler<F>(pub F);

impl<F: FnMut(&Record) -> Outcome> Handler for FnHandler<F> {
    fn handle(&mut self, record: &Record, _ctx: &Context<'_>) -> Result<Handled, HandlerError> {
        let outcome = (self.0)(record);
        let detail: std::borrow::Cow<'static, str> = match &outcome {
            Outcome::Success => "returned success".into(),
            Outcome::Error => "returned error".into(),
            Outcome::Status(s) => format!("returned status {s}").into(),
        };
        Ok(Handled::new(outcome, detail))
    }
}

//! A batch as the batch handler keeps it between sending its lines and filing the last
//! of its answers: what to send again to a new process, whom an answer belongs to, and
//! since when its records' time runs.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use super::{Ending, Handled};
use crate::record::Scalar;

/// A batch sent and not yet fully answered.
pub(super) struct Sent {
    /// The lines as written, and where each record's line ends: the records still
    /// waiting are sent again after a restart they did not cause.
    pub(super) lines: Arc<[u8]>,
    pub(super) ends: Vec<usize>,
    /// The place in the batch of each record still waiting, by its id.
    pub(super) waiting: HashMap<Scalar, usize>,
    pub(super) answers: Vec<Option<Handled>>,
    /// Why the records still waiting will get no answer, and how their work ended.
    pub(super) ended: Option<(String, Ending)>,
    /// When its lines went to the process.
    pub(super) sent_at: Instant,
}

impl Sent {
    /// The lines of the records still waiting, in the batch's order.
    pub(super) fn unanswered_lines(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for (i, answer) in self.answers.iter().enumerate() {
            if answer.is_none() {
                let start = if i == 0 { 0 } else { self.ends[i - 1] };
                out.extend_from_slice(&self.lines[start..self.ends[i]]);
            }
        }
        out
    }
}

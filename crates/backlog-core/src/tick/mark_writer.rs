//! The thread that writes a tick's groups of marks on the store's second connection
//! (`Store::mark_writer`) while the tick takes the next pages: two groups out at
//! most, each written group handed back, in order, to be settled. A group the
//! database refused is said at once (`refused`), not when the tick next sends one: by
//! then it would have handed out more records whose marks cannot be written.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;

use crate::store::{Mark, MarkWriter, StoreError};

/// A group of marks and whether each succeeded.
type Group = (Vec<Mark>, Vec<bool>);

/// A group written: the places of its lost marks, or why it could not be written.
pub(super) type Written = (Vec<Mark>, Vec<bool>, Result<Vec<usize>, StoreError>);

/// Groups that may be out at once: one being written, and the next waiting for the
/// connection, so that the tick hands out on while a write's round trips go (on a
/// link of 200 ms, six of them a group); the tick waits only for a third.
const OUT_AT_MOST: usize = 2;

/// The thread that writes groups on the store's second connection (`Marks::open_writer`).
pub(super) struct Writer {
    groups: mpsc::Sender<Group>,
    done: mpsc::Receiver<Written>,
    /// Groups sent and not yet taken back.
    out: usize,
    /// Set by the thread as soon as a group could not be written.
    refused: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

impl Writer {
    /// Writes each group it is sent with `writer`, on a thread of its own, in order,
    /// until the channel closes.
    pub(super) fn start(mut writer: Box<dyn MarkWriter>, owner: &str) -> Self {
        let (groups, to_write) = mpsc::channel::<Group>();
        let (written, done) = mpsc::channel();
        let owner = owner.to_string();
        let refused = Arc::new(AtomicBool::new(false));
        let said = Arc::clone(&refused);
        let span = tracing::Span::current();
        let thread = std::thread::spawn(move || {
            let _in_span = span.enter();
            for (marks, succeeded) in to_write {
                let lost = writer.mark(&owner, &marks);
                if let Err(e) = &lost {
                    said.store(true, Ordering::Release);
                    let group = crate::plural::count(marks.len(), "mark", "marks");
                    tracing::debug!("a group of {group} was refused: {e}");
                }
                if written.send((marks, succeeded, lost)).is_err() {
                    return;
                }
            }
        });
        Writer {
            groups,
            done,
            out: 0,
            refused,
            thread,
        }
    }

    /// Whether a group sent could not be written (its error comes back with it).
    pub(super) fn refused(&self) -> bool {
        self.refused.load(Ordering::Acquire)
    }

    /// The groups still out, once written; then the thread ends, and its connection
    /// closes.
    pub(super) fn end(mut self) -> Vec<Written> {
        let mut last = Vec::new();
        while self.out > 0 {
            last.push(self.next_written());
        }
        drop(self.groups);
        if let Err(panic) = self.thread.join() {
            std::panic::resume_unwind(panic);
        }
        last
    }

    /// Sends a group, and returns the groups written since the last call: at once,
    /// unless `OUT_AT_MOST` are out, when it waits for the oldest.
    pub(super) fn send(&mut self, marks: Vec<Mark>, succeeded: Vec<bool>) -> Vec<Written> {
        let mut written = Vec::new();
        while self.out > 0 {
            match self.done.try_recv() {
                Ok(group) => {
                    self.out -= 1;
                    written.push(group);
                }
                Err(_) => break,
            }
        }
        if self.out >= OUT_AT_MOST {
            written.push(self.next_written());
        }
        self.groups
            .send((marks, succeeded))
            .expect("the writer lives as long as the tick's scope");
        self.out += 1;
        written
    }

    /// The oldest group out, once written.
    fn next_written(&mut self) -> Written {
        self.out -= 1;
        self.done.recv().expect("the writer answers every group")
    }
}

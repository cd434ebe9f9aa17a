//! The thread that writes a tick's groups of marks on the store's second connection
//! (`Store::mark_writer`) while the tick takes the next pages: one group out at a
//! time, each written group handed back to be settled. A group the database refused
//! is said at once (`refused`), not when the tick next sends one: by then it would
//! have handed out another group's worth of records whose marks cannot be written.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;

use crate::store::{Mark, MarkWriter, StoreError};

/// A group of marks and whether each succeeded.
type Group = (Vec<Mark>, Vec<bool>);

/// A group written: the places of its lost marks, or why it could not be written.
pub(super) type Written = (Vec<Mark>, Vec<bool>, Result<Vec<usize>, StoreError>);

/// The thread that writes groups on the store's second connection (`Marks::open_writer`).
pub(super) struct Writer {
    groups: mpsc::Sender<Group>,
    done: mpsc::Receiver<Written>,
    /// A group is being written, or was and is not yet taken back.
    out: bool,
    /// The group out, written, found by `busy` before it was taken back.
    ready: Option<Written>,
    /// Set by the thread as soon as a group could not be written.
    refused: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

impl Writer {
    /// Writes each group it is sent with `writer`, on a thread of its own, until the
    /// channel closes.
    pub(super) fn start(mut writer: Box<dyn MarkWriter>, owner: &str) -> Self {
        let (groups, to_write) = mpsc::channel::<Group>();
        let (written, done) = mpsc::channel();
        let owner = owner.to_string();
        let refused = Arc::new(AtomicBool::new(false));
        let said = Arc::clone(&refused);
        let thread = std::thread::spawn(move || {
            for (marks, succeeded) in to_write {
                let lost = writer.mark(&owner, &marks);
                if let Err(e) = &lost {
                    said.store(true, Ordering::Release);
                    tracing::debug!("a group of {} marks was refused: {e}", marks.len());
                }
                if written.send((marks, succeeded, lost)).is_err() {
                    return;
                }
            }
        });
        Writer {
            groups,
            done,
            out: false,
            ready: None,
            refused,
            thread,
        }
    }

    /// Whether a group sent could not be written (its error comes back with it).
    pub(super) fn refused(&self) -> bool {
        self.refused.load(Ordering::Acquire)
    }

    /// The last group, once written; then the thread ends, and its connection closes.
    pub(super) fn end(mut self) -> Option<Written> {
        let last = self.wait();
        drop(self.groups);
        if let Err(panic) = self.thread.join() {
            std::panic::resume_unwind(panic);
        }
        last
    }

    /// Sends a group once the one before is written, and returns that one: at most
    /// one group is being written while the next fills.
    pub(super) fn send(&mut self, marks: Vec<Mark>, succeeded: Vec<bool>) -> Option<Written> {
        let before = self.wait();
        self.groups
            .send((marks, succeeded))
            .expect("the writer lives as long as the tick's scope");
        self.out = true;
        before
    }

    /// Whether the group out is still being written: the next group then goes on
    /// filling while the tick hands out, rather than wait for the write's round trips.
    pub(super) fn busy(&mut self) -> bool {
        if !self.out || self.ready.is_some() {
            return false;
        }
        match self.done.try_recv() {
            Ok(written) => {
                self.ready = Some(written);
                false
            }
            Err(mpsc::TryRecvError::Empty) => true,
            // The thread is gone: `wait` says so.
            Err(mpsc::TryRecvError::Disconnected) => false,
        }
    }

    /// The group being written, once it is; none when none is out.
    fn wait(&mut self) -> Option<Written> {
        if !self.out {
            return None;
        }
        self.out = false;
        if let Some(written) = self.ready.take() {
            return Some(written);
        }
        Some(self.done.recv().expect("the writer answers every group"))
    }
}

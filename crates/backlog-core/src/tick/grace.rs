//! The bound on a stopped tick's wait: once a stop is asked (SIGTERM, SIGINT), the
//! handlers already running get `handler.stop_grace` to finish and be marked; then
//! the tick stops them, so a deploy waits out the grace, never a long handler
//! timeout, and systemd's `TimeoutStopSec` (set above the grace) never kills a tick
//! in the middle of writing its marks. What the stopped handlers had is not marked:
//! their records stay pending, and the next tick takes them.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use super::heartbeat::HeartbeatThread;
use crate::duration;

/// How often the watch looks at the stop flag: a stop is seen within this.
const LOOK_EVERY: Duration = Duration::from_millis(50);

/// Watches `stop` until `done` says the tick's handlers have all come back (a message
/// or its sender dropped); once `stop` is set, waits `grace` more, then cancels the
/// handlers still running through the heartbeat's cancel flag. Runs on a thread of
/// the tick's scope.
pub(super) fn watch(
    stop: &AtomicBool,
    grace: Duration,
    heartbeat: &HeartbeatThread,
    done: &mpsc::Receiver<()>,
) {
    loop {
        match done.recv_timeout(LOOK_EVERY) {
            Err(mpsc::RecvTimeoutError::Timeout) if !stop.load(Ordering::Relaxed) => continue,
            Err(mpsc::RecvTimeoutError::Timeout) => break,
            _ => return,
        }
    }
    if let Err(mpsc::RecvTimeoutError::Timeout) = done.recv_timeout(grace) {
        tracing::warn!(
            "stopping: the handlers still running had handler.stop_grace ({}) to finish; they are stopped now, and their records stay pending for the next tick",
            duration::compact(grace)
        );
        heartbeat.cancel();
    }
}

//! Signals to a handler's process group: how a tick, its watchdog, the host registry
//! and the subreaper end what a handler started, whoever of them does it.

use rustix::process::{Pid, Signal, kill_process_group};

/// Sends `signal` to the process group `pgid`. An ESRCH (the group is gone) is the
/// expected, harmless answer; a group id is positive, and no other is signalled.
pub(super) fn signal_group(pgid: i32, signal: Signal) {
    if let Some(pgid) = Pid::from_raw(pgid.max(0)) {
        let _ = kill_process_group(pgid, signal);
    }
}

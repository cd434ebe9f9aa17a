//! Signals to a handler's process group: how a tick, its watchdog, the host registry
//! and the subreaper end what a handler started, whoever of them does it.

/// Sends `signal` to the process group `pgid`.
pub(super) fn signal_group(pgid: i32, signal: libc::c_int) {
    // SAFETY: kill(2) with a negative pid signals a process group; it has no memory
    // effects, and an ESRCH (the group is gone) is the expected, harmless answer.
    unsafe {
        libc::kill(-pgid, signal);
    }
}

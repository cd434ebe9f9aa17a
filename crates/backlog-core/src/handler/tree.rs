//! The handler's process tree as a whole: what a handler's construction sets up, and
//! what the end of the last handler of this process cleans up.
//!
//! Building a command or batch handler (which a tick does before it takes any record)
//! makes the process a child subreaper, starts the watchdog, and sweeps the host
//! registry of dead ticks, so that what a killed tick left on this host is dead before
//! its records are handed out again. Each handler holds a `Tree` token; when the last
//! token of the process is dropped (the tick ends), the orphans left are killed and
//! reaped and the registry file is trimmed.

use std::sync::Mutex;

use super::{registry, subreaper, watchdog};

/// How many handlers of this process hold the tree.
static HOLDERS: Mutex<usize> = Mutex::new(0);

/// A handler's hold on the process tree's set-up.
#[derive(Debug)]
pub(super) struct Tree(());

impl Tree {
    pub fn new() -> Tree {
        subreaper::become_subreaper();
        watchdog::start();
        registry::sweep_dead_ticks();
        Tree::hold()
    }

    fn hold() -> Tree {
        *HOLDERS.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        Tree(())
    }
}

impl Clone for Tree {
    fn clone(&self) -> Tree {
        Tree::hold()
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        let mut holders = HOLDERS.lock().unwrap_or_else(|e| e.into_inner());
        *holders -= 1;
        if *holders == 0 {
            subreaper::sweep_at_end();
            registry::trim_own();
        }
    }
}

//! `backlog` works through a database backlog on a progressive schedule: young records
//! are retried often, old ones rarely, with no extra columns in the user's table.
//!
//! This is the library of the `backlog` command, for a Rust program that works through
//! its backlog with a handler of its own: [`Backlog::open`] a schedule file, then one
//! tick with [`Backlog::process_backlog`], or every tier on its cadence, as `backlog
//! daemon` does, with [`Backlog::run`]. Features `sqlite` (default), `postgres` and
//! `mysql` link the drivers of the databases a program may name; `cli` builds the
//! command.
//!
//! The crates the API names are re-exported: [`chrono`] and [`serde_json`]. The enums
//! are `#[non_exhaustive]`: a `match` on one needs a `_` arm.

#![warn(missing_docs)]
#![doc = include_str!("../docs/library.md")]

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use backlog_core::duration;
use backlog_core::store::Store;
use backlog_core::tick::{TickOptions, open_store};

pub use backlog_core::chrono;
pub use backlog_core::serde_json;

pub use backlog_core::Error;
pub use backlog_core::handler::{
    Context, Ending, FnHandler, Handled, Handler, HandlerError, Outcome, Snooze,
};
pub use backlog_core::record::{Columns, Record, Scalar};
pub use backlog_core::store::StoreError;
pub use backlog_core::tick::TickSummary;

// What the `backlog` command shares with the library: the daemon and the ticks as it
// runs them, the alerts around them, `status`'s reading of the tiers. Public for the
// command's sake only; not the library's API.
#[doc(hidden)]
pub mod alert;
#[doc(hidden)]
pub mod exit_code;
#[doc(hidden)]
pub mod explain;
#[doc(hidden)]
pub mod failed_start;
#[doc(hidden)]
pub mod runner;
#[doc(hidden)]
pub mod status;
#[doc(hidden)]
pub mod ticks;

/// A schedule file and its database, open: the table checked, the tool's tables made.
pub struct Backlog {
    config: backlog_core::Config,
    store: Box<dyn Store>,
}

impl std::fmt::Debug for Backlog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Backlog")
            .field("file", &self.config.path)
            .field("table", &self.config.table.name)
            .finish_non_exhaustive()
    }
}

impl Backlog {
    /// Reads the schedule file at `path` as `backlog` does (`${VAR}` from the
    /// environment, `BACKLOG_DATABASE_URL` in place of its URL when set), opens its
    /// database with the drivers of this build's features, and checks the table and
    /// its columns. The file's `[handler]` may be left out: the program brings its
    /// handler, and the section's other keys (concurrency, rate, timeout, the
    /// breaker) apply to it.
    pub fn open(path: impl AsRef<Path>) -> Result<Backlog, Error> {
        install_drivers();
        let config = backlog_core::Config::load_for_program(path.as_ref())?;
        let mut store = open_store(&config)?;
        store.inspect().map_err(Error::store(store.describe()))?;
        Ok(Backlog { config, store })
    }

    /// The table's name, as the schedule file gives it.
    pub fn table(&self) -> &str {
        &self.config.table.name
    }

    /// The line `backlog run` prints for a tick's summary: `tier 1 (7d every 1h), ages
    /// 0 to 7d: selected 3, succeeded 3, failed 0, skipped 0 in 0.01s`.
    pub fn line(&self, summary: &TickSummary) -> String {
        summary.line(&self.config.table)
    }

    /// One tick of the tier of `window` (a window of the file's `[[tier]]`s, like
    /// `backlog run --window 7d`): each record of its band goes to `handler`, its
    /// answer is marked, and the summary counts them. A record whose handler failed is
    /// counted, not an error.
    pub fn process_backlog<F>(&mut self, window: Duration, handler: F) -> Result<TickSummary, Error>
    where
        F: Fn(&Record) -> Outcome + Sync,
    {
        self.process_with(window, &mut FnHandler(handler))
    }

    /// As [`Backlog::process_backlog`], with a [`Handler`] of the program's own.
    pub fn process_with(
        &mut self,
        window: Duration,
        handler: &mut dyn Handler,
    ) -> Result<TickSummary, Error> {
        if self.config.schedule.tier(window).is_none() {
            return Err(Error::Usage(format!(
                "window {} is no tier's window in {} (its windows: {}{}); give one of them",
                duration::compact(window),
                self.config.path.display(),
                self.config.schedule.windows().join(", "),
                self.config.schedule.did_you_mean_window(window)
            )));
        }
        let now = ticks::shared_now(&self.config, self.store.as_mut())?;
        let opts = TickOptions::for_config(&self.config, window, now);
        ticks::run_tick_on(
            &self.config,
            self.store.as_mut(),
            &opts,
            Some(handler),
            &mut |_| {},
        )
    }

    /// Fires every tier on its cadence, as `backlog daemon` does, until `stop` is set:
    /// a slot missed while the program was down is made up at start, a tick that
    /// ended early is finished, runners of one backlog on several hosts share its
    /// records, the schedule file is read again when it changes. Each tick runs on a
    /// thread of its own, with `concurrency` more per tick. Once `stop` is set, no
    /// record is handed out; handlers running finish, and `run` returns.
    pub fn run<F>(&self, handler: F, stop: &AtomicBool) -> Result<(), Error>
    where
        F: Fn(&Record) -> Outcome + Sync,
    {
        self.run_with(&FnHandler(handler), stop)
    }

    /// As [`Backlog::run`], with a [`Handler`] of the program's own: each tick works
    /// with the handler [`Handler::worker`] gives.
    pub fn run_with(&self, handler: &(dyn Handler + Sync), stop: &AtomicBool) -> Result<(), Error> {
        let signals = runner::Signals {
            program_stop: Some(stop),
            ..Default::default()
        };
        let seed = u64::from(std::process::id()) ^ chrono::Utc::now().timestamp_micros() as u64;
        runner::run_daemon(
            &self.config.path,
            &signals,
            runner::Handlers::Program(handler),
            seed,
        )
    }
}

/// Tells the core how to open the databases this build links.
fn install_drivers() {
    #[cfg(feature = "sqlite")]
    backlog_sqlite::install();
    #[cfg(feature = "postgres")]
    backlog_postgres::install();
    #[cfg(feature = "mysql")]
    backlog_mysql::install();
}

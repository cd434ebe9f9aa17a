//! `backlog` works through a database backlog on a progressive schedule: young records
//! are retried often, old ones rarely, with no extra columns in the user's table.
//!
//! The pieces a Rust user needs: load a [`Config`] (or build a [`Schedule`] and a
//! [`TableConfig`]), open a [`Store`] ([`open_store`], or [`store::SqliteStore::open`]),
//! and call [`process_backlog`] with a [`Handler`], such as a closure wrapped in
//! [`FnHandler`]. Every fallible call returns [`Error`] or an error that converts into
//! it, so `?` works in a function returning `Result<_, backlog::Error>`.
//!
//! ```no_run
//! fn main() -> Result<(), backlog::Error> {
//!     let config = backlog::Config::load("backlog.toml".as_ref())?;
//!     let mut store = backlog::open_store(&config)?;
//!     let mut handler = backlog::FnHandler(|record: &backlog::Record| {
//!         println!("{} {}", record.id, record.columns["PAYLOAD"]);
//!         backlog::Outcome::Success
//!     });
//!     let week = std::time::Duration::from_secs(7 * 86_400);
//!     let opts = backlog::TickOptions::for_config(&config, week, backlog::chrono::Utc::now());
//!     let summary = backlog::process_backlog(
//!         &config.schedule,
//!         &config.table,
//!         store.as_mut(),
//!         &mut handler,
//!         &opts,
//!         &mut |_| {},
//!     )?;
//!     println!("{}", summary.line(&config.table));
//!     Ok(())
//! }
//! ```
//!
//! A handler sees a [`Record`] (its id as a [`Scalar`], its status, its inserted-at
//! time and its [`Columns`]) and a [`Context`] (the tier's window, the record's
//! age, and a `cancel` flag), and answers with an [`Outcome`] ([`Handled`] with a
//! detail, for a [`Handler`] of its own). The crates the public API names are
//! re-exported: [`chrono`] (times, [`TickOptions::new`]), [`chrono_tz`]
//! ([`Schedule::timezone`]) and [`serde_json`] (the values of [`Columns`]), so a user
//! needs no version of them in step with this one. See `examples/rust_handler.rs`.
//!
//! Besides the root, the public modules are [`config`] (the schedule file and its
//! sections), [`handler`], [`schedule`] and [`store`]; the rest of the crate is the
//! program's own. The enums and the option structs are `#[non_exhaustive]`: a `match`
//! needs a `_` arm, and a struct is built by its constructor (or `Default`), then
//! changed field by field.
//!
//! The `cli` feature, on by default, adds the `backlog` command and the `cli` module
//! with what only it needs (clap, progress bars, log output, signal handling, SVG
//! plots); with `default-features = false` a tick builds without them. The databases
//! are features too, `sqlite`, `postgres` and `mysql`, all three on by default: a
//! library user names the ones it needs (`default-features = false, features =
//! ["postgres"]`), and a schedule file whose URL names another is refused with the
//! feature to add.

#![warn(missing_docs)]

#[cfg(not(any(feature = "sqlite", feature = "postgres", feature = "mysql")))]
compile_error!(
    "backlog needs at least one database: enable the cargo feature sqlite, postgres or mysql"
);

// The library's API: the modules below that are `pub`, and the re-exports at the end.
// The rest is the program's own, `pub(crate)`; the modules only the `backlog` command
// uses are built with the `cli` feature alone.
pub mod config;
pub mod handler;
pub mod schedule;
pub mod store;

// The `backlog` command's own parts, public for `main.rs` only: not the library's API
// (clap reads these types' doc comments as help text, so they stay as terse as the
// command line wants them).
#[cfg(feature = "cli")]
#[doc(hidden)]
pub mod cli;

mod error;
mod record;
mod tick;

pub(crate) mod backoff;
#[cfg(any(feature = "postgres", feature = "mysql"))]
pub(crate) mod causes;
pub(crate) mod digest;
pub(crate) mod duration;
pub(crate) mod explain;
pub(crate) mod rate;
pub(crate) mod timestamp;

#[cfg(feature = "cli")]
pub(crate) mod account;
#[cfg(feature = "cli")]
pub(crate) mod alert;
#[cfg(feature = "cli")]
pub(crate) mod crontab;
#[cfg(feature = "cli")]
pub(crate) mod demo;
#[cfg(feature = "cli")]
pub(crate) mod doctor;
#[cfg(feature = "cli")]
pub(crate) mod metrics;
#[cfg(feature = "cli")]
pub(crate) mod operate;
#[cfg(feature = "cli")]
pub(crate) mod plot;
#[cfg(feature = "cli")]
pub(crate) mod runner;
#[cfg(feature = "cli")]
pub(crate) mod status;
#[cfg(feature = "cli")]
pub(crate) mod web;

pub use chrono;
pub use chrono_tz;
pub use serde_json;

pub use config::{Config, TableConfig};
pub use error::{Error, ExitCode};
pub use handler::{
    CommandHandler, Context, Ending, FnHandler, Handled, Handler, HandlerError, Outcome,
};
pub use rate::Rate;
pub use record::{Columns, Record, Scalar};
pub use schedule::{BandMode, Schedule};
pub use store::Store;
pub use tick::{BandSummary, Event, TickOptions, TickSummary, open_store, process_backlog};

//! The core of `backlog`, which works through a database backlog on a progressive
//! schedule: young records are retried often, old ones rarely, with no extra columns
//! in the user's table.
//!
//! This crate holds the schedule, the schedule file, the tick, the handlers and the
//! store's protocol; it links no database client. A database is a crate of its own
//! (`backlog-sqlite`, `backlog-postgres`, `backlog-mysql`) that implements the store's
//! traits and a [`store::driver::Driver`], which the program installs before it loads
//! a schedule file. Programs take the `backlog` crate, the facade over this one and the
//! databases (docs/library.md); this crate's API follows what the database crates and
//! the `backlog` command need.
//!
//! The crates the public API names are re-exported: [`chrono`], [`chrono_tz`] and
//! [`serde_json`], so a user needs no version of them in step with this one. The enums
//! and the option structs are `#[non_exhaustive]`: a `match` needs a `_` arm, and a
//! struct is built by its constructor (or `Default`), then changed field by field.

#![warn(missing_docs)]

pub mod backoff;
pub mod causes;
pub mod config;
pub mod curve;
pub mod digest;
pub mod duration;
pub mod error;
pub mod handler;
pub mod pace;
pub mod plural;
pub mod rate;
pub mod record;
pub mod schedule;
pub mod store;
pub mod suggest;
pub mod tick;
pub mod timestamp;
pub mod trace_context;

pub use chrono;
pub use chrono_tz;
pub use serde_json;

pub use config::{Config, TableConfig};
pub use error::Error;
pub use handler::{
    CommandHandler, Context, Ending, FnHandler, Handled, Handler, HandlerError, Outcome,
};
pub use rate::Rate;
pub use record::{Columns, Record, Scalar};
pub use schedule::{BandMode, Schedule};
pub use store::Store;
pub use tick::{BandSummary, Event, TickOptions, TickSummary, open_store, process_backlog};

//! `backlog` works through a database backlog on a progressive schedule: young records
//! are retried often, old ones rarely, with no extra columns in the user's table.
//!
//! The pieces a Rust user needs: load a [`Config`] (or build a [`Schedule`] and a
//! [`TableConfig`]), open a [`Store`], and call [`process_backlog`] with a [`Handler`],
//! such as a closure wrapped in [`FnHandler`]. See `examples/rust_handler.rs`.
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let config = backlog::Config::load("backlog.toml".as_ref())?;
//! let mut store = backlog::store::open(&config.database, &config.table)?;
//! let mut handler = backlog::FnHandler(|record: &backlog::Record| backlog::Outcome::Success);
//! let opts = backlog::TickOptions::new(std::time::Duration::from_secs(7 * 86_400), chrono::Utc::now());
//! let summary = backlog::process_backlog(&config.schedule, &config.table, store.as_mut(), &mut handler, &opts, &mut |_| {})?;
//! # Ok(())
//! # }
//! ```

pub mod account;
pub mod backoff;
pub mod causes;
pub mod cli;
pub mod config;
pub mod crontab;
pub mod demo;
pub mod doctor;
pub mod duration;
pub mod error;
pub mod explain;
pub mod handler;
pub mod rate;
pub mod record;
pub mod runner;
pub mod schedule;
pub mod status;
pub mod store;
pub mod tick;
pub mod timestamp;

pub use config::{Config, TableConfig};
pub use error::{Error, ExitCode};
pub use handler::{CommandHandler, FnHandler, Handled, Handler, Outcome};
pub use record::{Columns, Record, Scalar};
pub use schedule::{BandMode, Schedule};
pub use store::Store;
pub use tick::{TickOptions, TickSummary, process_backlog};

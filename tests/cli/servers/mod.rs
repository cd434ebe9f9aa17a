//! The conformance suite of the two servers, PostgreSQL and MySQL (MariaDB): what the
//! product promises alike on both (docs/postgresql.md, docs/mysql.md), each test body
//! run on each (`on_servers!`). What only one server has is in `postgresql` and
//! `mysql`; `server` holds the facts that differ (URL words, variables, types), so that
//! a body never names its server but to read what the server says in its own words.

mod clock;
mod connection;
mod handler_log;
mod kill_storm;
mod link;
mod outage;
mod own_tables;
mod pages;
mod partition;
mod plan;
mod reaches;
mod runners;
pub mod server;
mod slow_link;
mod tls;
mod types;

pub use runners::{
    all_success, batch_schedule, drain, output_within, output_within_a_minute, pending_records,
    run_log_sum, spawn_run,
};

//! Integration tests: the real `backlog` binary on real SQLite files and real
//! PostgreSQL and MariaDB servers.

mod alert;
mod backoff;
mod bad_input;
mod batch;
mod completions;
mod concurrency;
mod considerate;
mod crontab;
mod daemon;
mod dashboard;
mod dashboard_browser;
mod dashboard_bulk;
mod doctor;
mod explain;
mod filters;
mod formats;
mod give_up;
mod harness;
mod help;
mod hooks;
mod lapse;
mod logging;
mod metrics;
mod mysql;
mod operate;
mod pipes;
mod pool;
mod postgresql;
mod process_tree;
mod query_plan;
mod retry;
mod schedule_file;
mod servers;
mod snooze;
mod tick;

//! The dashboard as a person on call meets it: `serve --help` says what the dashboard
//! does. (A part of `dashboard_bulk.rs`, whose served backlog it shares.)

use crate::harness::Env;

/// `serve --help` names every action the dashboard takes.
#[test]
fn serve_help_names_its_actions() {
    let env = Env::new();
    let help = env.backlog(&["serve", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    for action in ["retry", "snooze", "give up", "pause", "resume"] {
        assert!(help.contains(action), "{action}: {help}");
    }
}

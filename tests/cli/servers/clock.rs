//! The clock is the server's: `status` and `run` take the time from it, and a daemon
//! on a host whose clock is wrong fires its slots by it. Each test body runs on both
//! servers.

use std::process::Stdio;

use crate::harness::{Backend, Env, Running, Schedule, recording_handler};
use crate::tick::wait_for;

/// Without `--now`, `status` (and `run`) take the time from the database server: here,
/// on the same machine, within a minute of the host's.
fn the_clock_is_the_database_servers(backend: Backend) {
    let env = Env::on(backend);
    env.classic();
    env.write_schedule(&Schedule::default());
    let out = env.backlog(&["status", "--json"]).assert().success();
    let status: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let now: chrono::DateTime<chrono::Utc> = status["now"].as_str().unwrap().parse().unwrap();
    let skew = (chrono::Utc::now() - now).num_seconds().abs();
    assert!(skew < 60, "{now} is {skew} s off");
}

/// A daemon on a host whose clock is two days slow (`faketime`) goes by the database
/// server's: its slots fire, its bands hold today's records, and the run log's clock is
/// the server's, as for `backlog run`.
fn a_daemon_on_a_slow_host_goes_by_the_servers_clock(backend: Backend) {
    let env = Env::on(backend);
    env.classic_at(chrono::Utc::now());
    env.write_schedule(&Schedule {
        tiers: "\n[[tier]]\nwindow = \"1d\"\nevery = \"1h\"\n",
        ..Schedule::default()
    });
    env.write_handler("handler.sh", &recording_handler(&[]));
    // The library itself rather than the `faketime` wrapper, so that the signal to stop
    // reaches the daemon.
    let faketime = std::fs::read_dir("/usr/lib")
        .unwrap()
        .filter_map(|e| Some(e.ok()?.path().join("faketime/libfaketimeMT.so.1")))
        .find(|p| p.exists())
        .expect("libfaketime: Debian's faketime package, which .ci/run installs");
    let log = std::fs::File::create(env.path("daemon.log")).unwrap();
    let daemon = Running::spawn(
        env.command()
            .arg("daemon")
            .env("LD_PRELOAD", faketime)
            .env("FAKETIME", "-2d")
            // The monotonic clock stays true: leases and timeouts are measured on it.
            .env("FAKETIME_DONT_FAKE_MONOTONIC", "1")
            .stdout(Stdio::null())
            .stderr(log),
    );
    // Never ticked: the tier's slot counts as missed and fires at once.
    wait_for(|| env.with_status("SUCCESS") == 2);
    let out = daemon.terminate();
    let text = std::fs::read_to_string(env.path("daemon.log")).unwrap_or_default();
    assert!(out.status.success(), "{text}");
    assert_eq!(env.take_calls(), [1, 2], "{text}");
    let skew = env.count(&format!(
        "SELECT CAST(max(abs({})) AS BIGINT) FROM {}",
        match backend {
            Backend::Mysql => "TIMESTAMPDIFF(SECOND, clock, UTC_TIMESTAMP())",
            _ => "EXTRACT(EPOCH FROM clock - now())",
        },
        env.own("backlog_runs")
    ));
    assert!(
        skew < 60,
        "the run log's clock is {skew} s from the server's"
    );
}

crate::on_servers!(
    the_clock_is_the_database_servers,
    a_daemon_on_a_slow_host_goes_by_the_servers_clock,
);

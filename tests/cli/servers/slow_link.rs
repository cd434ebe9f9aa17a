//! A fleet over a slow link: two runners reach the server through a link of the
//! test's own (`link::SlowLink`) that adds 100 ms each way, a 200 ms round trip as
//! between regions, and every 5 s stalls one of their connections for 1.5 s. Its
//! throughput against a direct link is `examples/bench_fleet.rs`'s (`BENCH_LINKS`).

use std::net::Ipv4Addr;
use std::process::Stdio;
use std::time::Duration;

use crate::harness::{Backend, Env, NOW, Schedule};
use crate::servers::handler_log::{self, HANDLER};
use crate::servers::link::{Shape, SlowLink, server_of};
use crate::servers::{all_success, drain, output_within, pending_records, run_log_sum};

const RECORDS: i64 = 24;

/// What the link does. Its stalls are waited out within the lease (30 s: a beat every
/// 7.5 s, of five round trips, and a stall or two stay under half of it, where the
/// tick would stop handing out).
const SHAPE: Shape = Shape {
    delay: Duration::from_millis(100),
    stall_every: Some(Duration::from_secs(5)),
    stall_for: Duration::from_millis(1500),
};

fn a_fleet_over_a_slow_link_hands_out_each_record_once_and_marks_them_all(backend: Backend) {
    let env = Env::alone(backend);
    pending_records(&env, RECORDS);
    env.write_schedule(&Schedule {
        timeout: "60s",
        handler_extra: "concurrency = 4",
        database_extra: "claim_lease = \"30s\"",
        ..Schedule::default()
    });
    env.write_handler("handler.sh", HANDLER);
    let link = SlowLink::start(Ipv4Addr::LOCALHOST.into(), server_of(&env.url()), SHAPE);
    let text = std::fs::read_to_string(env.path("backlog.toml")).unwrap();
    std::fs::write(env.path("slow.toml"), link.instead_of(&text, &env.url())).unwrap();
    let runners: Vec<_> = (0..2)
        .map(|_| {
            let mut cmd = env.command();
            cmd.args([
                "run",
                "--schedule",
                "slow.toml",
                "--window",
                "1d",
                "--now",
                NOW,
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
            let mut child = cmd.spawn().expect("a runner starts");
            let said = drain(&mut child);
            (child, said)
        })
        .collect();
    for (child, said) in runners {
        let out = output_within(child, Duration::from_secs(180));
        let said = said.join().unwrap();
        assert!(out.status.success(), "a runner over the slow link: {said}");
        assert!(
            !said.contains("WARN"),
            "a runner over the slow link: {said}"
        );
    }
    assert!(link.stalls() > 0, "the link stalled no connection");
    let log = std::fs::read_to_string(env.path("handler.log")).unwrap();
    // Every hold was renewed in time: no record went to a second handler, even after
    // its first.
    assert_eq!(
        handler_log::one_at_a_time(&log),
        0,
        "records done twice over a slow link: {log}"
    );
    assert!(all_success(&env), "records left pending over a slow link");
    assert_eq!(env.holds_left(), 0, "no record left held");
    let sum = |column: &str| run_log_sum(&env, column);
    assert_eq!(sum("succeeded"), RECORDS, "the run log's successes");
    assert_eq!(sum("lost"), 0, "the run log's lost marks");
    env.assert_intact();
}

crate::on_servers!(a_fleet_over_a_slow_link_hands_out_each_record_once_and_marks_them_all);

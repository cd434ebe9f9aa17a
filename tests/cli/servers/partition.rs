//! A runner cut off from its database mid-tick. It runs on a host of the test's own:
//! a network namespace joined to this one by a veth pair, which reaches the test
//! server through a relay on this side of the pair (the servers listen on loopback
//! only). Its link goes down for 12 s while its handlers run, some of them longer
//! than the 4 s lease; another runner, on this side, takes the band meanwhile; then
//! the link comes back. The namespace is made and removed by the test, as root (`bash
//! .ci/run` runs as root); without root the test fails, saying so.

use std::net::Ipv4Addr;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::harness::{Backend, Env, NOW, Schedule};
use crate::servers::handler_log::{self, HANDLER};
use crate::servers::link::{Shape, SlowLink, server_of};
use crate::servers::{all_success, drain, output_within_a_minute, pending_records, run_log_sum};

/// The records, newest first by id.
const RECORDS: i64 = 200;

/// How long the far runner's link is down: four leases, past TCP's sixth resend (at 12.6 s).
const CUT: Duration = Duration::from_secs(16);

/// Runs `ip` with `args`, failing the test with its words if it fails.
fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("ip runs");
    assert!(
        out.status.success(),
        "ip {}: {} (the test hosts take root and iproute2, as bash .ci/run has)",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    );
}

/// A host of the test's own: a network namespace, its end of a veth pair at
/// `10.X.Y.2/30` and ours at `.1`, removed (with the pair) when dropped.
struct Host {
    ns: String,
    ours: String,
    address: Ipv4Addr,
}

impl Host {
    fn new() -> Host {
        static N: AtomicU32 = AtomicU32::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        // Names of at most 15 characters, and a subnet no other test process uses.
        let tag = format!("{}{n}", pid % 100_000);
        let (ns, ours, theirs) = (
            format!("blns{tag}"),
            format!("blo{tag}"),
            format!("blt{tag}"),
        );
        let address = Ipv4Addr::new(
            10,
            100 + (n % 100) as u8,
            (pid >> 6) as u8,
            ((pid & 63) * 4) as u8,
        );
        let [a, b, c, d] = address.octets();
        let (here, there) = (
            format!("{a}.{b}.{c}.{}/30", d + 1),
            format!("{a}.{b}.{c}.{}/30", d + 2),
        );
        ip(&["netns", "add", &ns]);
        let host = Host {
            ns: ns.clone(),
            ours: ours.clone(),
            address: Ipv4Addr::new(a, b, c, d + 1),
        };
        ip(&[
            "link", "add", &ours, "type", "veth", "peer", "name", &theirs,
        ]);
        ip(&["link", "set", &theirs, "netns", &ns]);
        ip(&["addr", "add", &here, "dev", &ours]);
        ip(&["link", "set", &ours, "up"]);
        ip(&["-n", &ns, "addr", "add", &there, "dev", &theirs]);
        ip(&["-n", &ns, "link", "set", &theirs, "up"]);
        ip(&["-n", &ns, "link", "set", "lo", "up"]);
        host
    }

    /// The link down: what either side sends is dropped, as on a cut cable; their
    /// connections stall (no reset), until `mend`.
    fn cut(&self) {
        ip(&["link", "set", &self.ours, "down"]);
    }

    fn mend(&self) {
        ip(&["link", "set", &self.ours, "up"]);
    }

    /// `cmd` run on the host: through `ip netns exec`, with its folder and
    /// environment.
    fn run(&self, cmd: &Command) -> Command {
        let mut on = Command::new("ip");
        on.args(["netns", "exec", &self.ns])
            .arg(cmd.get_program())
            .args(cmd.get_args());
        if let Some(dir) = cmd.get_current_dir() {
            on.current_dir(dir);
        }
        for (key, value) in cmd.get_envs() {
            match value {
                Some(v) => on.env(key, v),
                None => on.env_remove(key),
            };
        }
        on
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.ns]).status();
    }
}

fn a_runner_cut_off_mid_tick_hands_out_nothing_and_its_late_marks_are_refused(backend: Backend) {
    let env = Env::alone(backend);
    pending_records(&env, RECORDS);
    env.write_schedule(&Schedule {
        timeout: "60s",
        handler_extra: "concurrency = 4",
        database_extra: "claim_lease = \"4s\"",
        ..Schedule::default()
    });
    env.write_handler("handler.sh", HANDLER);
    let host = Host::new();
    // TCP's resends on the host at most a second apart, where the kernel can (Linux
    // 6.15 and later): the runner then sees the link back within about a second,
    // whatever the cut's length (docs/operating.md).
    let capped = std::path::Path::new("/proc/sys/net/ipv4/tcp_rto_max_ms").exists();
    if capped {
        // Written from inside: /proc/sys/net is the namespace's of who reads it.
        let mut cap = Command::new("sh");
        cap.args(["-c", "echo 1000 > /proc/sys/net/ipv4/tcp_rto_max_ms"]);
        let status = host.run(&cap).status().expect("sh runs");
        assert!(status.success(), "net.ipv4.tcp_rto_max_ms on the host");
    } else {
        println!("this kernel has no net.ipv4.tcp_rto_max_ms: the runner's return is TCP's");
    }
    let relay = SlowLink::start(host.address.into(), server_of(&env.url()), Shape::DIRECT);
    // The cut-off runner's file: the same, through the relay.
    let text = std::fs::read_to_string(env.path("backlog.toml")).unwrap();
    std::fs::write(env.path("far.toml"), relay.instead_of(&text, &env.url())).unwrap();
    let tick = |schedule: &str, on: Option<&Host>| {
        let mut cmd = env.command();
        cmd.args([
            "run",
            "--schedule",
            schedule,
            "--window",
            "1d",
            "--now",
            NOW,
        ]);
        // Piped here: `Host::run` carries over the program, folder and environment.
        let mut cmd = match on {
            Some(host) => host.run(&cmd),
            None => cmd,
        };
        cmd.stdout(Stdio::null()).stderr(Stdio::piped());
        cmd.spawn().expect("a tick starts")
    };
    let log = || std::fs::read_to_string(env.path("handler.log")).unwrap_or_default();

    let mut far = tick("far.toml", Some(&host));
    let far_said = drain(&mut far);
    let started = Instant::now();
    while log().matches("start ").count() < 20 {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the far runner handed out nothing: {}",
            log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    host.cut();
    let cut_at = Instant::now();
    // Past its lease, the band is another runner's to take.
    std::thread::sleep(Duration::from_secs(6));
    let mut near = tick("backlog.toml", None);
    let near_said = drain(&mut near);
    std::thread::sleep(CUT.saturating_sub(cut_at.elapsed()));
    host.mend();
    let mended_at = Instant::now();
    let far_out = output_within_a_minute(far);
    let far_ended = mended_at.elapsed();
    let far_said = far_said.join().unwrap();
    let near_out = output_within_a_minute(near);
    let near_said = near_said.join().unwrap();
    assert!(near_out.status.success(), "the near runner: {near_said}");
    assert_eq!(far_out.status.code(), Some(8), "the far runner: {far_said}");
    let stale: Vec<&str> = far_said
        .lines()
        .filter(|l| l.contains("without renewal"))
        .collect();
    assert!(
        !stale.is_empty(),
        "the far runner says its holds lapsed: {far_said}"
    );
    // Its late marks are refused where the near runner took the records: one line.
    let lost: Vec<&str> = far_said
        .lines()
        .filter(|l| l.contains("marks lost: records"))
        .collect();
    assert!(lost.len() <= 1, "{far_said}");
    assert!(
        !capped || far_ended < Duration::from_secs(5),
        "the far runner ended {far_ended:?} after the link came back, its resends a second apart"
    );
    println!(
        "the far runner ended {far_ended:?} after the link came back: {}",
        far_said.lines().collect::<Vec<_>>().join(" | ")
    );

    // What is left (the far runner's lost marks, failures kept) the next ticks finish.
    let deadline = Instant::now() + Duration::from_secs(60);
    while !all_success(&env) {
        assert!(
            Instant::now() < deadline,
            "records still pending a minute after the cut"
        );
        let mut cmd = env.command();
        cmd.args(["run", "--window", "1d", "--now", NOW, "--retry-failed"]);
        let out = output_within_a_minute(
            cmd.stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap(),
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let second_hands = handler_log::one_at_a_time(&log());
    assert!(
        second_hands > 0,
        "the near runner redid none of the far runner's records"
    );
    assert_eq!(env.holds_left(), 0, "no record left held");
    // The run log is true: the far runner's row counts what it marked, its lost
    // marks apart; with the others' rows, every record's success once.
    let sum = |column: &str| run_log_sum(&env, column);
    assert_eq!(sum("succeeded"), RECORDS, "the run log's successes");
    assert!(
        sum("lost") >= 1,
        "the far runner's lost marks in its run-log row"
    );
    env.assert_intact();
    drop(relay);
}

crate::on_servers!(a_runner_cut_off_mid_tick_hands_out_nothing_and_its_late_marks_are_refused);

//! A fleet under a kill storm: runners killed at random (SIGKILL, mid-batch) and
//! started again while the others work, 32 at once on PostgreSQL and 16 on MariaDB.
//! No record may be in two handlers at once, none lost, none left held.

use std::collections::BTreeMap;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::harness::{Backend, Env, NOW};
use crate::servers::{all_success, pending_records};

/// A batch handler (perl, quick to start on a loaded machine) that logs `start ID ns RUNNER`
/// and `end ID ns RUNNER` around each record, 50 ms a record. RUNNER is the number the
/// test gave its tick (`STORM_RUNNER`, inherited), not `getppid()`: a handler that starts
/// after its tick was killed, before the watchdog kills it, is the orphan of pid 1.
const HANDLER: &str = r#"#!/usr/bin/perl
use strict;
use Time::HiRes qw(time sleep);
$| = 1;
open(my $log, '>>', 'handler.log') or die "handler.log: $!";
$log->autoflush(1);
my $tick = $ENV{STORM_RUNNER};
while (my $line = <STDIN>) {
    my ($id) = $line =~ /^\{"id":([^,]*),/ or next;
    printf $log "start %s %.0f %d\n", $id, time * 1e9, $tick;
    sleep 0.05;
    printf $log "end %s %.0f %d\n", $id, time * 1e9, $tick;
    print "{\"id\":$id,\"code\":0}\n";
}
"#;

fn ns_now() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

/// A small generator, seeded from the clock and printed, so that a failing storm can
/// be told apart from another (no crate for six lines).
struct Dice(u64);

impl Dice {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) % n as u64) as usize
    }
}

/// A runner, numbered for its handlers' log; its stderr goes to `runners.err`, shared
/// (appended) by all: a pipe read only at the end would fill and block a runner that
/// warns much.
fn spawn(env: &Env, number: u32, extra: &[&str]) -> Child {
    let err = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(env.path("runners.err"))
        .unwrap();
    env.command()
        .args(["run", "--window", "1d", "--now", NOW, "--json"])
        .args(extra)
        .env("STORM_RUNNER", number.to_string())
        .stdout(Stdio::null())
        .stderr(err)
        .spawn()
        .unwrap()
}

/// What the runners said on stderr, for a failure's message.
fn said(env: &Env) -> String {
    let all = std::fs::read_to_string(env.path("runners.err")).unwrap_or_default();
    let start = all.len().saturating_sub(4000);
    all.get(start..).unwrap_or(&all).to_string()
}

/// The runners of the storm, by number, killed and reaped if the test fails half-way,
/// so that they do not load the machine under the tests that follow.
struct Storm(Vec<(u32, Child)>);

impl Drop for Storm {
    fn drop(&mut self) {
        for (_, child) in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Each record's handler runs, from the log and the instants the ticks were killed:
/// a start with no end ran until its tick died (the watchdog kills its handler then; a
/// handler that started after, an orphan for the few milliseconds until that kill, is
/// counted from its start: the record's claim lasts its 2 s lease beyond).
fn runs(log: &str, killed: &BTreeMap<u32, u128>) -> BTreeMap<i64, Vec<(u128, u128)>> {
    let mut open: BTreeMap<(i64, u32), u128> = BTreeMap::new();
    let mut runs: BTreeMap<i64, Vec<(u128, u128)>> = BTreeMap::new();
    for line in log.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        let (id, at, tick): (i64, u128, u32) = (
            f[1].parse().unwrap(),
            f[2].parse().unwrap(),
            f[3].parse().unwrap(),
        );
        if f[0] == "start" {
            open.insert((id, tick), at);
        } else if let Some(start) = open.remove(&(id, tick)) {
            runs.entry(id).or_default().push((start, at));
        }
    }
    for ((id, tick), start) in open {
        let died = killed.get(&tick).copied().unwrap_or_else(|| {
            panic!(
                "record {id}'s handler under tick {tick} never ended, and that tick was not killed"
            )
        });
        runs.entry(id).or_default().push((start, died.max(start)));
    }
    runs
}

fn a_fleet_killed_at_random_hands_no_record_to_two_handlers_at_once(backend: Backend) {
    // Alone: 32 runners and their handlers fill two cores.
    let env = Env::alone(backend);
    let fleet = if backend == Backend::Postgres { 32 } else { 16 };
    pending_records(&env, 4_000);
    env.write_schedule(&crate::harness::Schedule {
        command: r#"["./batch.pl"]"#,
        timeout: "60s",
        handler_extra: "mode = \"batch\"\nbatch_size = 5\nconcurrency = 2",
        database_extra: "claim_lease = \"2s\"",
        ..Default::default()
    });
    env.write_handler("batch.pl", HANDLER);
    let seed = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    println!("kill storm seed {seed}");
    let mut dice = Dice(seed);
    let mut next = 0u32;
    let mut numbered = |extra: &[&str]| {
        next += 1;
        (next, spawn(&env, next, extra))
    };
    let mut storm_runners = Storm((0..fleet).map(|_| numbered(&[])).collect());
    let live = &mut storm_runners.0;
    let mut killed: BTreeMap<u32, u128> = BTreeMap::new();
    // The storm: every 50 ms a runner killed, one whose handler has begun if any, and
    // another started; a runner that ended is replaced too, while records are pending.
    let storm = Instant::now();
    while storm.elapsed() < Duration::from_secs(15) && !all_success(&env) {
        std::thread::sleep(Duration::from_millis(50));
        let log = std::fs::read_to_string(env.path("handler.log")).unwrap_or_default();
        let working: Vec<usize> = (0..live.len())
            .filter(|&i| log.contains(&format!(" {}\n", live[i].0)))
            .collect();
        let victim = match working.len() {
            0 => dice.below(live.len()),
            n => working[dice.below(n)],
        };
        let (number, mut victim) = live.swap_remove(victim);
        victim.kill().unwrap();
        // Killed (no code), or it had ended on its own just before: well, or lapsed.
        let status = victim.wait().unwrap();
        assert!(
            matches!(status.code(), None | Some(0) | Some(8)),
            "a runner failed: {status}: {}",
            said(&env)
        );
        killed.insert(number, ns_now());
        live.push(numbered(&[]));
        for runner in live.iter_mut() {
            if let Some(status) = runner.1.try_wait().unwrap() {
                assert!(
                    status.success() || status.code() == Some(8),
                    "a runner failed: {status}: {}",
                    said(&env)
                );
                *runner = numbered(&[]);
            }
        }
    }
    for (_, child) in std::mem::take(live) {
        let out = crate::servers::output_within_a_minute(child);
        assert!(
            out.status.success() || out.status.code() == Some(8),
            "a runner failed: {}: {}",
            out.status,
            said(&env)
        );
    }
    // What the killed held comes free within a lease; later ticks finish the band.
    let deadline = Instant::now() + Duration::from_secs(60);
    while !all_success(&env) {
        assert!(
            Instant::now() < deadline,
            "records still pending a minute after the storm"
        );
        std::thread::sleep(Duration::from_millis(500));
        // Records a handler failed (a timeout on a loaded machine) are kept until the
        // end of their slot: taken at once all the same.
        let out = crate::servers::output_within_a_minute(numbered(&["--retry-failed"]).1);
        assert!(out.status.success(), "{}: {}", out.status, said(&env));
    }
    let log = std::fs::read_to_string(env.path("handler.log")).unwrap();
    let mut cut_short = 0;
    for (id, mut runs) in runs(&log, &killed) {
        runs.sort();
        for pair in runs.windows(2) {
            assert!(
                pair[1].0 >= pair[0].1,
                "record {id} was handed to a second handler at {} while the first ran (until {}); seed {seed}",
                pair[1].0,
                pair[0].1
            );
        }
        cut_short += runs.len() - 1;
    }
    assert!(
        killed.len() >= 5 && cut_short >= 5,
        "the storm killed {} runners, {cut_short} mid-record",
        killed.len()
    );
    assert_eq!(env.holds_left(), 0, "no record left held");
}

crate::on_servers!(a_fleet_killed_at_random_hands_no_record_to_two_handlers_at_once);

//! `rate = "auto"`: the fleet finds a counterpart's capacity by itself. A loopback
//! counterpart takes so many calls a second and answers `429` with `Retry-After: 1`
//! beyond; the handler calls it with curl and turns a 429 into exit 75 and a
//! `retry-after:` line. The checks are of direction (most records go through, the
//! pace found is the counterpart's order, not the bound's), never of timing, which a
//! loaded machine bends.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::harness::{Backend, Env, NOW, Running, Schedule};

/// A counterpart on 127.0.0.1 that takes `per_second` calls a second (a token bucket
/// holding a second's worth) and refuses the rest with 429; its capacity can be
/// raised while it runs (`raise`).
struct Counterpart {
    url: String,
    took: Arc<AtomicUsize>,
    refused: Arc<AtomicUsize>,
    /// The bucket: tokens, when they were last counted, and the capacity a second.
    bucket: Arc<Mutex<(f64, Instant, f64)>>,
}

impl Counterpart {
    fn start(per_second: f64) -> Counterpart {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        let url = format!("http://{}/", listener.local_addr().unwrap());
        let (took, refused) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (counted_took, counted_refused) = (Arc::clone(&took), Arc::clone(&refused));
        let bucket = Arc::new(Mutex::new((per_second, Instant::now(), per_second)));
        let shared = Arc::clone(&bucket);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                }
                let taken = {
                    let mut bucket = shared.lock().unwrap();
                    let (tokens, at, per_second) = &mut *bucket;
                    *tokens = (*tokens + at.elapsed().as_secs_f64() * *per_second).min(*per_second);
                    *at = Instant::now();
                    let taken = *tokens >= 1.0;
                    if taken {
                        *tokens -= 1.0;
                    }
                    taken
                };
                let answer: &[u8] = if taken {
                    counted_took.fetch_add(1, Ordering::SeqCst);
                    b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                } else {
                    counted_refused.fetch_add(1, Ordering::SeqCst);
                    b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                };
                let _ = stream.write_all(answer);
            }
        });
        Counterpart {
            url,
            took,
            refused,
            bucket,
        }
    }

    /// From now on it takes `per_second` calls a second (the tokens it holds stay).
    fn raise(&self, per_second: f64) {
        let mut bucket = self.bucket.lock().unwrap();
        let (tokens, at, old) = &mut *bucket;
        *tokens = (*tokens + at.elapsed().as_secs_f64() * *old).min(*old);
        *at = Instant::now();
        *old = per_second;
    }

    fn took(&self) -> usize {
        self.took.load(Ordering::SeqCst)
    }

    fn refused(&self) -> usize {
        self.refused.load(Ordering::SeqCst)
    }

    /// A handler that calls it: 200 is a success, 429 a snooze for its Retry-After.
    fn handler(&self) -> String {
        handler_of(&format!("'{}'", self.url))
    }
}

/// A handler that calls the URL `url` (a shell word): 200 is a success, 429 a snooze
/// for its Retry-After.
fn handler_of(url: &str) -> String {
    format!(
        r#"#!/bin/sh
cat > /dev/null
code=$(curl -s -o /dev/null -w '%{{http_code}}' --max-time 5 {url})
case "$code" in
  200) exit 0 ;;
  429) echo "retry-after: 1"; exit 75 ;;
  *) echo "counterpart answered $code"; exit 1 ;;
esac
"#
    )
}

/// Runs `runners` ticks of the day's tier at once and waits for each to succeed.
fn runners_at_once(env: &Env, runners: usize) {
    let started: Vec<_> = (0..runners)
        .map(|_| {
            env.command()
                .args(["run", "--window", "1d", "--now", NOW])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut runner in started {
        assert_eq!(runner.wait().unwrap().code(), Some(0));
    }
}

/// Against a counterpart of 20 calls a second, runners with `rate = "auto"` and four
/// handlers each call it once per record: most records go through in the tick (a
/// refused one is snoozed, not called again), most calls are taken, and the pace the
/// fleet found, read from `backlog_paces`, is one row for the tier, out of slow start
/// and of the counterpart's order, far below `rate_max`, and `backlog status` and
/// the metrics show it. On PostgreSQL eight runners share that one row, on MySQL three.
fn an_auto_rate_finds_the_counterparts_capacity(backend: Backend) {
    const RECORDS: usize = 160;
    let counterpart = Counterpart::start(20.0);
    let env = Env::on(backend);
    env.records_minutes_apart(RECORDS as i64);
    env.write_schedule(&Schedule {
        handler_extra: "rate = \"auto\"\nrate_max = \"400/s\"\nconcurrency = 4",
        ..Schedule::default()
    });
    env.write_handler("handler.sh", &counterpart.handler());
    // On PostgreSQL, the issue's eight runners on one pace.
    let runners = match backend {
        Backend::Sqlite => 2,
        Backend::Postgres => 8,
        _ => 3,
    };
    runners_at_once(&env, runners);

    let (took, refused) = (counterpart.took(), counterpart.refused());
    assert_eq!(
        took + refused,
        RECORDS,
        "each record called once in the tick"
    );
    assert_eq!(env.with_status("SUCCESS") as usize, took);
    assert!(
        took * 10 >= RECORDS * 6,
        "{took} of {RECORDS} went through ({refused} refused)"
    );
    let paces = env.own("backlog_paces");
    let names = env.lines(&format!("SELECT name FROM {paces}"));
    assert_eq!(names.len(), 1, "one pace for the fleet: {names:?}");
    assert!(names[0].contains("tier 86400s"), "{names:?}");
    let per_second = env.count(&format!("SELECT micro_per_second FROM {paces}")) as f64 / 1e6;
    assert!(
        (1.0 / 60.0..=80.0).contains(&per_second),
        "a pace of the counterpart's order: {per_second}/s"
    );
    eprintln!("{took} took, {refused} refused; the pace found: {per_second:.1}/s");
    if refused > 0 {
        let slow_start = env.count(&format!("SELECT slow_start FROM {paces}"));
        assert_ne!(slow_start, 1, "refusals end slow start");
    }
    // `backlog status` shows it.
    env.backlog(&["status", "--now", NOW])
        .assert()
        .success()
        .stdout(predicates::str::contains(
            "\nadapted rates (rate = \"auto\"): 1\n  tier 1d: ",
        ));
    // And the metrics, by tier (and rate_key value: none here).
    env.backlog(&[
        "run",
        "--window",
        "1d",
        "--now",
        NOW,
        "--metrics-file",
        "m.prom",
    ])
    .assert()
    .success();
    let metrics = std::fs::read_to_string(env.path("m.prom")).unwrap();
    assert!(
        metrics.contains("\nbacklog_pace_per_second{table=\"BACKLOG\",tier=\"1d\",key=\"\"} "),
        "{metrics}"
    );
}

crate::on_every_backend!(an_auto_rate_finds_the_counterparts_capacity);

/// With `rate_key`, each counterpart gets a pace of its own: a slow counterpart (4
/// calls a second) and a fast one (40) behind one table, with `rate = "auto"`; the slow
/// one's refusals do not lower the fast one's pace, which ends above the slow one's,
/// and the fast one's records go through.
#[test]
fn a_slow_counterpart_does_not_lower_a_fast_ones_pace() {
    const SLOW: i64 = 24;
    const RECORDS: i64 = 120;
    let (slow, fast) = (Counterpart::start(4.0), Counterpart::start(40.0));
    let env = Env::on(Backend::Sqlite);
    env.records_minutes_apart(RECORDS);
    env.execute(&format!(
        "UPDATE \"BACKLOG\" SET \"PAYLOAD\" = CASE WHEN \"ID\" <= {SLOW} THEN 'slow' ELSE 'fast' END"
    ));
    env.write_schedule(&Schedule {
        handler_extra: "rate = \"auto\"\nrate_key = \"PAYLOAD\"\nconcurrency = 4",
        ..Schedule::default()
    });
    let url = format!(
        "\"$([ \"$BACKLOG_RECORD_ID\" -le {SLOW} ] && echo '{}' || echo '{}')\"",
        slow.url, fast.url
    );
    env.write_handler("handler.sh", &handler_of(&url));
    runners_at_once(&env, 2);

    assert_eq!(slow.took() + slow.refused(), SLOW as usize);
    assert_eq!(fast.took() + fast.refused(), (RECORDS - SLOW) as usize);
    assert!(
        fast.took() * 10 >= (RECORDS - SLOW) as usize * 7,
        "{} of the fast counterpart's {} went through",
        fast.took(),
        RECORDS - SLOW
    );
    let pace = |key: &str| {
        env.count(&format!(
            "SELECT micro_per_second FROM backlog_paces WHERE name LIKE '%, counterpart {key}'"
        )) as f64
            / 1e6
    };
    let (slow_pace, fast_pace) = (pace("slow"), pace("fast"));
    eprintln!(
        "slow: {} took, {} refused, {slow_pace:.1}/s; fast: {} took, {} refused, {fast_pace:.1}/s",
        slow.took(),
        slow.refused(),
        fast.took(),
        fast.refused()
    );
    assert!(
        fast_pace > slow_pace,
        "the fast counterpart's pace {fast_pace}/s, the slow one's {slow_pace}/s"
    );
}

/// A tick sends its last calls to the fleet's pace as it ends, and the next tick goes
/// on from there, not from a slow start of its own: three calls that go through take a
/// fresh pace from one start a second to four (slow start adds one a call), and two
/// more in the next tick to six.
#[test]
fn each_tick_goes_on_from_the_fleets_pace() {
    let env = Env::on(Backend::Sqlite);
    env.create_table("TEXT");
    let encode =
        |t: chrono::DateTime<chrono::Utc>| t.format("%Y-%m-%d %H:%M:%S").to_string().into();
    env.insert_aged(&[(1, 60), (2, 120), (3, 180)], encode);
    env.write_schedule(&Schedule {
        handler_extra: "rate = \"auto\"",
        ..Schedule::default()
    });
    env.write_handler("handler.sh", "#!/bin/sh\ncat > /dev/null\nexit 0\n");
    let pace = || env.count("SELECT micro_per_second FROM backlog_paces");
    env.run_window("1d");
    assert_eq!(pace(), 4_000_000);
    env.insert_aged(&[(4, 240), (5, 300)], encode);
    env.run_window("1d");
    assert_eq!(pace(), 6_000_000);
}

/// The pace follows a counterpart whose capacity is raised: against 10 calls a second,
/// two runners with `rate = "auto"` and two handlers each find it (slow start ends in
/// a cut); a little later the counterpart takes 40 a second, and the fleet's pace,
/// read from `backlog_paces` as the runners end, is above the old capacity and above
/// what it was at the raise. A check of direction: the pace grows by the calls that go
/// through, so a loaded machine makes the run longer, not the pace lower.
#[test]
fn the_pace_follows_a_raised_capacity() {
    const RECORDS: usize = 280;
    const OLD: f64 = 10.0;
    let counterpart = Counterpart::start(OLD);
    let env = Env::on(Backend::Sqlite);
    env.records_minutes_apart(RECORDS as i64);
    env.write_schedule(&Schedule {
        handler_extra: "rate = \"auto\"\nconcurrency = 2",
        ..Schedule::default()
    });
    env.write_handler("handler.sh", &counterpart.handler());
    let runners: Vec<_> = (0..2)
        .map(|_| {
            Running::spawn(
                env.command()
                    .args(["run", "--window", "1d", "--now", NOW])
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::null()),
            )
        })
        .collect();
    let db = env.db();
    db.busy_timeout(Duration::from_secs(5)).unwrap();
    let read = |sql: &str| {
        db.query_row(sql, [], |r| r.get::<_, Option<i64>>(0))
            .ok()
            .flatten()
    };
    // The old capacity found: the first cut, then a few seconds of AIMD near it.
    let waited = Instant::now();
    while read("SELECT count(*) FROM backlog_paces WHERE cut_at_us IS NOT NULL") != Some(1) {
        assert!(
            waited.elapsed() < Duration::from_secs(120),
            "no cut against {OLD}/s in two minutes"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(3));
    let pace = || read("SELECT micro_per_second FROM backlog_paces").unwrap_or(0) as f64 / 1e6;
    let at_raise = pace();
    let took_at_raise = counterpart.took() + counterpart.refused();
    counterpart.raise(40.0);
    for runner in runners {
        assert_eq!(runner.wait().status.code(), Some(0));
    }

    let (took, refused) = (counterpart.took(), counterpart.refused());
    assert_eq!(
        took + refused,
        RECORDS,
        "each record called once in the tick"
    );
    let after = RECORDS - took_at_raise;
    assert!(
        after >= RECORDS / 2,
        "{after} of {RECORDS} calls after the raise: too few to follow it"
    );
    let end = pace();
    eprintln!(
        "{took} took, {refused} refused; the pace: {at_raise:.1}/s at the raise, {end:.1}/s at the end ({after} calls after the raise)"
    );
    assert!(
        end > OLD && end > at_raise,
        "the pace {end}/s at the end, {at_raise}/s at the raise to 40/s from {OLD}/s"
    );
}

//! `rate = "auto"`'s own overload signals, `handler.overload` and
//! `handler.target_latency`, and how an overload meets the breaker: the pace takes it
//! while it can fall, and the breaker counts it once the pace is at `rate_min`. Each
//! check sets a pair of runs side by side that differ in the one key, so that what it
//! sees is that key's doing; none times anything.

use crate::harness::{Backend, Env, NOW, Schedule};

/// A handler that answers by a count it keeps in `calls`: calls 21 to 23 and 25 to 27
/// end with `code` (the counterpart was busy), the others with 0: a busy counterpart,
/// which takes a call between its refusals. One record at a time, so the count has no
/// race.
fn busy_for_six(code: u8) -> String {
    format!(
        r#"#!/bin/sh
cat > /dev/null
n=$(( $(cat calls 2>/dev/null || echo 0) + 1 ))
echo "$n" > calls
case "$n" in
  21|22|23|25|26|27) echo "counterpart busy"; exit {code} ;;
esac
exit 0
"#
    )
}

/// A table of `n` records due in the day's tier.
fn table_of(n: i64) -> Env {
    let env = Env::on(Backend::Sqlite);
    env.records_minutes_apart(n);
    env
}

/// The fleet's pace row: its starts a second and its phase (1: slow start).
fn pace(env: &Env) -> (f64, i64) {
    let per_second = env.count("SELECT micro_per_second FROM backlog_paces") as f64 / 1e6;
    (
        per_second,
        env.count("SELECT slow_start FROM backlog_paces"),
    )
}

fn run(env: &Env) -> assert_cmd::assert::Assert {
    env.backlog(&["run", "--window", "1d", "--now", NOW])
        .assert()
}

/// Two bursts of three refusals, where `stop_after_failures = 3`: listed in
/// `overload`, the exit code halves the pace and the breaker leaves a busy
/// counterpart's bursts to it, so the tick goes on and the other records go through;
/// not listed, it is an error like any other and the breaker trips on the third (exit
/// 7).
#[test]
fn a_listed_exit_code_lowers_the_pace_and_the_breaker_leaves_the_burst_to_it() {
    const KEYS: &str = "rate = \"auto\"\nrate_min = \"1/s\"\nstop_after_failures = 3";
    for listed in [true, false] {
        let env = table_of(40);
        env.write_schedule(&Schedule {
            handler_extra: if listed {
                "rate = \"auto\"\nrate_min = \"1/s\"\nstop_after_failures = 3\noverload = [69]"
            } else {
                KEYS
            },
            ..Schedule::default()
        });
        env.write_handler("handler.sh", &busy_for_six(69));
        if listed {
            run(&env).success().stderr(predicates::str::contains(
                "the counterpart of table BACKLOG, tier 1d was overloaded (exit 69, in handler.overload): its adapted pace halved to ",
            ));
            assert_eq!(env.with_status("SUCCESS"), 34);
            assert_eq!(env.with_status("ERROR"), 6);
            let (per_second, phase) = pace(&env);
            assert_ne!(phase, 1, "the refusals ended slow start");
            assert!(per_second > 1.0, "above rate_min: {per_second}/s");
        } else {
            run(&env)
                .code(7)
                .stderr(predicates::str::contains("3 failures in a row"));
            assert_eq!(env.with_status("SUCCESS"), 20);
            assert_eq!(env.with_status("ERROR"), 3);
            assert_eq!(pace(&env).1, 1, "an error is no overload: still slow start");
        }
    }
}

/// A status `handler.exit_codes` gives, listed in `overload`, is an overload too: the
/// records get their status, and the pace leaves slow start.
#[test]
fn a_listed_status_is_an_overload() {
    let env = table_of(30);
    env.write_schedule(&Schedule {
        handler_extra: "rate = \"auto\"\nexit_codes = { 70 = \"THROTTLED\" }\noverload = [\"THROTTLED\"]",
        ..Schedule::default()
    });
    env.write_handler("handler.sh", &busy_for_six(70));
    // `explain` says what slows the pace.
    env.backlog(&["explain", "--now", NOW])
        .assert()
        .success()
        .stdout(predicates::str::contains(
            "starts at a pace adapted to the counterpart, 1/m to 500/s, slower on exit 70, ",
        ));
    run(&env).success();
    assert_eq!(env.with_status("THROTTLED"), 6);
    assert_ne!(pace(&env).1, 1, "the THROTTLED answers ended slow start");
}

/// A counterpart that takes nothing between two cuts is down, not busy: after ten
/// calls through, every call is refused; the pace is cut, cut again a round trip later
/// with nothing through between, and from then on the breaker counts the refusals and
/// trips, well above `rate_min`.
#[test]
fn a_counterpart_that_takes_nothing_between_two_cuts_is_the_breakers() {
    let env = table_of(200);
    env.write_schedule(&Schedule {
        handler_extra: "rate = \"auto\"\nstop_after_failures = 3\noverload = [69]",
        ..Schedule::default()
    });
    env.write_handler(
        "handler.sh",
        r#"#!/bin/sh
cat > /dev/null
n=$(( $(cat calls 2>/dev/null || echo 0) + 1 ))
echo "$n" > calls
[ "$n" -le 10 ] && exit 0
echo "counterpart down"
exit 69
"#,
    );
    run(&env)
        .code(7)
        .stderr(predicates::str::contains("3 failures in a row"));
    assert_eq!(env.with_status("SUCCESS"), 10);
    let refused = env.with_status("ERROR");
    assert!(
        (3..60).contains(&refused),
        "{refused} refused before the trip"
    );
    assert!(
        pace(&env).0 > 1.0 / 60.0,
        "above rate_min: {:?}",
        pace(&env)
    );
}

/// Once the pace is at `rate_min` it can fall no further, and an overload counts
/// toward the breaker as any failure does: a counterpart that refuses every call at
/// the slowest pace allowed is down, not busy.
#[test]
fn at_rate_min_the_breaker_counts_overloads() {
    let env = table_of(10);
    env.write_schedule(&Schedule {
        handler_extra: "rate = \"auto\"\nrate_min = \"5/s\"\nrate_max = \"10/s\"\nstop_after_failures = 3\noverload = [69]",
        ..Schedule::default()
    });
    env.write_handler(
        "handler.sh",
        "#!/bin/sh\ncat > /dev/null\necho 'counterpart busy'\nexit 69\n",
    );
    run(&env)
        .code(7)
        .stderr(predicates::str::contains("3 failures in a row"));
    assert_eq!(env.with_status("ERROR"), 3);
    assert_eq!(pace(&env).0, 5.0, "at rate_min");
}

/// A handler slower than `target_latency` says the counterpart is overloaded even when
/// it succeeds: the records are marked as answered, and the pace leaves slow start.
/// Without the key the same calls leave it in slow start.
#[test]
fn a_call_slower_than_target_latency_lowers_the_pace() {
    for target in [true, false] {
        let env = table_of(4);
        env.write_schedule(&Schedule {
            handler_extra: if target {
                "rate = \"auto\"\ntarget_latency = \"100ms\""
            } else {
                "rate = \"auto\""
            },
            ..Schedule::default()
        });
        env.write_handler("handler.sh", "#!/bin/sh\ncat > /dev/null\nsleep 0.3\n");
        run(&env).success();
        assert_eq!(env.with_status("SUCCESS"), 4);
        let phase = pace(&env).1;
        if target {
            assert_ne!(phase, 1, "slow answers ended slow start");
        } else {
            assert_eq!(phase, 1, "no target: the same calls went through");
        }
    }
}

/// The keys are refused where they mean nothing, with a line naming the key and the
/// fix, and the table is left as it was.
#[test]
fn the_signals_need_an_auto_rate() {
    let env = table_of(3);
    env.write_schedule(&Schedule {
        handler_extra: "rate = \"20/s\"\noverload = [69]",
        ..Schedule::default()
    });
    env.write_handler("handler.sh", "#!/bin/sh\nexit 0\n");
    run(&env).code(3).stderr(predicates::str::contains(
        "handler.overload tells an adaptive rate when to slow down, but handler.rate is not \"auto\"; set rate = \"auto\", or leave overload out",
    ));
    assert_eq!(env.with_status("NEW"), 3);
}

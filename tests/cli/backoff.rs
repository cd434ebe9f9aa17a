//! `backlog backoff`: the test vectors through the real binary.

use crate::harness::Env;

fn run(args: &[&str]) -> String {
    let env = Env::new();
    let out = env.backlog(args).assert().success();
    String::from_utf8_lossy(&out.get_output().stdout)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn delays_match_the_reference_vectors() {
    let cases: &[(&[&str], &str)] = &[
        (
            &[
                "mimd",
                "-p",
                "initial=3",
                "-p",
                "failure=2",
                "-p",
                "success=0.5",
                "-p",
                "min=2",
                "0",
                "0",
                "0",
                "0",
                "1",
                "1",
                "1",
                "1",
                "1",
                "0",
                "0",
                "0",
            ],
            "3 6 12 24 12 6 3 2 2 4 8 16",
        ),
        (
            &[
                "exponential",
                "-p",
                "initial=1",
                "-p",
                "max=200",
                "0",
                "0",
                "0",
                "0",
                "0",
                "0",
                "0",
                "0",
                "0",
                "0",
                "1",
                "1",
                "1",
            ],
            "1 2 4 8 16 32 64 128 200 200 0 0 0",
        ),
        (
            &[
                "lild",
                "-p",
                "initial=3",
                "-p",
                "failure=4",
                "-p",
                "success=-5",
                "-p",
                "min=1",
                "0",
                "0",
                "0",
                "1",
                "1",
                "1",
                "1",
                "0",
                "0",
                "0",
            ],
            "3 7 11 6 1 1 1 5 9 13",
        ),
        (
            &[
                "fibonacci",
                "-p",
                "first=2",
                "-p",
                "second=3",
                "-p",
                "max=20",
                "-p",
                "success=1",
                "0",
                "0",
                "0",
                "0",
                "0",
                "0",
                "1",
            ],
            "2 3 5 8 13 20 1",
        ),
        (
            &["arctan", "--unit", "h", "0", "0", "0"],
            "1.017 7.486 16.252",
        ),
        (
            &["httpx", "-p", "factor=0.5", "0", "0", "0", "0"],
            "0 0.5 1 2",
        ),
        (
            &["exponential", "--max-attempts", "3", "0", "0", "0", "0"],
            "1 2 -1 -1",
        ),
        (
            &[
                "constant",
                "-p",
                "delay=60",
                "--subtract-waited",
                "0@0",
                "0@90",
                "0@150",
            ],
            "60 30 30",
        ),
    ];
    for (args, expected) in cases {
        let mut all = vec!["backoff", "delays"];
        all.extend_from_slice(args);
        assert_eq!(run(&all), *expected, "{args:?}");
    }
}

#[test]
fn budget_counts_retries_and_shows_the_closed_form() {
    assert_eq!(
        run(&[
            "backoff",
            "budget",
            "httpx",
            "-p",
            "factor=0.5",
            "--timeout",
            "30s"
        ]),
        "httpx: 6 retries fit in 30s, waiting 15.5s in all closed form: b·(2ⁿ⁻¹ − 1) ≤ t ⇒ n = ⌊log₂(t/b + 1)⌋ + 1 (before the cap) = 6"
    );
    assert_eq!(
        run(&["backoff", "budget", "exponential", "--retries", "5"]),
        "exponential: 5 retries wait 31s in all"
    );
    assert_eq!(
        run(&[
            "backoff",
            "budget",
            "fibonacci",
            "--unit",
            "m",
            "--timeout",
            "1h"
        ]),
        "fibonacci: 8 retries fit in 60m, waiting 54m in all",
        "1+1+2+3+5+8+13+21 = 54; the next, 34, passes an hour"
    );
    // One retry is one, in the singular.
    assert_eq!(
        run(&["backoff", "budget", "exponential", "--retries", "1"]),
        "exponential: 1 retry waits 1s in all"
    );
    assert!(
        run(&["backoff", "budget", "exponential", "--timeout", "2s"])
            .starts_with("exponential: 1 retry fits in 2s, waiting 1s in all"),
    );
}

#[test]
fn the_same_seed_gives_the_same_jittered_delays() {
    let args = [
        "backoff", "delays", "sidekiq", "--seed", "42", "0", "0", "0", "0", "0",
    ];
    assert_eq!(run(&args), run(&args));
    assert_ne!(
        run(&args),
        run(&[
            "backoff", "delays", "sidekiq", "--seed", "43", "0", "0", "0", "0", "0"
        ])
    );
}

#[test]
fn unknown_strategies_and_parameters_are_usage_errors() {
    let env = Env::new();
    env.backlog(&["backoff", "delays", "expo"])
        .assert()
        .code(2)
        .stderr("backlog: no strategy \"expo\"; the strategies are constant, exponential, httpx, fibonacci, arctan, sidekiq, buckets, lild, limd, mild, mimd (and progressive, with --schedule)\n");
    env.backlog(&["backoff", "delays", "mimd", "-p", "fail=2"])
        .assert()
        .code(2)
        .stderr(
            "backlog: mimd: no parameter \"fail\"; it takes failure, success, initial, min, max\n",
        );
    env.backlog(&["backoff", "delays", "constant", "-p", "delay=nan"])
        .assert()
        .code(2)
        .stderr("backlog: constant: delay: nan is out of range; use 0s to 36500d\n");
    env.backlog(&[
        "backoff",
        "budget",
        "mimd",
        "-p",
        "success=5",
        "--timeout",
        "1h",
    ])
    .assert()
    .code(2)
    .stderr("backlog: mimd: success: 5 is out of range; use 0 to 1\n");
    env.backlog(&["backoff", "delays", "constant", "2"])
        .assert()
        .code(2)
        .stderr("backlog: outcome \"2\": write 0 for a failure, 1 for a success\n");
}

#[test]
fn simulate_is_deterministic_and_compares_schedules_with_strategies() {
    let env = Env::new();
    env.write_schedule(&crate::harness::Schedule::default());
    let args = [
        "backoff",
        "simulate",
        "--records",
        "200",
        "--outage",
        "30m..3h",
        "--seed",
        "9",
        "--json",
        "--strategy",
        "exponential initial=1 max=1h",
        "--strategy",
        "sidekiq",
        "--schedule",
        "backlog.toml",
    ];
    let first = env
        .backlog(&args)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let again = env
        .backlog(&args)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    assert_eq!(first, again, "the same seed, the same simulation");
    let report: serde_json::Value = serde_json::from_slice(&first).unwrap();
    let outage = report["outage_seconds"].as_f64().unwrap();
    assert!(
        (1800.0..=10_800.0).contains(&outage),
        "drawn from the range: {outage}"
    );
    let names: Vec<&str> = report["contenders"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["exponential initial=1 max=1h", "sidekiq", "backlog.toml"]
    );
    let schedule = &report["contenders"][2];
    assert_eq!(
        schedule["peak_calls_per_minute"], 200,
        "every record on the same 5-minute ticks"
    );
    assert_eq!(schedule["never"], 0);
}

#[test]
fn the_progressive_schedule_is_a_strategy_too() {
    let env = Env::new();
    env.write_schedule(&crate::harness::Schedule::default());
    let out = env
        .backlog(&[
            "backoff",
            "delays",
            "progressive",
            "--schedule",
            "backlog.toml",
            "--inserted",
            "2026-11-21T11:58:00Z",
            "--unit",
            "m",
            "0",
            "0",
            "1",
            "0",
        ])
        .assert()
        .success();
    assert_eq!(
        String::from_utf8_lossy(&out.get_output().stdout),
        "5\n5\n-1\n-1\n",
        "every 5 minutes; a success ends it"
    );
}

#[test]
fn plot_writes_an_svg_with_titles_axes_and_legend() {
    let env = Env::new();
    env.write_schedule(&crate::harness::Schedule::default());
    env.backlog(&[
        "backoff",
        "plot",
        "--records",
        "20",
        "--horizon",
        "6h",
        "--out",
        "retries.svg",
        "--strategy",
        "exponential initial=1m",
        "--strategy",
        "buckets",
        "--schedule",
        "backlog.toml",
    ])
    .assert()
    .success()
    .stdout(predicates::str::starts_with(
        "wrote retries.svg (3 strategies, 20 jobs, ",
    ));
    let svg = std::fs::read_to_string(env.path("retries.svg")).unwrap();
    assert!(svg.starts_with("<svg"), "an SVG document");
    for text in [
        "When retries land: jobs that failed at the same moment and keep failing",
        "exponential initial=1m",
        "buckets",
        "backlog.toml",
        "time since the failure (log scale)",
        "retry 1",
        "retry 8+",
        "most retries in one minute (peak",
    ] {
        assert!(svg.contains(text), "the SVG shows {text:?}");
    }
}

/// The texts of an SVG that plotters wrote, with their x positions.
fn texts(svg: &str) -> Vec<(f64, String)> {
    svg.split("<text ")
        .skip(1)
        .filter_map(|element| {
            let x = element
                .split("x=\"")
                .nth(1)?
                .split('"')
                .next()?
                .parse()
                .ok()?;
            let (_, body) = element.split_once('>')?;
            let (text, _) = body.split_once("</text>")?;
            Some((x, text.trim().to_string()))
        })
        .collect()
}

/// Writes `backoff plot` with `args` in a fresh folder: the SVG's text.
fn plot(args: &[&str]) -> String {
    let env = Env::new();
    env.write_schedule(&crate::harness::Schedule::default());
    let mut all = vec!["backoff", "plot", "--out", "plot.svg"];
    all.extend_from_slice(args);
    env.backlog(&all).assert().success();
    std::fs::read_to_string(env.path("plot.svg")).unwrap()
}

#[test]
fn the_default_plot_is_small() {
    let svg = plot(&[]);
    assert!(svg.len() < 200_000, "{} bytes", svg.len());
    let thousand = plot(&["--records", "1000", "--horizon", "7d"]);
    assert!(thousand.len() < 250_000, "{} bytes", thousand.len());
}

#[test]
fn a_year_long_schedule_reads_in_human_units_across_orders_of_magnitude() {
    let svg = plot(&["--schedule", "backlog.toml", "--horizon", "360d"]);
    let labels: Vec<String> = texts(&svg).into_iter().map(|(_, t)| t).collect();
    for tick in ["1m", "10m", "1h", "1d", "7d", "30d"] {
        assert!(
            labels.iter().any(|l| l == tick),
            "a tick at {tick}: {labels:?}"
        );
    }
    assert!(
        labels
            .iter()
            .any(|l| l == "time since the failure (log scale)")
    );
    let marks = svg.matches("<path").count() + svg.matches("<circle").count();
    assert!(
        marks < 20,
        "retries merged into a few paths, not {marks} elements"
    );
}

#[test]
fn the_columns_share_one_y_range() {
    let svg = plot(&[]);
    let width: f64 = svg
        .split("width=\"")
        .nth(1)
        .and_then(|w| w.split('"').next())
        .and_then(|w| w.parse().ok())
        .unwrap();
    let columns = 4;
    // Each column's numeric tick labels (jobs and load), in the order drawn.
    let mut numbers = vec![Vec::new(); columns];
    for (x, text) in texts(&svg) {
        if text.parse::<u64>().is_ok() {
            let column = ((x / (width / columns as f64)) as usize).min(columns - 1);
            numbers[column].push(text);
        }
    }
    assert!(numbers[0].len() > 6, "{numbers:?}");
    for column in &numbers[1..] {
        assert_eq!(column, &numbers[0], "the same ticks in every column");
    }
}

/// `simulate --capacity`: against a counterpart of 40/s (refused beyond), 1,200
/// records, 32 handlers, no pace trips the breaker and leaves the band; the adaptive
/// paces find the capacity by themselves and follow it when it is raised.
#[test]
fn simulate_capacity_compares_no_pace_a_fixed_one_and_the_adaptive_ones() {
    let json: serde_json::Value = serde_json::from_str(&run(&[
        "backoff",
        "simulate",
        "--capacity",
        "40/s",
        "--records",
        "1200",
        "--json",
    ]))
    .unwrap();
    let paces = json["paces"].as_array().unwrap();
    let names: Vec<&str> = paces.iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["none", "fixed 38/s", "aimd", "mimd"]);
    let none = &paces[0];
    assert_eq!(none["tripped"], true, "{none}");
    assert!(none["through"].as_u64().unwrap() < 120, "{none}");
    for adaptive in &paces[2..] {
        let calls = adaptive["calls"].as_u64().unwrap();
        assert!(
            adaptive["through"].as_u64().unwrap() >= 1020,
            "85 %: {adaptive}"
        );
        assert!(
            adaptive["refused"].as_u64().unwrap() * 100 <= calls * 15,
            "{adaptive}"
        );
        assert!(
            adaptive["of_capacity"].as_f64().unwrap() >= 0.7,
            "{adaptive}"
        );
    }

    let raised: serde_json::Value = serde_json::from_str(&run(&[
        "backoff",
        "simulate",
        "--capacity",
        "40/s",
        "--capacity",
        "80/s@30s",
        "--records",
        "4000",
        "--rate",
        "38/s",
        "--json",
    ]))
    .unwrap();
    let aimd = &raised["paces"][2];
    assert_eq!(aimd["name"], "aimd");
    let followed = aimd["followed_in"][0].as_f64().expect("it followed");
    assert!(followed <= 30.0, "{aimd}");

    let table = run(&[
        "backoff",
        "simulate",
        "--capacity",
        "40/s",
        "--records",
        "1200",
    ]);
    assert!(
        table.starts_with("a counterpart of 40/s (refused beyond), 1200 records, 32 handlers at once, calls of 100ms, the breaker at 10 refusals in a row"),
        "{table}"
    );
}

#[test]
fn simulate_capacity_refuses_what_does_not_apply() {
    let env = Env::new();
    env.backlog(&["backoff", "simulate", "--capacity", "40/s@10s"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("the first capacity starts at 0s"));
    env.backlog(&[
        "backoff",
        "simulate",
        "--capacity",
        "40/s",
        "--strategy",
        "sidekiq",
    ])
    .assert()
    .code(2)
    .stderr(predicates::str::contains("cannot be used with"));
    env.backlog(&["backoff", "simulate", "--capacity", "forty"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("\"forty\" is not a rate"));
}

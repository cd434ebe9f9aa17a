//! `backlog backoff simulate --capacity`: one tick of a fleet's handlers against a
//! counterpart that refuses calls beyond its capacity, with no pace, fixed paces, and
//! the adaptive ones (`backlog_core::pace`), side by side.

use std::time::Duration;

use super::counterpart::{Contender, Counterpart, Report, simulate};
use backlog_core::pace::Rule;

use super::SimulateArgs;
use crate::cli::print;
use crate::error::Error;
use backlog_core::duration;
use backlog_core::plural::count;

/// `backoff simulate --capacity …`.
pub(super) fn simulate_paces(args: &SimulateArgs) -> Result<(), Error> {
    let mut capacity: Vec<(f64, f64)> = args
        .capacity
        .capacity
        .iter()
        .map(|(from, rate)| (from.as_secs_f64(), *rate))
        .collect();
    capacity.sort_by(|a, b| a.0.total_cmp(&b.0));
    if capacity[0].0 > 0.0 {
        return Err(Error::Usage(format!(
            "--capacity: the first capacity starts at 0s, not {}; write it without @",
            duration::compact(Duration::from_secs_f64(capacity[0].0))
        )));
    }
    let first = capacity[0].1;
    let counterpart = Counterpart {
        capacity,
        latency: args.capacity.latency.as_secs_f64(),
        lanes: usize::from(args.capacity.lanes),
        records: args.records,
        stop_after: (args.capacity.stop_after > 0).then_some(args.capacity.stop_after),
    };
    let mut contenders = vec![Contender::Unpaced];
    let rates = match args.capacity.rates.is_empty() {
        true => vec![first * 0.95],
        false => args.capacity.rates.clone(),
    };
    contenders.extend(rates.into_iter().map(Contender::Fixed));
    // The adaptive paces as `rate = "auto"` starts them: at 1/s, within 1/m and 500/s.
    for rule in [Rule::AUTO, Rule::MIMD] {
        contenders.push(Contender::Adaptive {
            rule,
            start: 1.0,
            min: 1.0 / 60.0,
            max: 500.0,
        });
    }
    let reports: Vec<Report> = contenders
        .into_iter()
        .map(|c| simulate(c, &counterpart))
        .collect();
    if args.json {
        let value = serde_json::json!({
            "capacity": counterpart.capacity.iter().map(|(from, c)| serde_json::json!({"from_seconds": from, "per_second": c})).collect::<Vec<_>>(),
            "records": counterpart.records,
            "lanes": counterpart.lanes,
            "latency_seconds": counterpart.latency,
            "stop_after": counterpart.stop_after,
            "paces": reports,
        });
        return print(&format!("{value}\n"));
    }
    print(&table(&counterpart, &reports))
}

/// The comparison as a table, under a line saying what was simulated.
fn table(counterpart: &Counterpart, reports: &[Report]) -> String {
    let per_second = |x: f64| {
        let text = format!("{x:.1}");
        format!("{}/s", text.trim_end_matches(".0"))
    };
    let capacity: Vec<String> = counterpart
        .capacity
        .iter()
        .map(|(from, c)| match *from > 0.0 {
            false => per_second(*c),
            true => format!(
                "{} from {}",
                per_second(*c),
                duration::compact(Duration::from_secs_f64(*from))
            ),
        })
        .collect();
    let breaker = match counterpart.stop_after {
        Some(k) => format!(
            "the breaker at {} in a row",
            count(k, "refusal", "refusals")
        ),
        None => "no breaker".into(),
    };
    let mut text = format!(
        "a counterpart of {} (refused beyond), {}, {} at once, calls of {}, {breaker}\n\n",
        capacity.join(", then "),
        count(counterpart.records, "record", "records"),
        count(counterpart.lanes, "handler", "handlers"),
        duration::compact(Duration::from_secs_f64(counterpart.latency)),
    );
    let followed = counterpart.capacity.len() > 1;
    text.push_str(&format!(
        "{:<12} {:>7} {:>8} {:>8} {:>6} {:>8} {:>9} {:>11} {:>10}{}\n",
        "pace",
        "calls",
        "refused",
        "through",
        "left",
        "tripped",
        "time",
        "of capacity",
        "final pace",
        if followed { "  followed in" } else { "" }
    ));
    for r in reports {
        let follow: Vec<String> = r
            .followed_in
            .iter()
            .map(|f| f.map_or("never".into(), |s| format!("{s:.1}s")))
            .collect();
        text.push_str(&format!(
            "{:<12} {:>7} {:>8} {:>8} {:>6} {:>8} {:>9} {:>11} {:>10}{}\n",
            r.name,
            r.calls,
            format!("{:.1}%", percent(r.refused, r.calls)),
            format!("{:.1}%", percent(r.through, counterpart.records as u64)),
            r.left,
            if r.tripped { "yes" } else { "no" },
            format!("{:.1}s", r.seconds),
            format!("{:.2}", r.of_capacity),
            r.final_pace.map_or("-".into(), per_second),
            match (followed, r.final_pace.is_some()) {
                (true, true) => format!("  {}", follow.join(", ")),
                (true, false) => "  -".into(),
                _ => String::new(),
            }
        ));
    }
    text
}

fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        return 0.0;
    }
    part as f64 * 100.0 / whole as f64
}

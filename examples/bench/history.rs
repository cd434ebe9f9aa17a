//! The history of attempts against the engine without it (part 4).

use std::path::Path;
use std::time::Duration;

use backlog_core::config::{HistoryConfig, HistoryRecord};
use backlog_core::{FnHandler, Outcome, TickOptions};

use crate::common::*;

/// A tick of the history bench: its name, whether its handler fails every record, and
/// the history it keeps.
pub(crate) struct HistoryCase {
    pub(crate) name: &'static str,
    pub(crate) fails: bool,
    pub(crate) history: HistoryConfig,
}

pub(crate) fn history_cases() -> Vec<HistoryCase> {
    let mut off = HistoryConfig::default();
    off.keep = Duration::ZERO;
    let mut all = HistoryConfig::default();
    all.record = HistoryRecord::All;
    vec![
        HistoryCase {
            name: "history off (keep = 0)",
            fails: false,
            history: off.clone(),
        },
        HistoryCase {
            name: "default (failures only)",
            fails: false,
            history: HistoryConfig::default(),
        },
        HistoryCase {
            name: "record = all",
            fails: false,
            history: all,
        },
        HistoryCase {
            name: "every record fails, default",
            fails: true,
            history: HistoryConfig::default(),
        },
        HistoryCase {
            name: "every record fails, off",
            fails: true,
            history: off,
        },
    ]
}

/// The floor and the ticks of `history_cases`, `rounds` times on fresh copies of
/// `source`; prints each round, then each tick's median records/s and its ratios to
/// the history-off tick and to the floor of the same round (median, min–max).
pub(crate) fn history_bench(source: &Path, work: &Path, rounds: usize) {
    let cases = history_cases();
    // Per case: records/s, ratio to off, ratio to the floor.
    let mut figures: Vec<[Vec<f64>; 3]> = cases.iter().map(|_| Default::default()).collect();
    let mut floors = Vec::new();
    for round in 0..rounds {
        copy(source, work);
        let (floor_rps, n) = floor(work, "*");
        floors.push(floor_rps);
        let mut rps = vec![0.0; cases.len()];
        let mut order = Vec::new();
        for k in 0..cases.len() {
            let i = (round + k) % cases.len();
            let case = &cases[i];
            copy(source, work);
            let tune = |o: &mut TickOptions| o.history = case.history.clone();
            let (r, m) = if case.fails {
                tick_with(
                    work,
                    &mut FnHandler(|_: &backlog_core::Record| Outcome::Error),
                    tune,
                )
            } else {
                tick_with(
                    work,
                    &mut FnHandler(|_: &backlog_core::Record| Outcome::Success),
                    tune,
                )
            };
            assert_eq!(n, m, "every tick and the floor cover the same band");
            let (attempts, tried) = own_rows(work);
            eprintln!(
                "  {}: {attempts} attempt rows, {tried} kept from later ticks",
                case.name
            );
            rps[i] = r;
            order.push(i + 1);
        }
        println!(
            "round {}: {n} records; floor {floor_rps:>7.0}/s; ticks in the order {order:?}",
            round + 1
        );
        for (i, case) in cases.iter().enumerate() {
            let (of_off, of_floor) = (rps[i] / rps[0], rps[i] / floor_rps);
            println!(
                "  {}. {:<28} {:>7.0}/s = {of_off:.3} of off, {of_floor:.3} of the floor",
                i + 1,
                case.name,
                rps[i]
            );
            figures[i][0].push(rps[i]);
            figures[i][1].push(of_off);
            figures[i][2].push(of_floor);
        }
    }
    let spread = |v: &[f64]| {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        (v[v.len() / 2], v[0], v[v.len() - 1])
    };
    let (floor_median, floor_min, floor_max) = spread(&floors);
    println!(
        "history of attempts over {rounds} rounds (median, min–max): floor {floor_median:.0}/s ({floor_min:.0}–{floor_max:.0})"
    );
    for (case, [rps, of_off, of_floor]) in cases.iter().zip(&figures) {
        let (r, r0, r1) = spread(rps);
        let (o, o0, o1) = spread(of_off);
        let (f, f0, f1) = spread(of_floor);
        println!(
            "  {:<28} {r:>7.0}/s ({r0:.0}–{r1:.0}); {o:.3} of off ({o0:.3}–{o1:.3}); {f:.3} of the floor ({f0:.3}–{f1:.3})",
            case.name
        );
    }
    let off_median = spread(&figures[0][0]).0;
    let two = two_readings_ns();
    println!(
        "two Instant::now() readings: {two:.1} ns, {:.1} % of a record's {:.0} ns with the history off",
        two * off_median / 1e7,
        1e9 / off_median
    );
}

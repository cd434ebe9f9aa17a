//! The dashboard's pictures, as SVG text a few KB long: records handled and failed per
//! slot over time (over every runner that ticked in it), and the pending records by age band. Their look (colours, fonts,
//! the legend above the chart, the clock axis, the empty picture) is `backoff plot`'s,
//! from `crate::plot`.

use plotters::prelude::{
    ChartBuilder, Circle, Color, Cross, IntoDrawingArea, IntoSegmentedCoord, Rectangle, SVGBackend,
    SegmentValue, Text, WHITE,
};
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::plot::{self, Entry, Mark};
use backlog::status::Status;
use backlog_core::store::RecentRun;

const WIDTH: u32 = 560;
const HEIGHT: u32 = 260;
const Y_LABELS: u32 = 48;
const MARGIN: u32 = 10;

fn empty(text: &str) -> String {
    plot::empty((WIDTH, HEIGHT), text)
}

/// Records handled and failed per slot (`status::slot::by_slot`), over the slots'
/// times. The legend sits above the chart, off the data.
pub(crate) fn ticks(runs: &[RecentRun]) -> String {
    let (Some(first), Some(last)) = (runs.first(), runs.last()) else {
        return empty("No tick yet.");
    };
    // At least a minute wide, the ticks in the middle.
    let (first, last) = (
        first.clock.timestamp() as f64,
        last.clock.timestamp() as f64,
    );
    let widen = (60.0 - (last - first)).max(0.0) / 2.0;
    let (start, end) = (first - widen, last + widen);
    let pad = (end - start) * 0.03;
    let top = runs.iter().map(|r| r.selected).max().unwrap_or(0).max(1) as f64 * 1.1;
    let (x_axis, layout) = plot::clock_axis((start - pad)..(end + pad));
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        let _ = root.fill(&WHITE);
        let (strip, body) = root.split_vertically(plot::LEGEND_HEIGHT);
        let _ = plot::legend(
            &strip,
            (MARGIN + Y_LABELS) as i32,
            &[
                Entry {
                    label: "handled".into(),
                    colour: plot::PRIMARY,
                    mark: Mark::Dot,
                },
                Entry {
                    label: "failed".into(),
                    colour: plot::FAILED,
                    mark: Mark::Cross,
                },
            ],
        );
        let built = ChartBuilder::on(&body)
            .margin(MARGIN)
            .x_label_area_size(28)
            .y_label_area_size(Y_LABELS)
            .build_cartesian_2d(x_axis, 0f64..top);
        let Ok(mut chart) = built else {
            return empty("Cannot draw the ticks.");
        };
        let _ = plot::quiet_mesh(&mut chart.configure_mesh())
            .y_labels(5)
            .x_label_formatter(&|t| plot::clock_label(*t, layout))
            .y_label_formatter(&|n| format!("{n:.0}"))
            .y_desc("records per slot")
            .draw();
        let x = |r: &RecentRun| r.clock.timestamp() as f64;
        let _ = chart.draw_series(
            runs.iter()
                .map(|r| Circle::new((x(r), r.selected as f64), 3, plot::PRIMARY.filled())),
        );
        let _ = chart.draw_series(
            runs.iter()
                .filter(|r| r.failed > 0)
                .map(|r| Cross::new((x(r), r.failed as f64), 4, plot::FAILED.stroke_width(2))),
        );
        let _ = root.present();
    }
    svg
}

/// Pending records by age band, one bar each.
pub(crate) fn backlog(status: &Status, pending: &[String]) -> String {
    let bands: Vec<(String, u64)> = status
        .ages
        .iter()
        .map(|row| {
            let label = match row.tier {
                Some(n) => format!("tier {n}"),
                None if row.label.starts_with("in the future") => "future".into(),
                None => "past last".into(),
            };
            (
                label,
                pending.iter().filter_map(|p| row.counts.get(p)).sum(),
            )
        })
        .collect();
    if bands.iter().all(|(_, n)| *n == 0) {
        return empty("No pending record.");
    }
    let top = (bands.iter().map(|(_, n)| *n).max().unwrap_or(1).max(1) as f64 * 1.15) as u64 + 1;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        let _ = root.fill(&WHITE);
        let built = ChartBuilder::on(&root)
            .margin(MARGIN)
            .x_label_area_size(32)
            .y_label_area_size(Y_LABELS)
            .build_cartesian_2d((0..bands.len()).into_segmented(), 0u64..top);
        let Ok(mut chart) = built else {
            return empty("Cannot draw the backlog.");
        };
        let _ = plot::quiet_mesh(&mut chart.configure_mesh())
            .disable_x_mesh()
            .x_labels(bands.len())
            .x_label_formatter(&|v| match v {
                SegmentValue::CenterOf(i) => bands.get(*i).map(|b| b.0.clone()).unwrap_or_default(),
                _ => String::new(),
            })
            .y_desc("pending records")
            .y_labels(5)
            .draw();
        let _ = chart.draw_series(bands.iter().enumerate().map(|(i, (_, n))| {
            let mut bar = Rectangle::new(
                [
                    (SegmentValue::Exact(i), 0),
                    (SegmentValue::Exact(i + 1), *n),
                ],
                plot::BARS.filled(),
            );
            bar.set_margin(0, 0, 8, 8);
            bar
        }));
        let _ = chart.draw_series(bands.iter().enumerate().map(|(i, (_, n))| {
            Text::new(
                n.to_string(),
                (SegmentValue::CenterOf(i), *n),
                plot::font(plot::TICK, plot::INK).pos(Pos::new(HPos::Center, VPos::Bottom)),
            )
        }));
        let _ = root.present();
    }
    svg
}

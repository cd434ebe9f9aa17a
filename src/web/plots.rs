//! The dashboard's pictures, as SVG text a few KB long: records handled and failed per
//! tick over time, and the pending records by age band.

use plotters::prelude::*;

use crate::status::Status;
use crate::store::RecentRun;

const WIDTH: u32 = 560;
const HEIGHT: u32 = 260;
const HANDLED: RGBColor = RGBColor(36, 87, 197);
const FAILED: RGBColor = RGBColor(180, 35, 24);
const BARS: RGBColor = RGBColor(96, 125, 185);

fn empty(text: &str) -> String {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        let _ = root.fill(&WHITE);
        let _ = root.draw_text(
            text,
            &("sans-serif", 15)
                .into_font()
                .color(&RGBColor(107, 116, 128)),
            (24, (HEIGHT / 2) as i32),
        );
        let _ = root.present();
    }
    svg
}

/// Records handled and failed per tick, over the ticks' clocks. The legend sits above
/// the chart, off the data.
pub(crate) fn ticks(runs: &[RecentRun]) -> String {
    let (Some(first), Some(last)) = (runs.first(), runs.last()) else {
        return empty("No tick yet.");
    };
    let start = first.clock.timestamp() as f64;
    let end = (last.clock.timestamp() as f64).max(start + 60.0);
    let pad = (end - start) * 0.03;
    let top = runs.iter().map(|r| r.selected).max().unwrap_or(0).max(1) as f64 * 1.1;
    // Seconds while the ticks span under an hour, times of day under two days, dates
    // beyond.
    let layout = match end - start {
        span if span < 3_600.0 => "%H:%M:%S",
        span if span < 2.0 * 86_400.0 => "%H:%M",
        _ => "%m-%d",
    };
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        let _ = root.fill(&WHITE);
        let (legend, body) = root.split_vertically(24);
        let font = ("sans-serif", 12).into_font();
        let _ = legend.draw(&Circle::new((60, 12), 4, HANDLED.filled()));
        let _ = legend.draw(&Text::new("handled", (70, 5), font.clone()));
        let _ = legend.draw(&Cross::new((150, 12), 4, FAILED.stroke_width(2)));
        let _ = legend.draw(&Text::new("failed", (160, 5), font));
        let built = ChartBuilder::on(&body)
            .margin(10)
            .x_label_area_size(28)
            .y_label_area_size(44)
            .build_cartesian_2d((start - pad)..(end + pad), 0f64..top);
        let Ok(mut chart) = built else {
            return empty("Cannot draw the ticks.");
        };
        let _ = chart
            .configure_mesh()
            .x_labels(6)
            .y_labels(5)
            .x_label_formatter(&|t| {
                chrono::DateTime::from_timestamp(*t as i64, 0)
                    .map(|t| t.format(layout).to_string())
                    .unwrap_or_default()
            })
            .y_label_formatter(&|n| format!("{n:.0}"))
            .y_desc("records per tick")
            .light_line_style(RGBColor(243, 244, 246))
            .bold_line_style(RGBColor(229, 231, 235))
            .label_style(("sans-serif", 11))
            .draw();
        let x = |r: &RecentRun| r.clock.timestamp() as f64;
        let _ = chart.draw_series(
            runs.iter()
                .map(|r| Circle::new((x(r), r.selected as f64), 3, HANDLED.filled())),
        );
        let _ = chart.draw_series(
            runs.iter()
                .filter(|r| r.failed > 0)
                .map(|r| Cross::new((x(r), r.failed as f64), 4, FAILED.stroke_width(2))),
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
            .margin(10)
            .x_label_area_size(32)
            .y_label_area_size(44)
            .build_cartesian_2d((0..bands.len()).into_segmented(), 0u64..top);
        let Ok(mut chart) = built else {
            return empty("Cannot draw the backlog.");
        };
        let _ = chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(bands.len())
            .x_label_formatter(&|v| match v {
                SegmentValue::CenterOf(i) => bands.get(*i).map(|b| b.0.clone()).unwrap_or_default(),
                _ => String::new(),
            })
            .y_desc("pending records")
            .y_labels(5)
            .light_line_style(RGBColor(243, 244, 246))
            .bold_line_style(RGBColor(229, 231, 235))
            .label_style(("sans-serif", 11))
            .draw();
        let _ = chart.draw_series(bands.iter().enumerate().map(|(i, (_, n))| {
            let mut bar = Rectangle::new(
                [
                    (SegmentValue::Exact(i), 0),
                    (SegmentValue::Exact(i + 1), *n),
                ],
                BARS.filled(),
            );
            bar.set_margin(0, 0, 8, 8);
            bar
        }));
        let _ = chart.draw_series(bands.iter().enumerate().map(|(i, (_, n))| {
            Text::new(
                n.to_string(),
                (SegmentValue::CenterOf(i), *n + top / 40),
                ("sans-serif", 11).into_font(),
            )
        }));
        let _ = root.present();
    }
    svg
}

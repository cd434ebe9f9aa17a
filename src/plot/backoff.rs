//! `backoff plot`: an SVG of when retries land, for jobs that failed at the same moment
//! and keep failing, one column per strategy: a mark per retry (a row per job, coloured
//! by retry number) above the load they make (the most retries in one minute).
//!
//! The columns are meant to be compared, so they share everything: the time axis
//! (logarithmic when the first retries come thousands of times sooner than the
//! horizon), the rows and the load's scale. Retries are drawn on a grid of 2-pixel
//! cells merged into one path per colour: every retry marks its cell, and the file's
//! size follows the picture's pixels rather than the number of retries.

use plotters::prelude::{
    Cartesian2d, ChartBuilder, ChartContext, Color, DrawingArea, DrawingBackend, IntoDrawingArea,
    Rectangle, SVGBackend, WHITE,
};
use std::collections::BTreeMap;
use std::path::Path;

use plotters::coord::types::RangedCoordf64;

use crate::plot::{self, Entry, Mark, Marks, Scale, TimeAxis, TimeCoord};

/// One strategy's retries, ready to draw.
pub struct Panel {
    /// What the column is headed with: the strategy as given, or the schedule file.
    pub title: String,
    /// For each job, the times of its retries, in seconds from the failure.
    pub retries: Vec<Vec<f64>>,
}

/// Most rows of marks: past it, a row stands for several jobs.
const MOST_ROWS: usize = 100;
/// Bars of the load chart.
const BARS: usize = 60;
/// Width of a column of cells, in pixels.
const CELL: i32 = 2;
/// Width of one strategy's column, and the least width of the picture.
const COLUMN: u32 = 440;
const LEAST_WIDTH: u32 = 760;
/// Room for the y tick labels, the same in every column so the charts line up.
const Y_LABELS: u32 = 52;
const MARGIN: u32 = 12;

/// Draws the panels side by side into an SVG at `path`, up to `horizon` seconds. With
/// `unit` (seconds, name), the time axis is linear and counts in that unit; without,
/// it labels its ticks in human units and goes logarithmic when the span is wide.
pub fn plot(
    path: &Path,
    panels: &[Panel],
    horizon: f64,
    unit: Option<(f64, &'static str)>,
) -> Result<(), String> {
    let fail = |e: &dyn std::fmt::Display| format!("cannot draw {}: {e}", path.display());
    let svg = draw(panels, horizon, unit).map_err(|e| fail(&e))?;
    std::fs::write(path, svg).map_err(|e| fail(&e))
}

/// The SVG text of the plot.
fn draw(
    panels: &[Panel],
    horizon: f64,
    unit: Option<(f64, &'static str)>,
) -> Result<String, Box<dyn std::error::Error>> {
    let first = panels
        .iter()
        .flat_map(|p| p.retries.iter().flatten())
        .copied()
        .filter(|t| *t > 0.0)
        .reduce(f64::min);
    let axis = match unit {
        Some((seconds, name)) => TimeAxis {
            scale: Scale::Unit(seconds, name),
            ..TimeAxis::linear(horizon)
        },
        None => TimeAxis::fit(first, horizon),
    };
    let loads: Vec<Vec<(f64, f64, u32)>> = panels.iter().map(|p| load(p, &axis)).collect();
    let peak = loads
        .iter()
        .flatten()
        .map(|(_, _, n)| *n)
        .max()
        .unwrap_or(0)
        .max(1);
    let top = peak + peak / 10 + 1;
    let jobs = panels
        .iter()
        .map(|p| p.retries.len())
        .max()
        .unwrap_or(0)
        .max(1);

    let columns = panels.len().max(1) as u32;
    let width = (COLUMN * columns).max(LEAST_WIDTH);
    let mut svg = String::new();
    let mut marks = Marks::default();
    {
        let root = SVGBackend::with_string(&mut svg, (width, 800)).into_drawing_area();
        root.fill(&WHITE)?;
        let (heading, rest) = root.split_vertically(58);
        heading.draw_text(
            "When retries land: jobs that failed at the same moment and keep failing",
            &plot::font(plot::TITLE, plot::INK),
            (MARGIN as i32, 10),
        )?;
        heading.draw_text(
            &format!(
                "A mark where a job retries, one row per {}; below, the most retries in one minute. Columns share their scales.",
                if jobs > MOST_ROWS { "group of jobs" } else { "job" }
            ),
            &plot::font(plot::LABEL, plot::MUTED),
            (MARGIN as i32, 38),
        )?;
        let (strip, body) = rest.split_vertically(plot::LEGEND_HEIGHT);
        let entries = legend_entries();
        plot::legend(&strip, (MARGIN + Y_LABELS) as i32, &entries)?;

        let areas = body.split_evenly((1, columns as usize));
        for ((panel, load), area) in panels.iter().zip(&loads).zip(areas) {
            draw_panel(&area, panel, load, &axis, (jobs, top), &mut marks)?;
        }
        root.present()?;
    }
    Ok(marks.finish(svg))
}

/// The legend: a colour for each retry's number, the last for it and the later ones.
fn legend_entries() -> Vec<Entry> {
    plot::SERIES
        .iter()
        .enumerate()
        .map(|(n, colour)| Entry {
            label: if n + 1 == plot::SERIES.len() {
                format!("retry {}+", n + 1)
            } else {
                format!("retry {}", n + 1)
            },
            colour: *colour,
            mark: Mark::Square,
        })
        .collect()
}

/// One strategy's column: its retries, a row per job (`jobs` rows), above the most
/// retries in one minute (up to `top`).
fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    panel: &Panel,
    load: &[(f64, f64, u32)],
    axis: &TimeAxis,
    (jobs, top): (usize, u32),
    marks: &mut Marks,
) -> Result<(), Box<dyn std::error::Error>>
where
    DB::ErrorType: 'static,
{
    let (upper, lower) = area.split_vertically(440);
    let mut dots = ChartBuilder::on(&upper)
        .caption(&panel.title, plot::font(plot::CAPTION, plot::INK))
        .margin(MARGIN)
        .x_label_area_size(24)
        .y_label_area_size(Y_LABELS)
        .build_cartesian_2d(axis.range(), 0f64..jobs as f64)?;
    plot::quiet_mesh(&mut dots.configure_mesh())
        .disable_y_mesh()
        .x_label_formatter(&|c| axis.label(*c))
        .y_labels(6)
        .y_label_formatter(&|y| format!("{y:.0}"))
        .y_desc("job")
        .draw()?;
    mark_retries(&dots, panel, axis, jobs, marks);

    let mut bars = ChartBuilder::on(&lower)
        .caption(
            format!(
                "most retries in one minute (peak {})",
                load.iter().map(|b| b.2).max().unwrap_or(0)
            ),
            plot::font(plot::LABEL, plot::INK),
        )
        .margin(MARGIN)
        .x_label_area_size(40)
        .y_label_area_size(Y_LABELS)
        .build_cartesian_2d(axis.range(), 0u32..top)?;
    plot::quiet_mesh(&mut bars.configure_mesh())
        .x_label_formatter(&|c| axis.label(*c))
        .x_desc(axis.describe("time since the failure"))
        .y_labels(5)
        .y_desc("retries")
        .draw()?;
    bars.draw_series(
        load.iter()
            .filter(|b| b.2 > 0)
            .map(|(a, b, n)| Rectangle::new([(*a, 0), (*b, *n)], plot::BARS.filled())),
    )?;
    Ok(())
}

/// Marks each retry's cell: a row per job (or group of jobs), 2-pixel columns of time,
/// coloured by the lowest retry number in the cell; runs of one colour merge.
fn mark_retries<DB: DrawingBackend>(
    chart: &ChartContext<DB, Cartesian2d<TimeCoord, RangedCoordf64>>,
    panel: &Panel,
    axis: &TimeAxis,
    jobs: usize,
    marks: &mut Marks,
) {
    let (low, high) = (axis.at(axis.low), axis.at(axis.high));
    let (pixels, _) = chart.plotting_area().get_pixel_range();
    let cells = ((pixels.end - pixels.start) / CELL).max(1) as usize;
    let group = jobs.div_ceil(MOST_ROWS);
    // (row, cell) → lowest retry number seen there.
    let mut grid: BTreeMap<(usize, usize), usize> = BTreeMap::new();
    for (job, times) in panel.retries.iter().enumerate() {
        for (n, t) in times.iter().enumerate() {
            let x = (axis.at(*t) - low) / (high - low);
            let cell = ((x * cells as f64) as usize).min(cells - 1);
            let seen = grid.entry((job / group, cell)).or_insert(n);
            *seen = (*seen).min(n);
        }
    }
    let x_of = |cell: usize| {
        let c = low + (high - low) * cell as f64 / cells as f64;
        chart.backend_coord(&(c, 0.0)).0
    };
    let mut cells = grid.into_iter().peekable();
    while let Some(((row, start), n)) = cells.next() {
        let mut end = start + 1;
        while let Some(&((r, c), m)) = cells.peek() {
            if r != row || c != end || m.min(7) != n.min(7) {
                break;
            }
            end += 1;
            cells.next();
        }
        let y_top = chart.backend_coord(&(low, ((row + 1) * group) as f64)).1;
        let y_bottom = chart.backend_coord(&(low, (row * group) as f64)).1;
        let height = y_bottom - y_top;
        let gap = i32::from(height >= 3);
        let (x0, x1) = (x_of(start), x_of(end));
        marks.rect(
            plot::SERIES[n.min(plot::SERIES.len() - 1)],
            (x0, y_top + gap),
            (x1 - x0).max(1),
            (height - gap).max(1),
        );
    }
}

/// The load: for each of `BARS` bars across the axis, its coordinates and the most
/// retries that land in one minute within it.
fn load(panel: &Panel, axis: &TimeAxis) -> Vec<(f64, f64, u32)> {
    let mut minutes: BTreeMap<u64, u32> = BTreeMap::new();
    for t in panel.retries.iter().flatten() {
        *minutes.entry((t / 60.0) as u64).or_default() += 1;
    }
    let (low, high) = (axis.at(axis.low), axis.at(axis.high));
    let width = (high - low) / BARS as f64;
    (0..BARS)
        .map(|i| {
            let (a, b) = (low + width * i as f64, low + width * (i + 1) as f64);
            // The first bar takes what came before the axis's left edge too.
            let from = if i == 0 { 0.0 } else { axis.seconds(a) };
            let to = axis.seconds(b);
            let first = (from / 60.0) as u64;
            let last = ((to / 60.0).ceil() as u64).max(first + 1);
            let most = minutes.range(first..last).map(|(_, n)| *n).max();
            (a, b, most.unwrap_or(0))
        })
        .collect()
}

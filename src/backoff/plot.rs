//! `backoff plot`: an SVG of when retries land, for jobs that failed at the same moment
//! and keep failing, one column per strategy: a dot per retry (a row per job, coloured
//! by retry number) above a histogram of retries per time bucket, where load peaks show.

use std::path::Path;

use plotters::prelude::*;

/// One strategy's retries, ready to draw.
pub struct Panel {
    pub title: String,
    /// For each job, the times of its retries, in seconds from the failure.
    pub retries: Vec<Vec<f64>>,
}

/// Colours of retries 1 to 8; later retries share the last.
const RETRY_COLOURS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

/// Draws the panels side by side into an SVG at `path`. Times are shown in units of
/// `unit_seconds`, named `unit`, up to `horizon` seconds.
pub fn plot(
    path: &Path,
    panels: &[Panel],
    horizon: f64,
    unit_seconds: f64,
    unit: &str,
) -> Result<(), String> {
    let columns = panels.len().max(1);
    let root = SVGBackend::new(path, (460 * columns as u32, 760)).into_drawing_area();
    let fail = |e: &dyn std::fmt::Display| format!("cannot draw {}: {e}", path.display());
    root.fill(&WHITE).map_err(|e| fail(&e))?;
    let (title, body) = root.split_vertically(50);
    title
        .titled(
            "When retries land: jobs that failed at the same moment and keep failing",
            ("sans-serif", 22),
        )
        .map_err(|e| fail(&e))?;
    let x_max = horizon / unit_seconds;
    for (panel, area) in panels.iter().zip(body.split_evenly((1, columns))) {
        let (top, bottom) = area.split_vertically(460);
        let jobs = panel.retries.len().max(1);
        let mut dots = ChartBuilder::on(&top)
            .caption(&panel.title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(50)
            .build_cartesian_2d(0f64..x_max, 0f64..jobs as f64)
            .map_err(|e| fail(&e))?;
        dots.configure_mesh()
            .x_desc(format!("time since the failure ({unit})"))
            .y_desc("job")
            .y_label_formatter(&|y| format!("{y:.0}"))
            .disable_mesh()
            .draw()
            .map_err(|e| fail(&e))?;
        for (n, colour) in RETRY_COLOURS.iter().enumerate() {
            let points = panel.retries.iter().enumerate().flat_map(|(job, times)| {
                times
                    .iter()
                    .enumerate()
                    .filter(move |(i, _)| *i == n || (n == RETRY_COLOURS.len() - 1 && *i >= n))
                    .map(move |(_, t)| (t / unit_seconds, job as f64 + 0.5))
            });
            let label = if n == RETRY_COLOURS.len() - 1 {
                format!("retry {}+", n + 1)
            } else {
                format!("retry {}", n + 1)
            };
            dots.draw_series(points.map(|p| Circle::new(p, 2, colour.filled())))
                .map_err(|e| fail(&e))?
                .label(label)
                .legend(move |(x, y)| Circle::new((x + 6, y), 4, colour.filled()));
        }
        dots.configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.3))
            .label_font(("sans-serif", 12))
            .draw()
            .map_err(|e| fail(&e))?;

        // Load: retries per bucket, 60 buckets over the horizon.
        let buckets = 60usize;
        let width = x_max / buckets as f64;
        let mut counts = vec![0u32; buckets];
        for t in panel.retries.iter().flatten() {
            let b = ((t / unit_seconds) / width) as usize;
            if b < buckets {
                counts[b] += 1;
            }
        }
        let peak = counts.iter().copied().max().unwrap_or(0).max(1);
        let mut load = ChartBuilder::on(&bottom)
            .caption(
                format!(
                    "retries per {} {unit} (peak {peak})",
                    crate::explain::tries(width)
                ),
                ("sans-serif", 14),
            )
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(50)
            .build_cartesian_2d(0f64..x_max, 0u32..peak + peak / 10 + 1)
            .map_err(|e| fail(&e))?;
        load.configure_mesh()
            .x_desc(format!("time since the failure ({unit})"))
            .y_desc("retries")
            .disable_x_mesh()
            .draw()
            .map_err(|e| fail(&e))?;
        load.draw_series(counts.iter().enumerate().map(|(i, c)| {
            let x0 = i as f64 * width;
            Rectangle::new(
                [(x0, 0), (x0 + width, *c)],
                RGBColor(31, 119, 180).mix(0.7).filled(),
            )
        }))
        .map_err(|e| fail(&e))?;
    }
    root.present().map_err(|e| fail(&e))
}

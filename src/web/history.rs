//! The overview's history: is the backlog draining or growing, and since when. Four
//! charts of one selection (every tier, or one), drawn from `status::history` as SVG:
//! records handled and failed per UTC hour over 7 days and per UTC day over 90, the
//! pending count per hour, and the handler time's p50 and p95 per hour. Each has a
//! title, axes with units and a legend; one with nothing to draw says why.

use axum::extract::{Path, State};
use axum::response::Response;
use chrono::{DateTime, Utc};
use maud::{Markup, html};
use plotters::prelude::{
    ChartBuilder, Circle, Color, IntoDrawingArea, LineSeries, Rectangle, SVGBackend, WHITE,
};

use super::reply::{SharedState, blocking, error_page};
use crate::plot::{self, Entry, Mark};
use backlog::status::history::{History, Point, Series};
use backlog_core::config::Config;

const WIDTH: u32 = 560;
const HEIGHT: u32 = 280;
const Y_LABELS: u32 = 56;
const MARGIN: u32 = 12;

/// The charts, by the name their address ends with, and each one's title.
const CHARTS: [(&str, &str); 4] = [
    (
        "hourly",
        "Records handled and failed per hour, last 7 days (UTC)",
    ),
    (
        "daily",
        "Records handled and failed per day, last 90 days (UTC)",
    ),
    (
        "pending",
        "Pending records at the ticks, per hour, last 7 days (UTC)",
    ),
    (
        "times",
        "Handler time p50 and p95 per hour, last 7 days (UTC)",
    ),
];

/// Which series the charts draw: every tier, or the tier of that number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Selection {
    All,
    Tier(usize),
}

impl Selection {
    /// `all`, or a tier's number, as the overview's `?history=` and the charts'
    /// addresses carry it; anything else is every tier.
    pub(crate) fn parse(text: Option<&str>, config: &Config) -> Selection {
        match text.and_then(|t| t.parse::<usize>().ok()) {
            Some(n) if (1..=config.schedule.tiers.len()).contains(&n) => Selection::Tier(n),
            _ => Selection::All,
        }
    }

    fn path(self) -> String {
        match self {
            Selection::All => "all".into(),
            Selection::Tier(n) => n.to_string(),
        }
    }

    /// `every tier` or `tier 2 (7d)`, for the charts' words.
    fn name(self, config: &Config) -> String {
        match self {
            Selection::All => "every tier".into(),
            Selection::Tier(n) => format!(
                "tier {n} ({})",
                backlog_core::duration::compact(config.schedule.tiers[n - 1].window)
            ),
        }
    }
}

/// The overview's history section: the selector and the four charts.
pub(super) fn section(config: &Config, selected: Selection) -> Markup {
    let choices = std::iter::once(Selection::All)
        .chain((1..=config.schedule.tiers.len()).map(Selection::Tier));
    html! {
        h2 id="history" { "History" span.meta { " (UTC hours and days, from the run log)" } }
        nav.history-tiers {
            "Show: "
            @for choice in choices {
                @if choice == selected {
                    strong { (choice.name(config)) }
                } @else {
                    a href=(format!("/?history={}#history", choice.path())) { (choice.name(config)) }
                }
                " "
            }
        }
        div.plots.history {
            @for (name, title) in CHARTS {
                figure {
                    img src=(format!("/plots/history/{}/{name}.svg", selected.path())) alt=(title);
                    figcaption { (title) ", " (selected.name(config)) }
                }
            }
        }
    }
}

/// `/plots/history/{selection}/{chart}.svg`.
pub(super) async fn plot(
    State(shared): SharedState,
    Path((selection, chart)): Path<(String, String)>,
) -> Response {
    let Some(chart) = chart
        .strip_suffix(".svg")
        .and_then(|c| CHARTS.iter().position(|(name, _)| *name == c))
    else {
        return error_page(
            axum::http::StatusCode::NOT_FOUND,
            "Not found",
            "There is no such chart: the history's are hourly, daily, pending and times.",
        );
    };
    let result = blocking(&shared, move |config| {
        let mut store = crate::operate::inspected(&config)?;
        let history = backlog::status::history::history(&config, store.as_mut(), Utc::now())
            .map_err(crate::error::Error::store(store.describe()))?;
        let selected = Selection::parse(Some(&selection), &config);
        Ok(draw(chart, &history, selected, &selected.name(&config)))
    })
    .await;
    match result {
        Ok(text) => super::routes::svg(text),
        Err(page) => page,
    }
}

/// The points of the selection in `series`.
fn points(series: &Series, selected: Selection) -> &[Point] {
    match selected {
        Selection::All => &series.all,
        Selection::Tier(n) => series
            .tiers
            .iter()
            .find(|t| t.tier == Some(n))
            .map_or(&[], |t| &t.points),
    }
}

/// Chart number `chart` of `CHARTS`, of `name` (`every tier`, `tier 1 (1d)`).
fn draw(chart: usize, history: &History, selected: Selection, name: &str) -> String {
    let (series, span) = match chart {
        1 => (&history.daily, "90 days"),
        _ => (&history.hourly, "7 days"),
    };
    let points = points(series, selected);
    let title = CHARTS[chart].1;
    if points.is_empty() {
        let who = match selected {
            Selection::All => "No tick".to_string(),
            Selection::Tier(_) => format!("No tick of {name}"),
        };
        return empty(title, &format!("{who} has run in the last {span}."));
    }
    let unrecorded = |what: &str| {
        let since = match history.recorded_since {
            Some(t) => format!("ticks since {} have them", t.format("%Y-%m-%d %H:%M UTC")),
            None => "ticks of this release will".into(),
        };
        format!("These ticks ran under a release that kept no {what}; {since}.")
    };
    let hour = 3600.0;
    match chart {
        0 | 1 => counts(
            title,
            series,
            points,
            if chart == 0 { hour } else { 24.0 * hour },
        ),
        2 if points.iter().all(|p| p.counts.pending.is_none()) => {
            empty(title, &unrecorded("pending counts"))
        }
        2 => pending(title, series, points),
        // Ticks of this release record a pending count, handlers or none.
        _ if points
            .iter()
            .all(|p| p.p50_ms.is_none() && p.counts.pending.is_none()) =>
        {
            empty(title, &unrecorded("handler times"))
        }
        _ if points.iter().all(|p| p.p50_ms.is_none()) => empty(
            title,
            "No handler ran in the last 7 days: the ticks found nothing to hand out.",
        ),
        _ => times(title, series, points),
    }
}

fn empty(title: &str, why: &str) -> String {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        let _ = root.fill(&WHITE);
        let _ = root.draw_text(title, &plot::font(plot::LABEL, plot::INK), (12, 8));
        let _ = root.draw_text(why, &plot::font(15, plot::MUTED), (24, (HEIGHT / 2) as i32));
        let _ = root.present();
    }
    svg
}

fn secs(t: DateTime<Utc>) -> f64 {
    t.timestamp() as f64
}

/// Records handled (bars) and failed (bars over them) per bucket of `width` seconds.
fn counts(title: &str, series: &Series, points: &[Point], width: f64) -> String {
    let top = points
        .iter()
        .map(|p| p.counts.handled)
        .max()
        .unwrap_or(0)
        .max(1) as f64
        * 1.1;
    let unit = if width > 3600.0 {
        "records per day"
    } else {
        "records per hour"
    };
    framed(
        title,
        series,
        &[
            entry("handled", plot::PRIMARY, Mark::Square),
            entry("failed", plot::FAILED, Mark::Square),
        ],
        (0.0, top),
        unit,
        &|n| format!("{n:.0}"),
        |chart| {
            let bar = |p: &Point, n: u64, colour: plotters::style::RGBColor| {
                let x = secs(p.counts.start);
                Rectangle::new([(x, 0.0), (x + width * 0.9, n as f64)], colour.filled())
            };
            let _ = chart.draw_series(
                points
                    .iter()
                    .map(|p| bar(p, p.counts.handled, plot::PRIMARY)),
            );
            let _ = chart.draw_series(
                points
                    .iter()
                    .filter(|p| p.counts.failed > 0)
                    .map(|p| bar(p, p.counts.failed, plot::FAILED)),
            );
        },
    )
}

/// The pending count per hour, a line through the points.
fn pending(title: &str, series: &Series, points: &[Point]) -> String {
    let known: Vec<(f64, f64)> = points
        .iter()
        .filter_map(|p| {
            p.counts
                .pending
                .map(|n| (secs(p.counts.start) + 1800.0, n as f64))
        })
        .collect();
    let top = known.iter().map(|(_, n)| *n).fold(1.0, f64::max) * 1.15;
    framed(
        title,
        series,
        &[entry(
            "pending (largest of the hour's ticks)",
            plot::BARS,
            Mark::Dot,
        )],
        (0.0, top),
        "pending records",
        &|n| format!("{n:.0}"),
        |chart| {
            let _ = chart.draw_series(LineSeries::new(
                known.iter().copied(),
                plot::BARS.stroke_width(2),
            ));
            let _ = chart.draw_series(
                known
                    .iter()
                    .map(|&at| Circle::new(at, 3, plot::BARS.filled())),
            );
        },
    )
}

/// The handler time's p50 and p95 per hour, on a log scale of milliseconds.
fn times(title: &str, series: &Series, points: &[Point]) -> String {
    let of = |q: fn(&Point) -> Option<f64>| -> Vec<(f64, f64)> {
        points
            .iter()
            .filter_map(|p| q(p).map(|ms| (secs(p.counts.start) + 1800.0, ms.max(0.01).log10())))
            .collect()
    };
    let (p50, p95) = (of(|p| p.p50_ms), of(|p| p.p95_ms));
    // Whole powers of ten around the data, a line each.
    let top = p95
        .iter()
        .chain(&p50)
        .map(|(_, y)| *y)
        .fold(0.0, f64::max)
        .floor()
        + 1.0;
    let low = p50
        .iter()
        .map(|(_, y)| *y)
        .fold(top, f64::min)
        .floor()
        .min(top - 1.0);
    framed(
        title,
        series,
        &[
            entry("p50", plot::PRIMARY, Mark::Dot),
            entry("p95", plot::SERIES[1], Mark::Dot),
        ],
        (low, top),
        "handler time (ms, log scale)",
        &|y| match 10f64.powf(*y) {
            ms if ms >= 1.0 => format!("{ms:.0}"),
            ms => format!("{ms}"),
        },
        |chart| {
            for (line, colour) in [(&p50, plot::PRIMARY), (&p95, plot::SERIES[1])] {
                let _ = chart.draw_series(LineSeries::new(
                    line.iter().copied(),
                    colour.stroke_width(2),
                ));
                let _ =
                    chart.draw_series(line.iter().map(|&at| Circle::new(at, 3, colour.filled())));
            }
        },
    )
}

fn entry(label: &str, colour: plotters::style::RGBColor, mark: Mark) -> Entry {
    Entry {
        label: label.into(),
        colour,
        mark,
    }
}

/// A chart's plotting area: a UTC clock across, a number up.
type Chart<'a, 'b> = plotters::chart::ChartContext<
    'a,
    SVGBackend<'b>,
    plotters::coord::cartesian::Cartesian2d<
        plot::TimeCoord,
        plotters::coord::types::RangedCoordf64,
    >,
>;

/// A chart over the series' span: its title, the legend in a strip under it, a clock
/// axis in UTC, and a y axis from `low` to `top` named `y`, labelled by `y_label`;
/// `body` draws the data.
fn framed(
    title: &str,
    series: &Series,
    legend: &[Entry],
    (low, top): (f64, f64),
    y: &str,
    y_label: &dyn Fn(&f64) -> String,
    body: impl FnOnce(&mut Chart<'_, '_>),
) -> String {
    let (x_axis, layout) = plot::clock_axis(secs(series.from)..secs(series.until));
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        let _ = root.fill(&WHITE);
        let (head, rest) = root.split_vertically(22);
        let _ = head.draw_text(title, &plot::font(plot::LABEL, plot::INK), (12, 4));
        let (strip, area) = rest.split_vertically(plot::LEGEND_HEIGHT);
        let _ = plot::legend(&strip, (MARGIN + Y_LABELS) as i32, legend);
        let x_desc = match layout {
            "%m-%d" => "date (UTC)",
            _ => "time (UTC)",
        };
        let built = ChartBuilder::on(&area)
            .margin(MARGIN)
            .x_label_area_size(40)
            .y_label_area_size(Y_LABELS)
            .build_cartesian_2d(x_axis, low..top);
        let Ok(mut chart) = built else {
            return empty(title, "Cannot draw this chart.");
        };
        let _ = plot::quiet_mesh(&mut chart.configure_mesh())
            .y_labels(5)
            .x_label_formatter(&|t| plot::clock_label(*t, layout))
            .y_label_formatter(y_label)
            .x_desc(x_desc)
            .y_desc(y)
            .draw();
        body(&mut chart);
        let _ = root.present();
    }
    svg
}

//! Time axes: tick labels in human units (`1m`, `6h`, `30d`) on round steps, a
//! logarithmic scale where the span is wide, or clock times.

use std::ops::Range;

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, Ranged};
use plotters::coord::types::RangedCoordf64;

const MINUTE: f64 = 60.0;
const HOUR: f64 = 3_600.0;
const DAY: f64 = 86_400.0;

/// A span as people write it: `0`, `45s`, `10m`, `1h30m`, `6h`, `30d`.
pub fn human(seconds: f64) -> String {
    if seconds <= 0.0 {
        return "0".into();
    }
    if seconds < 1.0 {
        return format!("{seconds:.1}s");
    }
    let s = seconds.round() as u64;
    let units = [(86_400, "d"), (3_600, "h"), (60, "m"), (1, "s")];
    let (i, (size, name)) = units
        .iter()
        .enumerate()
        .find(|(_, (size, _))| s >= *size)
        .expect("at least a second");
    let (whole, rest) = (s / size, s % size);
    match units.get(i + 1) {
        Some((next, next_name)) if rest > 0 && rest % next == 0 => {
            format!("{whole}{name}{}{next_name}", rest / next)
        }
        _ if rest > 0 => format!("{:.1}{name}", s as f64 / *size as f64),
        _ => format!("{whole}{name}"),
    }
}

/// Round steps for a linear time axis, in seconds.
const STEPS: [f64; 22] = [
    1.0,
    5.0,
    10.0,
    15.0,
    30.0,
    MINUTE,
    5.0 * MINUTE,
    10.0 * MINUTE,
    15.0 * MINUTE,
    30.0 * MINUTE,
    HOUR,
    2.0 * HOUR,
    3.0 * HOUR,
    6.0 * HOUR,
    12.0 * HOUR,
    DAY,
    2.0 * DAY,
    7.0 * DAY,
    14.0 * DAY,
    30.0 * DAY,
    60.0 * DAY,
    90.0 * DAY,
];

/// Ticks of a logarithmic time axis: the spans people think in, roughly evenly spaced.
const LADDER: [f64; 11] = [
    1.0,
    10.0,
    MINUTE,
    10.0 * MINUTE,
    HOUR,
    6.0 * HOUR,
    DAY,
    7.0 * DAY,
    30.0 * DAY,
    180.0 * DAY,
    365.0 * DAY,
];

/// The smallest round step that puts at most `most` ticks on `span` seconds.
fn step(span: f64, most: usize) -> f64 {
    STEPS
        .iter()
        .copied()
        .find(|s| span / s <= most as f64)
        .unwrap_or(180.0 * DAY)
}

/// The multiples of a round step within `range` (seconds): ticks of a linear axis.
fn round_ticks(range: &Range<f64>, most: usize) -> Vec<f64> {
    let step = step(range.end - range.start, most);
    let mut ticks = Vec::new();
    let mut t = (range.start / step).ceil() * step;
    while t <= range.end + 1e-9 {
        ticks.push(t);
        t += step;
    }
    ticks
}

/// Past this ratio of the horizon to the first point, a linear axis would squeeze the
/// start into a few pixels: the axis goes logarithmic.
const WIDE: f64 = 50.0;

/// How a time axis maps seconds to its coordinate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Scale {
    /// Seconds as they are, labelled in human units.
    Linear,
    /// Seconds as they are, labelled as numbers of `unit` seconds named `name`.
    Unit(f64, &'static str),
    /// log₁₀ of the seconds, from a lowest tick on.
    Log,
}

/// The coordinate of a time axis: plotters' f64 range with our ticks bound to it
/// (plotters' own `WithKeyPoints` over an f64 range cannot take a label formatter).
pub struct TimeCoord {
    inner: RangedCoordf64,
    ticks: Vec<f64>,
}

impl Ranged for TimeCoord {
    type ValueType = f64;
    type FormatOption = DefaultFormatting;

    fn range(&self) -> Range<f64> {
        self.inner.range()
    }

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        self.inner.map(value, limit)
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.ticks.clone()
        }
    }
}

/// A time axis counting from a moment (a failure): its range in seconds, its scale,
/// its ticks in human units.
#[derive(Debug, Clone, Copy)]
pub struct TimeAxis {
    /// What the coordinate is: seconds, a unit of them, or their log.
    pub scale: Scale,
    /// Seconds at the left edge.
    pub low: f64,
    /// Seconds at the right edge.
    pub high: f64,
}

impl TimeAxis {
    /// An axis from 0 (or from the tick below `first` when it is logarithmic) to
    /// `horizon`: logarithmic when the horizon is more than `WIDE` times the first point.
    pub fn fit(first: Option<f64>, horizon: f64) -> Self {
        match first {
            Some(first) if horizon / first.max(1.0) > WIDE => TimeAxis {
                scale: Scale::Log,
                low: LADDER
                    .iter()
                    .copied()
                    .rev()
                    .find(|l| *l <= first.max(1.0))
                    .unwrap_or(1.0),
                high: horizon,
            },
            _ => TimeAxis::linear(horizon),
        }
    }

    /// 0 to `horizon`, linear.
    pub fn linear(horizon: f64) -> Self {
        TimeAxis {
            scale: Scale::Linear,
            low: 0.0,
            high: horizon,
        }
    }

    /// The coordinate of a time; times before the left edge of a log axis sit on it.
    pub fn at(&self, seconds: f64) -> f64 {
        match self.scale {
            Scale::Log => seconds.clamp(self.low, self.high).log10(),
            _ => seconds,
        }
    }

    /// The time at a coordinate.
    pub fn seconds(&self, coordinate: f64) -> f64 {
        match self.scale {
            Scale::Log => 10f64.powf(coordinate),
            _ => coordinate,
        }
    }

    /// The coordinate range, with its ticks bound to it.
    pub fn range(&self) -> TimeCoord {
        let ticks: Vec<f64> = match self.scale {
            Scale::Log => {
                // Ticks closer than a twelfth of the axis would print over each other.
                let room = (self.at(self.high) - self.at(self.low)) / 12.0;
                let mut ticks: Vec<f64> = Vec::new();
                for l in LADDER
                    .iter()
                    .filter(|l| (self.low..=self.high).contains(*l))
                {
                    if ticks.last().is_none_or(|t| l.log10() - t.log10() >= room) {
                        ticks.push(*l);
                    }
                }
                ticks
            }
            Scale::Linear => round_ticks(&(self.low..self.high), 6),
            Scale::Unit(unit, _) => nice_numbers(self.high / unit, 6)
                .into_iter()
                .map(|n| n * unit)
                .collect(),
        };
        TimeCoord {
            inner: (self.at(self.low)..self.at(self.high)).into(),
            ticks: ticks.into_iter().map(|t| self.at(t)).collect(),
        }
    }

    /// A tick's label: `1m`, `6h`, `30d` (or a number of the unit).
    pub fn label(&self, coordinate: f64) -> String {
        match self.scale {
            Scale::Unit(unit, _) => {
                let text = format!("{:.2}", coordinate / unit);
                text.trim_end_matches('0').trim_end_matches('.').to_string()
            }
            _ => human(self.seconds(coordinate)),
        }
    }

    /// The axis description, `what` followed by how to read the scale.
    pub fn describe(&self, what: &str) -> String {
        match self.scale {
            Scale::Linear => what.to_string(),
            Scale::Unit(_, name) => format!("{what} ({name})"),
            Scale::Log => format!("{what} (log scale)"),
        }
    }
}

/// 1, 2 or 5 times a power of ten: at most `most` multiples of it up to `high`.
fn nice_numbers(high: f64, most: usize) -> Vec<f64> {
    let raw = (high / most as f64).max(f64::MIN_POSITIVE);
    let power = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * power)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * power);
    (0..=most * 2)
        .map(|i| i as f64 * step)
        .take_while(|v| *v <= high + 1e-9)
        .collect()
}

/// Ticks and their layout for a clock axis from `start` to `end` (Unix seconds, UTC):
/// on round steps, shown as seconds while the span is under a few minutes, times of
/// day under two days, dates beyond.
pub fn clock_axis(range: Range<f64>) -> (TimeCoord, &'static str) {
    let span = range.end - range.start;
    let layout = match step(span, 6) {
        s if s < MINUTE => "%H:%M:%S",
        s if s < DAY => "%H:%M",
        _ => "%m-%d",
    };
    let ticks = round_ticks(&range, 6);
    (
        TimeCoord {
            inner: range.into(),
            ticks,
        },
        layout,
    )
}

/// A clock tick's label, in the layout `clock_axis` chose (UTC).
pub fn clock_label(seconds: f64, layout: &str) -> String {
    chrono::DateTime::from_timestamp(seconds as i64, 0)
        .map(|t| t.format(layout).to_string())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_read_as_people_write_them() {
        let cases = [
            (0.0, "0"),
            (0.5, "0.5s"),
            (1.0, "1s"),
            (59.6, "1m"),
            (600.0, "10m"),
            (5_400.0, "1h30m"),
            (21_600.0, "6h"),
            (86_400.0, "1d"),
            (30.0 * 86_400.0, "30d"),
        ];
        for (seconds, text) in cases {
            assert_eq!(human(seconds), text, "{seconds}");
        }
    }

    #[test]
    fn a_wide_span_goes_logarithmic_and_keeps_human_ticks() {
        let axis = TimeAxis::fit(Some(90.0), 360.0 * 86_400.0);
        assert_eq!(axis.scale, Scale::Log);
        assert_eq!(axis.low, 60.0, "the tick below the first point");
        let labels: Vec<String> = LADDER
            .iter()
            .filter(|l| (axis.low..=axis.high).contains(*l))
            .map(|l| axis.label(axis.at(*l)))
            .collect();
        assert_eq!(labels, ["1m", "10m", "1h", "6h", "1d", "7d", "30d", "180d"]);
        let narrow = TimeAxis::fit(Some(1_800.0), 86_400.0);
        assert_eq!(narrow.scale, Scale::Linear, "48 times: linear reads well");
    }

    #[test]
    fn linear_and_clock_ticks_fall_on_round_steps() {
        assert_eq!(
            round_ticks(&(0.0..86_400.0), 6),
            [0.0, 21_600.0, 43_200.0, 64_800.0, 86_400.0]
        );
        let (coord, layout) = clock_axis(1_000.0..(1_000.0 + 3.0 * 3_600.0));
        assert_eq!(layout, "%H:%M");
        assert!(
            coord.ticks.iter().all(|t| t % 1_800.0 == 0.0),
            "{:?}",
            coord.ticks
        );
        assert_eq!(clock_label(coord.ticks[0], layout), "00:30");
        assert_eq!(nice_numbers(24.0, 6), [0.0, 5.0, 10.0, 15.0, 20.0]);
    }
}

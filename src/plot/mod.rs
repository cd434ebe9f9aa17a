//! The look every plot shares, in the terminal tool (`backoff plot`) and on the
//! dashboard: colours, fonts, a legend in its own strip above the plotting area (never
//! over the data), time axes with tick labels in human units (`1m`, `6h`, `30d`, or
//! clock times), the picture shown when there is nothing to draw, and marks merged into
//! one SVG path per colour, so that a picture's size follows its pixels, not its
//! number of points. The time axes are `axis`.

use plotters::prelude::{
    Circle, Color, Cross, DrawingArea, DrawingAreaErrorKind, DrawingBackend, IntoDrawingArea,
    IntoFont, RGBColor, Rectangle, SVGBackend, TextStyle, WHITE,
};
use std::collections::BTreeMap;

use plotters::coord::Shift;

mod axis;
pub mod backoff;

pub use axis::{Scale, TimeAxis, TimeCoord, clock_axis, clock_label};

/// The font family of every text.
pub const FONT: &str = "sans-serif";
/// Body text, axis descriptions.
pub const INK: RGBColor = RGBColor(31, 41, 55);
/// Secondary text: tick labels, notes, the empty picture.
pub const MUTED: RGBColor = RGBColor(107, 116, 128);
/// Grid lines.
pub const GRID: RGBColor = RGBColor(229, 231, 235);
/// The finer grid lines, between the labelled ones.
pub const GRID_LIGHT: RGBColor = RGBColor(243, 244, 246);
/// Records handled, retries of one strategy: the main series.
pub const PRIMARY: RGBColor = RGBColor(36, 87, 197);
/// Failures.
pub const FAILED: RGBColor = RGBColor(180, 35, 24);
/// Bars (counts, load).
pub const BARS: RGBColor = RGBColor(96, 125, 185);
/// One colour per member of an ordered series (retry 1, 2, …), told apart in print.
pub const SERIES: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

/// Text sizes, in plotters' units (its SVG backend writes about 0.8 of them as pixels).
/// This one: a picture's title.
pub const TITLE: u32 = 24;
/// A panel's caption, above its plotting area.
pub const CAPTION: u32 = 18;
/// Axis descriptions and legend entries.
pub const LABEL: u32 = 15;
/// Tick labels.
pub const TICK: u32 = 14;

/// A text style of the shared family.
pub fn font(size: u32, colour: RGBColor) -> TextStyle<'static> {
    (FONT, size).into_font().color(&colour)
}

/// The picture drawn when there is nothing to plot: the reason, in grey.
pub fn empty(size: (u32, u32), text: &str) -> String {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        let _ = root.fill(&WHITE);
        let _ = root.draw_text(text, &font(15, MUTED), (24, (size.1 / 2) as i32));
        let _ = root.present();
    }
    svg
}

/// The quiet mesh every chart uses: light grid, grey tick labels, dark descriptions.
pub fn quiet_mesh<'m, 'a, 'b, X, Y, DB>(
    mesh: &'m mut plotters::chart::MeshStyle<'a, 'b, X, Y, DB>,
) -> &'m mut plotters::chart::MeshStyle<'a, 'b, X, Y, DB>
where
    X: plotters::coord::ranged1d::Ranged,
    Y: plotters::coord::ranged1d::Ranged,
    DB: DrawingBackend,
{
    mesh.light_line_style(GRID_LIGHT)
        .bold_line_style(GRID)
        .axis_style(MUTED)
        .label_style(font(TICK, MUTED))
        .axis_desc_style(font(LABEL, INK))
}

/// How a legend entry is drawn.
#[derive(Debug, Clone, Copy)]
pub enum Mark {
    /// A filled circle, for a series of points.
    Dot,
    /// An ×, for failures.
    Cross,
    /// A filled square, for a series drawn as bars or cells.
    Square,
}

/// One legend entry.
pub struct Entry {
    /// What the entry names.
    pub label: String,
    /// The series' colour.
    pub colour: RGBColor,
    /// The shape drawn beside the label, as the series draws its points.
    pub mark: Mark,
}

/// Height of a legend strip.
pub const LEGEND_HEIGHT: u32 = 24;

/// Draws a legend on one line in `strip`, a strip of its own above the plotting area,
/// starting `indent` pixels in (to line up with the plotting area's left edge).
pub fn legend<DB: DrawingBackend>(
    strip: &DrawingArea<DB, Shift>,
    indent: i32,
    entries: &[Entry],
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    use plotters::style::text_anchor::{HPos, Pos, VPos};
    let style = font(LABEL, INK).pos(Pos::new(HPos::Left, VPos::Center));
    let middle = strip.dim_in_pixel().1 as i32 / 2;
    let mut x = indent;
    for entry in entries {
        let at = (x + 5, middle);
        match entry.mark {
            Mark::Dot => strip.draw(&Circle::new(at, 4, entry.colour.filled()))?,
            Mark::Cross => strip.draw(&Cross::new(at, 4, entry.colour.stroke_width(2)))?,
            Mark::Square => strip.draw(&Rectangle::new(
                [(at.0 - 5, at.1 - 5), (at.0 + 5, at.1 + 5)],
                entry.colour.filled(),
            ))?,
        }
        let (width, _) = strip.estimate_text_size(&entry.label, &style)?;
        strip.draw_text(&entry.label, &style, (x + 15, middle))?;
        x += 15 + width as i32 + 18;
    }
    Ok(())
}

/// Marks (small rectangles) gathered per colour and written as one SVG path each: a
/// few bytes a mark where a plotters element costs a hundred.
#[derive(Default)]
pub struct Marks {
    /// Per colour: the path so far, and where its last rectangle started (a closed
    /// subpath leaves the pen there, so the next one moves relative to it).
    paths: BTreeMap<(u8, u8, u8), Path>,
}

/// One colour's path data, and its pen.
#[derive(Default)]
struct Path {
    d: String,
    pen: (i32, i32),
}

impl Marks {
    /// A rectangle at pixel `(x, y)`, `width` by `height`.
    pub fn rect(&mut self, colour: RGBColor, (x, y): (i32, i32), width: i32, height: i32) {
        use std::fmt::Write as _;
        let Path { d, pen } = self
            .paths
            .entry((colour.0, colour.1, colour.2))
            .or_default();
        if d.is_empty() {
            let _ = write!(d, "M{x} {y}");
        } else {
            let _ = write!(d, "m{} {}", x - pen.0, y - pen.1);
        }
        let _ = write!(d, "h{width}v{height}h-{width}z");
        *pen = (x, y);
    }

    /// `svg` (a whole document) with the marks drawn last, over what it holds.
    pub fn finish(self, mut svg: String) -> String {
        let Some(end) = svg.rfind("</svg>") else {
            return svg;
        };
        let paths: String = self
            .paths
            .iter()
            .map(|((r, g, b), Path { d, .. })| {
                format!("<path fill=\"#{r:02X}{g:02X}{b:02X}\" d=\"{d}\"/>\n")
            })
            .collect();
        svg.insert_str(end, &paths);
        svg
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_become_one_path_per_colour() {
        let mut marks = Marks::default();
        marks.rect(SERIES[0], (1, 2), 3, 4);
        marks.rect(SERIES[0], (5, 2), 3, 4);
        marks.rect(SERIES[1], (9, 2), 3, 4);
        let svg = marks.finish("<svg></svg>".into());
        assert_eq!(svg.matches("<path").count(), 2, "{svg}");
        assert!(svg.contains("M1 2h3v4h-3zm4 0h3v4h-3z"), "{svg}");
    }
}

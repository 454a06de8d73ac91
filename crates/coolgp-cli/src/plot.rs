//! Plots a person would rather look at than read: learning curves and the per-agent
//! pre- vs post-fusion scatter (the paper's Fig. 4a), as PNG and SVG.

use std::path::Path;

use anyhow::{anyhow, Result};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;

static FONT: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");

fn register_font() {
    use std::sync::Once;
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // The embedded font is valid TrueType; a failure would only lose text, not the plot.
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, FONT);
    });
}

/// One named line of (x, y) points.
pub struct Series {
    /// Legend label.
    pub label: String,
    /// Points; NaN y values are skipped.
    pub points: Vec<(f64, f64)>,
}

impl Series {
    /// One series per label, in order, from parallel lists of labels and points.
    pub fn labeled(labels: &[&str], points: Vec<Vec<(f64, f64)>>) -> Vec<Series> {
        labels
            .iter()
            .zip(points)
            .map(|(l, p)| Series {
                label: (*l).into(),
                points: p,
            })
            .collect()
    }
}

const COLORS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
    RGBColor(127, 127, 127),
];

fn bounds(series: &[Series]) -> (f64, f64, f64, f64) {
    let pts = series
        .iter()
        .flat_map(|s| s.points.iter())
        .filter(|p| p.0.is_finite() && p.1.is_finite());
    let (mut x0, mut x1, mut y0, mut y1) = (
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::INFINITY,
        f64::NEG_INFINITY,
    );
    for &(x, y) in pts {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y0 = y0.min(y);
        y1 = y1.max(y);
    }
    if !x0.is_finite() {
        return (0.0, 1.0, 0.0, 1.0);
    }
    let px = ((x1 - x0) * 0.03).max(1e-9);
    let py = ((y1 - y0) * 0.08).max(1e-9);
    (x0 - px, x1 + px, y0 - py, y1 + py)
}

type Chart<'a, DB> = ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

fn err(e: impl std::fmt::Display) -> anyhow::Error {
    anyhow!("{e}")
}

/// An axis tick without trailing zeros: `500`, not `500.0`; `0.99`, not `0.990`.
fn tick(v: &f64) -> String {
    if (v - v.round()).abs() < 1e-9 * v.abs().max(1.0) {
        format!("{v:.0}")
    } else {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_owned()
    }
}

/// White background, caption, axes with labels and a grid.
fn frame<'a, DB: DrawingBackend>(
    root: &'a DrawingArea<DB, Shift>,
    title: &str,
    labels: (&str, &str),
    x: std::ops::Range<f64>,
    y: std::ops::Range<f64>,
) -> Result<Chart<'a, DB>>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(root)
        .caption(title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(x, y)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc(labels.0)
        .x_label_formatter(&tick)
        .y_desc(labels.1)
        .label_style(("sans-serif", 14))
        .draw()
        .map_err(err)?;
    Ok(chart)
}

/// Draws the legend at `pos` and writes the file.
fn finish<'a, DB: DrawingBackend + 'a>(
    mut chart: Chart<'a, DB>,
    root: &'a DrawingArea<DB, Shift>,
    pos: SeriesLabelPosition,
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    chart
        .configure_series_labels()
        .position(pos)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .draw()
        .map_err(err)?;
    root.present().map_err(err)
}

fn draw_lines<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    title: &str,
    xlabel: &str,
    ylabel: &str,
    series: &[Series],
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let (x0, x1, y0, y1) = bounds(series);
    // Headroom above the data for the legend (≈ 20 px per entry of a ≈ 440 px plot area), so
    // that it never hides a line.
    let f = ((series.len() as f64 * 20.0 + 24.0) / 440.0).min(0.6);
    let y1 = y1 + (y1 - y0) * f / (1.0 - f);
    let mut chart = frame(&root, title, (xlabel, ylabel), x0..x1, y0..y1)?;
    for (i, s) in series.iter().enumerate() {
        let c = COLORS[i % COLORS.len()];
        let pts: Vec<(f64, f64)> = s
            .points
            .iter()
            .copied()
            .filter(|p| p.1.is_finite())
            .collect();
        chart
            .draw_series(LineSeries::new(pts.clone(), c.stroke_width(2)))
            .map_err(err)?
            .label(s.label.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2)));
        chart
            .draw_series(pts.iter().map(|&p| Circle::new(p, 3, c.filled())))
            .map_err(err)?;
    }
    finish(chart, &root, SeriesLabelPosition::UpperRight)
}

/// Writes `STEM.png` and `STEM.svg` with line series.
pub fn lines(
    dir: &Path,
    stem: &str,
    title: &str,
    xlabel: &str,
    ylabel: &str,
    series: &[Series],
) -> Result<()> {
    register_font();
    let png = dir.join(format!("{stem}.png"));
    let svg = dir.join(format!("{stem}.svg"));
    draw_lines(
        BitMapBackend::new(&png, (900, 560)).into_drawing_area(),
        title,
        xlabel,
        ylabel,
        series,
    )?;
    draw_lines(
        SVGBackend::new(&svg, (900, 560)).into_drawing_area(),
        title,
        xlabel,
        ylabel,
        series,
    )?;
    Ok(())
}

fn draw_scatter<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    title: &str,
    pts: &[(f64, f64)],
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let (x0, x1, y0, y1) = bounds(&[Series {
        label: String::new(),
        points: pts.to_vec(),
    }]);
    // One square range for both axes, padded so that points on an extreme (e.g. a fleet
    // whose agents all predict alike) stay off the frame.
    let (lo, hi) = (x0.min(y0), x1.max(y1));
    let pad = ((hi - lo) * 0.04).max(1e-9);
    let (lo, hi) = (lo - pad, hi + pad);
    let labels = (
        "pre-fusion RMSE (own model)",
        "post-fusion RMSE (fused model)",
    );
    let mut chart = frame(&root, title, labels, lo..hi, lo..hi)?;
    chart
        .draw_series(LineSeries::new(
            vec![(lo, lo), (hi, hi)],
            BLACK.mix(0.4).stroke_width(1),
        ))
        .map_err(err)?
        .label("post = pre")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], BLACK.mix(0.4)));
    chart
        .draw_series(
            pts.iter()
                .map(|&p| Circle::new(p, 3, COLORS[0].mix(0.6).filled())),
        )
        .map_err(err)?
        .label("agent")
        .legend(|(x, y)| Circle::new((x + 9, y), 3, COLORS[0].filled()));
    finish(chart, &root, SeriesLabelPosition::UpperLeft)
}

/// Writes `STEM.png` and `STEM.svg`: one point per agent, pre vs post, with the diagonal.
pub fn scatter(dir: &Path, stem: &str, title: &str, pts: &[(f64, f64)]) -> Result<()> {
    register_font();
    let png = dir.join(format!("{stem}.png"));
    let svg = dir.join(format!("{stem}.svg"));
    draw_scatter(
        BitMapBackend::new(&png, (640, 640)).into_drawing_area(),
        title,
        pts,
    )?;
    draw_scatter(
        SVGBackend::new(&svg, (640, 640)).into_drawing_area(),
        title,
        pts,
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::tick;

    #[test]
    fn ticks_drop_trailing_zeros_only() {
        assert_eq!(tick(&500.0), "500");
        assert_eq!(tick(&0.99), "0.99");
        assert_eq!(tick(&0.7), "0.7");
        assert_eq!(tick(&-2.5), "-2.5");
        assert_eq!(tick(&1e-12), "0");
    }
}

//! SVG plots of measurements against message size (log2 x axis), one line per series, like
//! the seeds' throughput and latency figures.

use plotters::coord::ranged1d::ValueFormatter;
use plotters::prelude::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::report::Row;

/// Why a plot could not be drawn.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PlotError {
    /// Nothing to draw: no series with a positive finite point.
    #[error("nothing to plot for {0:?}")]
    Empty(String),
    /// The drawing backend failed (file not writable, ...).
    #[error("cannot draw {path}: {reason}")]
    Draw {
        /// The output file.
        path: PathBuf,
        /// The backend's message.
        reason: String,
    },
}

/// One line of a plot.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Legend label.
    pub label: String,
    /// (x, y) points; non-positive or non-finite points are skipped (log axes).
    pub points: Vec<(f64, f64)>,
}

/// Titles and axes of a plot.
#[derive(Debug, Clone, PartialEq)]
pub struct Spec {
    /// Title above the plot.
    pub title: String,
    /// X axis label.
    pub x_label: String,
    /// Y axis label.
    pub y_label: String,
    /// Logarithmic y axis.
    pub log_y: bool,
}

fn bounds(vals: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    let (lo, hi) = vals.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
        (lo.min(v), hi.max(v))
    });
    (lo.is_finite() && hi.is_finite()).then_some((lo, hi))
}

/// Draws `series` into an SVG file at `path`, x on a log2 axis.
pub fn plot_xy(path: &Path, spec: &Spec, series: &[Series]) -> Result<(), PlotError> {
    let draw = |e: &dyn std::fmt::Display| PlotError::Draw {
        path: path.to_path_buf(),
        reason: e.to_string(),
    };
    let clean: Vec<Series> = series
        .iter()
        .map(|s| Series {
            label: s.label.clone(),
            points: s
                .points
                .iter()
                .copied()
                .filter(|&(x, y)| x > 0.0 && y > 0.0 && x.is_finite() && y.is_finite())
                .collect(),
        })
        .filter(|s| !s.points.is_empty())
        .collect();
    let all = || clean.iter().flat_map(|s| s.points.iter().copied());
    let (Some((x0, x1)), Some((y0, y1))) = (bounds(all().map(|p| p.0)), bounds(all().map(|p| p.1)))
    else {
        return Err(PlotError::Empty(spec.title.clone()));
    };
    let (x0, x1) = (x0 / 1.2, x1 * 1.2);
    let root = SVGBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| draw(&e))?;
    let mut b = ChartBuilder::on(&root);
    b.caption(&spec.title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(72);
    let xs = (x0..x1).log_scale().base(2.0);
    if spec.log_y {
        let mut chart = b
            .build_cartesian_2d(xs, (y0 / 1.5..y1 * 1.5).log_scale())
            .map_err(|e| draw(&e))?;
        mesh_and_lines(&mut chart, spec, &clean).map_err(|e| draw(&e))?;
    } else {
        let mut chart = b
            .build_cartesian_2d(xs, 0.0..y1 * 1.1)
            .map_err(|e| draw(&e))?;
        mesh_and_lines(&mut chart, spec, &clean).map_err(|e| draw(&e))?;
    }
    root.present().map_err(|e| draw(&e))?;
    Ok(())
}

type Chart<'a, X, Y> = ChartContext<'a, SVGBackend<'a>, Cartesian2d<X, Y>>;

fn mesh_and_lines<X, Y>(
    chart: &mut Chart<'_, X, Y>,
    spec: &Spec,
    series: &[Series],
) -> Result<(), DrawingAreaErrorKind<std::io::Error>>
where
    X: Ranged<ValueType = f64> + ValueFormatter<f64>,
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    chart
        .configure_mesh()
        .x_desc(&spec.x_label)
        .y_desc(&spec.y_label)
        .x_label_formatter(&|x| crate::sizes::format_size(x.round() as usize))
        .y_label_formatter(&|y| format!("{y:.3e}"))
        .draw()?;
    for (i, s) in series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(s.points.clone(), color.stroke_width(2)))?
            .label(&s.label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color));
        chart.draw_series(s.points.iter().map(|&p| Circle::new(p, 3, color.filled())))?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
}

/// Groups rows by `series()` into lines of (size, value).
pub fn series_of(rows: &[Row], value: impl Fn(&Row) -> f64) -> Vec<Series> {
    let mut by: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for r in rows {
        by.entry(r.series())
            .or_default()
            .push((r.size as f64, value(r)));
    }
    by.into_iter()
        .map(|(label, points)| Series { label, points })
        .collect()
}

/// Writes `<dir>/<bench>-throughput.svg` and `<dir>/<bench>-latency.svg` for each bench in
/// `rows`; returns the files written.
pub fn plot_rows(dir: &Path, rows: &[Row]) -> Result<Vec<PathBuf>, PlotError> {
    std::fs::create_dir_all(dir).map_err(|e| PlotError::Draw {
        path: dir.to_path_buf(),
        reason: e.to_string(),
    })?;
    let mut benches: Vec<&str> = rows.iter().map(|r| r.bench.as_str()).collect();
    benches.sort_unstable();
    benches.dedup();
    let mut out = Vec::new();
    for bench in benches {
        let mine: Vec<Row> = rows.iter().filter(|r| r.bench == bench).cloned().collect();
        let t = dir.join(format!("{bench}-throughput.svg"));
        let spec = Spec {
            title: format!("{bench}: throughput vs message size"),
            x_label: "message size (bytes)".into(),
            y_label: "MB/s".into(),
            log_y: true,
        };
        plot_xy(&t, &spec, &series_of(&mine, |r| r.mb_per_s))?;
        out.push(t);
        let l = dir.join(format!("{bench}-latency.svg"));
        let spec = Spec {
            title: format!("{bench}: one-way time vs message size (median)"),
            x_label: "message size (bytes)".into(),
            y_label: "ns".into(),
            log_y: true,
        };
        plot_xy(&l, &spec, &series_of(&mine, |r| r.one_way_ns_median))?;
        out.push(l);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::Summary;

    #[test]
    fn writes_svg_with_a_line_per_series() {
        let dir = tempfile::tempdir().unwrap();
        let mut rows = Vec::new();
        for (t, base) in [("tcp-raw", 20_000.0), ("crossbeam", 300.0)] {
            for k in 2..12 {
                let size = 1usize << k;
                let s = Summary::of(&[base + size as f64]).unwrap();
                rows.push(Row::new("pingpong", t, "-", size, &s));
            }
        }
        let files = plot_rows(dir.path(), &rows).unwrap();
        assert_eq!(files.len(), 2);
        let svg = std::fs::read_to_string(&files[0]).unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..80]);
        assert!(svg.contains("tcp-raw") && svg.contains("crossbeam"));
        assert!(svg.matches("<polyline").count() >= 2);
    }

    #[test]
    fn empty_or_unwritable_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let spec = Spec {
            title: "t".into(),
            x_label: "x".into(),
            y_label: "y".into(),
            log_y: false,
        };
        let none = [Series {
            label: "a".into(),
            points: vec![(0.0, 1.0)],
        }];
        assert!(matches!(
            plot_xy(&dir.path().join("a.svg"), &spec, &none),
            Err(PlotError::Empty(_))
        ));
        let one = [Series {
            label: "a".into(),
            points: vec![(4.0, 1.0), (8.0, 2.0)],
        }];
        let bad = dir.path().join("missing/dir/a.svg");
        assert!(matches!(
            plot_xy(&bad, &spec, &one),
            Err(PlotError::Draw { .. })
        ));
    }
}

//! Line and stacked-area charts as inline SVG, so an HTML report is one file that opens
//! anywhere without fetching a chart library. Each plotted series is one `<path>` with
//! class `series` and its name in `data-series`.

use std::fmt::Write;

use html_escape::{encode_double_quoted_attribute as attr, encode_text as text};

use crate::analysis::report::timeline::Unit;
use crate::model::units::ByteUnit;

const WIDTH: f64 = 940.0;
const PLOT_HEIGHT: f64 = 230.0;
const LEFT: f64 = 76.0;
const RIGHT: f64 = WIDTH - 230.0;
const TOP: f64 = 16.0;
const TICKS: usize = 5;
const LEGEND_ROW: f64 = 18.0;
/// Longest legend name shown whole; longer ones are cut, with the full name on hover.
const LEGEND_CHARS: usize = 28;

/// Colours of the series, in order (Tableau 10, readable on white and for most colour
/// vision).
const PALETTE: [&str; 10] = [
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
    "#9c755f", "#bab0ac",
];

/// One series of a chart.
pub struct Line<'a> {
    /// Its name, shown in the legend.
    pub name: &'a str,
    /// Drawn dashed: a total over the others, or a line that often lies on another.
    pub dashed: bool,
    /// One value per x; `None` leaves a gap.
    pub values: &'a [Option<f64>],
}

/// A vertical mark on a chart: a phase boundary or a spike.
pub struct Marker {
    /// Where, in x units.
    pub x: i64,
    /// Its label.
    pub label: String,
    /// Drawn in red rather than grey.
    pub alert: bool,
}

/// A chart of series over a whole-number x axis (iterations, steps, milliseconds).
pub struct Chart<'a> {
    /// What it shows (the SVG's accessible title).
    pub title: &'a str,
    /// What x counts (`iteration`, `ms`).
    pub x_label: &'a str,
    /// The x values.
    pub x: &'a [i64],
    /// The series.
    pub lines: Vec<Line<'a>>,
    /// Stack the series as filled areas (parts of a whole) instead of lines.
    pub stacked: bool,
    /// What the y axis measures.
    pub unit: Unit,
    /// Bytes ticked as MiB / GiB, for a page whose tables name them so (the snapshot's),
    /// rather than the report's MB / GB (the same binary units).
    pub iec_bytes: bool,
    /// Vertical marks.
    pub markers: Vec<Marker>,
}

/// Appends `chart` as an `<svg>` element to `out`.
pub fn chart(c: &Chart, out: &mut String) {
    let columns = if c.stacked {
        stack(c)
    } else {
        c.lines.iter().map(|l| l.values.to_vec()).collect()
    };
    let (x0, x1) = match (c.x.first(), c.x.last()) {
        (Some(&a), Some(&b)) if b > a => (a as f64, b as f64),
        (Some(&a), _) => (a as f64 - 1.0, a as f64 + 1.0),
        _ => (0.0, 1.0),
    };
    let (y0, y1) = y_range(&columns, c.unit);
    // The legend may need more room than the plot.
    let legend_height = TOP + 6.0 + c.lines.len() as f64 * LEGEND_ROW;
    let height = (TOP + PLOT_HEIGHT + 34.0).max(legend_height);
    let bottom = height - 34.0;
    let px = |x: f64| LEFT + (x - x0) / (x1 - x0) * (RIGHT - LEFT);
    let py = |y: f64| bottom - (y - y0) / (y1 - y0) * (bottom - TOP);
    let _ = write!(
        out,
        r##"<svg class="chart" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}" role="img"><title>{}</title>"##,
        text(c.title)
    );
    let _ = write!(
        out,
        r##"<rect x="{LEFT}" y="{TOP}" width="{}" height="{}" fill="#fafafc" stroke="#ccc"/>"##,
        RIGHT - LEFT,
        bottom - TOP
    );
    for (value, label) in ticks(y0, y1, c.unit, c.iec_bytes) {
        let y = py(value);
        let _ = write!(
            out,
            r##"<line x1="{LEFT}" x2="{RIGHT}" y1="{y:.1}" y2="{y:.1}" stroke="#e4e4ea"/><text x="{}" y="{:.1}" text-anchor="end" class="tick">{label}</text>"##,
            LEFT - 6.0,
            y + 4.0
        );
    }
    for (value, _) in ticks(x0, x1, Unit::Count, false) {
        let x = px(value);
        let _ = write!(
            out,
            r##"<text x="{x:.1}" y="{}" text-anchor="middle" class="tick">{value:.0}</text>"##,
            bottom + 16.0
        );
    }
    let _ = write!(
        out,
        r##"<text x="{}" y="{}" text-anchor="middle" class="axis">{}</text>"##,
        (LEFT + RIGHT) / 2.0,
        height - 2.0,
        text(c.x_label)
    );
    for (i, line) in c.lines.iter().enumerate() {
        let colour = PALETTE[i % PALETTE.len()];
        let points: Vec<Option<(f64, f64)>> =
            c.x.iter()
                .zip(&columns[i])
                .map(|(&x, v)| v.map(|v| (px(x as f64), py(v))))
                .collect();
        let d = if c.stacked {
            let below: Vec<Option<(f64, f64)>> = match i {
                0 => c.x.iter().map(|&x| Some((px(x as f64), py(0.0)))).collect(),
                _ => {
                    c.x.iter()
                        .zip(&columns[i - 1])
                        .map(|(&x, v)| v.map(|v| (px(x as f64), py(v))))
                        .collect()
                }
            };
            area_path(&points, &below)
        } else {
            line_path(&points)
        };
        let dash = if line.dashed {
            r#" stroke-dasharray="6 3""#
        } else {
            ""
        };
        let style = if c.stacked {
            format!(r#"fill="{colour}" fill-opacity="0.8" stroke="{colour}""#)
        } else {
            format!(r#"fill="none" stroke="{colour}" stroke-width="1.6"{dash}"#)
        };
        let _ = write!(
            out,
            r#"<path class="series" data-series="{}" {style} d="{d}"/>"#,
            attr(line.name)
        );
        let ly = TOP + 6.0 + i as f64 * LEGEND_ROW;
        let shown: String = if line.name.chars().count() > LEGEND_CHARS {
            line.name
                .chars()
                .take(LEGEND_CHARS - 1)
                .chain(['…'])
                .collect()
        } else {
            line.name.to_owned()
        };
        let _ = write!(
            out,
            r#"<rect x="{}" y="{ly:.1}" width="12" height="12" fill="{colour}"/><text x="{}" y="{:.1}" class="legend"><title>{}</title>{}</text>"#,
            RIGHT + 12.0,
            RIGHT + 30.0,
            ly + 10.0,
            text(line.name),
            text(&shown)
        );
    }
    for m in &c.markers {
        let x = px(m.x as f64);
        let colour = if m.alert { "#d62728" } else { "#777" };
        // Right of the line in the left half of the plot; left of it (ending at it) in
        // the right half, so that a label near the right edge (a peak at the end of the
        // trace) stays inside the plot instead of running over the legend.
        let (label_x, anchor) = if x > (LEFT + RIGHT) / 2.0 {
            (x - 3.0, "end")
        } else {
            (x + 3.0, "start")
        };
        let _ = write!(
            out,
            r#"<line class="marker" x1="{x:.1}" x2="{x:.1}" y1="{TOP}" y2="{bottom}" stroke="{colour}" stroke-dasharray="4 3"/><text x="{label_x:.1}" y="{}" text-anchor="{anchor}" class="marker-label" fill="{colour}">{}</text>"#,
            TOP + 11.0,
            text(&m.label)
        );
    }
    out.push_str("</svg>");
}

/// The running sums of the series (a gap counts as 0 once any series has a value there).
fn stack(c: &Chart) -> Vec<Vec<Option<f64>>> {
    let mut sums = vec![0.0; c.x.len()];
    c.lines
        .iter()
        .map(|l| {
            l.values
                .iter()
                .zip(sums.iter_mut())
                .map(|(v, sum)| {
                    *sum += v.unwrap_or(0.0);
                    Some(*sum)
                })
                .collect()
        })
        .collect()
}

fn y_range(columns: &[Vec<Option<f64>>], unit: Unit) -> (f64, f64) {
    let (mut lo, mut hi) = columns
        .iter()
        .flatten()
        .flatten()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
            (lo.min(*v), hi.max(*v))
        });
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    if unit != Unit::Loss {
        lo = lo.min(0.0);
    }
    if hi <= lo {
        hi = lo + 1.0;
    }
    let pad = (hi - lo) * 0.05;
    // Padding must not take a non-negative series below zero.
    let floor = if lo >= 0.0 { 0.0 } else { f64::NEG_INFINITY };
    ((lo - pad).max(floor), hi + pad)
}

/// Round tick values between `lo` and `hi`, with their labels; bytes are ticked in round
/// MB or GB (MiB or GiB with `iec`).
fn ticks(lo: f64, hi: f64, unit: Unit, iec: bool) -> Vec<(f64, String)> {
    let (mib, gib) = (ByteUnit::Mib.bytes(), ByteUnit::Gib.bytes());
    let (divisor, suffix) = match (unit, iec) {
        (Unit::Bytes, false) if hi >= 2.0 * gib => (gib, " GB"),
        (Unit::Bytes, false) => (mib, " MB"),
        (Unit::Bytes, true) if hi >= 2.0 * gib => (gib, " GiB"),
        (Unit::Bytes, true) => (mib, " MiB"),
        (Unit::Percent, _) => (1.0, "%"),
        (Unit::Milliseconds, _) => (1.0, " ms"),
        (Unit::Count | Unit::Loss | Unit::Norm, _) => (1.0, ""),
    };
    let (lo, hi) = (lo / divisor, hi / divisor);
    let raw = (hi - lo) / TICKS as f64;
    let magnitude = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * magnitude)
        .find(|s| *s >= raw)
        .unwrap_or(magnitude * 10.0);
    // Counts come in whole numbers.
    let step = if unit == Unit::Count {
        step.max(1.0)
    } else {
        step
    };
    let decimals = (0..6)
        .find(|d| {
            let scaled = step * 10f64.powi(*d);
            (scaled - scaled.round()).abs() < 1e-6 * scaled.max(1.0)
        })
        .unwrap_or(6) as usize;
    let mut v = (lo / step).ceil() * step;
    let mut out = Vec::new();
    while v <= hi + step * 1e-9 && out.len() <= TICKS * 2 {
        let v_shown = if v.abs() < step * 1e-9 { 0.0 } else { v }; // never "-0.00"
        out.push((v * divisor, format!("{v_shown:.decimals$}{suffix}")));
        v += step;
    }
    out
}

fn line_path(points: &[Option<(f64, f64)>]) -> String {
    let mut d = String::new();
    let mut pen_down = false;
    for p in points {
        match p {
            Some((x, y)) => {
                let _ = write!(d, "{}{x:.1},{y:.1}", if pen_down { "L" } else { "M" });
                pen_down = true;
            }
            None => pen_down = false,
        }
    }
    d
}

fn area_path(top: &[Option<(f64, f64)>], below: &[Option<(f64, f64)>]) -> String {
    let mut d = line_path(top);
    for (x, y) in below.iter().rev().flatten() {
        let _ = write!(d, "L{x:.1},{y:.1}");
    }
    d.push('Z');
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_inside_the_range() {
        let t: Vec<f64> = ticks(0.0, 97.0, Unit::Percent, false)
            .into_iter()
            .map(|(v, _)| v)
            .collect();
        assert_eq!(t, vec![0.0, 20.0, 40.0, 60.0, 80.0]);
        let gb = ticks(0.0, 8.0 * (1u64 << 30) as f64, Unit::Bytes, false);
        assert_eq!(gb[1].1, "2 GB");
        let gib = ticks(0.0, 8.0 * (1u64 << 30) as f64, Unit::Bytes, true);
        assert_eq!(gib[1].1, "2 GiB");
        let mib = ticks(0.0, 100.0 * (1u64 << 20) as f64, Unit::Bytes, true);
        assert_eq!(mib[1].1, "20 MiB");
        let quarter: Vec<String> = ticks(0.0, 12.0, Unit::Count, false)
            .into_iter()
            .map(|(_, l)| l)
            .collect();
        assert_eq!(quarter[..3], ["0.0", "2.5", "5.0"]);
    }

    #[test]
    fn a_gap_lifts_the_pen() {
        let d = line_path(&[Some((1.0, 2.0)), None, Some((3.0, 4.0)), Some((5.0, 6.0))]);
        assert_eq!(d, "M1.0,2.0M3.0,4.0L5.0,6.0");
    }

    /// The `x` and `text-anchor` of each marker label.
    fn marker_labels(svg: &str) -> Vec<(f64, String)> {
        svg.split(r#"<text x=""#)
            .skip(1)
            .filter(|t| t.contains(r#"class="marker-label""#))
            .map(|t| {
                let x = t[..t.find('"').unwrap()].parse().unwrap();
                let anchor = t
                    .split(r#"text-anchor=""#)
                    .nth(1)
                    .map_or("start", |a| &a[..a.find('"').unwrap()]);
                (x, anchor.to_owned())
            })
            .collect()
    }

    /// A marker at the right end of the plot (the peak of a snapshot's timeline is often
    /// its last event) had its label start right of the line, past the plot's right edge
    /// and over the first legend entry. A label that starts at x extends right of it, one
    /// that ends there extends left: every label must extend into the plot.
    #[test]
    fn marker_labels_stay_inside_the_plot() {
        let mut out = String::new();
        chart(
            &Chart {
                title: "timeline",
                x_label: "ms",
                x: &[0, 50, 100],
                lines: vec![Line {
                    name: "a",
                    dashed: false,
                    values: &[Some(1.0), Some(2.0), Some(3.0)],
                }],
                stacked: true,
                unit: Unit::Bytes,
                iec_bytes: false,
                markers: [0, 100]
                    .into_iter()
                    .map(|x| Marker {
                        x,
                        label: "peak 51.3 GiB".to_owned(),
                        alert: true,
                    })
                    .collect(),
            },
            &mut out,
        );
        let labels = marker_labels(&out);
        assert_eq!(labels.len(), 2, "{out}");
        for (x, anchor) in labels {
            assert!((LEFT..=RIGHT).contains(&x), "{x} {anchor}");
            let room = if anchor == "end" { x - LEFT } else { RIGHT - x };
            assert!(
                room > 100.0,
                "a label at {x} anchored {anchor} leaves the plot"
            );
        }
    }

    #[test]
    fn names_are_escaped() {
        let mut out = String::new();
        chart(
            &Chart {
                title: "a<b",
                x_label: "iteration",
                x: &[0, 1],
                lines: vec![Line {
                    name: "\"><script>",
                    dashed: false,
                    values: &[Some(1.0), Some(2.0)],
                }],
                stacked: false,
                unit: Unit::Count,
                iec_bytes: false,
                markers: Vec::new(),
            },
            &mut out,
        );
        assert!(!out.contains("<script>"), "{out}");
        assert!(out.contains("a&lt;b"));
    }
}

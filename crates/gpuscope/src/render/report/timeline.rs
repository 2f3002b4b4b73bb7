//! The text timeline: a table of the totals at a few points over the run, then one
//! sparkline per category as wide as the terminal allows.

use std::io::{self, Write};

use crate::analysis::report::timeline::{Timeline, TimelineSeries};
use crate::model::units::ByteUnit;
use crate::render::units::in_unit;

/// Rows of the totals table.
const ROWS: usize = 16;
/// Columns of a sparkline's label (2 indent + name) and of its range after it.
const LABEL: usize = 18;
const RANGE: usize = 22;
const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

/// Writes the timeline of one run in `width` columns.
pub fn write(out: &mut dyn Write, timeline: &Timeline, first: i64, width: u16) -> io::Result<()> {
    if timeline.iterations.len() < 2 {
        return Ok(());
    }
    let rows = timeline.resample(ROWS);
    let peak_note = if rows.records_per_point > 1 {
        format!(
            "; each row the peak of the {} records up to it",
            rows.records_per_point
        )
    } else {
        String::new()
    };
    writeln!(out, "Timeline ({} rows{peak_note}):", rows.iterations.len())?;
    let columns: Vec<(&str, &TimelineSeries)> = [
        ("allocated", "allocated"),
        ("reserved", "reserved"),
        ("frag", "fragmentation"),
        ("census", "census"),
        ("heap", "heap"),
        ("tensors", "tensors"),
    ]
    .into_iter()
    .filter_map(|(title, name)| Some((title, rows.get(name)?)))
    .collect();
    write!(out, "  {:>9}", "iteration")?;
    for (title, _) in &columns {
        write!(out, " {title:>10}")?;
    }
    writeln!(out)?;
    for (i, iteration) in rows.iterations.iter().enumerate() {
        write!(out, "  {iteration:>9}")?;
        for (title, s) in &columns {
            let cell = match (s.values[i], *title) {
                (None, _) => "-".to_owned(),
                (Some(v), "frag") => format!("{v:.1}%"),
                (Some(v), "tensors") => format!("{v:.0}"),
                (Some(v), _) => in_unit(v as u64, ByteUnit::Mib),
            };
            write!(out, " {cell:>10}")?;
        }
        writeln!(out)?;
    }
    let categories: Vec<&TimelineSeries> = timeline
        .series
        .iter()
        .filter(|s| s.name.starts_with("category/"))
        .collect();
    if categories.is_empty() {
        return Ok(());
    }
    let bars = (width as usize).saturating_sub(LABEL + RANGE).max(10);
    let columns = timeline.resample(bars);
    writeln!(
        out,
        "Categories over iterations ({first} → {}; MB, lowest–highest record):",
        timeline.iterations[timeline.iterations.len() - 1]
    )?;
    if columns.records_per_point > timeline.records_per_point {
        writeln!(out, "  (each bar is the peak of the records it stands for)")?;
    }
    for s in categories {
        let name = s.name.trim_start_matches("category/");
        let values = &columns.get(&s.name).expect("same series").values;
        // The range of every record: a bar's peak hides the lows between the peaks.
        let (lo, hi) = bounds(&s.values);
        writeln!(
            out,
            "  {name:<15} {} {:.1}–{:.1}",
            sparkline(values, lo, hi),
            ByteUnit::Mib.of(lo as u64),
            ByteUnit::Mib.of(hi as u64)
        )?;
    }
    Ok(())
}

fn bounds(values: &[Option<f64>]) -> (f64, f64) {
    values
        .iter()
        .flatten()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
            (lo.min(*v), hi.max(*v))
        })
}

fn sparkline(values: &[Option<f64>], lo: f64, hi: f64) -> String {
    values
        .iter()
        .map(|v| match v {
            None => ' ',
            Some(_) if hi <= lo => BARS[0],
            Some(v) => {
                let level = ((v - lo) / (hi - lo) * (BARS.len() - 1) as f64).round() as usize;
                BARS[level.min(BARS.len() - 1)]
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::report::timeline::Unit;

    /// Records alternating 100 MB and 200 MB of activations, more than an 80-column
    /// line has bars: every bar is a 200 MB peak, the range still starts at 100 MB.
    #[test]
    fn the_range_is_of_every_record_not_of_the_bars() {
        let n = 200;
        let mib = |m: f64| Some(m * (1u64 << 20) as f64);
        let timeline = Timeline {
            iterations: (0..n).collect(),
            records_per_point: 1,
            series: vec![TimelineSeries {
                name: "category/activations".into(),
                unit: Unit::Bytes,
                values: (0..n)
                    .map(|i| mib(if i % 2 == 0 { 100.0 } else { 200.0 }))
                    .collect(),
            }],
        };
        let mut out = Vec::new();
        write(&mut out, &timeline, 0, 80).unwrap();
        let text = String::from_utf8(out).unwrap();
        let line = text.lines().find(|l| l.contains("activations")).unwrap();
        assert!(line.ends_with(" 100.0–200.0"), "{text}");
        assert!(
            text.contains("each bar is the peak of the records"),
            "{text}"
        );
    }

    #[test]
    fn sparkline_spans_lowest_to_highest_bar() {
        let values = [Some(0.0), Some(50.0), None, Some(100.0)];
        assert_eq!(sparkline(&values, 0.0, 100.0), "▁▅ █");
        assert_eq!(sparkline(&[Some(3.0), Some(3.0)], 3.0, 3.0), "▁▁");
    }
}

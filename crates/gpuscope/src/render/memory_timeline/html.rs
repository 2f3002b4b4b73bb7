//! torch.profiler's memory timeline by category as one self-contained page with a stacked
//! chart.

use super::mb;
use crate::analysis::memory_timeline::{CategoryTimeline, Moment};
use crate::analysis::report::timeline::Unit;
use crate::render::html::{page_end, page_start, table as html_table};
use crate::render::svg::{chart, Chart, Line};
use std::fmt::Write as _;
use std::io::{self, Write};
use std::path::Path;

/// One page with the categories stacked over time.
pub fn html(path: &Path, t: &CategoryTimeline, out: &mut dyn Write) -> io::Result<()> {
    let mut page = page_start("gpuscope memory timeline", &format!("{} events", t.events));
    let _ = write!(
        page,
        "<h2>{}</h2><p>Peak {} MB at {:.1} ms; {} MB at the end.</p>",
        html_escape::encode_text(&path.display().to_string()),
        mb(t.peak.total),
        t.peak.at_ms,
        mb(t.end.total)
    );
    let x: Vec<i64> = t.timeline.iter().map(|m| m.at_ms.round() as i64).collect();
    let columns: Vec<Vec<Option<f64>>> = (0..t.categories.len())
        .map(|c| {
            t.timeline
                .iter()
                .map(|m: &Moment| Some(m.bytes[c] as f64))
                .collect()
        })
        .collect();
    let lines: Vec<Line> = t
        .categories
        .iter()
        .zip(&columns)
        .filter(|(_, v)| v.iter().flatten().any(|b| *b > 0.0))
        .map(|(name, values)| Line {
            name,
            dashed: false,
            values,
        })
        .collect();
    chart(
        &Chart {
            title: "Memory by category",
            x_label: "ms",
            x: &x,
            lines,
            stacked: true,
            unit: Unit::Bytes,
            iec_bytes: false,
            markers: Vec::new(),
        },
        &mut page,
    );
    let rows: Vec<Vec<String>> = t
        .categories
        .iter()
        .enumerate()
        .map(|(i, name)| vec![(*name).to_owned(), mb(t.peak.bytes[i]), mb(t.end.bytes[i])])
        .collect();
    html_table(&mut page, &["category", "MB at peak", "MB at end"], &rows);
    page_end(&mut page);
    out.write_all(page.as_bytes())
}

//! Renders torch.profiler's raw memory timeline by category: text, the
//! `gpuscope.memory-timeline/1` JSON document, and a page with a stacked chart.

use std::fmt::Write as _;
use std::io::{self, Write};
use std::path::Path;

use serde::Serialize;

use crate::analysis::memory_timeline::{CategoryTimeline, Moment};
use crate::analysis::report::timeline::Unit;
use crate::render::html::{page_end, page_start, table as html_table};
use crate::render::svg::{chart, Chart, Line};
use crate::render::{table, write_table};

/// JSON schema name and version of [`json`]'s output.
pub const SCHEMA: &str = "gpuscope.memory-timeline/1";

fn mb(bytes: i64) -> String {
    format!("{:.1}", bytes as f64 / (1u64 << 20) as f64)
}

/// The timeline as text in `width` columns.
pub fn text(path: &Path, t: &CategoryTimeline, width: u16, out: &mut dyn Write) -> io::Result<()> {
    writeln!(
        out,
        "{} — torch.profiler memory timeline, {} events",
        path.display(),
        t.events
    )?;
    writeln!(
        out,
        "Peak {} MB at {:.1} ms; {} MB at the end.",
        mb(t.peak.total),
        t.peak.at_ms,
        mb(t.end.total)
    )?;
    writeln!(out)?;
    let mut tt = table(width);
    tt.set_header(["category", "MB at peak", "MB at end", "its own max"]);
    for (i, name) in t.categories.iter().enumerate() {
        if t.max_bytes[i] != 0 || t.end.bytes[i] != 0 {
            tt.add_row([
                (*name).to_owned(),
                mb(t.peak.bytes[i]),
                mb(t.end.bytes[i]),
                mb(t.max_bytes[i]),
            ]);
        }
    }
    for c in [1, 2, 3] {
        if let Some(col) = tt.column_mut(c) {
            col.set_cell_alignment(comfy_table::CellAlignment::Right);
        }
    }
    write_table(out, &tt)
}

#[derive(Serialize)]
struct JsonDoc<'a> {
    schema: &'static str,
    path: &'a Path,
    #[serde(flatten)]
    timeline: &'a CategoryTimeline,
}

/// The `gpuscope.memory-timeline/1` document.
pub fn json(path: &Path, t: &CategoryTimeline, out: &mut dyn Write) -> io::Result<()> {
    let doc = JsonDoc {
        schema: SCHEMA,
        path,
        timeline: t,
    };
    serde_json::to_writer_pretty(&mut *out, &doc).map_err(io::Error::from)?;
    writeln!(out)
}

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

//! torch.profiler's memory timeline by category as text: the peak and the end, then each
//! category at the peak, at the end and at its own maximum.

use super::mb;
use crate::analysis::memory_timeline::CategoryTimeline;
use crate::render::{paragraph, table, write_table};
use std::io::{self, Write};
use std::path::Path;

/// The timeline as text in `width` columns.
pub fn text(path: &Path, t: &CategoryTimeline, width: u16, out: &mut dyn Write) -> io::Result<()> {
    let head = format!(
        "{} — torch.profiler memory timeline, {} events",
        path.display(),
        t.events
    );
    paragraph(out, &head, width)?;
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

//! Renders `gpuscope snapshot`: the `gpuscope.snapshot/1` JSON document (the report
//! serialised as it is) and what text and page share here; text for an 80-column terminal
//! in [`text`], a self-contained page in [`html`].

pub mod columns;
pub mod html;
mod text;

pub use text::{diff_text, text};

use std::io::{self, Write};
use std::path::Path;

use crate::analysis::snapshot::diff::SnapshotDiff;
use crate::analysis::snapshot::never_freed::NeverFreed;
use crate::analysis::snapshot::sites::SiteBytes;
use crate::analysis::snapshot::SnapshotReport;
use crate::render::units::{bytes, signed_bytes};
use crate::render::{unsupported, Compared, Format, Render};

/// JSON schema name and version of [`diff_json`]'s output.
pub const DIFF_SCHEMA: &str = "gpuscope.snapshot-diff/1";

/// Said under the dump's sites when the peak's are shown too: the two count different
/// sizes (torch's trace records the bytes asked for, its blocks the rounded bytes), so a
/// site's bytes may differ between the tables while nothing changed.
pub const SIZES_DIFFER: &str = "Sizes: the trace records the bytes each allocation asked \
    for, the dump the allocator's blocks, rounded up (to 512 B at least), so a site's \
    bytes can differ between the two tables.";

/// Title of the never-freed sites whose live bytes keep rising across the trace.
pub const ACCUMULATING: &str =
    "Accumulating: never freed, growing across the trace (leak candidates)";

/// Said, when the trace was read, where no site accumulates.
pub const NONE_ACCUMULATING: &str = "No call site accumulates: nothing that the trace \
    allocated and never freed kept growing across it.";

/// Title of the other never-freed sites.
pub const NOT_ACCUMULATING: &str = "Never freed, not accumulating (made once, late, or a few \
    at a time)";

/// The never-freed sites that accumulate and the others, each in the report's order.
pub(crate) fn split_accumulating(list: &[NeverFreed]) -> (Vec<SiteBytes>, Vec<SiteBytes>) {
    let (growing, rest): (Vec<&NeverFreed>, Vec<&NeverFreed>) =
        list.iter().partition(|r| r.accumulating);
    let sums = |rows: Vec<&NeverFreed>| rows.into_iter().map(|r| r.sums.clone()).collect();
    (sums(growing), sums(rest))
}

/// What a report read with `--no-trace` says in place of the trace's figures.
pub const TRACE_SKIPPED: &str =
    "Trace not read (--no-trace; trace=False in Python): this is the state at the \
     dump only. Read the file whole for the timeline, the peak, leak candidates, churn, \
     OOM events, annotations and allocator settings.";

/// The `gpuscope.snapshot/1` document.
pub fn json(report: &SnapshotReport, out: &mut dyn Write) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, report).map_err(io::Error::from)?;
    writeln!(out)
}

/// The `gpuscope.snapshot-diff/1` document: how snapshot `b` differs from `a`.
pub fn diff_json(a: &Path, b: &Path, diff: &SnapshotDiff, out: &mut dyn Write) -> io::Result<()> {
    crate::render::diff_json(DIFF_SCHEMA, a, b, diff, out)
}

/// The sums of a diff's two snapshots, a row each: what, A, B, B − A (for the text and
/// the HTML page).
pub(crate) fn diff_sums(d: &SnapshotDiff) -> Vec<Vec<String>> {
    [
        ("segments", d.before.segments, d.after.segments),
        ("reserved", d.before.reserved_bytes, d.after.reserved_bytes),
        (
            "allocated",
            d.before.allocated_bytes,
            d.after.allocated_bytes,
        ),
    ]
    .into_iter()
    .map(|(what, x, y)| {
        let change = y as i64 - x as i64;
        let (fx, fy, fd) = if what == "segments" {
            (x.to_string(), y.to_string(), format!("{change:+}"))
        } else {
            (bytes(x), bytes(y), signed_bytes(change))
        };
        vec![what.to_owned(), fx, fy, fd]
    })
    .collect()
}

impl Render for SnapshotReport {
    fn render(&self, format: Format, width: u16, out: &mut dyn Write) -> io::Result<()> {
        match format {
            Format::Text => text(self, width, out),
            Format::Json => json(self, out),
            Format::Html => html::html(self, out),
            Format::Csv => Err(unsupported("a snapshot report", format)),
        }
    }
}

impl Render for Compared<'_, SnapshotDiff> {
    fn render(&self, format: Format, width: u16, out: &mut dyn Write) -> io::Result<()> {
        match format {
            Format::Text => diff_text(self.a, self.b, self.diff, width, out),
            Format::Json => diff_json(self.a, self.b, self.diff, out),
            Format::Html => html::diff_html(self.a, self.b, self.diff, out),
            Format::Csv => Err(unsupported("a snapshot comparison", format)),
        }
    }
}

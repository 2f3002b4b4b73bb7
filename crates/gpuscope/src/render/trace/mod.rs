//! Renders `gpuscope trace`: the `gpuscope.trace/1` JSON document here, text for an
//! 80-column terminal in [`text`], a self-contained page in [`html`].

pub mod html;
pub mod stream;
pub mod tables;
mod text;

pub use text::{diff_text, health_text, ranks_text, summary, text};

use std::io::{self, Write};
use std::path::Path;

use serde::Serialize;

use crate::analysis::trace::device_memory::DeviceMemory;
use crate::analysis::trace::diff::TraceDiff;
use crate::analysis::trace::health::HealthIssue;
use crate::analysis::trace::ranks::RankComparison;
use crate::analysis::trace::report::RankReport;
use crate::analysis::trace::summary::{RankSummary, RanksView};
use crate::analysis::trace::TraceAnalysis;
use crate::model::trace::NONE;
use crate::render::short_names::{bare_name, clip};
use crate::render::units::ByteUnit;
use crate::render::{unsupported, Compared, Format, Render};

/// JSON schema name and version of [`json`]'s output.
pub const SCHEMA: &str = "gpuscope.trace/1";

/// JSON schema name and version of [`diff_json`]'s output.
pub const DIFF_SCHEMA: &str = "gpuscope.trace-diff/1";

/// The `gpuscope.trace/1` document, for [`json`] and for callers that hand it on as data
/// (the Python bindings).
#[derive(Serialize)]
pub struct JsonDoc<'a> {
    schema: &'static str,
    clock: &'static str,
    /// What makes the figures incomplete or misleading (`kind`, `rank`, `count`,
    /// `detail`; README, "Trace health"); empty when nothing was found.
    health: &'a [HealthIssue],
    ranks: &'a [RankReport],
    #[serde(skip_serializing_if = "Option::is_none")]
    rank_comparison: Option<&'a RankComparison>,
}

/// The document of an analysis.
pub fn document(analysis: &TraceAnalysis) -> JsonDoc<'_> {
    JsonDoc {
        schema: SCHEMA,
        clock: analysis.clock.name(),
        health: &analysis.health,
        ranks: &analysis.ranks,
        rank_comparison: analysis.comparison.as_ref(),
    }
}

/// The `gpuscope.trace/1` document as pretty JSON.
pub fn json(analysis: &TraceAnalysis, out: &mut dyn Write) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, &document(analysis)).map_err(io::Error::from)?;
    writeln!(out)
}

/// One rank's summary as compact JSON (`<rank>.summary.json`).
pub fn summary_json(summary: &RankSummary, out: &mut dyn Write) -> io::Result<()> {
    serde_json::to_writer(&mut *out, summary).map_err(io::Error::from)
}

impl Render for RanksView {
    fn render(&self, format: Format, width: u16, out: &mut dyn Write) -> io::Result<()> {
        match format {
            Format::Text => {
                writeln!(out, "{} ranks, from their summaries", self.ranks.len())?;
                if let Some(c) = &self.comparison {
                    ranks_text(c, width, out)?;
                }
                for m in &self.missing_steps {
                    writeln!(
                        out,
                        "rank {} lacks {} of the steps other ranks have",
                        m.rank, m.missing
                    )?;
                }
                if let Some(widest) = self.collectives.first() {
                    // The rank spending least in a collective is the one the others wait for.
                    writeln!(
                        out,
                        "widest collective spread: {}: rank {} {:.0} µs, rank {} {:.0} µs",
                        clip(&bare_name(&widest.name), 30),
                        widest.most_rank,
                        widest.max_total_us,
                        widest.least_rank,
                        widest.min_total_us,
                    )?;
                }
                Ok(())
            }
            Format::Json => {
                serde_json::to_writer_pretty(&mut *out, self).map_err(io::Error::from)?;
                writeln!(out)
            }
            Format::Html | Format::Csv => Err(unsupported("merged rank summaries", format)),
        }
    }
}

impl Render for TraceAnalysis {
    fn render(&self, format: Format, width: u16, out: &mut dyn Write) -> io::Result<()> {
        match format {
            Format::Text => {
                health_text(&self.health, width, out)?;
                text(&self.ranks, width, out)?;
                match &self.comparison {
                    Some(c) => ranks_text(c, width, out),
                    None => Ok(()),
                }
            }
            Format::Json => json(self, out),
            Format::Html => html::html(&self.health, &self.ranks, self.comparison.as_ref(), out),
            Format::Csv => Err(unsupported("a trace report", format)),
        }
    }
}

impl Render for Compared<'_, TraceDiff> {
    fn render(&self, format: Format, width: u16, out: &mut dyn Write) -> io::Result<()> {
        match format {
            Format::Text => diff_text(self.a, self.b, self.diff, width, out),
            Format::Json => diff_json(self.a, self.b, self.diff, out),
            Format::Html | Format::Csv => Err(unsupported("a trace comparison", format)),
        }
    }
}

/// The `gpuscope.trace-diff/1` document: how trace `b` differs from trace `a`.
pub fn diff_json(a: &Path, b: &Path, diff: &TraceDiff, out: &mut dyn Write) -> io::Result<()> {
    crate::render::diff_json(DIFF_SCHEMA, a, b, diff, out)
}

/// A stream id for tables: GPU work recorded without one (CUPTI's range profiler) is
/// `none`, not the column's empty marker.
pub(crate) fn stream_label(stream: i64) -> String {
    if stream == NONE {
        "none".to_owned()
    } else {
        stream.to_string()
    }
}

/// What a device's memory timeline comes to, after its heading: peak, end, and where the
/// count starts from.
pub(crate) fn memory_summary(m: &DeviceMemory) -> String {
    let mb = |bytes: i64| ByteUnit::Mib.of_f64(bytes as f64);
    let mut line = format!(
        "peak {:.1} MB allocated at {:.1} ms, {:.1} MB at the end",
        mb(m.peak_bytes),
        m.peak_at_us / 1000.0,
        mb(m.end_bytes)
    );
    match m.allocated_before_trace_bytes {
        Some(0) => {}
        Some(before) => {
            line += &format!(
                ", {:.1} MB already allocated when the trace began",
                mb(before)
            )
        }
        None => {
            line += " (counted from the start of the trace: its events carry no Total Allocated)"
        }
    }
    if let Some(reserved) = m.peak_reserved_bytes {
        line += &format!("; reserved at most {:.1} MB", mb(reserved));
    }
    line
}

//! Renders `gpuscope trace`: the `gpuscope.trace/1` JSON document here, text for an
//! 80-column terminal in [`text`], a self-contained page in [`html`].

pub mod html;
mod text;

pub use text::{diff_text, ranks_text, summary, text};

use std::io::{self, Write};
use std::path::Path;

use serde::Serialize;

use crate::analysis::trace::diff::TraceDiff;
use crate::analysis::trace::ranks::RankComparison;
use crate::analysis::trace::report::RankReport;
use crate::model::trace::NONE;

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
    ranks: &'a [RankReport],
    #[serde(skip_serializing_if = "Option::is_none")]
    rank_comparison: Option<&'a RankComparison>,
}

/// The document of `ranks`; `clock` says how times were taken (`exact`, `hta-rounded`).
pub fn document<'a>(
    ranks: &'a [RankReport],
    comparison: Option<&'a RankComparison>,
    clock: &'static str,
) -> JsonDoc<'a> {
    JsonDoc {
        schema: SCHEMA,
        clock,
        ranks,
        rank_comparison: comparison,
    }
}

/// The `gpuscope.trace/1` document as pretty JSON.
pub fn json(
    ranks: &[RankReport],
    comparison: Option<&RankComparison>,
    clock: &'static str,
    out: &mut dyn Write,
) -> io::Result<()> {
    let doc = document(ranks, comparison, clock);
    serde_json::to_writer_pretty(&mut *out, &doc).map_err(io::Error::from)?;
    writeln!(out)
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

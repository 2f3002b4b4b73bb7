//! Renders `gpuscope report`: text for terminals, the `gpuscope.report/1` JSON document
//! for scripts, and a self-contained HTML page with charts.

pub mod columns;
mod diagnosis;
mod health;
mod html;

mod text;
mod timeline;

use std::io::{self, Write};

use serde::Serialize;

use crate::analysis::diagnosis::Diagnosis;
use crate::analysis::report::compare::Comparison;
use crate::analysis::report::spread::RankSpread;
use crate::analysis::report::{Report, RunReport};
use crate::render::{unsupported, Format, Render};

pub use html::html;
pub use text::text;

/// JSON schema name and version of [`json`]'s output.
pub const SCHEMA: &str = "gpuscope.report/1";

#[derive(Serialize)]
struct JsonDoc<'a> {
    schema: &'static str,
    runs: &'a [RunReport],
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    rank_spread: &'a [RankSpread],
    #[serde(skip_serializing_if = "Option::is_none")]
    comparison: Option<&'a Comparison>,
    diagnoses: &'a [Diagnosis],
}

impl Render for Report {
    fn render(&self, format: Format, width: u16, out: &mut dyn Write) -> io::Result<()> {
        match format {
            Format::Text => text(self, width, out),
            Format::Json => json(self, out),
            Format::Html => html(self, out),
            Format::Csv => Err(unsupported("a report", format)),
        }
    }
}

/// The `gpuscope.report/1` JSON document.
pub fn json(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    let doc = JsonDoc {
        schema: SCHEMA,
        runs: &report.runs,
        rank_spread: &report.rank_spread,
        comparison: report.comparison.as_ref(),
        diagnoses: &report.diagnoses,
    };
    serde_json::to_writer_pretty(&mut *out, &doc).map_err(io::Error::from)?;
    writeln!(out)
}

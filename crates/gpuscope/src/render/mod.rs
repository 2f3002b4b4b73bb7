//! Renderers: turn model and analysis results into text for terminals, JSON for scripts,
//! CSV for spreadsheets. They write to any `io::Write` and never compute a statistic.

pub mod html;
pub mod memory_timeline;
pub mod report;
pub mod svg;
pub mod tb;
pub mod trace;
pub mod trace_export;
pub mod trace_html;

/// Output formats a renderer can produce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Human-readable text, fit for an 80-column terminal.
    Text,
    /// JSON with a `schema` field.
    Json,
    /// Comma-separated values with a header row.
    Csv,
}

/// A comfy-table table preset for terminal output: no borders, header underlined, at most
/// `width` columns wide.
pub(crate) fn table(width: u16) -> comfy_table::Table {
    let mut t = comfy_table::Table::new();
    t.load_preset("     ──            ")
        .set_content_arrangement(comfy_table::ContentArrangement::Dynamic)
        .set_width(width);
    t
}

/// Writes `text` wrapped to `width` columns, continuation lines indented by four.
pub(crate) fn paragraph(
    out: &mut dyn std::io::Write,
    text: &str,
    width: u16,
) -> std::io::Result<()> {
    let options = textwrap::Options::new(width as usize).subsequent_indent("    ");
    for line in textwrap::wrap(text, options) {
        writeln!(out, "{line}")?;
    }
    Ok(())
}

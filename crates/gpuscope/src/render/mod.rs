//! Renderers: turn model and analysis results into text for terminals, JSON for scripts,
//! CSV for spreadsheets. They write to any `io::Write` and never compute a statistic.

pub mod columns;
pub mod compare;
pub mod html;
pub mod memory_timeline;
pub mod monitor;
pub mod nonfinite;
pub mod nsys;
pub mod report;
pub(crate) mod short_names;
pub mod snapshot;
pub mod svg;
pub mod tb;
pub mod trace;
pub(crate) mod units;

/// Output formats a renderer can produce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Human-readable text, fit for an 80-column terminal.
    Text,
    /// JSON with a `schema` field.
    Json,
    /// One self-contained HTML page.
    Html,
    /// Comma-separated values with a header row.
    Csv,
}

/// What a command says, in the [`Format`]s it has: every command's result is written
/// through this one call, so the CLI opens, renders and flushes in one place.
pub trait Render {
    /// Writes `self` as `format`, text in `width` columns. A format this result has no
    /// renderer for is an [`std::io::ErrorKind::Unsupported`] error ([`unsupported`]).
    fn render(
        &self,
        format: Format,
        width: u16,
        out: &mut dyn std::io::Write,
    ) -> std::io::Result<()>;
}

/// Two inputs compared (`--diff`), with their paths; each command renders its own kind of
/// difference `T`.
pub struct Compared<'a, T> {
    /// The first input (the baseline).
    pub a: &'a std::path::Path,
    /// The second input.
    pub b: &'a std::path::Path,
    /// What changed from `a` to `b`.
    pub diff: &'a T,
}

/// The error of a [`Render`] asked for a format it does not have.
pub fn unsupported(what: &str, format: Format) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::Unsupported,
        format!("{what} has no {format:?} output"),
    )
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

/// Writes a table made by [`table`], each line without the padding that comfy-table
/// leaves after its last cell (trailing blanks that editors flag and diffs show).
pub(crate) fn write_table(
    out: &mut dyn std::io::Write,
    t: &comfy_table::Table,
) -> std::io::Result<()> {
    for line in t.lines() {
        writeln!(out, "{}", line.trim_end())?;
    }
    Ok(())
}

/// Writes `text` wrapped to `width` columns, continuation lines indented by four. Lines
/// break only at spaces: never at a hyphen inside a word, which would cut paths
/// (`/home/c-` then `kaitwang/...`) and names that must be copied whole, and never
/// between a number and its unit. A word longer than the line is cut at the width: the
/// output stays within it.
pub(crate) fn paragraph(
    out: &mut dyn std::io::Write,
    text: &str,
    width: u16,
) -> std::io::Result<()> {
    let options = textwrap::Options::new(width as usize)
        .subsequent_indent("    ")
        .word_splitter(textwrap::WordSplitter::NoHyphenation);
    for line in textwrap::wrap(&units_attached(text), options) {
        writeln!(out, "{}", line.replace(UNBROKEN_SPACE, " "))?;
    }
    Ok(())
}

/// Units that stay on the line of the number before them.
const UNITS: [&str; 13] = [
    "%", "ns", "µs", "ms", "s", "B", "KiB", "MiB", "GiB", "TiB", "KB", "MB", "GB",
];

/// `text` with the space between a number and a unit after it made unbroken.
fn units_attached(text: &str) -> String {
    let words: Vec<&str> = text.split(' ').collect();
    let mut out = String::with_capacity(text.len());
    for (k, word) in words.iter().enumerate() {
        if k > 0 {
            let number = words[k - 1].ends_with(|c: char| c.is_ascii_digit());
            let unit = UNITS
                .iter()
                .any(|u| word.trim_end_matches([',', ';', ')', ':', '.']) == *u);
            out.push_str(if number && unit { UNBROKEN_SPACE } else { " " });
        }
        out.push_str(word);
    }
    out
}

/// A duration in µs as a person reads it: µs under a millisecond, ms under a second,
/// else seconds.
pub(crate) fn duration_text(us: f64) -> String {
    if us.abs() < 1_000.0 {
        format!("{us:.1} µs")
    } else if us.abs() < 1_000_000.0 {
        format!("{:.1} ms", us / 1_000.0)
    } else {
        format!("{:.2} s", us / 1_000_000.0)
    }
}

/// A space [`paragraph`] never breaks a line at (textwrap splits words at ASCII spaces
/// only) and prints as a plain one.
const UNBROKEN_SPACE: &str = "\u{a0}";

/// `name` as [`paragraph`] keeps it on one line: names with spaces in them
/// (`## optimizer ##`, a record_function label) were wrapped mid-name. A name longer than
/// the line is still cut, at the width.
pub(crate) fn unbroken(name: &str) -> String {
    name.replace(' ', UNBROKEN_SPACE)
}

#[derive(serde::Serialize)]
struct DiffDoc<'a, T> {
    schema: &'static str,
    a: &'a std::path::Path,
    b: &'a std::path::Path,
    #[serde(flatten)]
    diff: &'a T,
}

/// A comparison of `b` with `a` as a JSON document: `schema`, the two paths, then the
/// fields of `diff`.
pub(crate) fn diff_json<T: serde::Serialize>(
    schema: &'static str,
    a: &std::path::Path,
    b: &std::path::Path,
    diff: &T,
    out: &mut dyn std::io::Write,
) -> std::io::Result<()> {
    let doc = DiffDoc { schema, a, b, diff };
    serde_json::to_writer_pretty(&mut *out, &doc).map_err(std::io::Error::from)?;
    writeln!(out)
}

/// Right-aligns the numeric `columns` of a table.
pub(crate) fn right_align(t: &mut comfy_table::Table, columns: &[usize]) {
    for &c in columns {
        if let Some(col) = t.column_mut(c) {
            col.set_cell_alignment(comfy_table::CellAlignment::Right);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wrapped(text: &str, width: u16) -> Vec<String> {
        let mut out = Vec::new();
        paragraph(&mut out, text, width).unwrap();
        String::from_utf8(out)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn a_number_keeps_its_unit_and_a_path_is_not_cut_at_its_hyphens() {
        let lines = wrapped("used 12 % of the device within 1043773 µs) and 5 MiB", 16);
        assert!(lines.iter().any(|l| l.contains("12 %")), "{lines:?}");
        assert!(lines.iter().any(|l| l.contains("1043773 µs)")), "{lines:?}");
        assert!(lines.iter().any(|l| l.contains("5 MiB")), "{lines:?}");
        let path = "/data/gpu-h200/lm-clean/x.pt.trace.json.gz";
        let lines = wrapped(&format!("the trace {path} was read"), 48);
        assert!(lines.iter().any(|l| l.trim() == path), "{lines:?}");
        assert!(lines.iter().all(|l| l.chars().count() <= 48), "{lines:?}");
    }

    #[test]
    fn durations_read_in_their_unit() {
        assert_eq!(duration_text(12.34), "12.3 µs");
        assert_eq!(duration_text(904_200.0), "904.2 ms");
        assert_eq!(duration_text(10_033_725.0), "10.03 s");
    }
}

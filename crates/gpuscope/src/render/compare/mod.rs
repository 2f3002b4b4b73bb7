//! Renders `gpuscope compare`: text for terminals and CI logs, the `gpuscope.compare/1`
//! JSON document for scripts, a self-contained HTML page. The rows of figures are built
//! once here and laid out by [`text`] and [`html`].

mod html;
mod text;

pub use html::html;
pub use text::text;

use std::io::{self, Write};

use serde::Serialize;

use crate::model::compare::{Bytes, CheckOutcome, Pair, RankFigures, RunComparison};
use crate::render::units::{in_unit, ByteUnit};
use crate::render::{unsupported, Format, Render};

/// JSON schema name and version of [`json`]'s output.
pub const SCHEMA: &str = "gpuscope.compare/1";

#[derive(Serialize)]
struct JsonDoc<'a> {
    schema: &'static str,
    passed: bool,
    #[serde(flatten)]
    comparison: &'a RunComparison,
}

impl Render for RunComparison {
    fn render(&self, format: Format, width: u16, out: &mut dyn Write) -> io::Result<()> {
        match format {
            Format::Text => text(self, width, out),
            Format::Json => json(self, out),
            Format::Html => html(self, out),
            Format::Csv => Err(unsupported("a comparison", format)),
        }
    }
}

/// The `gpuscope.compare/1` document: `schema`, `passed`, then the comparison's fields.
pub fn json(c: &RunComparison, out: &mut dyn Write) -> io::Result<()> {
    let doc = JsonDoc {
        schema: SCHEMA,
        passed: c.passed(),
        comparison: c,
    };
    serde_json::to_writer_pretty(&mut *out, &doc).map_err(io::Error::from)?;
    writeln!(out)
}

/// One row of a rank's table: figure, base, new, change.
pub(crate) type Row = Vec<String>;

/// `–` for a figure a run does not have.
const NONE: &str = "–";

fn row<T: Copy>(label: String, pair: &Pair<T>, show: impl Fn(T) -> String) -> Row {
    let cell = |v: Option<T>| v.map_or(NONE.to_owned(), &show);
    vec![
        label,
        cell(pair.base),
        cell(pair.new),
        pair.change_percent
            .map_or(NONE.to_owned(), |c| format!("{c:+.1}%")),
    ]
}

/// MB of 2^20 bytes, one decimal, as `gpuscope report` writes memory.
fn mb(b: Bytes) -> String {
    in_unit(b.0, ByteUnit::Mib)
}

/// The figures of `rank` as rows; `step` names the step time's source.
pub(crate) fn figure_rows(rank: &RankFigures, step: &str) -> Vec<Row> {
    let mut rows = vec![
        row("peak allocated".into(), &rank.peak_allocated_bytes, mb),
        row("peak reserved".into(), &rank.peak_reserved_bytes, mb),
        row("peak tensors".into(), &rank.peak_tensor_bytes, mb),
        row(format!("step time{step}"), &rank.step_time_us, |us| {
            format!("{:.2} ms", us / 1000.0)
        }),
        row(
            "throughput".into(),
            &rank.throughput_iterations_per_s,
            |it| format!("{it:.2} it/s"),
        ),
    ];
    rows.extend(
        rank.steady_categories_bytes
            .iter()
            .map(|(category, pair)| row(format!("steady {category}"), pair, mb)),
    );
    rows
}

/// A verdict's cell: `yes`, `no`, or `–` where the run cannot have it.
pub(crate) fn verdict(finding: &Option<CheckOutcome>) -> &'static str {
    match finding {
        Some(CheckOutcome { found: true, .. }) => "yes",
        Some(CheckOutcome { found: false, .. }) => "no",
        None => NONE,
    }
}

/// The rows of the sites at the snapshot peaks: site, base, new, change.
pub(crate) fn site_rows(c: &RunComparison) -> Vec<Row> {
    c.peak_sites
        .iter()
        .flat_map(|p| {
            std::iter::once(row("(peak, all sites)".into(), &p.peak_bytes, mb))
                .chain(p.sites.iter().map(|s| row(s.site.clone(), &s.bytes, mb)))
        })
        .collect()
}

/// ` (sections)`: the step time's source, for its label.
pub(crate) fn step_label(c: &RunComparison) -> String {
    c.step_source.map_or(String::new(), |s| format!(" ({s})"))
}

/// The gate's headline: passed, failed with N regressions, or no rules given.
pub(crate) fn gate_headline(c: &RunComparison) -> String {
    let rules: Vec<String> = c.fail_on.iter().map(ToString::to_string).collect();
    match (rules.is_empty(), c.regressions.len()) {
        (true, _) => "no --fail-on rules: the comparison is shown, nothing is judged".to_owned(),
        (false, 0) => format!("passed (--fail-on {})", rules.join(",")),
        (false, n) => format!(
            "FAILED, {n} regression{} (--fail-on {})",
            if n == 1 { "" } else { "s" },
            rules.join(",")
        ),
    }
}

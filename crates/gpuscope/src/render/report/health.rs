//! The training-health parts of the HTML report — timed sections, gradient flow,
//! non-finite events — and the number formats the text report shares with them.

use std::fmt::Write as _;

use html_escape::encode_text as text;

use crate::analysis::report::gradients::{GradientFlow, Verdict};
use crate::analysis::report::nonfinite::DiagnosedEvent;
use crate::analysis::report::sections::SectionTrend;
use crate::render::html::table;

/// Norms span orders of magnitude: three significant figures, in scientific notation
/// outside [0.01, 1000).
pub(super) fn sci(v: f64) -> String {
    if v == 0.0 || (0.01..1000.0).contains(&v.abs()) {
        format!("{v:.3}")
    } else {
        format!("{v:.2e}")
    }
}

/// A verdict as a word; the alarming ones in capitals, for the terminal.
pub(super) fn verdict(v: Verdict) -> &'static str {
    match v {
        Verdict::Steady => "steady",
        Verdict::Vanishing => "VANISHING",
        Verdict::Exploding => "EXPLODING",
        Verdict::NonFinite => "NaN/Inf",
    }
}

/// One streak of non-finite iterations in a sentence: when, what went first, which
/// gradients, what training did, where the report is.
pub(super) fn event_line(e: &DiagnosedEvent) -> String {
    let span = match e.events {
        0 | 1 => format!("Iteration {}", e.event.iteration),
        n => format!(
            "Iterations {}–{} ({n} checks in a row)",
            e.event.iteration, e.last_iteration
        ),
    };
    let what = match &e.diagnosis.first_component {
        Some(c) => format!("loss component {c} went non-finite first"),
        None => "losses finite, gradients not".to_owned(),
    };
    let params: Vec<&str> = e
        .event
        .nonfinite_parameters
        .iter()
        .map(|p| p.name.as_str())
        .collect();
    let params = match params.len() {
        0 => String::new(),
        n if n <= 3 => format!("; NaN/Inf gradients in {}", params.join(", ")),
        n => format!(
            "; NaN/Inf gradients in {} and {} more",
            params[..3].join(", "),
            n - 3
        ),
    };
    let report = e
        .event
        .report
        .as_deref()
        .map(|r| format!(" Report: {r}."))
        .unwrap_or_default();
    format!(
        "{span}: {what}{params}; training was told to {}.{report}",
        e.event.action
    )
}

/// The sections as an indented table, like the text report's.
pub(super) fn sections_table(page: &mut String, trends: &[SectionTrend]) {
    if trends.is_empty() {
        return;
    }
    let mut ordered: Vec<&SectionTrend> = trends.iter().collect();
    ordered.sort_by(|a, b| a.path.cmp(&b.path));
    let rows: Vec<Vec<String>> = ordered
        .iter()
        .map(|s| {
            let depth = s.path.matches('/').count();
            let name = s.path.rsplit('/').next().unwrap_or(&s.path);
            vec![
                format!("{}{name}", "\u{a0}\u{a0}".repeat(depth)),
                format!("{:.2}", s.mean_ms),
                format!("{:.2}", s.worst_p95_ms),
                s.share_percent.map_or("–".into(), |p| format!("{p:.0}%")),
                s.growth_percent.map_or("–".into(), |g| format!("{g:+.0}%")),
            ]
        })
        .collect();
    page.push_str("<h3>Timed sections (ms per call; growth: last third vs first)</h3>");
    table(
        page,
        &["section", "mean", "worst p95", "share", "growth"],
        &rows,
    );
}

/// The gradient norms, early against late, with their verdicts.
pub(super) fn gradients_table(page: &mut String, g: &GradientFlow) {
    let rows: Vec<Vec<String>> = std::iter::once(&g.global)
        .chain(&g.modules)
        .map(|n| {
            vec![
                n.name.clone(),
                n.early.map_or("–".into(), sci),
                n.late.map_or("–".into(), sci),
                n.change.map_or("–".into(), |c| format!("×{}", sci(c))),
                verdict(n.verdict).to_lowercase(),
                n.update_ratio.map_or("–".into(), sci),
            ]
        })
        .collect();
    let _ = write!(
        page,
        "<h3>Gradient flow ({} measurements; medians of the first and last thirds)</h3>",
        g.measurements
    );
    table(
        page,
        &[
            "norm",
            "early",
            "late",
            "change",
            "verdict",
            "update/weight",
        ],
        &rows,
    );
    let clipping = g
        .clipped_percent
        .map(|p| format!("; clipping bit on {p:.1}% of the iterations"))
        .unwrap_or_default();
    let _ = write!(
        page,
        "<p>{:.1}% of gradient elements were zero at the end{clipping}.</p>",
        g.zero_percent
    );
}

/// Each streak of non-finite iterations with its reading.
pub(super) fn nonfinite_list(page: &mut String, events: &[DiagnosedEvent]) {
    if events.is_empty() {
        return;
    }
    page.push_str("<h3>Non-finite values</h3><ul class=\"advice\">");
    for e in events {
        let _ = write!(
            page,
            "<li>{} {}</li>",
            text(&event_line(e)),
            text(&e.diagnosis.advice)
        );
    }
    page.push_str("</ul>");
}

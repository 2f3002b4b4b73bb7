//! The diagnoses, in text and HTML: per run directory what was read and what was absent,
//! then the findings, most severe first, each with what to try next. They come before the
//! report's sections, which hold the evidence; on the page each finding links to its
//! section (the rank's memory charts, the trace's step chart, the snapshot's timeline by
//! call site, the GPU samples).

use std::fmt::Write as _;
use std::io::{self, Write};

use html_escape::encode_text;

use crate::analysis::diagnosis::evidence::Evidence;
use crate::analysis::diagnosis::finding::{Anchor, Finding, Severity};
use crate::analysis::diagnosis::Diagnosis;
use crate::analysis::report::Report;
use crate::model::sources::Source;
use crate::model::units::{counted, human_bytes};
use crate::render::html::table;
use crate::render::{paragraph, snapshot, trace};

const RULE: &str =
    "================================================================================";

/// Every diagnosis in `width` columns.
pub fn text(diagnoses: &[Diagnosis], width: u16, out: &mut dyn Write) -> io::Result<()> {
    for d in diagnoses {
        writeln!(out, "{RULE}")?;
        writeln!(out, "DIAGNOSIS: {}", d.path.display())?;
        writeln!(out, "{RULE}")?;
        paragraph(out, &format!("Read: {}", read_line(d)), width)?;
        if !d.sources.sources.absent.is_empty() {
            let absent: Vec<String> = d
                .sources
                .sources
                .absent
                .iter()
                .map(|a| format!("{} (written by {})", a.source, a.written_by))
                .collect();
            paragraph(out, &format!("Absent: {}", absent.join("; ")), width)?;
        }
        writeln!(out)?;
        for f in &d.findings {
            finding(f, width, out)?;
        }
        writeln!(out)?;
    }
    Ok(())
}

/// `memory (2 ranks), trace (2 ranks), snapshot (3 files), gpu (48 samples)`.
fn read_line(d: &Diagnosis) -> String {
    let s = &d.sources;
    let found: Vec<String> = s
        .sources
        .found
        .iter()
        .map(|f| {
            let count = match f.source {
                Source::Memory => counted(s.memory_ranks, "rank"),
                Source::Trace => counted(s.traces, "trace"),
                Source::Gpu => counted(s.gpu_samples, "sample"),
                Source::Snapshot | Source::Nonfinite | Source::Nsys => {
                    counted(f.files.len(), "file")
                }
            };
            format!("{} ({count})", f.source)
        })
        .collect();
    if found.is_empty() {
        format!("memory ({})", counted(s.memory_ranks, "rank"))
    } else {
        found.join(", ")
    }
}

fn finding(f: &Finding, width: u16, out: &mut dyn Write) -> io::Result<()> {
    let rank = f.rank.map_or(String::new(), |r| format!(", rank {r}"));
    let head = format!(
        "{} [{}{rank}] {}",
        severity_word(f.severity),
        f.source,
        f.summary
    );
    paragraph(out, &head, width)?;
    if !f.next.is_empty() {
        paragraph(out, &format!("    next: {}", f.next), width)?;
    }
    Ok(())
}

/// The severity as the text writes it: capitals where something is wrong.
fn severity_word(s: Severity) -> &'static str {
    match s {
        Severity::High => "HIGH",
        Severity::Medium => "MEDIUM",
        Severity::Low => "LOW",
        Severity::Info => "info",
    }
}

/// The id of the report's section on `report.runs[index]`.
pub(super) fn run_id(index: usize) -> String {
    format!("run-{index}")
}

/// The id of diagnosis `d`'s section `anchor` (not the memory sections: [`run_id`]).
fn section_id(d: usize, anchor: Anchor) -> String {
    format!("d{d}-{anchor}")
}

/// Where `f` of diagnosis `d` links to.
fn link(report: &Report, d: usize, f: &Finding) -> String {
    let diagnosis = &report.diagnoses[d];
    match f.anchor {
        Anchor::Memory | Anchor::Health => report
            .runs
            .iter()
            .position(|r| r.path == diagnosis.path && Some(r.rank) == f.rank)
            .map_or_else(|| section_id(d, Anchor::Sources), run_id),
        Anchor::Trace if diagnosis.views.traces.is_none() => section_id(d, Anchor::Sources),
        Anchor::Snapshot if diagnosis.views.snapshots.is_empty() => section_id(d, Anchor::Sources),
        anchor => section_id(d, anchor),
    }
}

/// The findings of every diagnosis, at the top of the page.
pub(super) fn html_findings(page: &mut String, report: &Report) {
    for (d, diagnosis) in report.diagnoses.iter().enumerate() {
        let _ = write!(
            page,
            "<section class=\"diagnosis\" id=\"{}\"><h2>Diagnosis: {}</h2><p>Read: {}</p>",
            section_id(d, Anchor::Sources),
            encode_text(&diagnosis.path.display().to_string()),
            encode_text(&read_line(diagnosis))
        );
        if !diagnosis.sources.sources.absent.is_empty() {
            page.push_str("<p>Absent:</p><ul>");
            for a in &diagnosis.sources.sources.absent {
                let _ = write!(
                    page,
                    "<li>{} — written by {}</li>",
                    a.source,
                    encode_text(a.written_by)
                );
            }
            page.push_str("</ul>");
        }
        page.push_str("<ol class=\"findings\">");
        for f in &diagnosis.findings {
            let rank = f.rank.map_or(String::new(), |r| format!(", rank {r}"));
            let _ = write!(
                page,
                "<li class=\"finding {severity}\"><span class=\"severity\">{severity}</span> \
                 <span class=\"source\">{source}{rank}</span> \
                 <a class=\"summary\" href=\"#{href}\">{summary}</a>",
                severity = f.severity,
                source = f.source,
                href = link(report, d, f),
                summary = encode_text(&f.summary)
            );
            if !f.next.is_empty() {
                let _ = write!(
                    page,
                    "<div class=\"next\">next: <code>{}</code></div>",
                    encode_text(&f.next)
                );
            }
            page.push_str("</li>");
        }
        page.push_str("</ol></section>");
    }
}

/// The sections the findings link to that the memory report does not have: each run's
/// traces (step chart), snapshots (timeline by call site) and GPU samples.
pub(super) fn html_evidence(page: &mut String, diagnoses: &[Diagnosis]) {
    for (d, diagnosis) in diagnoses.iter().enumerate() {
        let path = encode_text(&diagnosis.path.display().to_string()).into_owned();
        if let Some(traces) = &diagnosis.views.traces {
            let _ = write!(
                page,
                "<section id=\"{}\"><h2>Profiler traces of {path}</h2>",
                section_id(d, Anchor::Trace)
            );
            for rank in &traces.ranks {
                let _ = write!(
                    page,
                    "<h3>rank {}: {}</h3>",
                    rank.rank,
                    encode_text(&rank.path.display().to_string())
                );
                trace::html::steps(page, rank);
            }
            page.push_str("</section>");
        }
        if !diagnosis.views.snapshots.is_empty() {
            let _ = write!(
                page,
                "<section id=\"{}\"><h2>Allocator snapshots of {path}</h2>",
                section_id(d, Anchor::Snapshot)
            );
            for s in &diagnosis.views.snapshots {
                let _ = write!(
                    page,
                    "<h3>{}</h3>",
                    encode_text(&s.path.display().to_string())
                );
                snapshot::html::timeline(page, s);
            }
            page.push_str("</section>");
        }
        gpu_section(page, d, diagnosis, &path);
    }
}

/// The GPU samples' figures, from the utilisation findings' evidence.
fn gpu_section(page: &mut String, d: usize, diagnosis: &Diagnosis, path: &str) {
    let rows: Vec<Vec<String>> = diagnosis
        .findings
        .iter()
        .filter_map(|f| match &f.evidence {
            Evidence::Utilization(u) => Some(vec![
                u.gpu.to_string(),
                u.samples.to_string(),
                percent(u.mean_percent),
                percent(u.max_percent),
                percent(u.trace_busy_percent),
                u.peak_memory_used_bytes.map_or("–".to_owned(), human_bytes),
                u.memory_total_bytes.map_or("–".to_owned(), human_bytes),
            ]),
            _ => None,
        })
        .collect();
    if rows.is_empty() {
        return;
    }
    let _ = write!(
        page,
        "<section id=\"{}\"><h2>GPU samples of {path}</h2>",
        section_id(d, Anchor::Gpu)
    );
    table(
        page,
        &[
            "GPU",
            "samples held",
            "mean util",
            "max util",
            "trace busy",
            "peak memory",
            "memory",
        ],
        &rows,
    );
    page.push_str("</section>");
}

fn percent(p: Option<f64>) -> String {
    p.map_or("–".to_owned(), |p| format!("{p:.0} %"))
}

//! The diagnoses as text: per run directory what was read and what was absent, then the
//! findings, most severe first, each with what to try next. Printed before the report's
//! sections, which hold the evidence.

use std::io::{self, Write};

use crate::analysis::diagnosis::finding::{Finding, Severity};
use crate::analysis::diagnosis::Diagnosis;
use crate::model::sources::Source;
use crate::render::paragraph;

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
                Source::Memory => plural(s.memory_ranks, "rank"),
                Source::Trace => plural(s.traces, "trace"),
                Source::Gpu => plural(s.gpu_samples, "sample"),
                Source::Snapshot | Source::Nonfinite | Source::Nsys => {
                    plural(f.files.len(), "file")
                }
            };
            format!("{} ({count})", f.source)
        })
        .collect();
    if found.is_empty() {
        format!("memory ({})", plural(s.memory_ranks, "rank"))
    } else {
        found.join(", ")
    }
}

fn plural(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
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

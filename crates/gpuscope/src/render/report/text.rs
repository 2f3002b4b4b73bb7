//! The text report: the `tensor_profile` analyzer's summary for each run and rank, then what gpuscope
//! adds (timeline, trends, leak verdict, advice, loss phases), the ranks' spread and the
//! comparison of runs; fit for an 80-column terminal.

use std::io::{self, Write};

use crate::analysis::report::allocator_verdict::Verdict;
use crate::analysis::report::compare::Comparison;
use crate::analysis::report::gradients::GradientFlow;
use crate::analysis::report::leak::{LeakAnalysis, SeriesTrend};
use crate::analysis::report::losses::LossAnalysis;
use crate::analysis::report::nonfinite::DiagnosedEvent;
use crate::analysis::report::sections::SectionTrend;
use crate::analysis::report::spread::RankSpread;
use crate::analysis::report::summary::Figures;
use crate::analysis::report::{Report, RunReport};
use crate::model::memory::percent;
use crate::model::oom::{OomEvent, OomSnapshot};
use crate::model::units::ByteUnit;

use super::health::{event_line, sci, verdict};
use super::timeline;
use crate::render::units::{bytes, figure, in_unit};
use crate::render::{paragraph, right_align, table, unbroken, write_table};

/// Modules listed in the gradient table; the ones that vanish or explode come first.
const MODULE_ROWS: usize = 12;

const RULE: &str =
    "================================================================================";

/// The text report in `width` columns.
pub fn text(report: &Report, width: u16, out: &mut dyn Write) -> io::Result<()> {
    super::diagnosis::text(&report.diagnoses, width, out)?;
    for run in &report.runs {
        let s = &run.summary;
        writeln!(out, "{RULE}")?;
        writeln!(out, "TENSOR PROFILING SUMMARY")?;
        writeln!(out, "{RULE}")?;
        writeln!(out, "{} (rank {})", run.path.display(), run.rank)?;
        out_of_memory(out, run, width)?;
        writeln!(out)?;
        writeln!(
            out,
            "Iteration Range: {} - {}",
            s.iterations[0], s.iterations[1]
        )?;
        writeln!(out, "Total Snapshots: {}", s.records)?;
        writeln!(out)?;
        let (a, b) = (&s.start, &s.end);
        match (a.allocated_bytes, b.allocated_bytes) {
            (Some(x), Some(y)) => writeln!(
                out,
                "Memory Allocated:         Start: {:.1} MB  →  End: {:.1} MB",
                ByteUnit::Mib.of(x),
                ByteUnit::Mib.of(y)
            )?,
            _ => writeln!(
                out,
                "Memory Allocated:         n/a (CPU run: no caching allocator)"
            )?,
        }
        if let (Some(x), Some(y)) = (a.reserved_bytes, b.reserved_bytes) {
            writeln!(
                out,
                "Memory Reserved:          Start: {:.1} MB  →  End: {:.1} MB",
                ByteUnit::Mib.of(x),
                ByteUnit::Mib.of(y)
            )?;
        }
        if let (Some(x), Some(y)) = (a.fragmentation_percent, b.fragmentation_percent) {
            writeln!(
                out,
                "Fragmentation:            Start: {x:.1}%  →  End: {y:.1}%"
            )?;
        }
        writeln!(
            out,
            "Census:                   Start: {:.1} MB  →  End: {:.1} MB",
            ByteUnit::Mib.of(a.census_bytes),
            ByteUnit::Mib.of(b.census_bytes)
        )?;
        writeln!(
            out,
            "Total Tensors:            Start: {}  →  End: {}",
            a.tensor_count, b.tensor_count
        )?;
        writeln!(out)?;
        shares(out, "Tensor Categories (at end):", &b.categories_bytes)?;
        if b.allocated_bytes.is_none() && b.categories_bytes.contains_key("activations") {
            // No allocator on CPU: the figure is an estimate, and says what it counts.
            paragraph(
                out,
                "  (CPU run: activations are the C heap beyond the counted tensors, above \
                 its lowest point in the run; other libraries' heap growth counts too)",
                width,
            )?;
        }
        writeln!(out)?;
        shares(out, "Data Types (at end):", &b.dtypes_bytes)?;
        writeln!(out)?;
        large(out, b)?;
        writeln!(out)?;
        timeline::write(out, &run.timeline, s.iterations[0], width)?;
        writeln!(out)?;
        trends(out, &run.leak, width)?;
        if let Some(e) = &run.oom_estimate {
            let line = format!(
                "Out of memory: at {:+.1} MB per 1000 iterations, {} ({:.1} MB now) reaches \
                 the device's {:.1} MB near iteration {}",
                ByteUnit::Mib.of_f64(e.slope_bytes_per_1k_iters),
                e.series,
                ByteUnit::Mib.of(e.current_bytes),
                ByteUnit::Mib.of(e.device_total_bytes),
                e.iteration
            );
            paragraph(out, &line, width)?;
        }
        if let Some(f) = &run.fragmentation {
            let line = format!("Allocator: {} — {}", verdict_word(f.verdict), f.reason);
            paragraph(out, &line, width)?;
        }
        if let Some(h) = run.host_memory.as_ref().filter(|h| h.growing) {
            paragraph(out, &format!("Host memory grows: {}", h.reason), width)?;
        }
        for a in &run.advice {
            let line = format!("Advice ({}): {}", a.figure.reading(a.value), a.advice);
            paragraph(out, &line, width)?;
        }
        losses(out, &run.losses, width)?;
        sections(out, &run.sections, width)?;
        if let Some(g) = &run.gradients {
            gradients(out, g, width)?;
        }
        nonfinite(out, &run.nonfinite, width)?;
        for line in run.skipped.iter().take(5) {
            writeln!(out, "skipped: {line}")?;
        }
        if run.skipped.len() > 5 {
            writeln!(out, "skipped: … and {} more lines", run.skipped.len() - 5)?;
        }
        writeln!(out)?;
    }
    for s in &report.rank_spread {
        spread(out, s)?;
    }
    if let Some(c) = &report.comparison {
        compared(out, c, width)?;
    }
    Ok(())
}

/// The allocator's retries and out-of-memory errors with their iterations, and the errors
/// `oom_guard` caught: first thing under a run's name, since they cost batches.
fn out_of_memory(out: &mut dyn Write, run: &RunReport, width: u16) -> io::Result<()> {
    if let Some(f) = run.fragmentation.as_ref().filter(|f| !f.rose_at.is_empty()) {
        let at: Vec<String> = f
            .rose_at
            .iter()
            .map(|r| format!("{}: {}/{}", r.iteration, r.ooms, r.alloc_retries))
            .collect();
        let line = format!(
            "Out of memory: {} errors and {} allocation retries ({}); OOMs/retries by \
             iteration: {}",
            f.ooms.unwrap_or(0),
            f.alloc_retries.unwrap_or(0),
            verdict_word(f.verdict),
            at.join(", ")
        );
        paragraph(out, &line, width)?;
    }
    for e in &run.oom_events {
        paragraph(out, &caught_oom(e), width)?;
    }
    Ok(())
}

/// One caught out-of-memory error in a line.
pub(crate) fn caught_oom(e: &OomEvent) -> String {
    let at = e
        .iteration
        .map(|i| format!(" at iteration {i}"))
        .unwrap_or_default();
    let asked = match (e.requested_bytes, e.device_total_bytes) {
        (Some(asked), Some(total)) if e.impossible => format!(
            ": an impossible request, {} asked of a {} device (a size bug, not memory \
             pressure or fragmentation)",
            bytes(asked),
            bytes(total)
        ),
        (Some(asked), _) => format!(": {} asked", bytes(asked)),
        _ => String::new(),
    };
    let snapshot = match &e.snapshot {
        Some(OomSnapshot {
            path: Some(path), ..
        }) => format!("; what was alive: gpuscope snapshot {}", path.display()),
        Some(OomSnapshot { named, path: None }) => {
            format!("; its allocator snapshot ({named}) is not beside the report")
        }
        None => String::new(),
    };
    format!(
        "Caught out-of-memory error{at}{asked} ({}){snapshot}",
        e.report.display()
    )
}

/// The verdict as the report says it.
pub(crate) fn verdict_word(v: Verdict) -> &'static str {
    match v {
        Verdict::Cache => "cache, not fragmentation",
        Verdict::Fragmented => "fragmentation",
        Verdict::Pressure => "memory pressure",
        Verdict::None => "not judged",
    }
}

fn spread(out: &mut dyn Write, s: &RankSpread) -> io::Result<()> {
    writeln!(out, "{RULE}")?;
    writeln!(out, "RANKS of {} ({} ranks)", s.path, s.ranks.len())?;
    writeln!(out, "{RULE}")?;
    writeln!(
        out,
        "  {:<24} {:>18} {:>18} {:>7}",
        "figure", "lowest", "highest", "spread"
    )?;
    for (name, f) in &s.figures {
        writeln!(
            out,
            "  {name:<24} {:>18} {:>18} {:>6.1}%",
            format!("{} (r{})", in_unit(f.min_bytes, ByteUnit::Mib), f.min_rank),
            format!("{} (r{})", in_unit(f.max_bytes, ByteUnit::Mib), f.max_rank),
            f.spread_percent
        )?;
    }
    writeln!(out)
}

/// A difference's change: `+531%`, `new` when the baseline had none of the category, and
/// a factor (`×4096`) from ten-fold up: against a baseline of a few kilobytes a percentage
/// ran to eight digits (`+10127668%`) that nobody reads.
pub(crate) fn change_text(change_percent: Option<f64>) -> String {
    match change_percent {
        None => "new".to_owned(),
        Some(c) if c >= 900.0 => {
            let factor = 1.0 + c / 100.0;
            match factor {
                f if f < 100.0 => format!("×{f:.1}"),
                f if f < 1e6 => format!("×{f:.0}"),
                f => format!("×{f:.1e}"),
            }
        }
        Some(c) => format!("{c:+.0}%"),
    }
}

fn compared(out: &mut dyn Write, c: &Comparison, width: u16) -> io::Result<()> {
    writeln!(out, "{RULE}")?;
    paragraph(
        out,
        &format!("COMPARISON (against {})", c.runs[0].label),
        width,
    )?;
    writeln!(out, "{RULE}")?;
    let mut t = table(width);
    t.set_header(["run", "peak alloc MB", "peak tensors MB", "end census MB"]);
    for r in &c.runs {
        let alloc = r
            .peak_allocated_bytes
            .map_or_else(|| "-".to_owned(), |b| figure(b as f64, ByteUnit::Mib, 1));
        t.add_row([
            r.label.clone(),
            alloc,
            figure(r.peak_tensor_bytes as f64, ByteUnit::Mib, 1),
            figure(r.end_census_bytes as f64, ByteUnit::Mib, 1),
        ]);
    }
    right_align(&mut t, &[1, 2, 3]);
    write_table(out, &t)?;
    if c.differences.is_empty() {
        writeln!(
            out,
            "No category differs from the baseline by 10% and 1 MB or more."
        )?;
    }
    for d in &c.differences {
        let line = format!(
            "  {}: {} {:.1} MB vs {:.1} MB ({})",
            d.run,
            d.category,
            ByteUnit::Mib.of(d.bytes),
            ByteUnit::Mib.of(d.baseline_bytes),
            change_text(d.change_percent)
        );
        paragraph(out, &line, width)?;
    }
    Ok(())
}

fn shares(
    out: &mut dyn Write,
    title: &str,
    bytes: &std::collections::BTreeMap<String, u64>,
) -> io::Result<()> {
    writeln!(out, "{title}")?;
    let total: u64 = bytes.values().sum();
    let mut rows: Vec<_> = bytes.iter().collect();
    rows.sort_by_key(|(_, b)| std::cmp::Reverse(**b));
    for (name, b) in rows {
        writeln!(
            out,
            "  {name:<15}: {:>8.1} MB  ({:>5.1}%)",
            ByteUnit::Mib.of(*b),
            percent(*b, total)
        )?;
    }
    Ok(())
}

fn large(out: &mut dyn Write, end: &Figures) -> io::Result<()> {
    match end.large_threshold_bytes {
        Some(bytes) => {
            let threshold = (ByteUnit::Mib.of(bytes) * 1000.0).round() / 1000.0;
            writeln!(
                out,
                "Large Tensors (>{threshold}MB): {}",
                end.large_tensor_count
            )
        }
        None => writeln!(out, "Large Tensors: {}", end.large_tensor_count),
    }
}

fn trends(out: &mut dyn Write, analysis: &LeakAnalysis, width: u16) -> io::Result<()> {
    if let Some(start) = analysis.window_start {
        if !analysis.trends.is_empty() {
            writeln!(
                out,
                "Trends from iteration {start} (MB per 1000 iterations, r²):"
            )?;
        }
    }
    for (name, t) in &analysis.trends {
        let mb_per_1k = ByteUnit::Mib.of_f64(t.slope_bytes_per_1k_iters);
        let mark = if t.sustained { "  ← sustained" } else { "" };
        writeln!(out, "  {name:<15}: {mb_per_1k:>+9.2}  ({}){mark}", fit(t))?;
    }
    let verdict = match (analysis.leak.judged, analysis.leak.suspected) {
        (false, _) => "not judged",
        (true, true) => "SUSPECTED",
        (true, false) => "none",
    };
    paragraph(
        out,
        &format!("Leak: {verdict} — {}", analysis.leak.reason),
        width,
    )
}

/// How well a trend's line fits: `r² 0.93`, or `flat` for a series that never changed
/// (its r² of 1 beside the noisy series' 0.1 read as the strongest trend of all).
fn fit(t: &SeriesTrend) -> String {
    if t.flat {
        "flat".to_owned()
    } else {
        format!("r² {:.2}", t.r2)
    }
}

/// The timed sections as a tree (children under their parent), with growth and phases.
fn sections(out: &mut dyn Write, trends: &[SectionTrend], width: u16) -> io::Result<()> {
    if trends.is_empty() {
        return Ok(());
    }
    writeln!(out)?;
    writeln!(
        out,
        "Timed sections (ms per call; growth: last third of the run vs first):"
    )?;
    let mut t = table(width);
    t.set_header(vec!["section", "mean", "worst p95", "share", "growth"]);
    let mut ordered: Vec<&SectionTrend> = trends.iter().collect();
    ordered.sort_by(|a, b| a.path.cmp(&b.path));
    for s in ordered {
        let depth = s.path.matches('/').count();
        let name = s.path.rsplit('/').next().unwrap_or(&s.path);
        t.add_row(vec![
            format!("{}{name}", "  ".repeat(depth)),
            format!("{:.2}", s.mean_ms),
            format!("{:.2}", s.worst_p95_ms),
            s.share_percent.map_or("–".into(), |p| format!("{p:.0}%")),
            s.growth_percent.map_or("–".into(), |g| format!("{g:+.0}%")),
        ]);
    }
    right_align(&mut t, &[1, 2, 3, 4]);
    write_table(out, &t)?;
    if let Some(grew) = trends
        .first()
        .filter(|s| s.growth_percent.is_some_and(|g| g >= 20.0))
    {
        let phases: Vec<String> = grew
            .phases
            .iter()
            .map(|p| format!("{}–{}: {:.2} ms", p.from, p.to, p.mean_ms))
            .collect();
        let by_phase = if phases.is_empty() {
            String::new()
        } else {
            format!(" By loss phase: {}.", phases.join(", "))
        };
        paragraph(
            out,
            &format!(
                "{} grew the most: {:.2} → {:.2} ms per call.{by_phase}",
                unbroken(&grew.path),
                grew.early_mean_ms,
                grew.late_mean_ms
            ),
            width,
        )?;
    }
    Ok(())
}

/// The global and per-module gradient norms, early against late, with their verdicts.
fn gradients(out: &mut dyn Write, g: &GradientFlow, width: u16) -> io::Result<()> {
    writeln!(out)?;
    writeln!(
        out,
        "Gradient flow ({} measurements; medians of the first and last thirds):",
        g.measurements
    )?;
    let with_ratio = std::iter::once(&g.global)
        .chain(&g.modules)
        .any(|t| t.update_ratio.is_some());
    let mut t = table(width);
    let mut header = vec!["norm", "early", "late", "change", "verdict"];
    if with_ratio {
        header.push("update/weight");
    }
    t.set_header(header);
    let shown = MODULE_ROWS.min(g.modules.len());
    for n in std::iter::once(&g.global).chain(&g.modules[..shown]) {
        let mut row = vec![
            n.name.clone(),
            n.early.map_or("–".into(), sci),
            n.late.map_or("–".into(), sci),
            n.change.map_or("–".into(), |c| format!("×{}", sci(c))),
            verdict(n.verdict).to_owned(),
        ];
        if with_ratio {
            row.push(n.update_ratio.map_or("–".into(), sci));
        }
        t.add_row(row);
    }
    right_align(&mut t, &[1, 2, 3, 5]);
    write_table(out, &t)?;
    if g.modules.len() > shown {
        writeln!(
            out,
            "  … and {} steady modules more",
            g.modules.len() - shown
        )?;
    }
    let mut notes = vec![format!(
        "{:.1}% of gradient elements were zero at the end",
        g.zero_percent
    )];
    if let Some(p) = g.clipped_percent {
        let factor = g
            .mean_clip_factor
            .map(|f| format!(", scaling them by {f:.2} on average"))
            .unwrap_or_default();
        notes.push(format!("clipping bit on {p:.1}% of the iterations{factor}"));
    }
    paragraph(out, &format!("{}.", notes.join("; ")), width)
}

/// Each non-finite event in a few lines: what went first, the gradients, what to do.
fn nonfinite(out: &mut dyn Write, events: &[DiagnosedEvent], width: u16) -> io::Result<()> {
    if events.is_empty() {
        return Ok(());
    }
    writeln!(out)?;
    writeln!(out, "Non-finite values:")?;
    for e in events {
        paragraph(out, &format!("  {}", event_line(e)), width)?;
    }
    if let Some(first) = events.first() {
        paragraph(out, &format!("  {}", first.diagnosis.advice), width)?;
    }
    Ok(())
}

fn losses(out: &mut dyn Write, analysis: &LossAnalysis, width: u16) -> io::Result<()> {
    if analysis.phases.is_empty() {
        return Ok(());
    }
    writeln!(out)?;
    writeln!(out, "Loss phases (share of the components' sum):")?;
    for p in &analysis.phases {
        let line = format!("  {:>8} – {:<8} {}", p.from, p.to, p.shares_text());
        paragraph(out, &line, width)?;
    }
    for s in &analysis.spikes {
        let memory = match s.allocated_change_bytes {
            Some(b) => format!("allocated {:+.1} MB", ByteUnit::Mib.of_f64(b as f64)),
            None => format!(
                "census {:+.1} MB",
                ByteUnit::Mib.of_f64(s.census_change_bytes as f64)
            ),
        };
        let line = format!(
            "Loss spike at {}: total {:.4} (recent median {:.4}), driven by {}; {memory}",
            s.iteration,
            s.total,
            s.recent_median,
            s.driven_by.as_deref().unwrap_or("?")
        );
        paragraph(out, &line, width)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::change_text;

    #[test]
    fn changes_of_ten_fold_and_more_are_factors() {
        assert_eq!(change_text(None), "new");
        assert_eq!(change_text(Some(-50.0)), "-50%");
        assert_eq!(change_text(Some(531.0)), "+531%");
        assert_eq!(change_text(Some(900.0)), "×10.0");
        // 1.2 KB at the baseline, 123 MB in the run.
        assert_eq!(change_text(Some(10_127_668.0)), "×101278");
        assert_eq!(change_text(Some(1e9)), "×1.0e7");
    }
}

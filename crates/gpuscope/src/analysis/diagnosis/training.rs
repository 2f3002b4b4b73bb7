//! Findings of the training's own health, rank by rank, from the memory records: streaks of
//! non-finite losses or gradients, the timed section that grew (or takes most of an
//! iteration), and gradient norms that vanish or explode.

use super::evidence::Evidence;
use super::finding::{Anchor, Finding, FindingKind, FindingSource, Severity, Stake};
use super::RunInputs;
use crate::analysis::report::gradients::Verdict;
use crate::analysis::report::RunReport;
use crate::model::units::counted;

/// A section whose time per call grew by this many percent (last third of the run against
/// the first) is medium...
pub const SECTION_GROWTH_PERCENT: f64 = 25.0;
/// ...when it also grew by at least this many milliseconds per call.
pub const SECTION_GROWTH_MS: f64 = 1.0;

pub(super) fn findings(run: &RunInputs) -> Vec<Finding> {
    let mut out = Vec::new();
    for rank in &run.ranks {
        out.extend(nonfinite(rank));
        out.extend(section(run, rank));
        out.extend(gradients(rank));
    }
    out
}

fn nonfinite(rank: &RunReport) -> Vec<Finding> {
    let [first, last] = rank.summary.iterations;
    let iterations = u64::try_from(last - first + 1).ok();
    rank.nonfinite
        .iter()
        .map(|streak| {
            let e = &streak.event;
            let span = if streak.last_iteration > e.iteration {
                format!(
                    "iterations {}–{} ({} checks in a row)",
                    e.iteration, streak.last_iteration, streak.events
                )
            } else {
                format!("iteration {}", e.iteration)
            };
            let first_component = streak
                .diagnosis
                .first_component
                .as_deref()
                .map_or(String::new(), |c| format!("; {c} went first"));
            Finding {
                source: FindingSource::Nonfinite,
                rank: Some(rank.rank),
                kind: FindingKind::Nonfinite,
                severity: Severity::High,
                summary: format!(
                    "NaN/Inf in {span}{first_component}; {} with non-finite gradients; \
                     training was told to {}",
                    counted(e.nonfinite_parameters.len(), "parameter"),
                    e.action
                ),
                stake: Stake::Iterations {
                    value: streak.events,
                    of: iterations,
                },
                evidence: Evidence::Nonfinite(streak.clone()),
                next: streak.diagnosis.advice.clone(),
                anchor: Anchor::Health,
            }
        })
        .collect()
}

fn section(run: &RunInputs, rank: &RunReport) -> Option<Finding> {
    // The report lists the section that grew most first.
    let grew = rank.sections.first().filter(|s| {
        s.growth_percent
            .is_some_and(|g| g >= SECTION_GROWTH_PERCENT)
            && s.late_mean_ms - s.early_mean_ms >= SECTION_GROWTH_MS
    });
    let (section, severity, summary) = match grew {
        Some(s) => (
            s,
            Severity::Medium,
            format!(
                "section {} grew {:+.0} % over the run ({:.2} → {:.2} ms per call)",
                s.path,
                s.growth_percent.unwrap_or_default(),
                s.early_mean_ms,
                s.late_mean_ms
            ),
        ),
        None => {
            let s = rank
                .sections
                .iter()
                .filter(|s| s.parent.is_none())
                .max_by(|a, b| a.mean_ms.total_cmp(&b.mean_ms))?;
            let share = s
                .share_percent
                .map_or(String::new(), |p| format!(", {p:.0} % of an iteration"));
            (
                s,
                Severity::Info,
                format!(
                    "section {} takes the longest: {:.2} ms per call{share}; none grew \
                     over the run",
                    s.path, s.mean_ms
                ),
            )
        }
    };
    let trace_operators = run
        .section_operators
        .iter()
        .find(|s| s.rank == rank.rank && s.path == section.path)
        .map_or_else(Vec::new, |s| s.operators.clone());
    let mut summary = summary;
    if !trace_operators.is_empty() {
        let top: Vec<String> = trace_operators
            .iter()
            .filter(|o| o.self_us >= 50.0)
            .take(3)
            .map(|o| format!("{} {:.1} ms", o.name, o.self_us / 1000.0))
            .collect();
        if !top.is_empty() {
            summary.push_str(&format!(
                "; inside it in the trace (self time over the profiled steps): {}",
                top.join(", ")
            ));
        }
    }
    Some(Finding {
        source: FindingSource::Sections,
        rank: Some(rank.rank),
        kind: FindingKind::Section,
        severity,
        summary,
        stake: Stake::StepTime {
            percent: section.share_percent.unwrap_or(0.0),
        },
        evidence: Evidence::Section {
            section: section.clone(),
            trace_operators,
        },
        next: if grew.is_some() {
            "gpuscope.profile(...) around a late iteration: the operators of that section"
                .to_owned()
        } else {
            String::new()
        },
        anchor: Anchor::Health,
    })
}

fn gradients(rank: &RunReport) -> Option<Finding> {
    let flow = rank.gradients.as_ref()?;
    let flagged: Vec<_> = flow
        .modules
        .iter()
        .filter(|m| m.verdict != Verdict::Steady)
        .cloned()
        .collect();
    let global = &flow.global;
    let (severity, summary, next) = match global.verdict {
        Verdict::Steady if flagged.is_empty() => (
            Severity::Info,
            format!(
                "gradient norms steady over {} measurements (global {})",
                flow.measurements,
                norm_change(global.early, global.late)
            ),
            "",
        ),
        Verdict::NonFinite => (
            Severity::Medium,
            format!(
                "gradient norms NaN/Inf in {} of {} records, the first at iteration {} \
                 ({} flagged)",
                flow.nonfinite_records,
                flow.measurements,
                flow.first_nonfinite.unwrap_or_default(),
                counted(flagged.len(), "module")
            ),
            "see the non-finite finding: the first module and autograd node",
        ),
        verdict => (
            Severity::Medium,
            format!(
                "gradient norms: global {}, {}; {} flagged{}",
                norm_change(global.early, global.late),
                verdict_word(verdict),
                counted(flagged.len(), "module"),
                flagged.first().map_or(String::new(), |m| format!(
                    ", first {} ({})",
                    m.name,
                    verdict_word(m.verdict)
                ))
            ),
            "scope.record_gradients(it, clip_max_norm=...) with clipping, a lower learning \
             rate, or a normalisation layer where the norms change",
        ),
    };
    Some(Finding {
        source: FindingSource::Gradients,
        rank: Some(rank.rank),
        kind: FindingKind::GradientFlow,
        severity,
        summary,
        stake: Stake::None,
        evidence: Evidence::GradientFlow {
            global: global.clone(),
            flagged,
        },
        next: next.to_owned(),
        anchor: Anchor::Health,
    })
}

fn verdict_word(v: Verdict) -> &'static str {
    match v {
        Verdict::Steady => "steady",
        Verdict::Vanishing => "vanishing",
        Verdict::Exploding => "exploding",
        Verdict::NonFinite => "NaN/Inf",
    }
}

fn norm_change(early: Option<f64>, late: Option<f64>) -> String {
    match (early, late) {
        (Some(e), Some(l)) => format!("{e:.3} → {l:.3}"),
        (Some(e), None) => format!("{e:.3} → –"),
        _ => "–".to_owned(),
    }
}

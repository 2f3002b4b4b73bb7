//! One run's diagnosis: what every source of a run directory says, as findings ranked by
//! how much they matter, joined where two sources meet (the records' memory peak with what
//! a snapshot says was alive then; NVML's utilisation with the trace's busy time; a
//! straggling rank with its memory). Built from the results of the analyses that already
//! exist (report, trace, snapshot, nsys); nothing is analysed a second time here.
//!
//! The rules are written in the README ("How a run is diagnosed").

pub mod evidence;
pub mod finding;
mod gpu;
mod memory;
mod nsys;
mod snapshot;
mod trace;
mod training;

use std::path::{Path, PathBuf};

use serde::Serialize;

use self::finding::{rank_findings, Finding};
use crate::analysis::nsys::{nsys_report, KernelNames, NsysReport};
use crate::analysis::report::spread::RankSpread;
use crate::analysis::report::{report, Report, RunReport};
use crate::analysis::snapshot::{snapshot_report, Options, SnapshotReport};
use crate::analysis::trace::operators::{operators_inside, OperatorStats};
use crate::analysis::trace::scope::Clock;
use crate::analysis::trace::{analyze_traces, TraceAnalysis};
use crate::model::gpu::Sample;
use crate::model::run::RunRead;
use crate::model::sources::{Sources, Unreadable};

/// Everything read from one run directory, analysed by the existing engines.
pub struct RunInputs<'a> {
    /// The run directory (or file) given.
    pub path: &'a Path,
    /// What it holds.
    pub sources: &'a Sources,
    /// The report of each rank with memory records.
    pub ranks: Vec<&'a RunReport>,
    /// The spread between those ranks, with several.
    pub spread: Option<&'a RankSpread>,
    /// The analysis of its traces.
    pub traces: Option<&'a TraceAnalysis>,
    /// The report of each allocator snapshot read.
    pub snapshots: &'a [SnapshotReport],
    /// The GPU samples of `gpu.jsonl`.
    pub samples: &'a [Sample],
    /// The report of each Nsight export read.
    pub nsys: &'a [NsysReport],
    /// The operators inside each timed section's ranges in a trace, by rank and path.
    pub section_operators: &'a [SectionOperators],
    /// Files that could not be read.
    pub unreadable: &'a [Unreadable],
}

/// What ran inside one timed section in one rank's trace.
pub struct SectionOperators {
    /// The rank.
    pub rank: u32,
    /// The section's path.
    pub path: String,
    /// The operators, most self time first.
    pub operators: Vec<OperatorStats>,
}

/// What a run directory holds, as the diagnosis reports it.
#[derive(Debug, Clone, Serialize)]
pub struct SourceCounts {
    /// Sources found, with their files.
    #[serde(flatten)]
    pub sources: Sources,
    /// Ranks with memory records.
    pub memory_ranks: usize,
    /// Traces read (one per rank).
    pub traces: usize,
    /// Snapshots read.
    pub snapshots: usize,
    /// GPU samples read.
    pub gpu_samples: usize,
    /// Files that could not be read.
    pub unreadable: Vec<Unreadable>,
}

/// The diagnosis of one run directory.
#[derive(Debug, Serialize)]
pub struct Diagnosis {
    /// The run directory given.
    pub path: PathBuf,
    /// What was found and what was absent.
    pub sources: SourceCounts,
    /// The findings, most severe and most at stake first.
    pub findings: Vec<Finding>,
    /// The analyses the findings came from, for the HTML report's evidence sections.
    #[serde(skip)]
    pub views: Views,
}

/// The analyses of the heavy sources behind a diagnosis: what its HTML page charts.
#[derive(Debug, Default)]
pub struct Views {
    /// The traces' analysis.
    pub traces: Option<TraceAnalysis>,
    /// Each snapshot's report.
    pub snapshots: Vec<SnapshotReport>,
}

/// Kernels, operators and gaps kept of each trace, as `gpuscope trace` keeps by default.
const TRACE_TOP: usize = 10;
/// Operators kept of what ran inside a timed section.
const SECTION_OPERATORS: usize = 5;

/// The report on `runs` as read, with the diagnosis of each: the memory records through
/// [`report`], each other source through its own engine, then [`diagnose`].
pub fn report_runs(runs: Vec<RunRead>) -> Report {
    let (records, rest): (Vec<_>, Vec<_>) = runs
        .into_iter()
        .map(|mut run| ((run.path.clone(), std::mem::take(&mut run.ranks)), run))
        .unzip();
    let mut report = report(&records);
    report.diagnoses = rest
        .iter()
        .map(|run| {
            let traces = (!run.traces.is_empty())
                .then(|| analyze_traces(&run.traces, Clock::Exact, TRACE_TOP));
            let snapshots: Vec<SnapshotReport> = run
                .snapshots
                .iter()
                .map(|f| snapshot_report(&f.snapshot, f.path.clone(), &Options::default()))
                .collect();
            let nsys: Vec<NsysReport> = run
                .nsys
                .iter()
                .map(|(_, export)| nsys_report(export, KernelNames::Demangled))
                .collect();
            let sources = run.sources.clone().unwrap_or_default();
            let label = run.path.display().to_string();
            let ranks: Vec<&RunReport> =
                report.runs.iter().filter(|r| r.path == run.path).collect();
            let section_operators: Vec<SectionOperators> = run
                .traces
                .iter()
                .flat_map(|t| {
                    let sections = ranks
                        .iter()
                        .filter(|r| r.rank == t.trace.rank)
                        .flat_map(|r| &r.sections);
                    sections.filter_map(|s| {
                        let operators = operators_inside(&t.trace, &s.path, SECTION_OPERATORS);
                        (!operators.is_empty()).then(|| SectionOperators {
                            rank: t.trace.rank,
                            path: s.path.clone(),
                            operators,
                        })
                    })
                })
                .collect();
            let mut diagnosis = diagnose(&RunInputs {
                path: &run.path,
                sources: &sources,
                ranks,
                spread: report.rank_spread.iter().find(|s| s.path == label),
                traces: traces.as_ref(),
                snapshots: &snapshots,
                samples: &run.samples,
                nsys: &nsys,
                section_operators: &section_operators,
                unreadable: &run.unreadable,
            });
            diagnosis.views = Views { traces, snapshots };
            diagnosis
        })
        .collect();
    report
}

/// The diagnosis of one run from what its sources said.
pub fn diagnose(run: &RunInputs) -> Diagnosis {
    let mut findings = Vec::new();
    findings.extend(memory::findings(run));
    findings.extend(training::findings(run));
    findings.extend(trace::findings(run));
    findings.extend(snapshot::findings(run));
    findings.extend(gpu::findings(run));
    findings.extend(nsys::findings(run));
    findings.extend(run.unreadable.iter().map(unreadable));
    rank_findings(&mut findings);
    Diagnosis {
        path: run.path.to_path_buf(),
        sources: SourceCounts {
            sources: run.sources.clone(),
            memory_ranks: run.ranks.len(),
            traces: run.traces.map_or(0, |t| t.ranks.len()),
            snapshots: run.snapshots.len(),
            gpu_samples: run.samples.len(),
            unreadable: run.unreadable.to_vec(),
        },
        findings,
        views: Views::default(),
    }
}

/// `part` as a share (0–1) of `whole`; `None` when the whole is unknown or 0.
fn share_of(part: u64, whole: Option<u64>) -> Option<f64> {
    whole.filter(|&w| w > 0).map(|w| part as f64 / w as f64)
}

/// The file name of `path`, for a sentence (the path itself when it has none).
fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

fn unreadable(u: &Unreadable) -> Finding {
    use self::evidence::Evidence;
    use self::finding::{Anchor, FindingKind, Severity, Stake};
    Finding {
        source: u.source.into(),
        rank: None,
        kind: FindingKind::Unreadable,
        severity: Severity::Low,
        summary: format!(
            "{} could not be read ({}): what it holds is missing from this diagnosis",
            u.path.display(),
            u.reason
        ),
        stake: Stake::None,
        evidence: Evidence::Unread {
            count: 1,
            first: vec![format!("{}: {}", u.path.display(), u.reason)],
        },
        next: String::new(),
        anchor: Anchor::Sources,
    }
}

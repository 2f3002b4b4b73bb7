//! Everything `gpuscope report` says about a set of runs, put together from the other
//! analyses: per rank the summary, timeline, trends and leak verdict, out-of-memory
//! estimate, fragmentation, advice and loss phases; across the ranks of a run their
//! spread; across runs the comparison.

pub mod advice;
pub mod allocator_verdict;
pub mod compare;
pub mod gradients;
pub mod host_growth;
pub mod leak;
pub mod losses;
pub mod nonfinite;
pub mod oom;
pub mod sections;
pub mod spread;
pub mod summary;
pub mod timeline;
pub mod trend;

use std::path::PathBuf;

use serde::Serialize;

use self::advice::{advise, Advice};
use self::allocator_verdict::{fragmentation, Fragmentation};
use self::compare::{compare, Comparison};
use self::gradients::{gradient_flow, GradientFlow};
use self::host_growth::{host_growth, HostGrowth};
use self::leak::LeakAnalysis;
use self::losses::LossAnalysis;
use self::nonfinite::{diagnose_all, DiagnosedEvent};
use self::oom::OomEstimate;
use self::sections::{section_trends, SectionTrend};
use self::spread::{spread, RankSpread};
use self::summary::{summarize, Summary};
use self::timeline::{timeline, Timeline};
use crate::analysis::diagnosis::Diagnosis;
use crate::model::memory::RankRecords;
use crate::model::oom::OomEvent;

/// Points of each run's timeline: enough for a chart across a wide screen.
pub const TIMELINE_POINTS: usize = 480;

/// One rank of one run, summarised.
#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    /// The run directory or file given.
    pub path: PathBuf,
    /// The rank.
    pub rank: u32,
    /// The files read.
    pub files: Vec<PathBuf>,
    /// The summary.
    #[serde(flatten)]
    pub summary: Summary,
    /// Trends and the leak verdict.
    #[serde(flatten)]
    pub leak: LeakAnalysis,
    /// When the device would run out of memory at the present rate.
    pub oom_estimate: Option<OomEstimate>,
    /// The allocator's unallocated reserve judged by its counters (`null` on CPU).
    pub fragmentation: Option<Fragmentation>,
    /// Out-of-memory errors that `gpuscope.oom_guard` caught, oldest first.
    pub oom_events: Vec<OomEvent>,
    /// Host memory over a GPU run (`null` on CPU and without host figures).
    pub host_memory: Option<HostGrowth>,
    /// Advice, each with the figure that triggered it.
    pub advice: Vec<Advice>,
    /// Loss phases and spikes.
    #[serde(flatten)]
    pub losses: LossAnalysis,
    /// Lines that were skipped: `file:line: reason`.
    pub skipped: Vec<String>,
    /// The figures over iterations, at [`TIMELINE_POINTS`] points or fewer.
    pub timeline: Timeline,
    /// Timed sections over the run, the one that grew most first; empty for runs that
    /// time none.
    pub sections: Vec<SectionTrend>,
    /// Iterations where a loss or the gradients were NaN or infinite, read; empty when
    /// there were none (or the run did not check).
    pub nonfinite: Vec<DiagnosedEvent>,
    /// Gradient norms over the run, when `record_gradients` was called.
    pub gradients: Option<GradientFlow>,
}

/// The report on several runs.
#[derive(Debug)]
pub struct Report {
    /// Every rank of every run with records, in the order given.
    pub runs: Vec<RunReport>,
    /// The spread between ranks, for each run with several.
    pub rank_spread: Vec<RankSpread>,
    /// The runs compared with the first one, when there are several.
    pub comparison: Option<Comparison>,
    /// The diagnosis of each run given, in order; empty for a report of memory records
    /// alone ([`report`]).
    pub diagnoses: Vec<Diagnosis>,
}

/// The report on `runs`: each given path with the records of its ranks.
pub fn report(runs: &[(PathBuf, Vec<RankRecords>)]) -> Report {
    let ranks: Vec<(&PathBuf, &RankRecords)> = runs
        .iter()
        .flat_map(|(path, ranks)| ranks.iter().map(move |r| (path, r)))
        .filter(|(_, r)| !r.records.is_empty())
        .collect();
    let labelled: Vec<(String, &[_])> = ranks
        .iter()
        .map(|(path, r)| {
            (
                format!("{} (rank {})", path.display(), r.rank),
                &r.records[..],
            )
        })
        .collect();
    let rank_spread = runs
        .iter()
        .filter_map(|(path, ranks)| {
            let ranks: Vec<(u32, &[_])> = ranks.iter().map(|r| (r.rank, &r.records[..])).collect();
            spread(&path.display().to_string(), &ranks)
        })
        .collect();
    Report {
        rank_spread,
        runs: ranks
            .iter()
            .filter_map(|(path, r)| run_report(path, r))
            .collect(),
        comparison: compare(&labelled),
        diagnoses: Vec::new(),
    }
}

fn run_report(path: &std::path::Path, rank: &RankRecords) -> Option<RunReport> {
    let last = rank.records.last()?;
    let leak = leak::analyze(&rank.records);
    let losses = losses::analyze(&rank.records);
    let fragmentation = fragmentation(&rank.records, &rank.ooms);
    let host_memory = host_growth(&rank.records);
    let summary = summarize(&rank.records)?;
    Some(RunReport {
        path: path.to_path_buf(),
        rank: rank.rank,
        files: rank.files.clone(),
        oom_estimate: oom::estimate(&rank.records, &leak, summary.device_total_bytes),
        summary,
        leak,
        advice: advise(last, fragmentation.as_ref(), host_memory.as_ref()),
        fragmentation,
        oom_events: rank.ooms.clone(),
        host_memory,
        sections: section_trends(&rank.records, &losses.phases),
        losses,
        skipped: rank
            .skipped
            .iter()
            .map(|(file, s)| s.describe(file))
            .collect(),
        timeline: timeline(&rank.records, TIMELINE_POINTS),
        nonfinite: diagnose_all(&rank.nonfinite),
        gradients: gradient_flow(&rank.records),
    })
}

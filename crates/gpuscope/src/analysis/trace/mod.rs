//! Analyses of PyTorch profiler traces, each a function over the compact trace model.
//! Where Holistic Trace Analysis (HTA) answers the same question, the definitions follow
//! HTA's so the numbers can be compared; the module of each analysis says where and why
//! it departs.

pub mod clamp;
pub mod classify;
pub mod copies;
pub mod counter_tracks;
pub mod critical_path;
pub mod device_memory;
pub mod diff;
pub mod gaps;
pub mod graphs;
pub mod health;
pub mod idle;
pub mod intervals;
pub mod kernels;
pub mod launches;
pub mod operators;
pub mod overlap;
pub mod queue;
pub mod ranks;
pub mod report;
pub mod rows;
pub mod scope;
pub mod sequences;
pub mod steps;
pub mod summary;
pub mod temporal;

use self::diff::{diff, TraceDiff};
use self::health::{across_ranks, rank_health, HealthIssue, RankFacts};
use self::ranks::RankComparison;
use self::report::{report, RankReport};
use self::scope::{scope, Clock};
use self::summary::{merge_rank_summaries, summarize, RankSummary, RanksView};
use crate::model::trace::TraceFile;

/// Everything `gpuscope trace` says of a set of traces: what makes their figures
/// incomplete, each rank's report and, for several ranks, how they compare.
#[derive(Debug)]
pub struct TraceAnalysis {
    /// What makes the traces' figures incomplete or misleading ([`health`]).
    pub health: Vec<HealthIssue>,
    /// One report per trace, in the order given.
    pub ranks: Vec<RankReport>,
    /// The ranks side by side, when there are several.
    pub comparison: Option<RankComparison>,
    /// How event times were taken.
    pub clock: Clock,
}

/// One trace's share of an analysis of several: its report and health, and what the views
/// across ranks need of it, so that the trace can be dropped before the next is read.
#[derive(Debug)]
pub struct RankPart {
    /// The trace's report.
    pub report: RankReport,
    /// What makes this trace's figures incomplete or misleading.
    pub health: Vec<HealthIssue>,
    /// What the health checks across ranks need of it.
    pub facts: RankFacts,
    /// What the comparison of ranks needs of it.
    pub summary: RankSummary,
}

/// The part of `file` in an analysis on `clock`, keeping the `top` entries of each list.
pub fn analyze_rank(file: &TraceFile, clock: Clock, top: usize) -> RankPart {
    let (mut reports, health) = rayon::join(
        || report(std::slice::from_ref(file), clock, top),
        || rank_health(&file.trace),
    );
    let report = reports.pop().expect("one report per trace");
    let summary = summarize(file, &report, clock);
    RankPart {
        report,
        health,
        facts: RankFacts::of(file),
        summary,
    }
}

/// What an analysis of several traces keeps of each once its report is handed on: small
/// beside the report, so thousands of ranks can be compared.
#[derive(Debug, Default)]
pub struct AcrossRanks {
    health: Vec<HealthIssue>,
    facts: Vec<RankFacts>,
    summaries: Vec<RankSummary>,
}

impl AcrossRanks {
    /// Keeps what `part` holds beyond its report, and hands the report back.
    pub fn keep(&mut self, part: RankPart) -> RankReport {
        self.health.extend(part.health);
        self.facts.push(part.facts);
        self.summaries.push(part.summary);
        part.report
    }

    /// The health issues, each rank's then those across ranks, and the ranks merged (the
    /// comparison of `gpuscope trace DIR`).
    pub fn finish(mut self) -> (Vec<HealthIssue>, RanksView) {
        self.health.extend(across_ranks(&self.facts));
        (self.health, merge_rank_summaries(&self.summaries))
    }
}

/// Analyses `traces` with times taken by `clock`, keeping the `top` entries of each list.
pub fn analyze_traces(traces: &[TraceFile], clock: Clock, top: usize) -> TraceAnalysis {
    let mut across = AcrossRanks::default();
    let ranks = traces
        .iter()
        .map(|file| across.keep(analyze_rank(file, clock, top)))
        .collect();
    let (health, merged) = across.finish();
    TraceAnalysis {
        health,
        ranks,
        comparison: merged.comparison,
        clock,
    }
}

/// What changed from trace `a` to trace `b`, times taken by `clock`.
pub fn diff_traces(a: &TraceFile, b: &TraceFile, clock: Clock) -> TraceDiff {
    diff(
        (&a.trace, &scope(&a.trace, clock)),
        (&b.trace, &scope(&b.trace, clock)),
    )
}

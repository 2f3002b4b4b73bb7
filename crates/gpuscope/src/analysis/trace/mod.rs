//! Analyses of PyTorch profiler traces, each a function over the compact trace model.
//! Where Holistic Trace Analysis (HTA) answers the same question, the definitions follow
//! HTA's so the numbers can be compared; the module of each analysis says where and why
//! it departs.

pub mod clamp;
pub mod classify;
pub mod copies;
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
pub mod steps;
pub mod summary;
pub mod temporal;

use self::diff::{diff, TraceDiff};
use self::health::{health, HealthIssue};
use self::ranks::{compare_ranks, RankComparison};
use self::report::{report, RankReport};
use self::scope::{scope, Clock};
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

/// Analyses `traces` with times taken by `clock`, keeping the `top` entries of each list.
pub fn analyze_traces(traces: &[TraceFile], clock: Clock, top: usize) -> TraceAnalysis {
    let (ranks, health) = rayon::join(|| report(traces, clock, top), || health(traces));
    let comparison = compare_ranks(&ranks);
    TraceAnalysis {
        health,
        ranks,
        comparison,
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

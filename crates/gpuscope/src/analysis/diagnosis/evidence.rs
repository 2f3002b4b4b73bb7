//! The figures a finding rests on, typed per kind of finding. Most carry the result of the
//! analysis that found them as it is (the JSON is then that analysis's own), with the
//! figures of the other sources it was joined with.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;

use crate::analysis::report::allocator_verdict::Fragmentation;
use crate::analysis::report::gradients::NormTrend;
use crate::analysis::report::host_growth::HostGrowth;
use crate::analysis::report::leak::LeakVerdict;
use crate::analysis::report::nonfinite::DiagnosedEvent;
use crate::analysis::report::oom::OomEstimate;
use crate::analysis::report::sections::SectionTrend;
use crate::analysis::report::spread::Spread;
use crate::analysis::snapshot::never_freed::NeverFreed;
use crate::analysis::snapshot::sites::SiteBytes;
use crate::analysis::trace::gaps::Gap;
use crate::analysis::trace::health::HealthIssue;
use crate::analysis::trace::operators::OperatorStats;
use crate::analysis::trace::ranks::{RankFigures, Straggler};
use crate::analysis::trace::steps::Verdict;
use crate::model::oom::OomEvent;

/// The evidence of one finding; its shape depends on the finding's kind.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum Evidence {
    /// `peak`: the records' peak, and what a snapshot says was alive at its peak.
    Peak(PeakEvidence),
    /// `leak`: the verdict and the growth of the series that grew.
    Leak {
        /// The leak rule's verdict.
        verdict: LeakVerdict,
        /// Growth of the suspected series over the run's trend window, bytes per 1000
        /// iterations.
        slope_bytes_per_1k_iters: Option<f64>,
    },
    /// `oom_forecast`.
    OomForecast(OomEstimate),
    /// `allocator`.
    Allocator(Fragmentation),
    /// `host_growth`.
    HostGrowth(HostGrowth),
    /// `rank_spread`: the figures whose spread between ranks is widest.
    RankSpread {
        /// The ranks compared.
        ranks: Vec<u32>,
        /// By figure.
        figures: BTreeMap<String, Spread>,
    },
    /// `skipped_records`, `unreadable`: what could not be read.
    Unread {
        /// How many lines or files.
        count: usize,
        /// The first of them, `file:line: reason` or `file: reason`.
        first: Vec<String>,
    },
    /// `oom`: the caught error, and what was alive when its snapshot was read too.
    Oom {
        /// The error as its report gives it.
        event: OomEvent,
        /// What was alive at the error, by call site (from the snapshot saved with it).
        alive_by_site: Option<Vec<SiteBytes>>,
    },
    /// `alive_at_peak`.
    AliveAtPeak {
        /// The snapshot.
        snapshot: PathBuf,
        /// Bytes allocated at its peak (the replayed trace's, else at the dump).
        peak_bytes: u64,
        /// The largest call sites alive then.
        by_site: Vec<SiteBytes>,
    },
    /// `never_freed`.
    NeverFreed {
        /// The snapshot.
        snapshot: PathBuf,
        /// The call sites whose allocations accumulate.
        sites: Vec<NeverFreed>,
    },
    /// `steps`, `launch_bound`.
    Steps(StepEvidence),
    /// `straggler`.
    Straggler {
        /// The slow rank and by how much.
        straggler: Straggler,
        /// Every rank's figures.
        ranks: Vec<RankFigures>,
        /// The straggler's memory peak from its records, when it has some.
        peak_allocated_bytes: Option<u64>,
        /// Mean utilisation in `gpu.jsonl` of the GPU whose index is the rank, while the
        /// training held memory on it.
        gpu_utilization_percent: Option<f64>,
    },
    /// `trace_health`.
    TraceHealth(HealthIssue),
    /// `utilization`.
    Utilization(UtilizationEvidence),
    /// `disagreement`.
    Disagreement {
        /// The figure both sources measure.
        figure: &'static str,
        /// One source and its value.
        first: (&'static str, f64),
        /// The other.
        second: (&'static str, f64),
        /// Why they can differ.
        why: &'static str,
    },
    /// `nonfinite`.
    Nonfinite(DiagnosedEvent),
    /// `section`: the section over the run, and what ran inside it in a trace.
    Section {
        /// The section over the run.
        section: SectionTrend,
        /// The CPU operators inside the section's ranges in the rank's trace, most self
        /// time first; empty when no trace recorded the section.
        trace_operators: Vec<OperatorStats>,
    },
    /// `gradient_flow`.
    GradientFlow {
        /// The global norm.
        global: NormTrend,
        /// Modules whose norms vanished, exploded or went non-finite.
        flagged: Vec<NormTrend>,
    },
    /// `kernels`: an Nsight export's kernels.
    Kernels {
        /// The export.
        export: PathBuf,
        /// Kernels, most time first: name, total µs, share of kernel time %.
        top: Vec<(String, f64, f64)>,
    },
}

/// The evidence of a `peak` finding.
#[derive(Debug, Clone, Serialize)]
pub struct PeakEvidence {
    /// The iteration of the record with the most memory allocated.
    pub iteration: i64,
    /// The most allocated: on GPU the allocator's own peak (between records too), on CPU
    /// the records' highest sum of categories.
    pub allocated_bytes: u64,
    /// The most reserved, on GPU.
    pub reserved_bytes: Option<u64>,
    /// The device's memory in total, when recorded.
    pub device_total_bytes: Option<u64>,
    /// Memory by category at the record with the most allocated.
    pub categories_bytes: BTreeMap<String, u64>,
    /// The snapshot joined with it, and what was alive at its peak by call site.
    pub snapshot: Option<PathBuf>,
    /// See `snapshot`.
    pub alive_by_site: Vec<SiteBytes>,
}

/// The evidence of a `steps` finding.
#[derive(Debug, Clone, Serialize)]
pub struct StepEvidence {
    /// The trace.
    pub trace: PathBuf,
    /// Profiler steps read.
    pub steps: usize,
    /// The mean step, ms.
    pub mean_step_ms: Option<f64>,
    /// Share of the kernel span the GPU was idle, percent.
    pub gpu_idle_percent: Option<f64>,
    /// The step verdict, when one was given.
    pub verdict: Option<Verdict>,
    /// Most work is shorter than its launch and queues stay short.
    pub launch_bound: bool,
    /// The largest gap on the GPU and what the CPU did meanwhile.
    pub largest_gap: Option<Gap>,
}

/// The evidence of a `utilization` finding.
#[derive(Debug, Clone, Serialize)]
pub struct UtilizationEvidence {
    /// Samples read.
    pub samples: usize,
    /// GPU the figures are of.
    pub gpu: u32,
    /// Mean utilisation over the samples while the training held GPU memory, percent.
    pub mean_percent: Option<f64>,
    /// Highest utilisation, percent.
    pub max_percent: Option<f64>,
    /// Most memory in use on the GPU.
    pub peak_memory_used_bytes: Option<u64>,
    /// The GPU's memory.
    pub memory_total_bytes: Option<u64>,
    /// The trace's GPU busy share of its kernel span, percent, when a trace was read.
    pub trace_busy_percent: Option<f64>,
}

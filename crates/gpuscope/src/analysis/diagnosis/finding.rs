//! A finding: one thing one source of a run says, with how much it matters. Findings are
//! what `gpuscope report RUN` puts first, ranked by [`Severity`] and then by [`Stake`].

use std::cmp::Ordering;

use serde::Serialize;

use super::evidence::Evidence;
use crate::model::sources::Source;
use crate::model::words::words;

words! {
    /// Where a finding comes from: a source of the run directory, or one of the parts of
    /// the memory records that has its own rules (timed sections, gradients).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum FindingSource {
        /// The memory records (`profiles/memory*.jsonl`, text logs, TensorBoard tags).
        Memory = "memory",
        /// Profiler traces.
        Trace = "trace",
        /// Allocator snapshots and out-of-memory reports.
        Snapshot = "snapshot",
        /// GPU samples (`gpu.jsonl`).
        Gpu = "gpu",
        /// Non-finite losses or gradients.
        Nonfinite = "nonfinite",
        /// Timed sections of the memory records.
        Sections = "sections",
        /// Gradient norms of the memory records.
        Gradients = "gradients",
        /// Nsight Systems exports.
        Nsys = "nsys",
    }
}

impl From<Source> for FindingSource {
    fn from(source: Source) -> Self {
        match source {
            Source::Memory => FindingSource::Memory,
            Source::Trace => FindingSource::Trace,
            Source::Snapshot => FindingSource::Snapshot,
            Source::Gpu => FindingSource::Gpu,
            Source::Nonfinite => FindingSource::Nonfinite,
            Source::Nsys => FindingSource::Nsys,
        }
    }
}

words! {
    /// How much a finding matters. Ordered most severe first.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
    pub enum Severity {
        /// The run fails or will: out of memory, a leak, NaN, a GPU mostly idle.
        High = "high",
        /// Time or memory lost that a change would win back.
        Medium = "medium",
        /// Worth knowing; a figure may be incomplete.
        Low = "low",
        /// Nothing wrong: what the source shows.
        Info = "info",
    }
}

words! {
    /// What a finding is about.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum FindingKind {
        /// The memory peak of the records, and what held it.
        Peak = "peak",
        /// Memory that grows steadily.
        Leak = "leak",
        /// When the device would run out of memory at the present rate.
        OomForecast = "oom_forecast",
        /// The allocator's unallocated reserve judged by its counters.
        Allocator = "allocator",
        /// Host memory that grows over a GPU run.
        HostGrowth = "host_growth",
        /// Ranks whose memory differs.
        RankSpread = "rank_spread",
        /// Record lines that could not be read.
        SkippedRecords = "skipped_records",
        /// An out-of-memory error that was caught.
        Oom = "oom",
        /// What was alive at a snapshot's peak, by call site.
        AliveAtPeak = "alive_at_peak",
        /// Allocations never freed whose call sites accumulate.
        NeverFreed = "never_freed",
        /// How the profiled steps split, and the verdicts on them.
        Steps = "steps",
        /// The GPU waits for the CPU to launch work.
        LaunchBound = "launch_bound",
        /// A rank slower than the others.
        Straggler = "straggler",
        /// Something that makes a trace's figures incomplete.
        TraceHealth = "trace_health",
        /// GPU utilisation and memory sampled through the run.
        Utilization = "utilization",
        /// Two sources that disagree on the same figure.
        Disagreement = "disagreement",
        /// Iterations with NaN or Inf losses or gradients.
        Nonfinite = "nonfinite",
        /// The timed section that takes most of an iteration, or grew most.
        Section = "section",
        /// Gradient norms that vanish or explode.
        GradientFlow = "gradient_flow",
        /// What an Nsight Systems export shows.
        Kernels = "kernels",
        /// A file of a source that could not be read.
        Unreadable = "unreadable",
    }
}

words! {
    /// Where the evidence of a finding is shown in the HTML report.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Anchor {
        /// The memory charts of the run.
        Memory = "memory",
        /// The trace's step chart.
        Trace = "trace",
        /// The snapshot's timeline by call site.
        Snapshot = "snapshot",
        /// The GPU samples.
        Gpu = "gpu",
        /// The non-finite events, timed sections and gradient norms of the run.
        Health = "health",
        /// The sources table.
        Sources = "sources",
    }
}

/// What is at stake: the figure the ranking weighs after severity.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "unit", rename_all = "snake_case")]
pub enum Stake {
    /// Bytes of memory.
    Bytes {
        /// Bytes.
        value: u64,
        /// Their share of what holds them (the device, else the snapshot's reserve), 0–1.
        share: Option<f64>,
    },
    /// A share of the step time.
    StepTime {
        /// Percent.
        percent: f64,
    },
    /// Iterations lost.
    Iterations {
        /// How many.
        value: u64,
        /// Of the iterations the run made.
        of: Option<u64>,
    },
    /// Nothing measurable.
    None,
}

impl Stake {
    /// The stake as a share of the whole it is part of, 0–1, for ranking findings of
    /// different units against one another.
    pub fn weight(&self) -> f64 {
        let weight = match *self {
            Stake::Bytes { share, .. } => share.unwrap_or(0.0),
            Stake::StepTime { percent } => percent / 100.0,
            Stake::Iterations { value, of } => match of {
                Some(of) if of > 0 => value as f64 / of as f64,
                _ => 0.0,
            },
            Stake::None => 0.0,
        };
        if weight.is_finite() {
            weight.clamp(0.0, 1.0)
        } else {
            0.0
        }
    }
}

/// One finding.
#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    /// The source it comes from.
    pub source: FindingSource,
    /// The rank; `None` for findings of the whole run (GPU samples, across ranks).
    pub rank: Option<u32>,
    /// What it is about.
    pub kind: FindingKind,
    /// How much it matters.
    pub severity: Severity,
    /// One sentence.
    pub summary: String,
    /// What is at stake.
    pub stake: Stake,
    /// The figures it rests on.
    pub evidence: Evidence,
    /// The command or change to try; empty when there is nothing to try.
    pub next: String,
    /// Where the HTML report shows the evidence.
    #[serde(skip)]
    pub anchor: Anchor,
}

/// Most severe first, then most at stake; findings alike keep their order.
pub fn rank_findings(findings: &mut [Finding]) {
    findings.sort_by(|a, b| {
        a.severity.cmp(&b.severity).then_with(|| {
            b.stake
                .weight()
                .partial_cmp(&a.stake.weight())
                .unwrap_or(Ordering::Equal)
        })
    });
}

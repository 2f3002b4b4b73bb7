//! Everything `gpuscope trace` says about a set of per-rank traces, put together from
//! the other analyses.

use std::path::PathBuf;

use serde::Serialize;

use super::copies::{copies, CopyKind};
use super::device_memory::{device_memory, DeviceMemory};
use super::gaps::{largest_gaps, Gap};
use super::graphs::{GraphReplays, Replays};
use super::idle::{idle_by_stream, StreamIdle};
use super::kernels::{top_kernels, type_breakdown, KernelStats, TypeTime};
use super::launches::{launch_stats, launches, LaunchStats};
use super::operators::{operators, Operators};
use super::overlap::comm_comp_overlap_percent;
use super::queue::{queue_lengths, StreamQueue};
use super::scope::{scope, Clock};
use super::steps::{step_overview, StepOverview};
use super::temporal::{temporal, Temporal};
use crate::model::trace::Trace;
use crate::model::trace::TraceFile;

/// Mean queue length under which launches cannot keep a stream fed.
pub const LAUNCH_BOUND_QUEUE: f64 = 2.0;

fn is_launch_bound(stats: &Option<LaunchStats>, queues: &[StreamQueue]) -> bool {
    stats.as_ref().is_some_and(|l| {
        l.count >= LAUNCH_BOUND_MIN_LAUNCHES && l.shorter_than_launch_percent >= 50.0
    }) && queues.iter().all(|q| q.mean < LAUNCH_BOUND_QUEUE)
}

/// Launches below which a trace says nothing about launch overhead (one compiled kernel
/// launched once is no pattern).
pub const LAUNCH_BOUND_MIN_LAUNCHES: usize = 20;

/// Gaps listed per rank.
const GAPS: usize = 5;

/// One rank's trace, analysed.
#[derive(Debug, Clone, Serialize)]
pub struct RankReport {
    /// The rank.
    pub rank: u32,
    /// The trace file.
    pub path: PathBuf,
    /// Events kept from the file.
    pub events: usize,
    /// Events that could not be used, by reason.
    pub dropped: Vec<(String, u64)>,
    /// Whether the trace has GPU work at all.
    pub gpu_activity: bool,
    /// Kernels timed by CUPTI's range profiler (replayed for counters: not real time).
    pub counter_ranges: u64,
    /// The last profiler step (`ProfilerStep#12`), when it was left out.
    pub last_step_left_out: Option<String>,
    /// The temporal breakdown; `null` without GPU work.
    pub temporal: Option<Temporal>,
    /// Time by kernel type and overlap, largest first.
    pub kernel_types: Vec<TypeTime>,
    /// The kernels with the most time.
    pub top_kernels: Vec<KernelStats>,
    /// Idle time of each stream by cause.
    pub idle_by_stream: Vec<StreamIdle>,
    /// Share of communication time hidden under computation, percent; `null` without
    /// communication.
    pub comm_comp_overlap_percent: Option<f64>,
    /// Kernel launches; `null` without any.
    pub launches: Option<LaunchStats>,
    /// Launched work waiting on each stream.
    pub queue_by_stream: Vec<StreamQueue>,
    /// Most work is shorter than its launch call and no stream's queue averages
    /// [`LAUNCH_BOUND_QUEUE`] or more: the GPU waits for the CPU to launch.
    pub launch_bound: bool,
    /// The GPU work replayed from CUDA graphs, which `launches`, `queue_by_stream` and
    /// `launch_bound` leave out: a graph launch starts all of it, none has a launch call
    /// of its own to pair with; `null` without graph launches.
    pub graph_replays: Option<GraphReplays>,
    /// Copies and memsets by direction.
    pub copies: Vec<CopyKind>,
    /// The profiler steps and the verdicts on them; `null` without `ProfilerStep#N`.
    pub steps: Option<StepOverview>,
    /// CPU operators by self time, by GPU time launched, and by input shapes.
    pub operators: Operators,
    /// The largest gaps on the GPU timeline and what the CPU did meanwhile.
    pub largest_gaps: Vec<Gap>,
    /// Memory over time per device, from `profile_memory=True` traces.
    pub memory: Vec<DeviceMemory>,
    /// What to know when reading the figures above, one sentence each.
    pub notes: Vec<String>,
}

/// The analyses of `traces` on `clock`, listing `top` kernels by name.
pub fn report(traces: &[TraceFile], clock: Clock, top: usize) -> Vec<RankReport> {
    traces
        .iter()
        .map(|file| {
            let trace = &file.trace;
            // The step, operator and memory views do not need the GPU scope: the steps
            // and the memory timeline run beside the GPU and operator views. (Four tasks,
            // the operators beside the GPU views too, held ~100 MB more at the peak of a
            // 1 GiB trace for ~4 % less time: bench/README.md.)
            let ((gpu, operators), (steps, memory)) = rayon::join(
                || (GpuViews::of(trace, clock, top), operators(trace, top)),
                || (step_overview(trace), device_memory(trace)),
            );
            RankReport {
                rank: trace.rank,
                path: file.path.clone(),
                events: trace.events.len(),
                dropped: trace.dropped.clone(),
                gpu_activity: trace.has_gpu_work(),
                counter_ranges: trace.counter_ranges,
                last_step_left_out: gpu.cut,
                temporal: gpu.temporal,
                kernel_types: gpu.kernel_types,
                top_kernels: gpu.top_kernels,
                idle_by_stream: gpu.idle_by_stream,
                comm_comp_overlap_percent: gpu.comm_comp_overlap_percent,
                launch_bound: is_launch_bound(&gpu.launches, &gpu.queue_by_stream),
                launches: gpu.launches,
                queue_by_stream: gpu.queue_by_stream,
                graph_replays: gpu.graph_replays,
                copies: gpu.copies,
                steps,
                operators,
                largest_gaps: gpu.largest_gaps,
                memory,
                notes: gpu.notes,
            }
        })
        .collect()
}

/// The views computed within the analysed GPU window ([`scope`]).
struct GpuViews {
    cut: Option<String>,
    temporal: Option<Temporal>,
    kernel_types: Vec<TypeTime>,
    top_kernels: Vec<KernelStats>,
    idle_by_stream: Vec<StreamIdle>,
    comm_comp_overlap_percent: Option<f64>,
    launches: Option<LaunchStats>,
    queue_by_stream: Vec<StreamQueue>,
    graph_replays: Option<GraphReplays>,
    copies: Vec<CopyKind>,
    largest_gaps: Vec<Gap>,
    notes: Vec<String>,
}

impl GpuViews {
    fn of(trace: &Trace, clock: Clock, top: usize) -> GpuViews {
        let s = scope(trace, clock);
        let launched = launches(trace, &s);
        let calls = launched.iter().map(|l| l.call);
        let inside_out = s.ending_before_start(trace, s.gpu.iter().copied().chain(calls));
        GpuViews {
            cut: s.cut.map(|(name, _)| trace.names.get(name).to_owned()),
            temporal: temporal(trace, &s),
            kernel_types: type_breakdown(trace, &s),
            top_kernels: top_kernels(trace, &s, top),
            idle_by_stream: idle_by_stream(trace, &s),
            comm_comp_overlap_percent: comm_comp_overlap_percent(trace, &s),
            queue_by_stream: queue_lengths(trace, &s, &launched),
            launches: launch_stats(&launched),
            graph_replays: Replays::in_scope(trace, &s).summary(|i| s.duration(trace, i)),
            copies: copies(trace, &s),
            largest_gaps: largest_gaps(trace, &s, GAPS),
            notes: (inside_out > 0)
                .then(|| rounding_note(inside_out))
                .into_iter()
                .collect(),
        }
    }
}

/// The note on `n` events that HTA's rounding leaves ending before they start.
fn rounding_note(n: usize) -> String {
    let (events, round) = if n == 1 {
        ("event", "rounds to a negative duration")
    } else {
        ("events", "round to negative durations")
    };
    format!(
        "{n} {events} shorter than 1 µs (kernels, memsets, launch calls) {round} under HTA's \
         rounding (start up, end down): durations, times and shares are clamped at 0, so \
         idle, compute and non-compute may not add up to the span."
    )
}

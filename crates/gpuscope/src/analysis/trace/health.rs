//! Trace health: what makes a trace's figures incomplete or misleading without any error —
//! options the profiler ran without, records CUPTI lost, GPU work no operator launched,
//! ranks that cannot be told apart or lined up. Each check is a rule on the trace model
//! alone (README, "Trace health"); none changes another analysis's figures, they say
//! which of them to doubt and how to record a better trace.

use std::collections::BTreeMap;

use rustc_hash::{FxHashMap, FxHashSet};

use rayon::prelude::*;
use serde::Serialize;

use super::classify::Call;
use super::graphs::{GraphReplays, Replays};
use crate::model::trace::{file_name, Kind, RankFrom, Trace, TraceFile, NONE, NO_SHAPES};
use crate::model::units::counted;
use crate::model::words::words;

words! {
    /// What makes a trace's figures incomplete or misleading.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub enum HealthKind {
        /// Recorded without `profile_memory=True`: no `[memory]` events, so no memory
        /// timeline and no allocation attribution.
        NoMemoryEvents = "no_memory_events",
        /// Recorded without `record_shapes=True`: no `Input Dims` on any CPU operator, so
        /// no operators-by-shape table.
        NoShapes = "no_shapes",
        /// Fewer than two `ProfilerStep#N`: no step-to-step figures, and nothing tells the
        /// steady state from warm-up or the profiler's stop.
        SingleStep = "single_step",
        /// `cudaGraphLaunch` calls: the GPU work replayed from a graph was launched by no
        /// CPU operator, so per-operator GPU time misses it.
        CudaGraphs = "cuda_graphs",
        /// Kernel launches whose kernel is not in the trace (CUPTI dropped records, its
        /// buffers full), or Kineto saying it lost records: GPU time is undercounted.
        DroppedKernels = "dropped_kernels",
        /// Several traces, some without `distributedInfo.rank`: their ranks were taken
        /// from file names or assumed 0.
        NoRankMetadata = "no_rank_metadata",
        /// Several ranks whose same `ProfilerStep#N` starts further apart than half its
        /// mean duration: their timelines cannot be lined up.
        ClockSkew = "clock_skew",
    }
}

/// One thing that makes a trace's figures incomplete or misleading.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HealthIssue {
    /// What it is.
    pub kind: HealthKind,
    /// The rank of the trace concerned; `null` for an issue across traces
    /// (`no_rank_metadata`, `clock_skew`).
    pub rank: Option<u32>,
    /// The events concerned: CPU operators without shapes, profiler steps, graph
    /// launches, launches without their kernel, traces without a rank, steps out of line
    /// (0 for `no_memory_events`, which has none).
    pub count: u64,
    /// What is wrong, which figures it makes incomplete, and how to record a better
    /// trace.
    pub detail: String,
}

/// Phrases of Kineto's log that say it lost records.
const KINETO_LOSSES: [&str; 3] = [
    "Exceeded max GPU buffer count",
    "activity records",
    "CUPTI stopped early? = ",
];

/// A step on several ranks starting further apart than this fraction of its mean
/// duration is out of line.
pub const SKEW_FRACTION: f64 = 0.5;

/// What makes `traces` (one per rank, or successive traces of one process) incomplete or
/// misleading: each trace's issues in [`HealthKind::ALL`] order, then those across traces.
pub fn health(traces: &[TraceFile]) -> Vec<HealthIssue> {
    let (each, facts): (Vec<Vec<HealthIssue>>, Vec<RankFacts>) = traces
        .par_iter()
        .map(|file| (rank_health(&file.trace), RankFacts::of(file)))
        .unzip();
    let mut issues: Vec<HealthIssue> = each.into_iter().flatten().collect();
    issues.extend(across_ranks(&facts));
    issues
}

/// What the checks across traces need of one trace, kept once the trace itself is gone
/// (a directory of thousands of ranks is read one trace at a time).
#[derive(Debug, Clone)]
pub struct RankFacts {
    rank: u32,
    rank_from: RankFrom,
    /// The file's name.
    file: String,
    /// The trace's clock origin, ns.
    base_time_ns: i64,
    /// Each profiler step's start and duration, ns from `base_time_ns`.
    steps: BTreeMap<String, (i64, i64)>,
}

impl RankFacts {
    /// The facts of `file`.
    pub fn of(file: &TraceFile) -> RankFacts {
        RankFacts {
            rank: file.trace.rank,
            rank_from: file.trace.rank_from,
            file: file_name(&file.path),
            base_time_ns: file.trace.base_time_ns,
            steps: step_starts(&file.trace),
        }
    }
}

/// The issues across the traces whose facts are `facts`: ranks without metadata, clocks
/// that disagree.
pub fn across_ranks(facts: &[RankFacts]) -> Vec<HealthIssue> {
    let mut issues = rank_metadata(facts);
    issues.extend(clock_skew(facts));
    issues
}

/// The issues of one trace.
pub fn rank_health(trace: &Trace) -> Vec<HealthIssue> {
    let issue = |kind, count, detail| HealthIssue {
        kind,
        rank: Some(trace.rank),
        count,
        detail,
    };
    let e = &trace.events;
    let mut issues = Vec::new();
    if !e.kind.contains(&Kind::Memory) {
        issues.push(issue(
            HealthKind::NoMemoryEvents,
            0,
            "No [memory] events: the trace was recorded without profile_memory=True, so it \
             has no memory timeline and no allocation attribution. Profile with \
             profile_memory=True."
                .to_owned(),
        ));
    }
    let operators = e.kind.iter().filter(|&&k| k == Kind::CpuOp).count() as u64;
    let shapes = (0..e.len()).any(|i| e.kind[i] == Kind::CpuOp && e.shapes[i] != NO_SHAPES);
    if operators > 0 && !shapes {
        issues.push(issue(
            HealthKind::NoShapes,
            operators,
            format!(
                "None of the {operators} CPU operators has input shapes (Input Dims): the \
                 trace was recorded without record_shapes=True, so there is no \
                 operators-by-shape table. Profile with record_shapes=True."
            ),
        ));
    }
    let steps = step_starts(trace);
    if steps.len() < 2 {
        let detail = match steps.keys().next() {
            None => "No ProfilerStep#N: the loop did not call prof.step(), so there are no \
                     step times, no step breakdown or verdicts, and every figure spans \
                     the whole window, warm-up included. Call prof.step() once per \
                     iteration, with a schedule of two or more active steps."
                .to_owned(),
            Some(name) => format!(
                "One profiler step ({name}): no step-to-step variation, no step left out \
                 where the profiler's stop may cut work short, and one step may be warm-up \
                 (allocations, autotuning). Record two or more active steps \
                 (torch.profiler.schedule(..., active=3))."
            ),
        };
        issues.push(issue(HealthKind::SingleStep, steps.len() as u64, detail));
    }
    if let Some(graphs) = Replays::of(trace).summary(|i| e.dur[i]) {
        issues.push(issue(
            HealthKind::CudaGraphs,
            graphs.launches,
            graphs_detail(&graphs),
        ));
    }
    let dropped = dropped_kernels(trace);
    let losses = kineto_losses(trace);
    if dropped > 0 || !losses.is_empty() {
        issues.push(issue(
            HealthKind::DroppedKernels,
            dropped,
            dropped_detail(dropped, &losses),
        ));
    }
    issues
}

/// Runtime and driver calls whose name is one of `names`.
fn calls<'a>(trace: &'a Trace, names: &'a FxHashSet<u32>) -> impl Iterator<Item = usize> + 'a {
    let e = &trace.events;
    (0..e.len()).filter(move |&i| {
        matches!(e.kind[i], Kind::Runtime | Kind::Driver) && names.contains(&e.name[i])
    })
}

/// The start and duration (ns) of each CPU-side `ProfilerStep#N`, by name: the first
/// occurrence of each (the same name on the GPU, `gpu_user_annotation`, is left out).
fn step_starts(trace: &Trace) -> BTreeMap<String, (i64, i64)> {
    let e = &trace.events;
    let mut steps = BTreeMap::new();
    for i in 0..e.len() {
        if e.kind[i].is_gpu() || e.kind[i] == Kind::GpuUserAnnotation {
            continue;
        }
        let name = trace.names.get(e.name[i]);
        if name.starts_with("ProfilerStep#") {
            let first = steps.entry(name.to_owned()).or_insert((e.ts[i], e.dur[i]));
            if e.ts[i] < first.0 {
                *first = (e.ts[i], e.dur[i]);
            }
        }
    }
    steps
}

/// What the health issue on graph launches says of `graphs`.
fn graphs_detail(graphs: &GraphReplays) -> String {
    format!(
        "{} replayed {} kernels, copies and memsets ({:.1} ms of GPU \
         time) that no CPU operator launched: per-operator GPU time leaves them out (or \
         gives them to the operator that replayed the graph), though kernel and stream \
         figures count them. Profile once without CUDA graphs (torch.compile mode other \
         than \"reduce-overhead\") to see them by operator.",
        counted(graphs.launches as usize, "CUDA graph launch"),
        graphs.work,
        graphs.gpu_us / 1000.0
    )
}

/// Kernel launches with a correlation id whose kernel is not in the trace, counting only
/// launches whose kernel must have run inside the profiler's window — Kineto leaves out
/// GPU records that end after its window, and work still queued when the profiler stopped
/// is not lost. With a device-wide synchronisation in the trace (torch.profiler makes one
/// as it stops), those are the launches that ended before the last one began: it returned
/// inside the window, so their work had run. Without one, those that ended before the
/// start of the last recorded GPU work less the longest any recorded kernel waited after
/// its launch (the deepest queue seen). Launches inside a stream capture are left out: they
/// record a graph and run nothing. A trace whose GPU work carries no correlation ids
/// (CUPTI's range profiler) has nothing to match: 0.
pub fn dropped_kernels(trace: &Trace) -> u64 {
    let e = &trace.events;
    // Kernel launches only: a copy or memset of 0 bytes returns without any GPU work (235
    // of the 380 `cudaMemsetAsync` of the shared V100 trace, cuDNN's empty workspaces).
    let launch_names = Call::names_in(trace, &[Call::KernelLaunch]);
    if launch_names.is_empty() {
        return 0;
    }
    let work: FxHashMap<i64, usize> = (0..e.len())
        .filter(|&i| e.kind[i].is_gpu() && e.correlation[i] != NONE)
        .map(|i| (e.correlation[i], i))
        .collect();
    let any_work = e.kind.iter().any(|k| k.is_gpu());
    if work.is_empty() && any_work {
        // GPU work without correlation ids (CUPTI's range profiler): nothing to match.
        return 0;
    }
    let sync_names = Call::names_in(trace, &[Call::DeviceSync]);
    let horizon = match calls(trace, &sync_names).map(|i| e.ts[i]).max() {
        Some(sync) => sync,
        None => {
            let Some(last_start) = (0..e.len())
                .filter(|&i| e.kind[i].is_gpu())
                .map(|i| e.ts[i])
                .max()
            else {
                return 0;
            };
            let deepest_queue = calls(trace, &launch_names)
                .filter_map(|call| {
                    let &w = work.get(&e.correlation[call])?;
                    Some((e.ts[w] - e.end(call)).max(0))
                })
                .max()
                .unwrap_or_default();
            last_start - deepest_queue
        }
    };
    let captures = captures(trace);
    calls(trace, &launch_names)
        .filter(|&i| e.correlation[i] != NONE && e.end(i) <= horizon)
        .filter(|&i| !work.contains_key(&e.correlation[i]))
        .filter(|&i| {
            captures.get(&e.tid[i]).is_none_or(|spans| {
                !spans
                    .iter()
                    .any(|&(start, end)| start <= e.ts[i] && e.ts[i] <= end)
            })
        })
        .count() as u64
}

/// The stream captures of each thread: from the start of each capture's begin call to
/// the end of the next end call on that thread (to the end of the trace when none).
fn captures(trace: &Trace) -> FxHashMap<i64, Vec<(i64, i64)>> {
    let e = &trace.events;
    let begins = Call::names_in(trace, &[Call::CaptureBegin]);
    let ends = Call::names_in(trace, &[Call::CaptureEnd]);
    let mut marks: Vec<(i64, i64, bool)> = calls(trace, &begins)
        .map(|i| (e.tid[i], e.ts[i], true))
        .chain(calls(trace, &ends).map(|i| (e.tid[i], e.end(i), false)))
        .collect();
    marks.sort_unstable();
    let mut spans: FxHashMap<i64, Vec<(i64, i64)>> = FxHashMap::default();
    let mut open: FxHashMap<i64, i64> = FxHashMap::default();
    for (tid, at, begin) in marks {
        if begin {
            open.entry(tid).or_insert(at);
        } else if let Some(start) = open.remove(&tid) {
            spans.entry(tid).or_default().push((start, at));
        }
    }
    for (tid, start) in open {
        spans.entry(tid).or_default().push((start, i64::MAX));
    }
    spans
}

/// Kineto's log lines saying it lost records (a record count line only when it says
/// CUPTI stopped early), without their `LEVEL:date pid:tid file:line]` prefix.
fn kineto_losses(trace: &Trace) -> Vec<String> {
    trace
        .kineto_log
        .iter()
        .filter(|line| {
            KINETO_LOSSES.iter().any(|p| line.contains(p))
                && !line.contains("CUPTI stopped early? = 0")
                && !line.contains("Dropped 0 ")
        })
        .map(|line| {
            line.split_once("] ")
                .map_or(line.as_str(), |(_, message)| message)
                .trim()
                .to_owned()
        })
        .collect()
}

fn dropped_detail(dropped: u64, losses: &[String]) -> String {
    let mut detail = String::new();
    if dropped > 0 {
        detail.push_str(&format!(
            "{dropped} kernel launches have no kernel in the trace though the profiler \
             was still recording when they ran: CUPTI dropped their records (its buffers \
             were full), so GPU time, kernel counts and idle time are undercounted."
        ));
    }
    if let Some(first) = losses.first() {
        if !detail.is_empty() {
            detail.push(' ');
        }
        detail.push_str(&format!(
            "Kineto logged that it lost records (\"{first}\"{}): the figures leave that \
             work out.",
            if losses.len() > 1 {
                format!(", and {} more such lines", losses.len() - 1)
            } else {
                String::new()
            }
        ));
    }
    detail.push_str(
        " Profile fewer steps, or raise Kineto's buffer (KINETO_CONFIG with \
         ACTIVITIES_MAX_GPU_BUFFER_SIZE_MB).",
    );
    detail
}

/// With several traces, those whose rank did not come from `distributedInfo`.
fn rank_metadata(traces: &[RankFacts]) -> Vec<HealthIssue> {
    if traces.len() < 2 {
        return Vec::new();
    }
    let mut distinct: Vec<u32> = traces.iter().map(|t| t.rank).collect();
    distinct.sort_unstable();
    distinct.dedup();
    let shared = distinct.len() < traces.len();
    let mut issues = Vec::new();
    for from in [RankFrom::FileName, RankFrom::Default] {
        let these: Vec<&RankFacts> = traces.iter().filter(|t| t.rank_from == from).collect();
        if these.is_empty() {
            continue;
        }
        let files = file_list(&these);
        let mut detail = match from {
            RankFrom::FileName => format!(
                "{} of {} traces carry no distributedInfo.rank; their ranks are taken \
                 from their file names ({files}).",
                these.len(),
                traces.len()
            ),
            _ => format!(
                "{} of {} traces carry no distributedInfo.rank and no rank in their file \
                 names; each is assumed rank 0 ({files}).",
                these.len(),
                traces.len()
            ),
        };
        if shared {
            detail.push_str(
                " Traces of one rank are read as successive profiler cycles of one \
                 process: there is no rank comparison, straggler or clock-skew check.",
            );
        }
        detail.push_str(
            " Profile after torch.distributed.init_process_group (Kineto then records \
             the rank), or name each file with rank<R>.",
        );
        issues.push(HealthIssue {
            kind: HealthKind::NoRankMetadata,
            rank: None,
            count: these.len() as u64,
            detail,
        });
    }
    issues
}

/// The file names of `traces`, the first three and how many more.
fn file_list(traces: &[&RankFacts]) -> String {
    let names: Vec<String> = traces
        .iter()
        .take(3)
        .map(|t| match t.rank_from {
            RankFrom::FileName => format!("{}: rank {}", t.file, t.rank),
            _ => t.file.clone(),
        })
        .collect();
    match traces.len() {
        n if n > 3 => format!("{}, and {} more", names.join(", "), n - 3),
        _ => names.join(", "),
    }
}

/// With several distinct ranks, the `ProfilerStep#N` present on every rank whose start
/// times (on each trace's `baseTimeNanoseconds` clock) spread further than
/// [`SKEW_FRACTION`] of its mean duration across the ranks.
fn clock_skew(traces: &[RankFacts]) -> Option<HealthIssue> {
    let mut ranks: Vec<u32> = traces.iter().map(|t| t.rank).collect();
    ranks.sort_unstable();
    ranks.dedup();
    if ranks.len() < 2 || ranks.len() < traces.len() {
        return None;
    }
    let steps: Vec<_> = traces.iter().map(|t| (t.base_time_ns, &t.steps)).collect();
    let first = steps.first()?;
    // (name, spread, mean duration), ns.
    let mut skewed: Vec<(&str, i64, f64)> = Vec::new();
    let mut common = 0;
    for name in first.1.keys() {
        let Some(times): Option<Vec<(i64, i64)>> = steps
            .iter()
            .map(|(base, s)| s.get(name).map(|&(ts, dur)| (base + ts, dur)))
            .collect()
        else {
            continue;
        };
        common += 1;
        let earliest = times.iter().map(|t| t.0).min().unwrap_or_default();
        let latest = times.iter().map(|t| t.0).max().unwrap_or_default();
        let mean = times.iter().map(|t| t.1 as f64).sum::<f64>() / times.len() as f64;
        let spread = latest - earliest;
        if spread as f64 > SKEW_FRACTION * mean {
            skewed.push((name, spread, mean));
        }
    }
    let &(name, spread, mean) = skewed.iter().max_by_key(|s| s.1)?;
    Some(HealthIssue {
        kind: HealthKind::ClockSkew,
        rank: None,
        count: skewed.len() as u64,
        detail: format!(
            "{} of the {common} profiler steps on all {} ranks start further apart across \
             ranks than half their mean duration (worst: {name} starts {:.1} ms apart, \
             mean duration {:.1} ms): synchronous ranks start each step together, so the \
             traces' clocks disagree and their timelines cannot be lined up (the per-rank \
             figures stand). Record the ranks on one clock (hosts synchronised with \
             NTP/PTP, one torch version).",
            skewed.len(),
            ranks.len(),
            spread as f64 / 1e6,
            mean / 1e6
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::trace::test_traces::trace;

    const R: Kind = Kind::Runtime;

    #[test]
    fn launches_inside_a_stream_capture_run_nothing_and_are_not_dropped() {
        let launches = [
            (R, "cudaLaunchKernel", 10, 5, 1, 1),
            (Kind::Kernel, "k", 20, 5, 7, 1),
            (R, "cudaLaunchKernel", 40, 5, 1, 2),
            // Another thread, no capture: its kernel is missing.
            (R, "cudaLaunchKernel", 42, 5, 2, 3),
            (R, "cudaDeviceSynchronize", 100, 50, 1, 4),
        ];
        assert_eq!(dropped_kernels(&trace(&launches)), 2);
        let mut captured = launches.to_vec();
        captured.push((R, "cudaStreamBeginCapture_v2", 30, 2, 1, 5));
        captured.push((R, "cudaStreamEndCapture", 50, 2, 1, 6));
        assert_eq!(dropped_kernels(&trace(&captured)), 1);
    }

    #[test]
    fn launches_after_the_last_sync_began_are_not_counted() {
        let t = trace(&[
            (R, "cudaLaunchKernel", 10, 5, 1, 1),
            (R, "cudaDeviceSynchronize", 20, 50, 1, 2),
            (R, "cudaLaunchKernel", 80, 5, 1, 3),
            (Kind::Kernel, "k", 90, 5, 7, 3),
            (R, "cudaLaunchKernel", 95, 5, 1, 4),
        ]);
        // The first ended before the sync began: its kernel is lost. The last may have run
        // after the profiler stopped.
        assert_eq!(dropped_kernels(&t), 1);
    }

    #[test]
    fn kineto_lines_of_no_loss_are_not_losses() {
        let t = Trace {
            kineto_log: vec![
                "INFO:x a.cpp:1] Record counts: Out-of-range = 4181, CUPTI stopped early? = 0"
                    .into(),
                "WARNING:x a.cpp:2] Dropped 0 activity records".into(),
                "WARNING:x a.cpp:3] Dropped 12 activity records".into(),
                "INFO:x a.cpp:4] Record counts: Out-of-range = 0, CUPTI stopped early? = 1".into(),
            ],
            ..Trace::default()
        };
        assert_eq!(
            kineto_losses(&t),
            [
                "Dropped 12 activity records",
                "Record counts: Out-of-range = 0, CUPTI stopped early? = 1"
            ]
        );
    }
}

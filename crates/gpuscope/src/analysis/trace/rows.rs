//! The rows behind the summaries, as parallel columns, for notebooks: every kernel name's
//! statistics, every idle gap, every change of a stream's queue, every change of copy
//! bandwidth, every launch. The Python package turns them into the DataFrames Holistic
//! Trace Analysis (HTA) returns; each table follows the HTA method it feeds, over the same
//! events ([`Scope`]) and on the same clock as the summaries. Times are µs, relative to
//! `origin` (ns on the traces' clock: HTA counts from the earliest event of all ranks).

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;
use serde::Serialize;

use super::classify::KernelType;
use super::idle::{gaps, IdleCause};
use super::kernels::{annotation_stats, kernel_stats, KernelStats};
use super::launches::Launch;
use super::queue::changes;
use super::scope::{on_gpu, Scope};
use crate::model::trace::{Kind, Trace, NONE};

/// Each name's statistics: kernels by name, or user annotations by name.
#[derive(Debug, Default, Serialize)]
pub struct DurationTable {
    /// The name, as recorded.
    pub name: Vec<String>,
    /// How many times it ran.
    pub count: Vec<u64>,
    /// Total time, µs.
    pub sum: Vec<f64>,
    /// Longest run, µs.
    pub max: Vec<f64>,
    /// Shortest run, µs.
    pub min: Vec<f64>,
    /// Mean, µs.
    pub mean: Vec<f64>,
    /// Sample standard deviation, µs (0 for one run).
    pub stddev: Vec<f64>,
}

impl DurationTable {
    fn of(stats: &[KernelStats]) -> Self {
        let column = |f: fn(&KernelStats) -> f64| stats.iter().map(f).collect();
        DurationTable {
            name: stats.iter().map(|k| k.name.clone()).collect(),
            count: stats.iter().map(|k| k.count).collect(),
            sum: column(|k| k.sum_us),
            max: column(|k| k.max_us),
            min: column(|k| k.min_us),
            mean: column(|k| k.mean_us),
            stddev: column(|k| k.stddev_us),
        }
    }
}

/// Each kernel name's statistics and type (HTA's `get_gpu_kernel_breakdown`, before it
/// folds the small ones into `others`).
#[derive(Debug, Default, Serialize)]
pub struct KernelTable {
    /// The statistics, a row per name.
    #[serde(flatten)]
    pub durations: DurationTable,
    /// Each row's type.
    pub kernel_type: Vec<KernelType>,
}

/// The kernels (and, with `memory`, copies and memsets) of `scope` by name, in the order
/// of their total time, largest first.
pub fn kernel_table(trace: &Trace, scope: &Scope, memory: bool) -> KernelTable {
    let wanted = |t: KernelType| {
        matches!(t, KernelType::Computation | KernelType::Communication)
            || (memory && t == KernelType::Memory)
    };
    let stats = kernel_stats(trace, scope, |i| wanted(scope.kernel_type(trace, i)));
    KernelTable {
        kernel_type: stats
            .iter()
            .map(|k| k.kernel_type.unwrap_or(KernelType::Other))
            .collect(),
        durations: DurationTable::of(&stats),
    }
}

/// The user annotations (`record_function` ranges) of `scope` by name, largest total
/// first: as a GPU stream ran them (`gpu`, Kineto's `gpu_user_annotation`) or as the CPU
/// did (`user_annotation`). `None` when the trace has none of that kind at all, in scope
/// or not (HTA's `get_gpu_user_annotation_breakdown` then has nothing to say).
pub fn annotation_table(trace: &Trace, scope: &Scope, gpu: bool) -> Option<DurationTable> {
    let kind = if gpu {
        Kind::GpuUserAnnotation
    } else {
        Kind::UserAnnotation
    };
    trace
        .events
        .kind
        .contains(&kind)
        .then(|| DurationTable::of(&annotation_stats(trace, scope, kind)))
}

/// Each gap between two pieces of work on a stream (HTA's `get_idle_time_breakdown`).
#[derive(Debug, Default, Serialize)]
pub struct IdleTable {
    /// Every stream with work, gaps or not, ascending.
    pub streams: Vec<i64>,
    /// The CUDA stream.
    pub stream: Vec<i64>,
    /// Why it was idle.
    pub idle_category: Vec<IdleCause>,
    /// The gap, µs (negative when the work overlapped the previous piece).
    pub idle_interval: Vec<f64>,
}

/// The gaps of every stream, by stream number, then in time order; gaps under
/// `kernel_wait_us` are kernel waits.
pub fn idle_table(trace: &Trace, scope: &Scope, kernel_wait_us: i64) -> IdleTable {
    let mut out = IdleTable::default();
    for (stream, list) in gaps(trace, scope, kernel_wait_us) {
        out.streams.push(stream);
        for (cause, gap) in list {
            out.stream.push(stream);
            out.idle_category.push(cause);
            out.idle_interval.push(gap as f64 / 1000.0);
        }
    }
    out
}

/// Each change of a stream's queue of launched work (HTA's
/// `get_queue_length_time_series`): +1 at a launch call, −1 when its work starts.
#[derive(Debug, Default, Serialize)]
pub struct QueueTable {
    /// The event: the launch call or the work (its row in the trace as read).
    pub index: Vec<usize>,
    /// When, µs from the origin.
    pub ts: Vec<f64>,
    /// The work's process id (the device).
    pub pid: Vec<i64>,
    /// The work's thread id (the stream).
    pub tid: Vec<i64>,
    /// The CUDA stream.
    pub stream: Vec<i64>,
    /// Launched work not started yet, after this change.
    pub queue_length: Vec<i64>,
}

/// The queue of every stream, by stream number, then in time order.
pub fn queue_table(trace: &Trace, scope: &Scope, launches: &[Launch], origin: i64) -> QueueTable {
    let e = &trace.events;
    let mut out = QueueTable::default();
    for (stream, list) in changes(trace, scope, launches) {
        for c in list {
            out.index.push(c.event);
            out.ts.push(micros(c.at - origin));
            out.pid.push(e.pid[c.work]);
            out.tid.push(e.tid[c.work]);
            out.stream.push(stream);
            out.queue_length.push(c.length);
        }
    }
    out
}

/// Copy and memset bandwidth over time, per kind of copy (HTA's
/// `get_memory_bw_time_series`): each piece adds its bandwidth at its start and takes it
/// away at its end.
#[derive(Debug, Default, Serialize)]
pub struct BandwidthTable {
    /// When, µs from the origin.
    pub ts: Vec<f64>,
    /// The copy's process id (the device).
    pub pid: Vec<i64>,
    /// The kind of copy (`Memcpy HtoD`, `Memset`, ...).
    pub name: Vec<String>,
    /// The bandwidth of that kind's copies running after this change, GB/s.
    pub memory_bw_gbps: Vec<f64>,
}

/// HTA's name for a kind of copy: `Memset`, `Memcpy HtoD` (the first 11 characters of a
/// copy's name), or `Memcpy Unknown`.
fn copy_kind(kind: Kind, name: &str) -> String {
    if kind == Kind::Memset || name.starts_with("Memset") {
        "Memset".to_owned()
    } else if name.starts_with("Memcpy") {
        name.chars().take(11).collect()
    } else {
        "Memcpy Unknown".to_owned()
    }
}

/// A change of one kind of copy's bandwidth.
pub struct BandwidthChange {
    /// When, ns on `scope`'s clock.
    pub at: i64,
    /// The copy or memset that starts or ends then.
    pub event: usize,
    /// Its kind (`Memcpy HtoD`, `Memset`, ...).
    pub kind: String,
    /// The bandwidth of that kind's copies running after this change, GB/s.
    pub gbps: f64,
}

/// The bandwidth of every kind of copy, in time order (a start before an end at the same
/// instant). A piece's bandwidth is Kineto's `memory bandwidth (GB/s)` (from the exact
/// duration), else its bytes over its duration; 0 without bytes or duration.
pub fn bandwidth_changes(trace: &Trace, scope: &Scope) -> Vec<BandwidthChange> {
    let e = &trace.events;
    let mut points: Vec<(i64, bool, usize, String, f64)> = Vec::new();
    for &i in &scope.gpu {
        if scope.kernel_type(trace, i) != KernelType::Memory {
            continue;
        }
        let (start, end) = scope.interval(trace, i);
        let bytes = e.bytes[i];
        let gbps = trace
            .bandwidth_of(i)
            .unwrap_or(if bytes != NONE && end > start {
                bytes as f64 / (end - start) as f64
            } else {
                0.0
            });
        let kind = copy_kind(e.kind[i], trace.names.get(e.name[i]));
        points.push((start, false, i, kind.clone(), gbps));
        points.push((end, true, i, kind, -gbps));
    }
    points.sort_by_key(|p| (p.0, p.1, p.2));
    let mut running: BTreeMap<String, f64> = BTreeMap::new();
    points
        .into_iter()
        .map(|(at, _, event, kind, delta)| {
            let level = running.entry(kind.clone()).or_default();
            *level += delta;
            BandwidthChange {
                at,
                event,
                kind,
                gbps: *level,
            }
        })
        .collect()
}

/// [`bandwidth_changes`] as columns, times in µs from `origin` (ns).
pub fn bandwidth_table(trace: &Trace, scope: &Scope, origin: i64) -> BandwidthTable {
    let mut out = BandwidthTable::default();
    for c in bandwidth_changes(trace, scope) {
        out.ts.push(micros(c.at - origin));
        out.pid.push(trace.events.pid[c.event]);
        out.name.push(c.kind);
        out.memory_bw_gbps.push(c.gbps);
    }
    out
}

/// Each launch (HTA's `get_cuda_kernel_launch_stats`).
#[derive(Debug, Default, Serialize)]
pub struct LaunchTable {
    /// The correlation id linking the call and its work.
    pub correlation: Vec<i64>,
    /// The launch call, µs.
    pub cpu_duration: Vec<f64>,
    /// The work, µs.
    pub gpu_duration: Vec<f64>,
    /// From the call's end to the work's start, µs (0 when the work started first).
    pub launch_delay: Vec<f64>,
}

/// `launches` in the order of their calls; with `memory` false, the copies and memsets
/// left out.
pub fn launch_table(trace: &Trace, launches: &[Launch], memory: bool) -> LaunchTable {
    let e = &trace.events;
    let mut out = LaunchTable::default();
    for l in launches {
        if !memory && e.kind[l.work] != Kind::Kernel {
            continue;
        }
        out.correlation.push(e.correlation[l.call]);
        out.cpu_duration.push(micros(l.cpu_ns));
        out.gpu_duration.push(micros(l.gpu_ns));
        out.launch_delay.push(micros(l.delay_ns));
    }
    out
}

/// Each kernel launch made inside an ATen operator, with the innermost such operator
/// (HTA's `get_aten_op_kernels_and_delay`, before it groups them), in the order of the
/// launch calls.
#[derive(Debug, Default, Serialize)]
pub struct OpLaunchTable {
    /// The operator's thread.
    pub thread: Vec<i64>,
    /// The operator's name (`aten::…`).
    pub op: Vec<String>,
    /// The operator's start, µs from the origin.
    pub op_start: Vec<f64>,
    /// From the operator's start to the launch call's, µs.
    pub launch_delay: Vec<f64>,
    /// From the launch call's start to the kernel's, µs.
    pub runtime_delay: Vec<f64>,
    /// The kernel's name.
    pub kernel: Vec<String>,
}

/// The kernel launches of `launches` whose call an `aten::` operator of `scope` wraps
/// whole, each with the innermost one: of the operators (on any thread, as HTA looks)
/// that start no later than the call and end no earlier, the last to start, and of
/// those starting together the shortest.
pub fn op_launch_table(
    trace: &Trace,
    scope: &Scope,
    launches: &[Launch],
    origin: i64,
) -> OpLaunchTable {
    let e = &trace.events;
    let aten = scope
        .cpu
        .iter()
        .copied()
        .filter(|&i| trace.names.get(e.name[i]).starts_with("aten::"));
    let mut ops = Enclosing::new(trace, scope, aten);
    let mut kernels: Vec<(i64, i64, &Launch)> = launches
        .iter()
        .filter(|l| e.kind[l.work] == Kind::Kernel)
        .map(|l| {
            let (start, end) = scope.interval(trace, l.call);
            (start, end, l)
        })
        .collect();
    kernels.sort_by_key(|&(start, _, l)| (start, l.call));
    let mut out = OpLaunchTable::default();
    for (start, end, l) in kernels {
        let innermost = ops
            .around(start, end)
            .max_by_key(|&&(op_start, op_end, i)| (op_start, std::cmp::Reverse(op_end), i));
        let Some(&(op_start, _, op)) = innermost else {
            continue;
        };
        out.thread.push(e.tid[op]);
        out.op.push(trace.names.get(e.name[op]).to_owned());
        out.op_start.push(micros(op_start - origin));
        out.launch_delay.push(micros(start - op_start));
        out.runtime_delay
            .push(micros(scope.interval(trace, l.work).0 - start));
        out.kernel.push(trace.names.get(e.name[l.work]).to_owned());
    }
    out
}

/// The columns that place events: row, process, thread, start and duration.
#[derive(Debug, Default, Serialize)]
pub struct Placed {
    /// The event's row in the trace as read.
    pub index: Vec<usize>,
    /// Its process id (for GPU work, the device).
    pub pid: Vec<i64>,
    /// Its thread id (for GPU work, the stream).
    pub tid: Vec<i64>,
    /// Its start, µs from the origin.
    pub ts: Vec<f64>,
    /// Its duration, µs.
    pub dur: Vec<f64>,
}

impl Placed {
    /// Adds event `i`, on `scope`'s clock, its start counted from `origin` (ns).
    fn push(&mut self, trace: &Trace, scope: &Scope, i: usize, origin: i64) {
        let e = &trace.events;
        self.index.push(i);
        self.pid.push(e.pid[i]);
        self.tid.push(e.tid[i]);
        self.ts.push(micros(scope.interval(trace, i).0 - origin));
        self.dur.push(micros(scope.duration(trace, i)));
    }
}

/// Each piece of GPU work of `scope` with the GPU user annotation it ran under (HTA's
/// `get_gpu_kernels_with_user_annotations`), in file order.
#[derive(Debug, Default, Serialize)]
pub struct AnnotatedWorkTable {
    /// Where each piece of work is.
    #[serde(flatten)]
    pub placed: Placed,
    /// The CUDA stream.
    pub stream: Vec<i64>,
    /// The correlation id of its launch; -1 without one.
    pub correlation: Vec<i64>,
    /// What a copy or memset moved, bytes; -1 for a kernel.
    pub bytes: Vec<i64>,
    /// Its External id; -1 without one.
    pub external_id: Vec<i64>,
    /// The profiler step of its launch; -1 outside any.
    pub iteration: Vec<i64>,
    /// Its name.
    pub name: Vec<String>,
    /// Its category as Kineto spells it (`kernel`, `gpu_memcpy`, `gpu_memset`, ...).
    pub category: Vec<&'static str>,
    /// The innermost GPU user annotation over it; empty under none.
    pub user_annotation: Vec<String>,
}

/// The GPU work of `scope` and, for each, of the `gpu_user_annotation` ranges of `scope`
/// on its process and thread (device and stream) that overlap it, the shortest: the
/// innermost of nested ones, as HTA's walk from the longest down leaves it. `None` when
/// the trace has no GPU user annotations at all.
pub fn annotated_work_table(
    trace: &Trace,
    scope: &Scope,
    origin: i64,
) -> Option<AnnotatedWorkTable> {
    let e = &trace.events;
    if !e.kind.contains(&Kind::GpuUserAnnotation) {
        return None;
    }
    // Kineto writes the ranges without a `stream` argument, so the scope has them with
    // the CPU events.
    let is_annotation = |i: usize| e.kind[i] == Kind::GpuUserAnnotation;
    let every = scope.cpu.iter().chain(&scope.gpu).copied();
    let annotations: Vec<usize> = every.filter(|&i| is_annotation(i)).collect();
    let work: Vec<usize> = scope
        .gpu
        .iter()
        .copied()
        .filter(|&i| !is_annotation(i))
        .collect();
    let innermost = innermost_annotations(trace, scope, &annotations, &work);
    let iterations = iteration_of_each(trace);
    let mut out = AnnotatedWorkTable::default();
    for (i, annotation) in work.into_iter().zip(innermost) {
        out.placed.push(trace, scope, i, origin);
        out.stream.push(e.stream[i]);
        out.correlation.push(or_minus_one(e.correlation[i]));
        out.bytes.push(or_minus_one(e.bytes[i]));
        out.external_id.push(or_minus_one(e.external_id[i]));
        out.iteration
            .push(iterations[i].map_or(-1, |n| i64::try_from(n).unwrap_or(i64::MAX)));
        out.name.push(trace.names.get(e.name[i]).to_owned());
        out.category.push(kineto_category(e.kind[i]));
        out.user_annotation
            .push(annotation.map_or_else(String::new, |a| trace.names.get(e.name[a]).to_owned()));
    }
    Some(out)
}

/// An event's start and end (ns, on the scope's clock) and its index.
type Span = (i64, i64, usize);

/// One thread's annotations, by start, and how far a sweep through them has come.
#[derive(Default)]
struct Sweep {
    annotations: Vec<Span>,
    /// The first annotation not yet reached.
    next: usize,
    /// The annotations reached and not yet ended.
    open: Vec<Span>,
}

/// For each of `work`, the shortest of `annotations` on its process and thread that
/// overlaps it (half-open intervals, as HTA compares them; work without length, at its
/// start); of equally long ones, the last in the file (HTA's sort leaves that tie to
/// chance). One sweep per thread in order of start: the annotations open at a time are
/// few, those of the current stack.
fn innermost_annotations(
    trace: &Trace,
    scope: &Scope,
    annotations: &[usize],
    work: &[usize],
) -> Vec<Option<usize>> {
    let e = &trace.events;
    let thread = |i: usize| (e.pid[i], e.tid[i]);
    let mut sweeps: FxHashMap<(i64, i64), Sweep> = FxHashMap::default();
    for &a in annotations {
        let (start, end) = scope.interval(trace, a);
        // A range that rounding leaves without length holds nothing (HTA cannot take
        // one that ends before it starts).
        if end > start {
            let sweep = sweeps.entry(thread(a)).or_default();
            sweep.annotations.push((start, end, a));
        }
    }
    for sweep in sweeps.values_mut() {
        sweep.annotations.sort_unstable();
    }
    let mut order: Vec<Span> = work
        .iter()
        .enumerate()
        .map(|(k, &i)| (scope.interval(trace, i).0, i as i64, k))
        .collect();
    order.sort_unstable();
    let mut out = vec![None; work.len()];
    for (start, i, k) in order {
        let i = i as usize;
        let Some(sweep) = sweeps.get_mut(&thread(i)) else {
            continue;
        };
        // Work that rounding leaves without length is taken at its start (HTA's empty
        // interval overlaps nothing, so it leaves such work without an annotation).
        let end = scope.interval(trace, i).1.max(start + 1);
        // Work comes by start, so an annotation that ended by this start overlaps no
        // later work; one that starts after this end may still overlap later work.
        while let Some(&next) = sweep.annotations.get(sweep.next).filter(|a| a.0 < end) {
            sweep.open.push(next);
            sweep.next += 1;
        }
        sweep.open.retain(|&(_, a_end, _)| a_end > start);
        out[k] = sweep
            .open
            .iter()
            .filter(|&&(a_start, _, _)| a_start < end)
            .min_by_key(|&&(a_start, a_end, a)| (a_end - a_start, std::cmp::Reverse(a)))
            .map(|&(_, _, a)| a);
    }
    out
}

/// The category Kineto writes for an event of `kind` (HTA's `s_cat`).
fn kineto_category(kind: Kind) -> &'static str {
    match kind {
        Kind::Memcpy => "gpu_memcpy",
        Kind::Memset => "gpu_memset",
        Kind::Sync => "cuda_sync",
        Kind::GpuUserAnnotation => "gpu_user_annotation",
        other => other.as_str(),
    }
}

/// The kernels CUPTI's range profiler read hardware counters for, each with the CPU
/// operators its launch ran under (HTA's `get_cupti_counter_data_with_operators`), in
/// order of start. The profiler replays kernels one at a time and records them without
/// correlation ids, so the k-th kernel is the k-th `cudaLaunchKernel…` call, as HTA
/// pairs them; when the counts differ, no kernel is paired and the table has no rows.
#[derive(Debug, Default, Serialize)]
pub struct CounterTable {
    /// The range profiler's kernels in the trace.
    pub kernels: usize,
    /// The kernel launch calls in the trace.
    pub launches: usize,
    /// Where each kernel is (its duration as the profiler replayed it).
    #[serde(flatten)]
    pub placed: Placed,
    /// Its name.
    pub name: Vec<String>,
    /// The CPU operators around its launch on the launching thread, outermost first.
    pub op_stack: Vec<Vec<String>>,
    /// Each counter's value for each kernel, by counter name (NaN where a kernel has
    /// none).
    pub counters: BTreeMap<String, Vec<f64>>,
}

/// The range profiler's kernels of `scope` with their counters and operators; `None` for
/// a trace without any.
pub fn counter_table(trace: &Trace, scope: &Scope, origin: i64) -> Option<CounterTable> {
    if trace.counters.is_empty() {
        return None;
    }
    let e = &trace.events;
    let by_start = |mut v: Vec<usize>| {
        v.sort_by_key(|&i| (scope.interval(trace, i).0, i));
        v
    };
    // The range profiler's kernels are GPU work; the scope's lists are in file order.
    let kernels = by_start(
        trace
            .counters
            .iter()
            .map(|&(i, _)| i)
            .filter(|i| scope.gpu.binary_search(i).is_ok())
            .collect(),
    );
    let launches = by_start(
        scope
            .cpu
            .iter()
            .copied()
            .filter(|&i| {
                e.kind[i] == Kind::Runtime
                    && trace.names.get(e.name[i]).starts_with("cudaLaunchKernel")
            })
            .collect(),
    );
    let mut out = CounterTable {
        kernels: kernels.len(),
        launches: launches.len(),
        ..CounterTable::default()
    };
    if kernels.len() != launches.len() {
        return Some(out);
    }
    let values: FxHashMap<usize, &[(u32, f64)]> = trace
        .counters
        .iter()
        .map(|(i, c)| (*i, c.as_slice()))
        .collect();
    let stacks = operator_stacks(trace, scope, &launches);
    for (row, (&k, stack)) in kernels.iter().zip(stacks).enumerate() {
        out.placed.push(trace, scope, k, origin);
        out.name.push(trace.names.get(e.name[k]).to_owned());
        out.op_stack.push(
            stack
                .into_iter()
                .map(|op| trace.names.get(e.name[op]).to_owned())
                .collect(),
        );
        for &(name, value) in values.get(&k).copied().unwrap_or_default() {
            let column = out
                .counters
                .entry(trace.names.get(name).to_owned())
                .or_insert_with(|| vec![f64::NAN; kernels.len()]);
            column[row] = value;
        }
    }
    Some(out)
}

/// For each of `calls` (runtime calls, by start), the CPU operators of `scope` on its
/// thread that start no later than it and end no earlier, outermost first.
fn operator_stacks(trace: &Trace, scope: &Scope, calls: &[usize]) -> Vec<Vec<usize>> {
    let e = &trace.events;
    let cpu_ops = scope
        .cpu
        .iter()
        .copied()
        .filter(|&i| e.kind[i] == Kind::CpuOp);
    let mut ops = Enclosing::new(trace, scope, cpu_ops);
    let thread = |i: usize| (e.pid[i], e.tid[i]);
    calls
        .iter()
        .map(|&call| {
            let (start, end) = scope.interval(trace, call);
            ops.around(start, end)
                .filter(|&&(_, _, op)| thread(op) == thread(call))
                .map(|&(_, _, op)| op)
                .collect()
        })
        .collect()
}

/// A sweep through spans of events that tells, for spans asked in order of start, which
/// of them enclose each: a span that ended before one asked for encloses none asked
/// later, so only the spans open at the time are looked at.
struct Enclosing {
    /// By start, the longer first: outer before inner.
    spans: Vec<Span>,
    /// The first span not yet reached.
    next: usize,
    /// The spans reached and not yet ended, outermost first.
    open: Vec<Span>,
}

impl Enclosing {
    /// The sweep through `events`, on `scope`'s clock.
    fn new(trace: &Trace, scope: &Scope, events: impl Iterator<Item = usize>) -> Self {
        let mut spans: Vec<Span> = events
            .map(|i| {
                let (start, end) = scope.interval(trace, i);
                (start, end, i)
            })
            .collect();
        spans.sort_unstable_by_key(|&(start, end, i)| (start, std::cmp::Reverse(end), i));
        Enclosing {
            spans,
            next: 0,
            open: Vec::new(),
        }
    }

    /// The spans that start no later than `start` and end no earlier than `end`,
    /// outermost first; asked in order of `start`.
    fn around(&mut self, start: i64, end: i64) -> impl Iterator<Item = &Span> {
        while self.next < self.spans.len() && self.spans[self.next].0 <= start {
            self.open.push(self.spans[self.next]);
            self.next += 1;
        }
        self.open.retain(|&(_, span_end, _)| span_end >= start);
        self.open
            .iter()
            .filter(move |&&(_, span_end, _)| span_end >= end)
    }
}

/// Which events a trace diff counts (HTA's `DeviceType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// Events without a CUDA stream.
    Cpu,
    /// Events on a CUDA stream.
    Gpu,
    /// Both.
    All,
}

/// The operators and kernels of some iterations, by name (HTA's `TraceDiff`).
#[derive(Debug, Default, Serialize)]
pub struct OpsTable {
    /// The event's name.
    pub name: Vec<String>,
    /// How many events of that name.
    pub counts: Vec<u64>,
    /// Their total duration, µs.
    pub total_duration: Vec<f64>,
}

/// The profiler step each event belongs to: a CPU event's is the `ProfilerStep#N` it
/// starts in, GPU work's that of the runtime call that launched it (by correlation id).
/// Work on stream 0 has none, as in HTA.
fn iteration_of_each(trace: &Trace) -> Vec<Option<u64>> {
    let e = &trace.events;
    let mut steps: Vec<(i64, i64, u64)> = (0..e.len())
        .filter(|&i| !on_gpu(trace, i))
        .filter_map(|i| {
            let n = trace
                .names
                .get(e.name[i])
                .strip_prefix("ProfilerStep#")?
                .parse()
                .ok()?;
            Some((e.ts[i], e.end(i), n))
        })
        .collect();
    steps.sort_unstable();
    let step_at = |ts: i64| {
        let k = steps.partition_point(|s| s.0 <= ts).checked_sub(1)?;
        (ts < steps[k].1).then_some(steps[k].2)
    };
    let mut out: Vec<Option<u64>> = (0..e.len())
        .map(|i| {
            if on_gpu(trace, i) {
                None
            } else {
                step_at(e.ts[i])
            }
        })
        .collect();
    let by_correlation: FxHashMap<i64, u64> = (0..e.len())
        .filter(|&i| e.correlation[i] != NONE)
        .filter_map(|i| Some((e.correlation[i], out[i]?)))
        .collect();
    for (i, slot) in out.iter_mut().enumerate() {
        if on_gpu(trace, i) && e.stream[i] != 0 {
            *slot = by_correlation.get(&e.correlation[i]).copied();
        }
    }
    out
}

/// The events of `side` in `iterations`, by name (sorted), with their count and total
/// duration on `scope`'s clock. The allocator's instants and the profiler's own span are
/// not events here.
pub fn iteration_ops(trace: &Trace, scope: &Scope, iterations: &[u64], side: Side) -> OpsTable {
    let e = &trace.events;
    let mut by_name: BTreeMap<&str, (u64, i64)> = BTreeMap::new();
    for (i, iteration) in iteration_of_each(trace).into_iter().enumerate() {
        let wanted = match side {
            Side::Cpu => !on_gpu(trace, i),
            Side::Gpu => on_gpu(trace, i),
            Side::All => true,
        };
        if !wanted
            || matches!(e.kind[i], Kind::Memory | Kind::ProfilerSpan)
            || !iteration.is_some_and(|n| iterations.contains(&n))
        {
            continue;
        }
        let entry = by_name.entry(trace.names.get(e.name[i])).or_default();
        entry.0 += 1;
        entry.1 += scope.duration(trace, i);
    }
    let mut out = OpsTable::default();
    for (name, (count, ns)) in by_name {
        out.name.push(name.to_owned());
        out.counts.push(count);
        out.total_duration.push(micros(ns));
    }
    out
}

/// The starts of `events` that HTA counts as events (not the allocator's instants, not
/// the profiler's own span), ns on `scope`'s clock.
fn starts<'a>(
    trace: &'a Trace,
    scope: &'a Scope,
    events: impl Iterator<Item = usize> + 'a,
) -> impl Iterator<Item = i64> + 'a {
    events
        .filter(|&i| !matches!(trace.events.kind[i], Kind::Memory | Kind::ProfilerSpan))
        .map(|i| scope.interval(trace, i).0)
}

/// The earliest start of any event of any of `traces`, ns: HTA counts times from it.
pub fn origin<'a>(traces: impl Iterator<Item = (&'a Trace, &'a Scope)>) -> i64 {
    traces
        .flat_map(|(t, s)| starts(t, s, 0..t.events.len()))
        .min()
        .unwrap_or(0)
}

/// From the first start of an event of `scope` to the last start, µs (HTA's trace
/// duration, which the time at a full launch queue is a share of).
pub fn start_span(trace: &Trace, scope: &Scope) -> f64 {
    let events = scope.cpu.iter().chain(&scope.gpu).copied();
    let (lo, hi) = starts(trace, scope, events)
        .fold((i64::MAX, i64::MIN), |(lo, hi), t| (lo.min(t), hi.max(t)));
    if lo > hi {
        0.0
    } else {
        micros(hi - lo)
    }
}

/// The numbers of the profiler steps (`ProfilerStep#N`) in `scope`, ascending.
pub fn profiler_steps(trace: &Trace, scope: &Scope) -> Vec<u64> {
    let e = &trace.events;
    let mut steps: Vec<u64> = scope
        .cpu
        .iter()
        .filter_map(|&i| {
            trace
                .names
                .get(e.name[i])
                .strip_prefix("ProfilerStep#")?
                .parse()
                .ok()
        })
        .collect();
    steps.sort_unstable();
    steps.dedup();
    steps
}

/// The smallest and largest stream and correlation id of all events, an event without one
/// counting as -1 (HTA's default): HTA stores each column in the smallest integer type
/// that holds its range, so its frames' dtypes follow from these.
#[derive(Debug, Serialize)]
pub struct IdRanges {
    /// Of `args.stream`.
    pub stream: (i64, i64),
    /// Of `args.correlation`.
    pub correlation: (i64, i64),
}

/// `v`, or -1 (HTA's "none") for [`NONE`].
fn or_minus_one(v: i64) -> i64 {
    if v == NONE {
        -1
    } else {
        v
    }
}

/// The [`IdRanges`] of `trace`.
pub fn id_ranges(trace: &Trace) -> IdRanges {
    let range = |column: &[i64]| {
        column
            .iter()
            .map(|&v| or_minus_one(v))
            .fold((-1, -1), |(lo, hi), v| (lo.min(v), hi.max(v)))
    };
    IdRanges {
        stream: range(&trace.events.stream),
        correlation: range(&trace.events.correlation),
    }
}

pub(super) fn micros(ns: i64) -> f64 {
    ns as f64 / 1000.0
}

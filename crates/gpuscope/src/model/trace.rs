//! A PyTorch profiler (Kineto) trace held compactly: one row per duration or memory event
//! in parallel columns, names interned. A trace of a million events costs tens of bytes
//! per event, not the kilobyte a parsed JSON object would.

pub use super::interned::Names;
use super::words::words;

words! {
    /// What an event is. The trace's categories spell these two ways (`kernel` today,
    /// `Kernel` in the 2021 schema); both map here. Its word is the name in reports.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub enum Kind {
        /// A CPU operator (`cpu_op`, `Operator`).
        CpuOp = "cpu_op",
        /// A CUDA runtime call (`cuda_runtime`, `Runtime`): launches, copies, syncs.
        Runtime = "runtime",
        /// A CUDA driver call (`cuda_driver`).
        Driver = "driver",
        /// A GPU kernel (`kernel`, `Kernel`; `cuda_profiler_range` when CUPTI's range
        /// profiler recorded it with hardware counters).
        Kernel = "kernel",
        /// A GPU memory copy (`gpu_memcpy`, `Memcpy`).
        Memcpy = "memcpy",
        /// A GPU memset (`gpu_memset`, `Memset`).
        Memset = "memset",
        /// A `record_function` range on the CPU (`user_annotation`), including
        /// `ProfilerStep#N`.
        UserAnnotation = "user_annotation",
        /// The same range as seen on a GPU stream (`gpu_user_annotation`).
        GpuUserAnnotation = "gpu_user_annotation",
        /// A Python function (`python_function`).
        PythonFunction = "python_function",
        /// A CUDA synchronisation (`cuda_sync`).
        Sync = "sync",
        /// An allocation or free of the caching allocator (`[memory]` instant events).
        Memory = "memory",
        /// The profiler's own span around the whole trace (`Trace`).
        ProfilerSpan = "profiler_span",
        /// Anything else with a duration.
        Other = "other",
    }
}

impl Kind {
    /// The kind of a `ph: X` event's category.
    pub fn of_category(category: &str) -> Kind {
        match category {
            "cpu_op" | "Operator" => Kind::CpuOp,
            "cuda_runtime" | "Runtime" => Kind::Runtime,
            "cuda_driver" => Kind::Driver,
            "kernel" | "Kernel" | "cuda_profiler_range" => Kind::Kernel,
            "gpu_memcpy" | "Memcpy" => Kind::Memcpy,
            "gpu_memset" | "Memset" => Kind::Memset,
            "user_annotation" => Kind::UserAnnotation,
            "gpu_user_annotation" => Kind::GpuUserAnnotation,
            "python_function" => Kind::PythonFunction,
            "cuda_sync" => Kind::Sync,
            "Trace" => Kind::ProfilerSpan,
            _ => Kind::Other,
        }
    }

    /// True for work that runs on a GPU stream: kernels, copies and memsets.
    pub fn is_gpu(self) -> bool {
        matches!(self, Kind::Kernel | Kind::Memcpy | Kind::Memset)
    }

    /// True for what runs on a CPU thread whatever its arguments say: operators,
    /// runtime and driver calls, `record_function` ranges, Python functions.
    pub fn is_cpu(self) -> bool {
        matches!(
            self,
            Kind::CpuOp
                | Kind::Runtime
                | Kind::Driver
                | Kind::UserAnnotation
                | Kind::PythonFunction
        )
    }
}

/// No value: a column entry for an event that has no such field.
pub const NONE: i64 = i64::MIN;

/// The events, one row each, in parallel columns. Times are in nanoseconds on the trace's
/// own clock (Kineto writes microseconds, fractional on newer versions).
#[derive(Debug, Clone, Default)]
pub struct Events {
    /// What each event is.
    pub kind: Vec<Kind>,
    /// Its name.
    pub name: Vec<u32>,
    /// Start, ns.
    pub ts: Vec<i64>,
    /// Duration, ns (0 for instant events).
    pub dur: Vec<i64>,
    /// Process id (or [`NONE`] when not a number).
    pub pid: Vec<i64>,
    /// Thread id, or the CUDA stream for GPU work (or [`NONE`]).
    pub tid: Vec<i64>,
    /// `args.stream` of GPU work, or [`NONE`].
    pub stream: Vec<i64>,
    /// `args.correlation`: links a runtime call to the GPU work it launched, or [`NONE`].
    pub correlation: Vec<i64>,
    /// `args.External id`: links GPU work and runtime calls to their CPU operator.
    pub external_id: Vec<i64>,
    /// `args.bytes` of copies and memsets, `args.Bytes` of memory events, or [`NONE`].
    pub bytes: Vec<i64>,
    /// `args.device` of GPU work, `args.Device Id` of memory events, or [`NONE`].
    pub device: Vec<i64>,
    /// `args.Input Dims` of operators recorded with `record_shapes`, as compact JSON
    /// (`[[8,3,224,224],[64,3,7,7]]`), interned; [`NO_SHAPES`] without.
    pub shapes: Vec<u32>,
}

/// No input shapes recorded.
pub const NO_SHAPES: u32 = u32::MAX;

impl Events {
    /// The number of events.
    pub fn len(&self) -> usize {
        self.kind.len()
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.kind.is_empty()
    }

    /// End of event `i`, ns.
    pub fn end(&self, i: usize) -> i64 {
        self.ts[i] + self.dur[i]
    }
}

/// One event, as the reader hands it to [`Events::push`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Event {
    /// What it is.
    pub kind: Kind,
    /// Its interned name.
    pub name: u32,
    /// Start, ns.
    pub ts: i64,
    /// Duration, ns.
    pub dur: i64,
    /// Process id or [`NONE`].
    pub pid: i64,
    /// Thread id or [`NONE`].
    pub tid: i64,
    /// Stream or [`NONE`].
    pub stream: i64,
    /// Correlation id or [`NONE`].
    pub correlation: i64,
    /// External id or [`NONE`].
    pub external_id: i64,
    /// Bytes or [`NONE`].
    pub bytes: i64,
    /// Device or [`NONE`].
    pub device: i64,
    /// Interned input shapes or [`NO_SHAPES`].
    pub shapes: u32,
}

impl Events {
    /// Appends `e`.
    pub fn push(&mut self, e: Event) {
        self.kind.push(e.kind);
        self.name.push(e.name);
        self.ts.push(e.ts);
        self.dur.push(e.dur);
        self.pid.push(e.pid);
        self.tid.push(e.tid);
        self.stream.push(e.stream);
        self.correlation.push(e.correlation);
        self.external_id.push(e.external_id);
        self.bytes.push(e.bytes);
        self.device.push(e.device);
        self.shapes.push(e.shapes);
    }
}

words! {
    /// Where a trace's rank came from.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    pub enum RankFrom {
        /// `distributedInfo.rank`, which Kineto writes when `torch.distributed` is
        /// initialised.
        Metadata = "metadata",
        /// The file name (`rank3`, `rank-3`, `rank_3`).
        FileName = "file_name",
        /// Neither: assumed 0.
        #[default]
        Default = "default",
    }
}

/// A trace: its events and what the reader noticed.
#[derive(Debug, Clone, Default)]
pub struct Trace {
    /// The rank (`distributedInfo.rank`, else from the file name, else 0).
    pub rank: u32,
    /// Where [`Trace::rank`] came from.
    pub rank_from: RankFrom,
    /// `baseTimeNanoseconds`: newer Kineto writes each time as an offset from it (Unix
    /// time, ns); 0 when the trace has none (its times are Unix microseconds themselves).
    pub base_time_ns: i64,
    /// Kineto's own log lines that the trace keeps and that can tell of records it lost:
    /// every line of its `WARNING` and `ERROR` metadata, and the `INFO` line of its record
    /// counts (`Record counts: Out-of-range = …, CUPTI stopped early? = 0`), as written.
    pub kineto_log: Vec<String>,
    /// Interned names.
    pub names: Names,
    /// The events, in file order.
    pub events: Events,
    /// Events that were not kept, with why and how many (`negative duration`, ...).
    pub dropped: Vec<(String, u64)>,
    /// Kernels recorded by CUPTI's range profiler (`cuda_profiler_range`): it replays each
    /// kernel to read hardware counters, so their times are not the run's own.
    pub counter_ranges: u64,
    /// Kineto's `memory bandwidth (GB/s)` of copies and memsets, by event index (few
    /// events have it: kept apart rather than as a column), in index order.
    pub bandwidth: Vec<(usize, f64)>,
    /// What Kineto says of the collective each communication kernel ran, by event index,
    /// in index order (kept apart like [`Trace::bandwidth`]).
    pub collectives: Vec<(usize, Collective)>,
    /// The allocator's totals that newer Kineto writes on each `[memory]` event, by event
    /// index, in index order (kept apart like [`Trace::bandwidth`]).
    pub allocator_totals: Vec<(usize, AllocatorTotals)>,
    /// The hardware counters CUPTI's range profiler read for each of its kernels (the
    /// numeric `args` of `cuda_profiler_range` events: interned name, value), by event
    /// index, in index order (kept apart like [`Trace::bandwidth`]).
    pub counters: Vec<(usize, Vec<(u32, f64)>)>,
    /// What each synchronisation on a CUDA event (`Stream Wait Event`, `Event Sync`)
    /// waits for, from its `args`, by event index, in index order (kept apart like
    /// [`Trace::bandwidth`]).
    pub event_waits: Vec<(usize, EventWait)>,
    /// Where each event stands in the file's `traceEvents` array (0 for its first
    /// element, whatever was left out before it), so that a copy of the file can mark
    /// events gpuscope found; empty for a trace built in memory.
    pub positions: Vec<u32>,
}

/// One sample of a counter track, as a Chrome trace holds it (`"ph": "C"`): the value
/// of `counter` on the track `track` (of process `pid`, told apart by `id`) from `at`.
#[derive(Debug, Clone, PartialEq)]
pub struct CounterSample {
    /// The track's name (`Queue Length`, `Memcpy HtoD`, ...).
    pub track: String,
    /// Its process.
    pub pid: i64,
    /// What tells apart tracks of one name (a stream), if anything does.
    pub id: Option<i64>,
    /// When, ns on the trace's own clock.
    pub at: i64,
    /// The counter's name in `args`.
    pub counter: &'static str,
    /// Its value from then on.
    pub value: f64,
}

/// An arrow between two moments of a trace, as Chrome traces draw flows (Perfetto and
/// chrome://tracing show them): from `from` to `to`, with what it stands for.
#[derive(Debug, Clone, PartialEq)]
pub struct FlowArrow {
    /// Its name.
    pub name: &'static str,
    /// Its category: what kind of arrow it is.
    pub cat: &'static str,
    /// Where it starts.
    pub from: FlowEnd,
    /// Where it ends (bound to the slice that encloses that moment).
    pub to: FlowEnd,
    /// The time it stands for, ns (`args.weight`, in µs).
    pub weight: i64,
    /// `args.critical`.
    pub critical: bool,
}

/// One end of a [`FlowArrow`]: a moment on the track of an event of the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowEnd {
    /// The event, by position in the file's `traceEvents`: the arrow takes its `pid`
    /// and `tid` as written (a `tid` may be a string, `"stream 7"`).
    pub event: u32,
    /// When, ns on the trace's own clock.
    pub at: i64,
}

words! {
    /// What a CUDA synchronisation (`cuda_sync`) event records, by the name Kineto gives
    /// it.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum SyncKind {
        /// `cudaStreamSynchronize`: the CPU waits for a stream.
        StreamSync = "Stream Sync",
        /// `cudaDeviceSynchronize`: the CPU waits for the device.
        ContextSync = "Context Sync",
        /// `cudaEventSynchronize`: the CPU waits for a recorded event.
        EventSync = "Event Sync",
        /// `cudaStreamWaitEvent`: a stream waits for a recorded event.
        StreamWaitEvent = "Stream Wait Event",
    }
}

impl SyncKind {
    /// The kind a synchronisation event's name says, if it is one of these.
    pub fn of(name: &str) -> Option<SyncKind> {
        SyncKind::ALL.iter().copied().find(|k| k.as_str() == name)
    }
}

/// What a synchronisation on a CUDA event waits for, as Kineto writes it on the
/// `cuda_sync` event it records for `cudaStreamWaitEvent` (`Stream Wait Event`) and
/// `cudaEventSynchronize` (`Event Sync`): the event was recorded by the `cudaEventRecord`
/// call of correlation `record_correlation`, on stream `on_stream`, so what waits goes on
/// only when the work launched on `on_stream` before that call is done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventWait {
    /// `wait_on_stream`.
    pub on_stream: i64,
    /// `wait_on_cuda_event_record_corr_id`.
    pub record_correlation: i64,
}

/// The caching allocator's counts right after a `[memory]` event, as Kineto writes them
/// (`Total Allocated`, `Total Reserved`, in newer profilers' traces): what was allocated
/// before the trace began included. [`NONE`] where the event lacks one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AllocatorTotals {
    /// `Total Allocated`, bytes.
    pub allocated: i64,
    /// `Total Reserved`, bytes.
    pub reserved: i64,
}

/// A collective as Kineto describes it on its kernel: the metadata of the
/// `record_param_comms` operator that launched it (torch.distributed), copied onto the
/// kernel. Numbers are [`NONE`] where the trace does not give them (`Seq` is recent).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Collective {
    /// `Collective name` (`allreduce`, `allgather`, ...), interned.
    pub name: u32,
    /// `dtype` (`Float`, `BFloat16`, ...), interned; [`NO_SHAPES`] when absent.
    pub dtype: u32,
    /// `In msg nelems`: elements sent.
    pub in_elements: i64,
    /// `Out msg nelems`: elements received.
    pub out_elements: i64,
    /// `Group size`: ranks in the process group.
    pub group_size: i64,
    /// `Seq`: the collective's sequence number in its process group, the same on every
    /// rank for the same collective.
    pub seq: i64,
}

impl Trace {
    /// Kineto's bandwidth of event `i`, GB/s, when the trace gives it.
    pub fn bandwidth_of(&self, i: usize) -> Option<f64> {
        of_event(&self.bandwidth, i)
    }

    /// What Kineto says of the collective kernel `i` ran, when the trace says it.
    pub fn collective_of(&self, i: usize) -> Option<Collective> {
        of_event(&self.collectives, i)
    }

    /// Kineto's allocator totals after memory event `i`, when the trace gives them.
    pub fn allocator_totals_of(&self, i: usize) -> Option<AllocatorTotals> {
        of_event(&self.allocator_totals, i)
    }
}

/// The value a list kept apart by event index (in index order) holds for event `i`.
fn of_event<T: Copy>(list: &[(usize, T)], i: usize) -> Option<T> {
    let k = list.binary_search_by_key(&i, |v| v.0).ok()?;
    Some(list[k].1)
}

impl Trace {
    /// Where event `i` stands in the file's `traceEvents`; `None` for a trace built in
    /// memory.
    pub fn position(&self, i: usize) -> Option<u32> {
        self.positions.get(i).copied()
    }

    /// True when the trace has work on a GPU.
    pub fn has_gpu_work(&self) -> bool {
        self.events.kind.iter().any(|k| k.is_gpu())
    }
}

/// The name of the file at `path` (its whole path when it has none), as reports name a
/// trace.
pub fn file_name(path: &std::path::Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// A trace and the file it came from.
#[derive(Debug)]
pub struct TraceFile {
    /// The file.
    pub path: std::path::PathBuf,
    /// Its contents.
    pub trace: Trace,
}

/// Traces written out event by event, for the analyses' unit tests.
#[cfg(test)]
pub mod test_traces {
    use super::{Event, Kind, Trace, NONE, NO_SHAPES};

    /// A trace of `(kind, name, ts, dur, tid, correlation)` events on process 1; GPU work
    /// on stream 7.
    pub fn trace(events: &[(Kind, &str, i64, i64, i64, i64)]) -> Trace {
        let mut t = Trace::default();
        for &(kind, name, ts, dur, tid, correlation) in events {
            let name = t.names.intern(name);
            t.events.push(Event {
                kind,
                name,
                ts,
                dur,
                pid: 1,
                tid,
                stream: if kind.is_gpu() { 7 } else { NONE },
                correlation,
                external_id: NONE,
                bytes: NONE,
                device: NONE,
                shapes: NO_SHAPES,
            });
        }
        t
    }
}

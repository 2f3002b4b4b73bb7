//! The step-time overview of the deprecated TensorBoard profiler plugin: each
//! `ProfilerStep#N` split into what the time went to, each instant given to the first of
//! kernel, memcpy, memset, communication, runtime, data loader, CPU execution that was
//! happening then, and "other" when none was; and the share of each step the CPU spent in
//! the data loader whatever the GPU did; the runtime time split by what its calls did.
//! Then recommendations by fixed thresholds (README, "The step verdicts of `gpuscope
//! trace`").

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

use super::classify::{
    copy_launch_returns_at_once, is_cpu_collective, Call, CollectiveKind, KernelType,
};
use super::graphs::Replays;
use super::intervals::{intersection, length, merge, Interval};
use crate::model::trace::{Kind, Trace, NONE};
use crate::model::words::words;

/// The share of a step the CPU spends in the data loader from which the input pipeline is
/// named the bottleneck, percent.
pub const DATALOADER_PERCENT: f64 = 10.0;
/// The share of a step with no GPU work from which the GPU is said to be starved.
pub const GPU_IDLE_PERCENT: f64 = 30.0;
/// The share of a step in CUDA runtime calls from which a verdict names what they did.
pub const RUNTIME_PERCENT: f64 = 10.0;
/// A GPU-starved step whose runtime calls wait for the GPU this share of it or more is
/// held back by synchronisation; below, by the CPU's own work.
pub const WAITING_PERCENT: f64 = 5.0;
/// The share of a step in copies and memsets from which data movement is named.
pub const MEMORY_PERCENT: f64 = 10.0;
/// The share of a step in communication alone from which it is named.
pub const COMMUNICATION_PERCENT: f64 = 20.0;

words! {
    /// Where a step's time went, in the plugin's order of precedence: an instant goes to
    /// the first of these that was happening then.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Category {
        /// GPU kernels but communication.
        Kernel = "kernel",
        /// GPU memory copies.
        Memcpy = "memcpy",
        /// GPU memsets.
        Memset = "memset",
        /// Communication kernels (NCCL and the like); in a trace without GPU work, the
        /// collectives the CPU runs (gloo).
        Communication = "communication",
        /// CUDA runtime and driver calls.
        Runtime = "runtime",
        /// CPU work in the data loader.
        Dataloader = "dataloader",
        /// Other CPU operators, annotations and Python functions.
        CpuExec = "cpu_exec",
        /// None of the above.
        Other = "other",
    }
}

words! {
    /// What the CUDA runtime and driver calls of the runtime column did, in the order an
    /// instant goes to them when calls on several threads overlap.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum RuntimePart {
        /// Waiting for the GPU or a copy: synchronisation, and copies that return when
        /// done (with pageable host memory, or host memory of unknown kind).
        Waiting = "waiting",
        /// Allocating, freeing or mapping memory.
        Memory = "memory",
        /// Launching kernels, memsets, graphs, and copies that return at once.
        Launching = "launching",
        /// Any other call (stream creation, device queries, event records).
        Other = "other",
    }
}

impl RuntimePart {
    /// The part a call that does `call` belongs to, as far as its name tells: a copy
    /// launch waits unless its copy says otherwise ([`runtime_parts`]).
    pub fn of(call: Option<Call>) -> RuntimePart {
        match call {
            Some(Call::DeviceSync | Call::StreamSync | Call::Copy | Call::CopyLaunch) => {
                RuntimePart::Waiting
            }
            Some(Call::Allocation) => RuntimePart::Memory,
            Some(Call::KernelLaunch | Call::MemsetLaunch | Call::GraphLaunch) => {
                RuntimePart::Launching
            }
            Some(Call::CaptureBegin | Call::CaptureEnd) | None => RuntimePart::Other,
        }
    }
}

/// One profiler step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// `ProfilerStep#N`.
    pub name: String,
    /// Its duration on the CPU, µs.
    pub duration_us: f64,
    /// µs per category, in [`Category::ALL`] order.
    pub breakdown_us: Vec<f64>,
    /// Time the CPU spent in the data loader, µs, whatever the GPU did meanwhile.
    pub dataloader_cpu_us: f64,
    /// Time in the step that GPU work replayed from CUDA graphs ran, µs: part of the
    /// kernel, memcpy, memset and communication time, launched by graph launches (in
    /// the runtime time) and by no launch call of its own. 0 without graph launches.
    #[serde(default)]
    pub graph_replay_us: f64,
    /// The runtime column's µs split by what its calls did, in [`RuntimePart::ALL`]
    /// order; they add up to it.
    #[serde(default)]
    pub runtime_us: Vec<f64>,
}

impl Step {
    /// The share of the step in `category`, percent.
    pub fn percent(&self, category: Category) -> f64 {
        self.share(self.breakdown_us[category as usize])
    }

    /// `us` as a share of the step, percent (0 for an empty step).
    fn share(&self, us: f64) -> f64 {
        if self.duration_us > 0.0 {
            us * 100.0 / self.duration_us
        } else {
            0.0
        }
    }

    /// The share of the step its runtime calls spent waiting for the GPU or a copy,
    /// percent.
    pub fn waiting_percent(&self) -> f64 {
        let waiting = self.runtime_us.get(RuntimePart::Waiting as usize);
        self.share(waiting.copied().unwrap_or(0.0))
    }

    /// Whether synchronisation holds the step back: its runtime calls wait for the GPU
    /// [`WAITING_PERCENT`] of it or more.
    pub fn synchronising(&self) -> bool {
        self.waiting_percent() >= WAITING_PERCENT
    }

    /// The share of the step the CPU spent in the data loader, percent.
    pub fn dataloader_cpu_percent(&self) -> f64 {
        self.share(self.dataloader_cpu_us)
    }

    /// The share of the step in which GPU work replayed from CUDA graphs ran, percent.
    pub fn graph_replay_percent(&self) -> f64 {
        self.share(self.graph_replay_us)
    }

    /// The part of the runtime column that took the most of it (of equal parts, the first
    /// in precedence order), and its share of the step, percent; `None` without runtime
    /// time.
    pub fn largest_runtime_part(&self) -> Option<(RuntimePart, f64)> {
        RuntimePart::ALL
            .iter()
            .copied()
            .zip(&self.runtime_us)
            .filter(|(_, us)| **us > 0.0)
            .rev()
            .max_by(|a, b| a.1.total_cmp(b.1))
            .map(|(part, us)| (part, us * 100.0 / self.duration_us))
    }

    /// The share of the step in which the GPU did nothing, percent.
    pub fn gpu_idle_percent(&self) -> f64 {
        100.0
            - [
                Category::Kernel,
                Category::Memcpy,
                Category::Memset,
                Category::Communication,
            ]
            .into_iter()
            .map(|c| self.percent(c))
            .sum::<f64>()
    }
}

/// A recommendation and the figure that triggered it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    /// What it is about.
    pub kind: VerdictKind,
    /// The figure, percent of the mean step.
    pub percent: f64,
    /// The runtime call that took the most of the part a runtime verdict names (by the
    /// calls' time inside the steps).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call: Option<String>,
    /// The collective that took the most of the communication a communication verdict
    /// names (by its time inside the steps).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub collective: Option<CollectiveKind>,
    /// What it means and what to do.
    pub advice: String,
}

words! {
    /// What a step verdict is about.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum VerdictKind {
        /// The CPU waits on the data loader.
        InputPipeline = "input_pipeline",
        /// The GPU is idle much of each step.
        GpuStarved = "gpu_starved",
        /// CUDA runtime calls take much of each step, most of it launching work.
        LaunchOverhead = "launch_overhead",
        /// CUDA runtime calls take much of each step, most of it waiting for the GPU or a
        /// copy.
        HostWaits = "host_waits",
        /// CUDA runtime calls take much of each step, most of it managing memory.
        AllocatorCalls = "allocator_calls",
        /// CUDA runtime calls take much of each step, most of it in other calls.
        RuntimeCalls = "runtime_calls",
        /// Copies and memsets take much of each step.
        DataMovement = "data_movement",
        /// Communication alone takes much of each step.
        Communication = "communication",
    }
}

/// The steps and what they say.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepOverview {
    /// Every profiler step, in order.
    pub steps: Vec<Step>,
    /// The mean step.
    pub mean: Step,
    /// Recommendations, most important first.
    pub verdicts: Vec<Verdict>,
}

impl StepOverview {
    /// What the steps cannot attribute under CUDA graphs, in a sentence; `None` when no
    /// graph replay ran in them.
    pub fn graph_note(&self) -> Option<String> {
        let m = &self.mean;
        (m.graph_replay_us > 0.0).then(|| {
            format!(
                "GPU work replayed from CUDA graphs ran {:.0} % of the mean step ({:.1} ms): \
                 the kernel, memcpy and comm columns count it by when it ran, but at replay it \
                 had no launch call and no CPU operator of its own: the runtime column holds \
                 only the graph launches.",
                m.graph_replay_percent(),
                m.graph_replay_us / 1000.0
            )
        })
    }
}

/// The overview of the trace's profiler steps; `None` without any.
pub fn step_overview(trace: &Trace) -> Option<StepOverview> {
    let e = &trace.events;
    let mut windows: Vec<(i64, i64, u32)> = (0..e.len())
        .filter(|&i| !e.kind[i].is_gpu() && trace.names.get(e.name[i]).starts_with("ProfilerStep#"))
        .filter(|&i| e.kind[i] != Kind::GpuUserAnnotation)
        .map(|i| (e.ts[i], e.end(i), e.name[i]))
        .collect();
    if windows.is_empty() {
        return None;
    }
    windows.sort_unstable();
    let gpu = trace.has_gpu_work();
    let parts = runtime_parts(trace);
    let (slots, communication) = slots(trace, &parts, gpu);
    let replayed = merge(
        Replays::of(trace)
            .work
            .iter()
            .map(|&i| (e.ts[i], e.end(i)))
            .collect(),
    );
    let steps: Vec<Step> = windows
        .iter()
        .map(|&(start, end, name)| {
            let window = [(start, end)];
            let mut assigned: Vec<Interval> = Vec::new();
            let mut slot_us = Vec::with_capacity(slots.len());
            for slot in &slots {
                let inside = clip(slot, start, end);
                let new = length(&inside) - intersection(&inside, &assigned);
                slot_us.push(new as f64 / 1000.0);
                assigned = merge(assigned.into_iter().chain(inside).collect());
            }
            let runtime_us = slot_us[RUNTIME..RUNTIME + RuntimePart::ALL.len()].to_vec();
            let mut breakdown_us: Vec<f64> = Category::ALL[..Category::ALL.len() - 1]
                .iter()
                .map(|&c| match c {
                    Category::Runtime => runtime_us.iter().sum(),
                    c => slot_us[slot_of(c, RuntimePart::Other)],
                })
                .collect();
            breakdown_us.push((length(&window) - length(&assigned)) as f64 / 1000.0);
            Step {
                name: trace.names.get(name).to_owned(),
                duration_us: (end - start) as f64 / 1000.0,
                breakdown_us,
                dataloader_cpu_us: length(&clip(
                    &slots[slot_of(Category::Dataloader, RuntimePart::Other)],
                    start,
                    end,
                )) as f64
                    / 1000.0,
                graph_replay_us: length(&clip(&replayed, start, end)) as f64 / 1000.0,
                runtime_us,
            }
        })
        .collect();
    let n = steps.len() as f64;
    let mean = Step {
        name: "mean".into(),
        duration_us: steps.iter().map(|s| s.duration_us).sum::<f64>() / n,
        breakdown_us: (0..Category::ALL.len())
            .map(|c| steps.iter().map(|s| s.breakdown_us[c]).sum::<f64>() / n)
            .collect(),
        dataloader_cpu_us: steps.iter().map(|s| s.dataloader_cpu_us).sum::<f64>() / n,
        graph_replay_us: steps.iter().map(|s| s.graph_replay_us).sum::<f64>() / n,
        runtime_us: (0..RuntimePart::ALL.len())
            .map(|p| steps.iter().map(|s| s.runtime_us[p]).sum::<f64>() / n)
            .collect(),
    };
    // The steps' time as one set of disjoint spans, for what took the most of it.
    let spans = merge(windows.iter().map(|w| (w.0, w.1)).collect());
    let busiest = Busiest {
        calls: busiest_calls(trace, &spans, &parts),
        collective: busiest_collective(trace, &spans, &communication),
    };
    let verdicts = verdicts(&mean, gpu, &busiest);
    Some(StepOverview {
        steps,
        mean,
        verdicts,
    })
}

/// Where the runtime parts sit among the slots.
const RUNTIME: usize = Category::Runtime as usize;

/// The slot of an instant of `category` (of `part`, for runtime): the categories in
/// precedence order, the runtime one taking one slot per [`RuntimePart`].
fn slot_of(category: Category, part: RuntimePart) -> usize {
    debug_assert!(
        category != Category::Other,
        "\"other\" is what no slot holds"
    );
    match category as usize {
        c if c < RUNTIME => c,
        RUNTIME => RUNTIME + part as usize,
        c => c + RuntimePart::ALL.len() - 1,
    }
}

/// The part of each runtime or driver call of `trace`, as (event, part): what its name
/// says, but a copy launch by its copy, launching when the copy lets the call return at
/// once (`copy_launch_returns_at_once`), else waiting (also when the trace lacks its copy).
fn runtime_parts(trace: &Trace) -> Vec<(usize, RuntimePart)> {
    let e = &trace.events;
    let copies: FxHashMap<i64, u32> = (0..e.len())
        .filter(|&i| e.kind[i] == Kind::Memcpy && e.correlation[i] != NONE)
        .map(|i| (e.correlation[i], e.name[i]))
        .collect();
    // What each name says, worked out once per name: the events are many, the names few.
    let mut calls: Vec<Option<Option<Call>>> = vec![None; trace.names.len()];
    (0..e.len())
        .filter(|&i| matches!(e.kind[i], Kind::Runtime | Kind::Driver))
        .map(|i| {
            let name = e.name[i];
            let call = *calls[name as usize].get_or_insert_with(|| Call::of(trace.names.get(name)));
            let part = match (call, copies.get(&e.correlation[i])) {
                (Some(Call::CopyLaunch), Some(&copy))
                    if copy_launch_returns_at_once(trace.names.get(copy)) =>
                {
                    RuntimePart::Launching
                }
                (call, _) => RuntimePart::of(call),
            };
            (i, part)
        })
        .collect()
}

/// The busy intervals of each category but "other", in precedence order, the runtime
/// category's split into its parts ([`slot_of`]) as `parts` gives them; and the events of
/// the communication category. `gpu`: whether the trace has GPU work (without, the
/// collectives the CPU runs are its communication).
fn slots(
    trace: &Trace,
    parts: &[(usize, RuntimePart)],
    gpu: bool,
) -> (Vec<Vec<Interval>>, Vec<usize>) {
    let e = &trace.events;
    let mut slots: Vec<Vec<Interval>> =
        vec![Vec::new(); Category::ALL.len() - 2 + RuntimePart::ALL.len()];
    let mut communication = Vec::new();
    for &(i, part) in parts {
        slots[slot_of(Category::Runtime, part)].push((e.ts[i], e.end(i)));
    }
    // What each name says, worked out once per name: the events are many, the names few.
    let mut said: Vec<Option<Said>> = vec![None; trace.names.len()];
    for i in 0..e.len() {
        let name = e.name[i];
        let said = *said[name as usize].get_or_insert_with(|| Said::of(trace.names.get(name)));
        let class = match e.kind[i] {
            Kind::Kernel if said.communication => Category::Communication,
            Kind::Kernel => Category::Kernel,
            Kind::Memcpy => Category::Memcpy,
            Kind::Memset => Category::Memset,
            _ if said.step => continue,
            Kind::CpuOp | Kind::UserAnnotation if !gpu && said.cpu_collective => {
                Category::Communication
            }
            Kind::CpuOp | Kind::UserAnnotation | Kind::PythonFunction if said.dataloader => {
                Category::Dataloader
            }
            Kind::CpuOp | Kind::UserAnnotation | Kind::PythonFunction => Category::CpuExec,
            _ => continue,
        };
        if class == Category::Communication {
            communication.push(i);
        }
        slots[slot_of(class, RuntimePart::Other)].push((e.ts[i], e.end(i)));
    }
    (slots.into_iter().map(merge).collect(), communication)
}

/// The collective of the `communication` events with the most time inside the steps'
/// disjoint `spans`: by the name of each (a kernel's, or Kineto's `Collective name` where the
/// kernel's says none); `None` when they took none.
fn busiest_collective(
    trace: &Trace,
    spans: &[Interval],
    communication: &[usize],
) -> Option<CollectiveKind> {
    let e = &trace.events;
    let mut by_kind: FxHashMap<CollectiveKind, i64> = FxHashMap::default();
    for &i in communication {
        let kind = match CollectiveKind::of(trace.names.get(e.name[i])) {
            CollectiveKind::Other => trace.collective_of(i).map_or(CollectiveKind::Other, |c| {
                CollectiveKind::of(trace.names.get(c.name))
            }),
            kind => kind,
        };
        *by_kind.entry(kind).or_default() += length(&clip(spans, e.ts[i], e.end(i)));
    }
    CollectiveKind::ALL
        .iter()
        .filter_map(|k| by_kind.get(k).map(|&ns| (*k, ns)))
        .filter(|&(_, ns)| ns > 0)
        .rev()
        .max_by_key(|&(_, ns)| ns)
        .map(|(k, _)| k)
}

/// Per runtime part ([`RuntimePart::ALL`] order), the call with the most time of its own
/// inside the steps' disjoint `spans` (of equal times, the first name); `None` for a part no call
/// took time in.
fn busiest_calls(
    trace: &Trace,
    spans: &[Interval],
    parts: &[(usize, RuntimePart)],
) -> Vec<Option<String>> {
    let e = &trace.events;
    let mut by_call: FxHashMap<(u32, RuntimePart), i64> = FxHashMap::default();
    for &(i, part) in parts {
        let inside = length(&clip(spans, e.ts[i], e.end(i)));
        if inside > 0 {
            *by_call.entry((e.name[i], part)).or_default() += inside;
        }
    }
    let mut busiest: Vec<Option<(i64, &str)>> = vec![None; RuntimePart::ALL.len()];
    for ((name, part), ns) in by_call {
        let name = trace.names.get(name);
        let best = &mut busiest[part as usize];
        if best.is_none_or(|(most, first)| ns > most || (ns == most && name < first)) {
            *best = Some((ns, name));
        }
    }
    busiest
        .into_iter()
        .map(|b| b.map(|(_, name)| name.to_owned()))
        .collect()
}

/// What an event's name tells the step overview.
#[derive(Clone, Copy)]
struct Said {
    /// A profiler step (`ProfilerStep#N`).
    step: bool,
    /// Data loading (a name with `DataLoader` in it).
    dataloader: bool,
    /// Communication, when it names a kernel.
    communication: bool,
    /// A collective the CPU runs, when it names a CPU event.
    cpu_collective: bool,
}

impl Said {
    fn of(name: &str) -> Said {
        Said {
            step: name.starts_with("ProfilerStep#"),
            dataloader: name.contains("DataLoader"),
            communication: KernelType::of(name) == KernelType::Communication,
            cpu_collective: is_cpu_collective(name),
        }
    }
}

/// The parts of the disjoint, ordered `intervals` between `start` and `end`.
fn clip(intervals: &[Interval], start: i64, end: i64) -> Vec<Interval> {
    let first = intervals.partition_point(|&(_, e)| e <= start);
    intervals[first..]
        .iter()
        .take_while(|&&(s, _)| s < end)
        .map(|&(s, e)| (s.max(start), e.min(end)))
        .collect()
}

/// What took the most of the steps' time, for the verdicts to name.
struct Busiest {
    /// The busiest runtime call of each part ([`busiest_calls`]).
    calls: Vec<Option<String>>,
    /// The busiest collective ([`busiest_collective`]).
    collective: Option<CollectiveKind>,
}

/// The verdicts on the mean step; those about the GPU only when there is one.
fn verdicts(mean: &Step, gpu: bool, busiest: &Busiest) -> Vec<Verdict> {
    let mut out = Vec::new();
    let dataloader = mean.dataloader_cpu_percent();
    let idle = mean.gpu_idle_percent();
    if dataloader >= DATALOADER_PERCENT {
        out.push(Verdict {
            kind: VerdictKind::InputPipeline,
            percent: dataloader,
            call: None,
            collective: None,
            advice: format!(
                "the CPU is in the data loader {dataloader:.0} % of each step (the loader \
                 column counts only the part with nothing else running){}: the input \
                 pipeline is the bottleneck — more DataLoader workers (num_workers), \
                 pin_memory=True, prefetching, or lighter per-sample work",
                if gpu {
                    format!(" and the GPU is idle {idle:.0} % of it")
                } else {
                    String::new()
                }
            ),
        });
    } else if gpu && idle >= GPU_IDLE_PERCENT {
        out.push(Verdict {
            kind: VerdictKind::GpuStarved,
            percent: idle,
            call: None,
            collective: None,
            advice: if mean.percent(Category::Other) >= GPU_IDLE_PERCENT {
                format!(
                    "the GPU is idle {idle:.0} % of each step and for {:.0} % of it the \
                     profiler saw nothing run on the CPU either: time outside its events \
                     (torch.compile compiling, waiting on I/O or another process, a sleep)",
                    mean.percent(Category::Other)
                )
            } else if mean.synchronising() {
                format!(
                    "the GPU is idle {idle:.0} % of each step while runtime calls wait for \
                     it {:.0} % of the step: synchronisation (.item(), .cpu(), printing \
                     tensors) holds it back",
                    mean.waiting_percent()
                )
            } else {
                format!(
                    "the GPU is idle {idle:.0} % of each step while the CPU runs operators \
                     ({:.0} %) and runtime calls ({:.0} %), waiting on the GPU for almost \
                     none of it: the CPU's own work cannot keep up (fewer, larger kernels \
                     with torch.compile, CUDA graphs, or more work per step)",
                    mean.percent(Category::CpuExec),
                    mean.percent(Category::Runtime)
                )
            },
        });
    }
    let runtime = mean.percent(Category::Runtime);
    if runtime >= RUNTIME_PERCENT {
        out.extend(runtime_verdict(mean, runtime, &busiest.calls));
    }
    let moving = mean.percent(Category::Memcpy) + mean.percent(Category::Memset);
    if moving >= MEMORY_PERCENT {
        out.push(Verdict {
            kind: VerdictKind::DataMovement,
            percent: moving,
            call: None,
            collective: None,
            advice: format!(
                "copies and memsets take {moving:.0} % of each step: keep tensors on the \
                 GPU, pin host memory and copy with non_blocking=True"
            ),
        });
    }
    let communicating = mean.percent(Category::Communication);
    if communicating >= COMMUNICATION_PERCENT {
        out.push(Verdict {
            kind: VerdictKind::Communication,
            percent: communicating,
            call: None,
            collective: busiest.collective,
            advice: communication_advice(communicating, busiest.collective, gpu),
        });
    }
    out
}

/// What to do when communication alone takes `percent` of each step, most of it
/// `collective`; `gpu`: whether it ran on one (else gloo's or MPI's collectives on the
/// CPU).
fn communication_advice(percent: f64, collective: Option<CollectiveKind>, gpu: bool) -> String {
    let (what, remedy) = match collective.unwrap_or(CollectiveKind::Other) {
        CollectiveKind::AllReduce => (
            Some("all-reduce"),
            "gradient all-reduce the backward pass does not hide — DDP overlaps it bucket by \
             bucket (bucket_cap_mb), no_sync() skips it on gradient-accumulation steps, a \
             communication hook sends bf16 gradients",
        ),
        CollectiveKind::AllGather | CollectiveKind::ReduceScatter => (
            Some("all-gather and reduce-scatter"),
            "sharded training's parameter gathers and gradient scatters — prefetch them so \
             they overlap computation (FSDP's forward_prefetch, backward_prefetch), or shard \
             within a node only (HYBRID_SHARD)",
        ),
        CollectiveKind::Exchange => (
            Some("all-to-all and send/receive"),
            "exchanges of sharded embeddings, mixture-of-experts dispatch or pipeline \
             stages — exchange the next batch while this one computes (a pipelined loop), \
             balance what each rank sends, or send less",
        ),
        CollectiveKind::Broadcast => (
            Some("broadcast"),
            "a broadcast every step is usually DDP's buffer sync (broadcast_buffers=True) or \
             parameters sent again — broadcast once, or turn buffer broadcasting off when \
             the buffers need no sync",
        ),
        CollectiveKind::Other => (None, "overlap it with computation or reduce it"),
    };
    let most = what.map_or(String::new(), |w| format!(", most of it {w}"));
    if gpu {
        format!("communication alone takes {percent:.0} % of each step{most}: {remedy}")
    } else {
        format!(
            "collectives the CPU runs (gloo, MPI) take {percent:.0} % of each step{most}, \
             whatever else it did meanwhile: {remedy}"
        )
    }
}

/// The verdict on runtime calls taking `runtime` percent of the mean step, named by the
/// part of them that takes the most, with that part's busiest call.
fn runtime_verdict(mean: &Step, runtime: f64, busiest: &[Option<String>]) -> Option<Verdict> {
    let (part, share) = mean.largest_runtime_part()?;
    let call = busiest[part as usize].clone();
    let most = call
        .as_deref()
        .map_or(String::new(), |c| format!(", {c} the most"));
    let head = format!(
        "CUDA runtime calls take {runtime:.0} % of each step ({share:.0} % {}{most})",
        match part {
            RuntimePart::Waiting => "waiting",
            RuntimePart::Memory => "managing memory",
            RuntimePart::Launching => "launching work",
            RuntimePart::Other => "in other calls",
        }
    );
    let graph_launch = call
        .as_deref()
        .is_some_and(|c| Call::of(c) == Some(Call::GraphLaunch));
    let (kind, advice) = match part {
        RuntimePart::Launching if graph_launch => (
            VerdictKind::LaunchOverhead,
            format!(
                "{head}: each CUDA graph replay is a launch of its own — fewer, larger \
                 graphs (more of the step captured in each)"
            ),
        ),
        RuntimePart::Launching if mean.graph_replay_us > 0.0 => (
            VerdictKind::LaunchOverhead,
            format!(
                "{head}: the step already replays CUDA graphs, so these are the launches \
                 outside them — capture more of the step (fewer graph breaks)"
            ),
        ),
        RuntimePart::Launching => (
            VerdictKind::LaunchOverhead,
            format!(
                "{head}: many small kernels — CUDA graphs or torch.compile to fuse and \
                     batch launches"
            ),
        ),
        RuntimePart::Waiting => (
            VerdictKind::HostWaits,
            format!(
                "{head}: the CPU waits for the GPU or for a copy — a copy from pageable \
                 memory, or a read to the host (.item(), .cpu(), printing a tensor); pin host \
                 memory, copy with non_blocking=True and keep values on the GPU"
            ),
        ),
        RuntimePart::Memory => (
            VerdictKind::AllocatorCalls,
            format!(
                "{head}: the caching allocator is growing or giving memory back (cudaFree \
                 waits for the device) — memory near the limit, torch.cuda.empty_cache() in \
                 the loop, or ever-changing shapes; gpuscope snapshot shows which"
            ),
        ),
        RuntimePart::Other => (
            VerdictKind::RuntimeCalls,
            format!(
                "{head}: calls that neither launch, wait nor manage memory, repeated every \
                 step (stream creation, device queries) — make them once, outside the loop"
            ),
        ),
    };
    Some(Verdict {
        kind,
        percent: runtime,
        call,
        collective: None,
        advice,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::trace::test_traces::trace;

    type Event = (Kind, &'static str, i64, i64, i64, i64);

    /// Two 1,000 ns steps, each with the events `each` gives for its start (ns) and its
    /// correlation id (1, then 2).
    fn two_steps(each: impl Fn(i64, i64) -> Vec<Event>) -> StepOverview {
        let mut events = Vec::new();
        for (n, start, c) in [("ProfilerStep#1", 0, 1), ("ProfilerStep#2", 1000, 2)] {
            events.push((Kind::UserAnnotation, n, start, 1000, 1, NONE));
            events.extend(each(start, c));
        }
        step_overview(&trace(&events)).unwrap()
    }

    /// Two steps, each with `calls` (name, offset, duration, thread) and a kernel at
    /// 900–1,000 ns.
    fn steps(calls: &[(&'static str, i64, i64, i64)]) -> StepOverview {
        two_steps(|start, _| {
            let mut events: Vec<Event> = calls
                .iter()
                .map(|&(name, at, dur, tid)| (Kind::Runtime, name, start + at, dur, tid, NONE))
                .collect();
            events.push((Kind::Kernel, "k", start + 900, 100, 1, NONE));
            events
        })
    }

    /// The verdict on runtime calls.
    fn on_runtime(o: &StepOverview) -> &Verdict {
        o.verdicts.iter().find(|v| is_on_runtime(v.kind)).unwrap()
    }

    fn is_on_runtime(kind: VerdictKind) -> bool {
        matches!(
            kind,
            VerdictKind::LaunchOverhead
                | VerdictKind::HostWaits
                | VerdictKind::AllocatorCalls
                | VerdictKind::RuntimeCalls
        )
    }

    #[test]
    fn the_runtime_column_splits_by_what_its_calls_do() {
        let o = steps(&[
            ("cudaFree", 0, 300, 1),
            ("cudaLaunchKernel", 400, 100, 1),
            ("cudaStreamCreateWithFlags", 600, 50, 1),
            // Overlaps the launch on another thread: the overlap goes to waiting.
            ("cudaStreamSynchronize", 450, 100, 2),
            // Under the kernel: the GPU was busy, so no runtime time.
            ("cudaMemcpyAsync", 900, 50, 1),
        ]);
        let m = &o.mean;
        assert_eq!(m.runtime_us, [0.1, 0.3, 0.05, 0.05]);
        assert_eq!(
            m.runtime_us.iter().sum::<f64>(),
            m.breakdown_us[Category::Runtime as usize]
        );
        let v = on_runtime(&o);
        assert_eq!(v.kind, VerdictKind::AllocatorCalls);
        assert_eq!(v.call.as_deref(), Some("cudaFree"));
        assert!((v.percent - 50.0).abs() < 1e-9, "{}", v.percent);
    }

    /// Two steps, each with `call` at 0–300 ns and `work` (GPU work of the same
    /// correlation) at 900–1,000 ns.
    fn with_work(call: &'static str, work: (Kind, &'static str)) -> StepOverview {
        two_steps(|start, c| {
            vec![
                (Kind::Runtime, call, start, 300, 1, c),
                (work.0, work.1, start + 900, 100, 1, c),
            ]
        })
    }

    #[test]
    fn a_copy_launch_waits_only_for_a_copy_that_makes_it() {
        for (copy, kind) in [
            ("Memcpy DtoH (Device -> Pageable)", VerdictKind::HostWaits),
            ("Memcpy HtoD (Pageable -> Device)", VerdictKind::HostWaits),
            ("Memcpy HtoD (Host -> Device)", VerdictKind::HostWaits),
            (
                "Memcpy HtoD (Pinned -> Device)",
                VerdictKind::LaunchOverhead,
            ),
            (
                "Memcpy DtoD (Device -> Device)",
                VerdictKind::LaunchOverhead,
            ),
        ] {
            let o = with_work("cudaMemcpyAsync", (Kind::Memcpy, copy));
            assert_eq!(on_runtime(&o).kind, kind, "{copy}");
        }
    }

    #[test]
    fn graph_launches_that_take_the_time_are_named_as_such() {
        let o = with_work("cudaGraphLaunch", (Kind::Kernel, "k"));
        let v = on_runtime(&o);
        assert_eq!(v.kind, VerdictKind::LaunchOverhead);
        assert!(v.advice.contains("fewer, larger graphs"), "{}", v.advice);
    }

    #[test]
    fn each_part_names_its_verdict() {
        for (call, kind) in [
            ("cudaLaunchKernel", VerdictKind::LaunchOverhead),
            ("cudaMemcpyAsync", VerdictKind::HostWaits),
            ("cudaEventSynchronize", VerdictKind::HostWaits),
            ("cuMemUnmap", VerdictKind::AllocatorCalls),
            ("cudaGetDeviceProperties", VerdictKind::RuntimeCalls),
        ] {
            let v = on_runtime(&steps(&[(call, 0, 200, 1)])).clone();
            assert_eq!((v.kind, v.call.as_deref()), (kind, Some(call)));
            assert!(v.advice.contains(call), "{}", v.advice);
        }
        // Under 10 % of the step, no verdict on runtime calls.
        let o = steps(&[("cudaLaunchKernel", 0, 90, 1)]);
        assert!(o.verdicts.iter().all(|v| !is_on_runtime(v.kind)));
    }

    /// The README's rule: a starved GPU is blamed on synchronisation only when runtime
    /// calls wait for it 5 % of the step or more.
    #[test]
    fn a_starved_gpu_is_blamed_on_synchronisation_only_when_calls_wait() {
        let starved = |o: &StepOverview| {
            let v = o
                .verdicts
                .iter()
                .find(|v| v.kind == VerdictKind::GpuStarved);
            v.expect("GPU starved").advice.clone()
        };
        // The CPU runs an operator for 600 ns of each 1,000 and waits `sync` ns.
        let step = |sync: i64| {
            two_steps(move |start, _| {
                vec![
                    (Kind::CpuOp, "aten::add", start, 600, 1, NONE),
                    (
                        Kind::Runtime,
                        "cudaStreamSynchronize",
                        start + 600,
                        sync,
                        1,
                        NONE,
                    ),
                    (Kind::Kernel, "k", start + 900, 100, 1, NONE),
                ]
            })
        };
        let waiting = starved(&step(200));
        assert!(waiting.contains("synchronisation"), "{waiting}");
        let busy_cpu = step(40);
        assert!(!busy_cpu.mean.synchronising());
        let advice = starved(&busy_cpu);
        assert!(advice.contains("cannot keep up"), "{advice}");
        assert!(!advice.contains(".item()"), "{advice}");
    }

    #[test]
    fn launches_beside_graph_replays_are_those_outside_the_graphs() {
        let o = two_steps(|start, c| {
            vec![
                (Kind::Runtime, "cudaLaunchKernel", start, 300, 1, NONE),
                (Kind::Runtime, "cudaGraphLaunch", start + 300, 10, 1, c),
                (Kind::Kernel, "k", start + 900, 100, 1, c),
            ]
        });
        let v = on_runtime(&o);
        assert_eq!(v.kind, VerdictKind::LaunchOverhead);
        assert!(
            v.advice.contains("already replays CUDA graphs"),
            "{}",
            v.advice
        );
    }
}

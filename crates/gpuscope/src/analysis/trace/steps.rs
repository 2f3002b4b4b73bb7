//! The step-time overview of the deprecated TensorBoard profiler plugin: each
//! `ProfilerStep#N` split into what the time went to, each instant given to the first of
//! kernel, memcpy, memset, communication, runtime, data loader, CPU execution that was
//! happening then, and "other" when none was; and the share of each step the CPU spent in
//! the data loader whatever the GPU did. Then recommendations by fixed thresholds (README,
//! "The step verdicts of `gpuscope trace`").

use serde::{Deserialize, Serialize};

use super::classify::KernelType;
use super::graphs::Replays;
use super::intervals::{intersection, length, merge, Interval};
use crate::model::trace::{Kind, Trace};
use crate::model::words::words;

/// The share of a step the CPU spends in the data loader from which the input pipeline is
/// named the bottleneck, percent.
pub const DATALOADER_PERCENT: f64 = 10.0;
/// The share of a step with no GPU work from which the GPU is said to be starved.
pub const GPU_IDLE_PERCENT: f64 = 30.0;
/// The share of a step in CUDA runtime calls from which launch overhead is named.
pub const RUNTIME_PERCENT: f64 = 10.0;
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
        /// Communication kernels (NCCL and the like).
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
}

impl Step {
    /// The share of the step in `category`, percent.
    pub fn percent(&self, category: Category) -> f64 {
        if self.duration_us > 0.0 {
            self.breakdown_us[category as usize] * 100.0 / self.duration_us
        } else {
            0.0
        }
    }

    /// The share of the step the CPU spent in the data loader, percent.
    pub fn dataloader_cpu_percent(&self) -> f64 {
        if self.duration_us > 0.0 {
            self.dataloader_cpu_us * 100.0 / self.duration_us
        } else {
            0.0
        }
    }

    /// The share of the step in which GPU work replayed from CUDA graphs ran, percent.
    pub fn graph_replay_percent(&self) -> f64 {
        if self.duration_us > 0.0 {
            self.graph_replay_us * 100.0 / self.duration_us
        } else {
            0.0
        }
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
        /// CUDA runtime calls take much of each step.
        LaunchOverhead = "launch_overhead",
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
    let classes = classes(trace);
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
            let mut breakdown_us = Vec::with_capacity(Category::ALL.len());
            for class in &classes {
                let inside = clip(class, start, end);
                let new = length(&inside) - intersection(&inside, &assigned);
                breakdown_us.push(new as f64 / 1000.0);
                assigned = merge(assigned.into_iter().chain(inside).collect());
            }
            breakdown_us.push((length(&window) - length(&assigned)) as f64 / 1000.0);
            Step {
                name: trace.names.get(name).to_owned(),
                duration_us: (end - start) as f64 / 1000.0,
                breakdown_us,
                dataloader_cpu_us: length(&clip(
                    &classes[Category::Dataloader as usize],
                    start,
                    end,
                )) as f64
                    / 1000.0,
                graph_replay_us: length(&clip(&replayed, start, end)) as f64 / 1000.0,
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
    };
    let verdicts = verdicts(&mean, trace.has_gpu_work());
    Some(StepOverview {
        steps,
        mean,
        verdicts,
    })
}

/// The busy intervals of each category but "other", in precedence order.
fn classes(trace: &Trace) -> Vec<Vec<Interval>> {
    let e = &trace.events;
    let mut classes: Vec<Vec<Interval>> = vec![Vec::new(); Category::ALL.len() - 1];
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
            Kind::Runtime | Kind::Driver => Category::Runtime,
            _ if said.step => continue,
            Kind::CpuOp | Kind::UserAnnotation | Kind::PythonFunction if said.dataloader => {
                Category::Dataloader
            }
            Kind::CpuOp | Kind::UserAnnotation | Kind::PythonFunction => Category::CpuExec,
            _ => continue,
        };
        classes[class as usize].push((e.ts[i], e.end(i)));
    }
    classes.into_iter().map(merge).collect()
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
}

impl Said {
    fn of(name: &str) -> Said {
        Said {
            step: name.starts_with("ProfilerStep#"),
            dataloader: name.contains("DataLoader"),
            communication: KernelType::of(name) == KernelType::Communication,
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

type Threshold = (VerdictKind, f64, f64, fn(f64) -> String);

/// The verdicts on the mean step; those about the GPU only when there is one.
fn verdicts(mean: &Step, gpu: bool) -> Vec<Verdict> {
    let mut out = Vec::new();
    let dataloader = mean.dataloader_cpu_percent();
    let idle = mean.gpu_idle_percent();
    if dataloader >= DATALOADER_PERCENT {
        out.push(Verdict {
            kind: VerdictKind::InputPipeline,
            percent: dataloader,
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
            advice: if mean.percent(Category::Other) >= GPU_IDLE_PERCENT {
                format!(
                    "the GPU is idle {idle:.0} % of each step and for {:.0} % of it the \
                     profiler saw nothing run on the CPU either: time outside its events \
                     (torch.compile compiling, waiting on I/O or another process, a sleep)",
                    mean.percent(Category::Other)
                )
            } else {
                format!(
                    "the GPU is idle {idle:.0} % of each step while the CPU runs operators \
                     ({:.0} %) and runtime calls ({:.0} %): host-side work or \
                     synchronisation (.item(), .cpu(), printing tensors) holds it back",
                    mean.percent(Category::CpuExec),
                    mean.percent(Category::Runtime)
                )
            },
        });
    }
    let thresholds: [Threshold; 3] = [
        (
            VerdictKind::LaunchOverhead,
            mean.percent(Category::Runtime),
            RUNTIME_PERCENT,
            |p| {
                format!(
                    "CUDA runtime calls take {p:.0} % of each step: many small kernels — CUDA \
                     graphs or torch.compile to fuse and batch launches"
                )
            },
        ),
        (
            VerdictKind::DataMovement,
            mean.percent(Category::Memcpy) + mean.percent(Category::Memset),
            MEMORY_PERCENT,
            |p| {
                format!(
                    "copies and memsets take {p:.0} % of each step: keep tensors on the GPU, \
                     pin host memory and copy with non_blocking=True"
                )
            },
        ),
        (
            VerdictKind::Communication,
            mean.percent(Category::Communication),
            COMMUNICATION_PERCENT,
            |p| {
                format!(
                    "communication alone takes {p:.0} % of each step: overlap it with \
                     computation (DDP bucket size, gradient accumulation) or reduce it"
                )
            },
        ),
    ];
    for (kind, percent, threshold, advice) in thresholds {
        if percent >= threshold {
            out.push(Verdict {
                kind,
                percent,
                advice: advice(percent),
            });
        }
    }
    out
}

//! CUDA graph replays. A graph launch (`cudaGraphLaunch`) replays every kernel, copy and
//! memset captured into the graph, and CUPTI gives each of them the correlation id of that
//! one call: the shared rank0_nccl_negative_queue trace (a torch.compile run) has 70 graph
//! launches carrying 345 pieces of GPU work. None of that work has a launch call of its
//! own, and the operators captured into the graph are not recorded at replay. The
//! analyses that pair work with its launch — the launch statistics, the operators'
//! launched GPU time — and the step overview find the replays here, to say how much they
//! cannot attribute instead of miscounting it.

use rustc_hash::FxHashSet;

use serde::{Deserialize, Serialize};

use super::classify::Call;
use super::scope::Scope;
use crate::model::trace::{Kind, Trace};

/// Graph launch calls and the GPU work they replayed.
#[derive(Debug, Clone, Default)]
pub struct Replays {
    /// The graph launch calls, in event order.
    pub launches: Vec<usize>,
    /// The kernels, copies and memsets carrying their correlation ids, in event order.
    pub work: Vec<usize>,
}

impl Replays {
    /// The graph launches of the whole trace and the work they replayed.
    pub fn of(trace: &Trace) -> Replays {
        let all = 0..trace.events.len();
        Replays::among(trace, all.clone(), all)
    }

    /// The graph launches among the CPU events of `scope` and the work among its GPU
    /// events that they replayed.
    pub fn in_scope(trace: &Trace, scope: &Scope) -> Replays {
        Replays::among(trace, scope.cpu.iter().copied(), scope.gpu.iter().copied())
    }

    /// The graph launches among `calls` and the work among `work` carrying their
    /// correlation ids.
    fn among(
        trace: &Trace,
        calls: impl Iterator<Item = usize>,
        work: impl Iterator<Item = usize>,
    ) -> Replays {
        let e = &trace.events;
        let names = Call::names_in(trace, &[Call::GraphLaunch]);
        if names.is_empty() {
            return Replays::default();
        }
        let launches: Vec<usize> = calls
            .filter(|&i| {
                matches!(e.kind[i], Kind::Runtime | Kind::Driver) && names.contains(&e.name[i])
            })
            .collect();
        let correlations: FxHashSet<i64> = launches.iter().map(|&i| e.correlation[i]).collect();
        let work = work
            .filter(|&i| e.kind[i].is_gpu() && correlations.contains(&e.correlation[i]))
            .collect();
        Replays { launches, work }
    }

    /// What the replays come to, with each piece of work's duration (ns) from
    /// `duration`; `None` without graph launches.
    pub fn summary(&self, duration: impl Fn(usize) -> i64) -> Option<GraphReplays> {
        (!self.launches.is_empty()).then(|| GraphReplays {
            launches: self.launches.len() as u64,
            work: self.work.len() as u64,
            gpu_us: self.work.iter().map(|&i| duration(i)).sum::<i64>() as f64 / 1000.0,
        })
    }
}

/// GPU work replayed from CUDA graphs: no launch call of its own started it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GraphReplays {
    /// Graph launch calls (`cudaGraphLaunch`, `cuGraphLaunch`, `hipGraphLaunch`).
    pub launches: u64,
    /// Kernels, copies and memsets they replayed.
    pub work: u64,
    /// Their GPU time, summed, µs.
    pub gpu_us: f64,
}

impl GraphReplays {
    /// What the launch statistics leave out, in a sentence.
    pub fn unpaired_note(&self) -> String {
        format!(
            "{} kernels, copies and memsets ({:.1} ms of GPU time) were replayed by {} CUDA \
             graph launches: none has a launch call of its own, so the launch statistics, \
             the queues and the launch-bound verdict leave them out.",
            self.work,
            self.gpu_us / 1000.0,
            self.launches
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::trace::test_traces::trace;

    #[test]
    fn the_work_of_a_graph_launch_is_all_that_carries_its_correlation() {
        let t = trace(&[
            (Kind::Runtime, "cudaGraphLaunch", 0, 5, 1, 1),
            (Kind::Kernel, "a", 10, 3, 1, 1),
            (Kind::Memset, "Memset (Device)", 13, 1, 1, 1),
            (Kind::Kernel, "b", 14, 4, 1, 1),
            (Kind::Runtime, "cudaLaunchKernel", 20, 5, 1, 2),
            (Kind::Kernel, "c", 30, 7, 1, 2),
        ]);
        let r = Replays::of(&t);
        assert_eq!(r.launches, [0]);
        assert_eq!(r.work, [1, 2, 3]);
        let e = &t.events;
        assert_eq!(
            r.summary(|i| e.dur[i]),
            Some(GraphReplays {
                launches: 1,
                work: 3,
                gpu_us: 0.008
            })
        );
        // Without the graph launch among the calls, nothing is a replay.
        let plain = Replays::among(&t, 4..6, 0..6);
        assert!(plain.work.is_empty());
        assert!(plain.summary(|i| e.dur[i]).is_none());
    }
}

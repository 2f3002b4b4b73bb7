//! Kernel launches: each piece of GPU work paired with the CUDA runtime call that
//! launched it (by correlation id), how long the call took on the CPU, how long the work
//! took on the GPU, and how long the work waited after the call returned. Work shorter
//! than its own launch call is launch-bound: the GPU finishes faster than the CPU can feed
//! it.

use rustc_hash::FxHashMap;

use serde::{Deserialize, Serialize};

use super::classify::Call;
use super::scope::Scope;
use crate::model::trace::{Trace, NONE};

/// One launch: the runtime call and the work it launched.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Launch {
    /// Index of the runtime call.
    pub call: usize,
    /// Index of the GPU work.
    pub work: usize,
    /// The call's duration on the CPU, ns.
    pub cpu_ns: i64,
    /// The work's duration on the GPU, ns.
    pub gpu_ns: i64,
    /// From the end of the call to the start of the work, ns; 0 when the work started
    /// before the call returned (as HTA counts it).
    pub delay_ns: i64,
}

/// The launches of the GPU work in `scope`, in the order of the calls: kernel launches,
/// and copies and memsets launched on a stream. Graph launches are left out: one starts
/// many pieces of work, none with a launch of its own.
pub fn launches(trace: &Trace, scope: &Scope) -> Vec<Launch> {
    let e = &trace.events;
    let launch_names = Call::names_in(
        trace,
        &[Call::KernelLaunch, Call::CopyLaunch, Call::MemsetLaunch],
    );
    let work_by_correlation: FxHashMap<i64, usize> = scope
        .gpu
        .iter()
        .filter(|&&i| e.kind[i].is_gpu() && e.correlation[i] != NONE)
        .map(|&i| (e.correlation[i], i))
        .collect();
    scope
        .cpu
        .iter()
        .filter(|&&i| launch_names.contains(&e.name[i]))
        .filter_map(|&call| {
            let work = *work_by_correlation.get(&e.correlation[call])?;
            let (_, call_end) = scope.interval(trace, call);
            let (work_start, _) = scope.interval(trace, work);
            Some(Launch {
                call,
                work,
                cpu_ns: scope.duration(trace, call),
                gpu_ns: scope.duration(trace, work),
                delay_ns: (work_start - call_end).max(0),
            })
        })
        .collect()
}

/// Percentiles and extremes of a set of durations, µs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Distribution {
    /// Mean.
    pub mean_us: f64,
    /// Median.
    pub p50_us: f64,
    /// 95th percentile.
    pub p95_us: f64,
    /// Largest.
    pub max_us: f64,
}

impl Distribution {
    /// The distribution of `values` (ns); `None` when empty.
    pub fn of(mut values: Vec<i64>) -> Option<Distribution> {
        if values.is_empty() {
            return None;
        }
        values.sort_unstable();
        let at = |q: f64| values[((values.len() - 1) as f64 * q).round() as usize] as f64 / 1000.0;
        Some(Distribution {
            mean_us: values.iter().sum::<i64>() as f64 / values.len() as f64 / 1000.0,
            p50_us: at(0.5),
            p95_us: at(0.95),
            max_us: at(1.0),
        })
    }
}

/// What the launches of a rank say.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LaunchStats {
    /// Launches paired with their work.
    pub count: usize,
    /// Durations of the launch calls on the CPU.
    pub cpu_duration: Distribution,
    /// Durations of the launched work on the GPU.
    pub gpu_duration: Distribution,
    /// Waits from the end of a call to the start of its work.
    pub launch_delay: Distribution,
    /// Work that ran shorter than the call that launched it.
    pub shorter_than_launch: usize,
    /// Their share of the launches, percent.
    pub shorter_than_launch_percent: f64,
}

/// The statistics of `all` launches; `None` without any.
pub fn launch_stats(all: &[Launch]) -> Option<LaunchStats> {
    let shorter = all.iter().filter(|l| l.gpu_ns < l.cpu_ns).count();
    Some(LaunchStats {
        count: all.len(),
        cpu_duration: Distribution::of(all.iter().map(|l| l.cpu_ns).collect())?,
        gpu_duration: Distribution::of(all.iter().map(|l| l.gpu_ns).collect())?,
        launch_delay: Distribution::of(all.iter().map(|l| l.delay_ns).collect())?,
        shorter_than_launch: shorter,
        shorter_than_launch_percent: shorter as f64 * 100.0 / all.len() as f64,
    })
}

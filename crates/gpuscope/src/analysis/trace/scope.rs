//! Which events of a trace the GPU analyses look at, as HTA chooses them so the numbers
//! compare: GPU work is any event with a CUDA stream (kernels, copies, memsets, and the
//! stream syncs Kineto records with one). When the trace has two or more profiler steps,
//! the last is left out — the profiler's stop may cut it short — with every CPU event
//! from its start on and the GPU work those CPU events launched.
//!
//! Times are exact (ns) by default. HTA rounds a trace with fractional microseconds to
//! whole ones — start up, end down — which shrinks every short kernel and opens gaps
//! between back-to-back ones (idle time where the GPU was busy; a kernel of 0.5 µs gets a
//! negative duration). [`Clock::HtaRounded`] reproduces that, to compare with HTA's
//! figures, but not HTA's impossible results: a duration, a time or a share that this
//! rounding makes negative is 0, and the rank's notes say so. The tests show both clocks.

use rustc_hash::FxHashSet;

use super::classify::KernelType;
use crate::model::trace::{Trace, NONE};

/// How event times are taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Clock {
    /// As recorded, to the nanosecond.
    #[default]
    Exact,
    /// As HTA 0.5 takes them: when any timestamp has a fraction of a microsecond, starts
    /// rounded up and ends rounded down to whole microseconds.
    HtaRounded,
}

impl Clock {
    /// The name the JSON documents give this clock (`clock`).
    pub fn name(self) -> &'static str {
        match self {
            Clock::Exact => "exact",
            Clock::HtaRounded => "hta-rounded",
        }
    }
}

/// The events the GPU analyses use.
#[derive(Debug, Clone)]
pub struct Scope {
    /// Indices of the GPU events, in file order.
    pub gpu: Vec<usize>,
    /// Indices of the CPU events, in file order.
    pub cpu: Vec<usize>,
    /// The last profiler step (its name and start, ns), when it was left out.
    pub cut: Option<(u32, i64)>,
    /// Round times to whole microseconds, as HTA does.
    round: bool,
    /// The kernel type of each name of GPU work, by name id: the names are few and the
    /// events many, and telling the type takes substring searches through names hundreds
    /// of bytes long.
    types: Vec<Option<KernelType>>,
}

impl Scope {
    /// Start and end of event `i`, ns, on this scope's clock.
    pub fn interval(&self, trace: &Trace, i: usize) -> (i64, i64) {
        let (start, dur) = (trace.events.ts[i], trace.events.dur[i]);
        if !self.round {
            return (start, start + dur);
        }
        // HTA's arithmetic: microseconds in f64, end = ts + dur, then ceil and floor.
        let ts_us = start.div_euclid(1000) as f64 + start.rem_euclid(1000) as f64 / 1000.0;
        let end_us = ts_us + dur as f64 / 1000.0;
        (ts_us.ceil() as i64 * 1000, end_us.floor() as i64 * 1000)
    }

    /// The kernel type of GPU event `i`.
    pub fn kernel_type(&self, trace: &Trace, i: usize) -> KernelType {
        let name = trace.events.name[i];
        self.types
            .get(name as usize)
            .copied()
            .flatten()
            .unwrap_or_else(|| KernelType::of(trace.names.get(name)))
    }

    /// Duration of event `i`, ns, on this scope's clock; 0 for an event that rounding
    /// leaves ending before it starts (a duration cannot be negative).
    pub fn duration(&self, trace: &Trace, i: usize) -> i64 {
        let (start, end) = self.interval(trace, i);
        (end - start).max(0)
    }

    /// How many of `events` end before they start on this scope's clock: under HTA's
    /// rounding, those shorter than 1 µs whose rounded-up start passes their rounded-down
    /// end. None on the exact clock.
    pub fn ending_before_start(
        &self,
        trace: &Trace,
        events: impl IntoIterator<Item = usize>,
    ) -> usize {
        events
            .into_iter()
            .filter(|&i| {
                let (start, end) = self.interval(trace, i);
                end < start
            })
            .count()
    }
}

/// True for an event on a CUDA stream (HTA: `stream != -1`), and for GPU work recorded
/// without one (kernels of CUPTI's range profiler, where HTA finds no GPU work at all).
/// A CPU event is never GPU work, even with a `stream` argument: Inductor's Triton
/// launcher records one as a `cpu_op` (HTA counts its CPU time as GPU time).
pub fn on_gpu(trace: &Trace, i: usize) -> bool {
    let (s, kind) = (trace.events.stream[i], trace.events.kind[i]);
    (s != NONE && s != -1 && !kind.is_cpu()) || (s == NONE && kind.is_gpu())
}

/// The events HTA's breakdowns would use, on `clock`.
pub fn scope(trace: &Trace, clock: Clock) -> Scope {
    scope_with(trace, clock, false)
}

/// [`scope`], or with `last_step` every event, the last profiler step's too (HTA's
/// `include_last_profiler_step=True`).
pub fn scope_with(trace: &Trace, clock: Clock, last_step: bool) -> Scope {
    let e = &trace.events;
    let round = clock == Clock::HtaRounded && e.ts.iter().any(|ts| ts % 1000 != 0);
    let (gpu, cpu, cut) = if last_step {
        let (gpu, cpu) = (0..e.len()).partition(|&i| on_gpu(trace, i));
        (gpu, cpu, None)
    } else {
        events_in_scope(trace)
    };
    let mut types = vec![None; trace.names.len()];
    for &i in &gpu {
        let name = e.name[i];
        types[name as usize].get_or_insert_with(|| KernelType::of(trace.names.get(name)));
    }
    Scope {
        gpu,
        cpu,
        cut,
        round,
        types,
    }
}

/// The GPU and CPU events in scope, and the profiler step left out.
type InScope = (Vec<usize>, Vec<usize>, Option<(u32, i64)>);

fn events_in_scope(trace: &Trace) -> InScope {
    let e = &trace.events;
    let (gpu, cpu): (Vec<usize>, Vec<usize>) = (0..e.len()).partition(|&i| on_gpu(trace, i));
    let steps: FxHashSet<u32> = (0..trace.names.len() as u32)
        .filter(|&id| trace.names.get(id).contains("ProfilerStep"))
        .collect();
    let step_names_used: FxHashSet<u32> = e
        .name
        .iter()
        .copied()
        .filter(|n| steps.contains(n))
        .collect();
    if step_names_used.len() < 2 {
        return (gpu, cpu, None);
    }
    let Some((last_start, last_name)) = cpu
        .iter()
        .filter(|&&i| steps.contains(&e.name[i]))
        .map(|&i| (e.ts[i], e.name[i]))
        .max()
    else {
        return (gpu, cpu, None);
    };
    let cpu: Vec<usize> = cpu.into_iter().filter(|&i| e.ts[i] < last_start).collect();
    let launched: FxHashSet<i64> = cpu
        .iter()
        .map(|&i| e.correlation[i])
        .filter(|&c| c != NONE)
        .collect();
    let gpu = gpu
        .into_iter()
        .filter(|&i| launched.contains(&e.correlation[i]))
        .collect();
    (gpu, cpu, Some((last_name, last_start)))
}

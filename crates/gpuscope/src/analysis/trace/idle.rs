//! Why each CUDA stream sat idle between two pieces of its work, as HTA splits it:
//! **host wait** when the next launch call came after the previous work had finished (the
//! CPU was late), **kernel wait** for a short gap of under [`KERNEL_WAIT_US`] (launch
//! overhead between back-to-back kernels), **other** for the rest (waits on events, other
//! streams, synchronisation).

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;

use serde::Serialize;

use super::clamp::non_negative;
use super::scope::Scope;
use crate::model::trace::{Trace, NONE};
use crate::model::words::words;

/// Gaps shorter than this, µs, are kernel waits (HTA's `consecutive_kernel_delay`).
pub const KERNEL_WAIT_US: i64 = 30;

/// The idle time of one stream, µs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StreamIdle {
    /// The CUDA stream.
    pub stream: i64,
    /// Waiting for the CPU to launch the next piece of work.
    pub host_wait_us: f64,
    /// Short gaps between back-to-back work.
    pub kernel_wait_us: f64,
    /// The rest.
    pub other_us: f64,
}

impl StreamIdle {
    /// All three.
    pub fn total_us(&self) -> f64 {
        self.host_wait_us + self.kernel_wait_us + self.other_us
    }
}

words! {
    /// Why a stream sat idle before a piece of work (HTA's `idle_category`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum IdleCause {
        /// The launch call came after the previous work had finished.
        HostWait = "host_wait",
        /// A gap shorter than the kernel-wait threshold.
        KernelWait = "kernel_wait",
        /// The rest.
        Other = "other",
    }
}

/// The gaps before each piece of work on each stream but the first, by stream number:
/// cause and length, ns (negative where the work overlaps the previous piece, as HTA
/// takes it), in start order. Gaps under `kernel_wait_us` are kernel waits.
pub fn gaps(
    trace: &Trace,
    scope: &Scope,
    kernel_wait_us: i64,
) -> BTreeMap<i64, Vec<(IdleCause, i64)>> {
    let e = &trace.events;
    // When the CPU launched each piece of GPU work: the start of its runtime call.
    let launched_at: FxHashMap<i64, i64> = scope
        .cpu
        .iter()
        .filter(|&&i| e.correlation[i] != NONE)
        .map(|&i| (e.correlation[i], scope.interval(trace, i).0))
        .collect();
    let mut streams: BTreeMap<i64, Vec<(i64, i64, Option<i64>)>> = BTreeMap::new();
    for &i in &scope.gpu {
        if e.kind[i].is_gpu() {
            let (start, end) = scope.interval(trace, i);
            let launch = launched_at.get(&e.correlation[i]).copied();
            streams
                .entry(e.stream[i])
                .or_default()
                .push((start, end, launch));
        }
    }
    streams
        .into_iter()
        .map(|(stream, mut work)| {
            work.sort_by_key(|w| w.0);
            let gaps = work
                .windows(2)
                .map(|pair| {
                    let (previous_end, (start, _, launch)) = (pair[0].1, pair[1]);
                    let gap = start - previous_end;
                    let cause = match launch {
                        Some(at) if at > previous_end => IdleCause::HostWait,
                        _ if gap < kernel_wait_us * 1000 => IdleCause::KernelWait,
                        _ => IdleCause::Other,
                    };
                    (cause, gap)
                })
                .collect();
            (stream, gaps)
        })
        .collect()
}

/// The idle time of each stream, by stream number.
pub fn idle_by_stream(trace: &Trace, scope: &Scope) -> Vec<StreamIdle> {
    gaps(trace, scope, KERNEL_WAIT_US)
        .into_iter()
        .map(|(stream, gaps)| {
            let sum = |cause: IdleCause| -> i64 {
                gaps.iter()
                    .filter(|(c, _)| *c == cause)
                    .map(|(_, g)| g)
                    .sum()
            };
            // Work that overlaps the previous piece on its stream leaves a negative gap,
            // summed as HTA sums it; a category that comes out below zero is 0.
            let us = |ns: i64| non_negative(ns as f64 / 1000.0);
            StreamIdle {
                stream,
                host_wait_us: us(sum(IdleCause::HostWait)),
                kernel_wait_us: us(sum(IdleCause::KernelWait)),
                other_us: us(sum(IdleCause::Other)),
            }
        })
        .collect()
}

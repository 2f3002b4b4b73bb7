//! How many launched pieces of work wait on each CUDA stream: one more at each launch
//! call, one fewer when the work starts. A queue that stays near empty means the GPU
//! outruns the CPU (launch-bound); a long one means the CPU is far ahead.

use std::collections::BTreeMap;

use serde::Serialize;

use super::launches::Launch;
use super::scope::Scope;
use crate::model::trace::Trace;

/// The queue of one stream, over its change points (as HTA summarises it).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StreamQueue {
    /// The CUDA stream.
    pub stream: i64,
    /// Change points: launches and starts.
    pub count: usize,
    /// Mean queue length over the change points.
    pub mean: f64,
    /// Longest queue.
    pub max: i64,
}

/// The queue of each stream for `launches`.
pub fn queue_lengths(trace: &Trace, scope: &Scope, launches: &[Launch]) -> Vec<StreamQueue> {
    let mut changes: BTreeMap<i64, Vec<(i64, i64)>> = BTreeMap::new();
    for l in launches {
        let stream = trace.events.stream[l.work];
        let list = changes.entry(stream).or_default();
        list.push((scope.interval(trace, l.call).0, 1));
        list.push((scope.interval(trace, l.work).0, -1));
    }
    changes
        .into_iter()
        .map(|(stream, mut list)| {
            // At the same instant a launch goes before a start, as in HTA.
            list.sort_by_key(|&(t, delta)| (t, -delta));
            let mut length = 0i64;
            let mut sum = 0i64;
            let mut max = 0i64;
            for (_, delta) in &list {
                length += delta;
                sum += length;
                max = max.max(length);
            }
            StreamQueue {
                stream,
                count: list.len(),
                mean: sum as f64 / list.len() as f64,
                max,
            }
        })
        .collect()
}

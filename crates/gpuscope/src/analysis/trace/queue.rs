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

/// One change of a stream's queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Change {
    /// When, ns.
    pub at: i64,
    /// +1 at a launch call, −1 when its work starts.
    pub delta: i64,
    /// The event: the call, or the work.
    pub event: usize,
    /// The work launched.
    pub work: usize,
    /// The stream's launched work not started yet, after this change.
    pub length: i64,
}

/// Each change of each stream's queue for `launches`, by stream number, in time order,
/// with the queue's length after it.
pub fn changes(trace: &Trace, scope: &Scope, launches: &[Launch]) -> BTreeMap<i64, Vec<Change>> {
    let mut changes: BTreeMap<i64, Vec<Change>> = BTreeMap::new();
    for l in launches {
        let stream = trace.events.stream[l.work];
        let list = changes.entry(stream).or_default();
        for (event, delta) in [(l.call, 1), (l.work, -1)] {
            let at = scope.interval(trace, event).0;
            list.push(Change {
                at,
                delta,
                event,
                work: l.work,
                length: 0,
            });
        }
    }
    for list in changes.values_mut() {
        // At the same instant a launch goes before a start, as in HTA.
        list.sort_by_key(|c| (c.at, -c.delta));
        let mut length = 0;
        for c in list.iter_mut() {
            length += c.delta;
            c.length = length;
        }
    }
    changes
}

/// The queue of each stream for `launches`.
pub fn queue_lengths(trace: &Trace, scope: &Scope, launches: &[Launch]) -> Vec<StreamQueue> {
    changes(trace, scope, launches)
        .into_iter()
        .map(|(stream, list)| {
            let sum: i64 = list.iter().map(|c| c.length).sum();
            let max = list.iter().map(|c| c.length).max().unwrap_or(0).max(0);
            StreamQueue {
                stream,
                count: list.len(),
                mean: sum as f64 / list.len() as f64,
                max,
            }
        })
        .collect()
}

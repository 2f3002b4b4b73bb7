//! The memory timeline of a trace recorded with `profile_memory=True`: the `[memory]`
//! events (bytes allocated, negative when freed, per device) summed over time per device
//! from what the allocator held when the trace began (where Kineto writes its totals),
//! the peak, and the operators that had allocated the most (net of their frees) by the
//! time of the peak — each event belongs to the innermost operator running on its thread.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;

use serde::Serialize;

use crate::model::trace::{Kind, Trace, NONE};

/// Points of each device's timeline.
const POINTS: usize = 240;
/// Operators listed at the peak.
const TOP: usize = 10;

/// Net bytes an operator had allocated by the peak.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Allocator {
    /// The operator's name (`(no operator)` outside any).
    pub name: String,
    /// Bytes allocated less bytes freed within it, up to the peak.
    pub net_bytes: i64,
}

/// One device's memory over the trace.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeviceMemory {
    /// `cpu` or `cuda:<n>`.
    pub device: String,
    /// Memory events.
    pub events: u64,
    /// Bytes already allocated on the device when the trace began: Kineto's `Total
    /// Allocated` after the first event that carries it, less the events' bytes up to
    /// it. The peak, the end and the timeline are that count of the allocator's at each
    /// event that carries it (the last count plus the event's bytes at one that does
    /// not). `None` for a trace without `Total Allocated` (older profilers): there they
    /// count from the start of the trace, allocations made before it unseen.
    pub allocated_before_trace_bytes: Option<i64>,
    /// The highest `Total Reserved` of a GPU's events (the caching allocator's reserved
    /// bytes); `None` for the CPU and for a trace without it.
    pub peak_reserved_bytes: Option<i64>,
    /// Allocated bytes at the peak.
    pub peak_bytes: i64,
    /// When the peak was, µs from the first memory event.
    pub peak_at_us: f64,
    /// At the end.
    pub end_bytes: i64,
    /// Time (µs from the first memory event) and allocated bytes, the highest in each of
    /// up to 240 spans.
    pub timeline: Vec<(f64, i64)>,
    /// The operators that had allocated the most by the peak.
    pub top_allocators: Vec<Allocator>,
}

/// The memory timeline of each device; empty without memory events.
pub fn device_memory(trace: &Trace) -> Vec<DeviceMemory> {
    let e = &trace.events;
    let mut events: Vec<usize> = (0..e.len())
        .filter(|&i| e.kind[i] == Kind::Memory)
        .collect();
    if events.is_empty() {
        return Vec::new();
    }
    events.sort_by_key(|&i| e.ts[i]);
    let owner = owners(trace, &events);
    let origin = e.ts[events[0]];
    let mut by_device: BTreeMap<i64, Vec<(usize, Option<usize>)>> = BTreeMap::new();
    for (k, &i) in events.iter().enumerate() {
        by_device
            .entry(e.device[i])
            .or_default()
            .push((i, owner[k]));
    }
    by_device
        .into_iter()
        .map(|(device, list)| {
            let gpu = device >= 0;
            let mut level = 0i64;
            let mut levels = Vec::with_capacity(list.len());
            let (mut peak, mut peak_index) = (i64::MIN, 0);
            let (mut before, mut reserved) = (None, None);
            for (k, &(i, _)) in list.iter().enumerate() {
                let bytes = if e.bytes[i] == NONE { 0 } else { e.bytes[i] };
                let totals = trace.allocator_totals_of(i);
                // The allocator's own count where the event carries it; else the last
                // level plus the event's bytes.
                match totals.map(|t| t.allocated).filter(|&a| a != NONE) {
                    Some(allocated) => {
                        before.get_or_insert(allocated - (level + bytes));
                        level = allocated;
                    }
                    None => level += bytes,
                }
                if let Some(t) = totals.filter(|t| gpu && t.reserved != NONE) {
                    reserved = reserved.max(Some(t.reserved));
                }
                levels.push(level);
                if level > peak {
                    (peak, peak_index) = (level, k);
                }
            }
            let mut net: FxHashMap<Option<u32>, i64> = FxHashMap::default();
            for &(i, op) in &list[..=peak_index] {
                if e.bytes[i] != NONE {
                    *net.entry(op.map(|o| e.name[o])).or_default() += e.bytes[i];
                }
            }
            let mut top: Vec<Allocator> = net
                .into_iter()
                .filter(|(_, bytes)| *bytes > 0)
                .map(|(name, net_bytes)| Allocator {
                    name: name
                        .map_or("(no operator)", |n| trace.names.get(n))
                        .to_owned(),
                    net_bytes,
                })
                .collect();
            top.sort_by(|a, b| {
                b.net_bytes
                    .cmp(&a.net_bytes)
                    .then_with(|| a.name.cmp(&b.name))
            });
            top.truncate(TOP);
            let per = list.len().div_ceil(POINTS);
            DeviceMemory {
                device: if gpu {
                    format!("cuda:{device}")
                } else {
                    "cpu".into()
                },
                events: list.len() as u64,
                allocated_before_trace_bytes: before,
                peak_reserved_bytes: reserved,
                peak_bytes: peak,
                peak_at_us: (e.ts[list[peak_index].0] - origin) as f64 / 1000.0,
                end_bytes: level,
                timeline: list
                    .chunks(per)
                    .zip(levels.chunks(per))
                    .map(|(span, levels)| {
                        let at = e.ts[span[span.len() - 1].0];
                        let high = levels.iter().copied().max().unwrap_or(0);
                        ((at - origin) as f64 / 1000.0, high)
                    })
                    .collect(),
                top_allocators: top,
            }
        })
        .collect()
}

/// For each memory event (in `events` order, sorted by time), the innermost CPU operator
/// running on its thread when it happened.
fn owners(trace: &Trace, events: &[usize]) -> Vec<Option<usize>> {
    let e = &trace.events;
    let mut ops_by_thread: FxHashMap<(i64, i64), Vec<usize>> = FxHashMap::default();
    for i in 0..e.len() {
        if e.kind[i] == Kind::CpuOp {
            ops_by_thread
                .entry((e.pid[i], e.tid[i]))
                .or_default()
                .push(i);
        }
    }
    for ops in ops_by_thread.values_mut() {
        ops.sort_by_key(|&i| (e.ts[i], std::cmp::Reverse(e.dur[i])));
    }
    let mut cursor: FxHashMap<(i64, i64), (usize, Vec<usize>)> = FxHashMap::default();
    events
        .iter()
        .map(|&m| {
            let thread = (e.pid[m], e.tid[m]);
            let ops = ops_by_thread.get(&thread)?;
            let (next, stack) = cursor.entry(thread).or_default();
            while *next < ops.len() && e.ts[ops[*next]] <= e.ts[m] {
                let op = ops[*next];
                while stack.last().is_some_and(|&top| e.end(top) <= e.ts[op]) {
                    stack.pop();
                }
                stack.push(op);
                *next += 1;
            }
            while stack.last().is_some_and(|&top| e.end(top) < e.ts[m]) {
                stack.pop();
            }
            stack.last().copied()
        })
        .collect()
}

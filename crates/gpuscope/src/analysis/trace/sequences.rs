//! The sequences of GPU work that calls of one CPU operator launch, grouped into patterns
//! and counted (Holistic Trace Analysis' `get_frequent_cuda_kernel_sequences`): a way to
//! find the operator calls that launch the same kernels again and again, the candidates
//! for fusing or for a CUDA graph.

use rustc_hash::FxHashMap;
use serde::Serialize;

use super::rows::micros;
use super::scope::Scope;
use crate::model::trace::{Kind, Trace, NONE};

/// The patterns, a row each, most frequent first (ties by pattern).
#[derive(Debug, Default, Serialize)]
pub struct SequenceTable {
    /// The operator's name, then the names of the GPU work its call launched in order of
    /// start, joined by `|`.
    pub pattern: Vec<String>,
    /// How many calls launched exactly that sequence.
    pub count: Vec<u64>,
    /// The GPU work's total time over those calls, µs.
    pub gpu_duration: Vec<f64>,
    /// The calls' total time on the CPU, µs.
    pub cpu_duration: Vec<f64>,
    /// For each of the first `marked` patterns: where its events stand in the file's
    /// `traceEvents` (the calls, every CPU event inside them on their thread, and the GPU
    /// work they launched), ascending; empty for the others.
    pub positions: Vec<Vec<u32>>,
}

/// One pattern's calls so far.
#[derive(Default)]
struct Calls {
    count: u64,
    gpu_ns: i64,
    cpu_ns: i64,
    events: Vec<usize>,
}

/// The patterns of the calls of `scope` whose name contains `operator` (CPU operators,
/// and any other call on a CPU thread: a `record_function` range, a Python function),
/// each call taken with the GPU work (kernels, copies, memsets) correlated with the
/// runtime and driver calls inside it on its thread: a kernel launch's kernel, a copy's
/// copy, every kernel of a graph replay. A match that starts inside another on the same
/// thread is part of that one. Calls with fewer than `min_len` pieces of work are left
/// out. The events of the first `marked` patterns come with their positions in the file.
pub fn sequence_table(
    trace: &Trace,
    scope: &Scope,
    operator: &str,
    min_len: usize,
    marked: usize,
) -> SequenceTable {
    let e = &trace.events;
    let thread = |i: usize| (e.pid[i], e.tid[i]);
    // The calls by thread, then start, so that what lies inside a call is one run of
    // them; of calls starting together, the longer (the outer) first, on the exact clock
    // where rounding makes them equal.
    let mut cpu: Vec<((i64, i64), i64, usize)> = scope
        .cpu
        .iter()
        .filter(|&&i| e.kind[i].is_cpu())
        .map(|&i| (thread(i), scope.interval(trace, i).0, i))
        .collect();
    cpu.sort_unstable_by_key(|&(thread, start, i)| {
        let end = std::cmp::Reverse(scope.interval(trace, i).1);
        (thread, start, end, e.ts[i], std::cmp::Reverse(e.end(i)), i)
    });
    let mut work_of: FxHashMap<i64, Vec<usize>> = FxHashMap::default();
    for &w in &scope.gpu {
        if e.kind[w].is_gpu() && e.correlation[w] != NONE {
            work_of.entry(e.correlation[w]).or_default().push(w);
        }
    }

    let matches = trace.names.containing(operator);
    let mut patterns: FxHashMap<Vec<u32>, Calls> = FxHashMap::default();
    let mut outer: Option<((i64, i64), i64)> = None;
    for (k, &(at, start, op)) in cpu.iter().enumerate() {
        if !matches[e.name[op] as usize] {
            continue;
        }
        if outer.is_some_and(|(t, outer_end)| t == at && start < outer_end) {
            continue;
        }
        let end = scope.interval(trace, op).1;
        outer = Some((at, end));
        let inside: Vec<usize> = cpu[k..]
            .iter()
            .take_while(|&&(t, s, _)| t == at && s <= end)
            .map(|&(_, _, i)| i)
            .filter(|&i| scope.interval(trace, i).1 <= end)
            .collect();
        let mut work: Vec<(i64, usize)> = inside
            .iter()
            .filter(|&&i| matches!(e.kind[i], Kind::Runtime | Kind::Driver))
            .filter_map(|&i| work_of.get(&e.correlation[i]))
            .flatten()
            .map(|&w| (scope.interval(trace, w).0, w))
            .collect();
        if work.len() < min_len {
            continue;
        }
        work.sort_unstable();
        let key: Vec<u32> = std::iter::once(e.name[op])
            .chain(work.iter().map(|&(_, w)| e.name[w]))
            .collect();
        let entry = patterns.entry(key).or_default();
        entry.count += 1;
        entry.cpu_ns += scope.duration(trace, op);
        entry.gpu_ns += work
            .iter()
            .map(|&(_, w)| scope.duration(trace, w))
            .sum::<i64>();
        entry.events.extend(inside);
        entry.events.extend(work.iter().map(|&(_, w)| w));
    }

    let mut rows: Vec<(String, Calls)> = patterns
        .into_iter()
        .map(|(key, calls)| {
            let names: Vec<&str> = key.iter().map(|&n| trace.names.get(n)).collect();
            (names.join("|"), calls)
        })
        .collect();
    rows.sort_unstable_by(|(a, x), (b, y)| y.count.cmp(&x.count).then_with(|| a.cmp(b)));
    let mut out = SequenceTable::default();
    for (k, (pattern, calls)) in rows.into_iter().enumerate() {
        out.pattern.push(pattern);
        out.count.push(calls.count);
        out.gpu_duration.push(micros(calls.gpu_ns));
        out.cpu_duration.push(micros(calls.cpu_ns));
        let mut positions: Vec<u32> = if k < marked {
            calls
                .events
                .iter()
                .filter_map(|&i| trace.position(i))
                .collect()
        } else {
            Vec::new()
        };
        positions.sort_unstable();
        positions.dedup();
        out.positions.push(positions);
    }
    out
}

//! The sequences of GPU work that calls of one CPU operator launch, grouped into patterns
//! and counted (Holistic Trace Analysis' `get_frequent_cuda_kernel_sequences`): a way to
//! find the operator calls that launch the same kernels again and again, the candidates
//! for fusing or for a CUDA graph.

use rustc_hash::FxHashMap;
use serde::Serialize;

use super::launches::Launch;
use super::rows::micros;
use super::scope::Scope;
use crate::model::trace::{Kind, Trace};

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
/// and any other CPU event: a `record_function` range, a Python function), each call
/// taken with the GPU work launched (`launches`) from inside it on its thread;
/// a call inside another such call on the same thread is part of the outer one. Calls
/// that launched fewer than `min_len` pieces of work are left out. The events of the
/// first `marked` patterns come with their positions in the file.
pub fn sequence_table(
    trace: &Trace,
    scope: &Scope,
    launches: &[Launch],
    operator: &str,
    min_len: usize,
    marked: usize,
) -> SequenceTable {
    let e = &trace.events;
    let thread = |i: usize| (e.pid[i], e.tid[i]);
    // Every CPU event (but the allocator's instants) and every launch call by thread,
    // then start, so that what lies inside a call is one run of each; of calls starting
    // together, the longer (the outer) first.
    let mut cpu: Vec<((i64, i64), i64, usize)> = scope
        .cpu
        .iter()
        .filter(|&&i| e.kind[i] != Kind::Memory)
        .map(|&i| (thread(i), scope.interval(trace, i).0, i))
        .collect();
    cpu.sort_unstable_by_key(|&(thread, start, i)| {
        (
            thread,
            start,
            std::cmp::Reverse(scope.interval(trace, i).1),
            i,
        )
    });
    let mut calls: Vec<((i64, i64), i64, &Launch)> = launches
        .iter()
        .map(|l| (thread(l.call), scope.interval(trace, l.call).0, l))
        .collect();
    calls.sort_unstable_by_key(|&(thread, start, l)| (thread, start, l.call));

    // Names are few and events many: each name is searched once.
    let matches: Vec<bool> = (0..trace.names.len() as u32)
        .map(|n| trace.names.get(n).contains(operator))
        .collect();
    let mut patterns: FxHashMap<Vec<u32>, Calls> = FxHashMap::default();
    let mut outer: Option<((i64, i64), i64)> = None;
    for &(at, start, op) in &cpu {
        if !matches[e.name[op] as usize] {
            continue;
        }
        let end = scope.interval(trace, op).1;
        if outer.is_some_and(|(t, outer_end)| t == at && end <= outer_end) {
            continue;
        }
        outer = Some((at, end));
        let inside = |t: (i64, i64), s: i64| (t, s) >= (at, start) && (t, s) <= (at, end);
        let first = calls.partition_point(|&(t, s, _)| (t, s) < (at, start));
        let mut work: Vec<(i64, usize)> = calls[first..]
            .iter()
            .take_while(|&&(t, s, _)| inside(t, s))
            .filter(|&&(_, _, l)| scope.interval(trace, l.call).1 <= end)
            .map(|&(_, _, l)| (scope.interval(trace, l.work).0, l.work))
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
        let first = cpu.partition_point(|&(t, s, _)| (t, s) < (at, start));
        entry.events.extend(
            cpu[first..]
                .iter()
                .take_while(|&&(t, s, _)| inside(t, s))
                .filter(|&&(_, _, i)| scope.interval(trace, i).1 <= end)
                .map(|&(_, _, i)| i),
        );
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
                .filter_map(|&i| trace.positions.get(i).copied())
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

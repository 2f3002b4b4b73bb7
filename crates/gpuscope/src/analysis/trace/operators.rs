//! CPU operators: their total and self time (total less the operators nested in them on
//! the same thread), by name and, when the trace recorded them (`record_shapes=True`), by
//! input shapes; and the GPU time of the kernels each launched — found through the
//! External id that Kineto gives both an operator and the GPU work it launched.

use std::collections::HashMap;

use serde::Serialize;

use crate::model::trace::{Kind, Trace, NONE, NO_SHAPES};

/// One operator, or one operator with one set of input shapes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OperatorStats {
    /// Its name (`aten::addmm`).
    pub name: String,
    /// Its input shapes as recorded (`[[64,128],[128,10]]`), when grouped by them.
    pub input_shapes: Option<String>,
    /// How many times it ran.
    pub count: u64,
    /// Time from its start to its end, summed, µs.
    pub total_us: f64,
    /// Time not inside a nested operator, summed, µs.
    pub self_us: f64,
    /// GPU time of the kernels, copies and memsets it launched, µs.
    pub gpu_us: f64,
}

/// The operators' figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Operators {
    /// By name, most self time first.
    pub by_self_time: Vec<OperatorStats>,
    /// By name, most GPU time launched first (only those that launched any).
    pub by_gpu_time: Vec<OperatorStats>,
    /// By name and input shapes, most total time first; empty without recorded shapes.
    pub by_shapes: Vec<OperatorStats>,
}

/// The figures of every CPU operator of the trace, `top` rows per table.
pub fn operators(trace: &Trace, top: usize) -> Operators {
    let e = &trace.events;
    let ops: Vec<usize> = (0..e.len()).filter(|&i| e.kind[i] == Kind::CpuOp).collect();
    let self_ns = self_times(trace, &ops);
    let gpu_ns = launched_gpu_time(trace, &ops);
    let mut by_name: HashMap<u32, OperatorStats> = HashMap::new();
    let mut by_shapes: HashMap<(u32, u32), OperatorStats> = HashMap::new();
    for (k, &i) in ops.iter().enumerate() {
        let add = |s: &mut OperatorStats| {
            s.count += 1;
            s.total_us += e.dur[i] as f64 / 1000.0;
            s.self_us += self_ns[k] as f64 / 1000.0;
            s.gpu_us += gpu_ns[k] as f64 / 1000.0;
        };
        add(by_name
            .entry(e.name[i])
            .or_insert_with(|| empty(trace, e.name[i], NO_SHAPES)));
        if e.shapes[i] != NO_SHAPES {
            add(by_shapes
                .entry((e.name[i], e.shapes[i]))
                .or_insert_with(|| empty(trace, e.name[i], e.shapes[i])));
        }
    }
    let names: Vec<OperatorStats> = by_name.into_values().collect();
    Operators {
        by_self_time: ranked(names.clone(), top, |s| s.self_us),
        by_gpu_time: ranked(
            names.into_iter().filter(|s| s.gpu_us > 0.0).collect(),
            top,
            |s| s.gpu_us,
        ),
        by_shapes: ranked(by_shapes.into_values().collect(), top, |s| s.total_us),
    }
}

fn empty(trace: &Trace, name: u32, shapes: u32) -> OperatorStats {
    OperatorStats {
        name: trace.names.get(name).to_owned(),
        input_shapes: (shapes != NO_SHAPES).then(|| trace.names.get(shapes).to_owned()),
        count: 0,
        total_us: 0.0,
        self_us: 0.0,
        gpu_us: 0.0,
    }
}

fn ranked(
    mut rows: Vec<OperatorStats>,
    top: usize,
    key: impl Fn(&OperatorStats) -> f64,
) -> Vec<OperatorStats> {
    rows.sort_by(|a, b| key(b).total_cmp(&key(a)).then_with(|| a.name.cmp(&b.name)));
    rows.truncate(top);
    rows
}

/// Self time of each of `ops` (indices into the events), in the same order: its duration
/// less its direct children's on the same thread.
fn self_times(trace: &Trace, ops: &[usize]) -> Vec<i64> {
    let e = &trace.events;
    let mut order: Vec<usize> = (0..ops.len()).collect();
    // By thread, then start, the enclosing operator before what it encloses.
    order.sort_by_key(|&k| {
        let i = ops[k];
        (e.pid[i], e.tid[i], e.ts[i], std::cmp::Reverse(e.dur[i]))
    });
    let mut self_ns: Vec<i64> = ops.iter().map(|&i| e.dur[i]).collect();
    let mut stack: Vec<usize> = Vec::new();
    let mut thread = (NONE, NONE);
    for k in order {
        let i = ops[k];
        if (e.pid[i], e.tid[i]) != thread {
            thread = (e.pid[i], e.tid[i]);
            stack.clear();
        }
        while let Some(&top) = stack.last() {
            if e.end(ops[top]) <= e.ts[i] {
                stack.pop();
            } else {
                break;
            }
        }
        if let Some(&parent) = stack.last() {
            self_ns[parent] -= e.dur[i];
        }
        stack.push(k);
    }
    self_ns.into_iter().map(|ns| ns.max(0)).collect()
}

/// GPU time launched by each of `ops`: the GPU work with the operator's External id.
fn launched_gpu_time(trace: &Trace, ops: &[usize]) -> Vec<i64> {
    let e = &trace.events;
    let mut by_external: HashMap<i64, i64> = HashMap::new();
    for i in 0..e.len() {
        if e.kind[i].is_gpu() && e.external_id[i] != NONE {
            *by_external.entry(e.external_id[i]).or_default() += e.dur[i];
        }
    }
    ops.iter()
        .map(|&i| match e.external_id[i] {
            NONE => 0,
            id => by_external.get(&id).copied().unwrap_or(0),
        })
        .collect()
}

//! CPU operators and `record_function` ranges, counted as torch's `key_averages()` counts
//! them: total time, and self time (total less the operators and ranges nested in it on
//! the same thread); an operator whose only child has its own name (`aten::sum` calling
//! `aten::sum`) is one call. By name and, when the trace recorded them
//! (`record_shapes=True`), by input shapes; and the GPU time of the kernels each launched —
//! found through the External id that Kineto gives both an operator and its GPU work, or,
//! in traces whose GPU work carries no operator's External id (older Kineto wrote its
//! correlation id there), through the runtime call that launched it: the innermost
//! operator enclosing that call on its thread launched it. Unknown (`null`) when neither
//! links anything (a sampled trace without the launching thread). GPU work replayed from a
//! CUDA graph has one launch for the whole graph: it goes to the operator that ran the
//! graph launch, and [`GraphCredit`] says how much that is.

use rustc_hash::FxHashMap;

use serde::Serialize;

use super::graphs::Replays;
use crate::model::trace::{Kind, Trace, NONE, NO_SHAPES};
use crate::model::units::counted;

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
    /// GPU time of the kernels, copies and memsets it launched, µs; `null` when the trace
    /// does not link GPU work to operators.
    pub gpu_us: Option<f64>,
}

/// The operators' figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Operators {
    /// By name, most self time first.
    pub by_self_time: Vec<OperatorStats>,
    /// By name, most GPU time launched first (only those that launched any); empty when
    /// it is not known.
    pub by_gpu_time: Vec<OperatorStats>,
    /// Whether the GPU work of the trace is linked to operators, so that their launched
    /// GPU time is known.
    pub gpu_time_known: bool,
    /// How it is linked, when it is.
    pub gpu_time_linked_by: Option<GpuLink>,
    /// By name and input shapes, most total time first; empty without recorded shapes.
    pub by_shapes: Vec<OperatorStats>,
    /// The GPU work replayed from CUDA graphs, which the launched GPU time can give only
    /// to the operators that launched the graphs; `null` without graph launches.
    pub graph_replays: Option<GraphCredit>,
}

/// How the operators' launched GPU time counts the work replayed from CUDA graphs: all of
/// a graph's work to the operator that ran its launch call (`CompiledFunction` under
/// torch.compile), none to the operators captured into the graph, which the trace does not
/// record at replay.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GraphCredit {
    /// Graph launch calls in the trace.
    pub launches: u64,
    /// GPU time of the work they replayed, µs.
    pub gpu_us: f64,
    /// The part of it in the operators' launched GPU time, µs; the rest was launched
    /// outside any operator (or the trace does not link GPU work to operators).
    pub credited_us: f64,
    /// The operators credited with it, most first.
    pub credited_to: Vec<String>,
}

impl GraphCredit {
    /// What the operators' GPU time cannot attribute, in a sentence.
    pub fn note(&self) -> String {
        let mut note = format!(
            "{:.1} ms of GPU work was replayed by {}: its operators were \
             captured into the graphs and are not recorded at replay, so their GPU time is \
             not known.",
            self.gpu_us / 1000.0,
            counted(self.launches as usize, "CUDA graph launch")
        );
        if !self.credited_to.is_empty() {
            note.push_str(&format!(
                " GPU ms gives {:.1} ms of it to the operators that launched the graphs ({}).",
                self.credited_us / 1000.0,
                self.credited_to.join(", ")
            ));
        }
        note
    }
}

/// How GPU work is matched to the operator that launched it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GpuLink {
    /// The operator's External id, which Kineto gives the GPU work it launched.
    ExternalId,
    /// The innermost operator enclosing, on its thread, the runtime call with the GPU
    /// work's correlation id.
    Enclosure,
}

/// The figures of every CPU operator of the trace, `top` rows per table.
pub fn operators(trace: &Trace, top: usize) -> Operators {
    operators_where(trace, top, |_| true)
}

/// The operators that ran inside the `record_function` ranges called `name` (a timed
/// section of gpuscope's memory profiler, which opens one while a profiler records),
/// most self time first; empty when the trace has no such range.
pub fn operators_inside(trace: &Trace, name: &str, top: usize) -> Vec<OperatorStats> {
    let e = &trace.events;
    let Some(id) = trace.names.find(name) else {
        return Vec::new();
    };
    let ranges: Vec<(i64, i64, i64)> = (0..e.len())
        .filter(|&i| e.kind[i] == Kind::UserAnnotation && e.name[i] == id)
        .map(|i| (e.tid[i], e.ts[i], e.end(i)))
        .collect();
    if ranges.is_empty() {
        return Vec::new();
    }
    let inside = |i: usize| {
        e.name[i] != id
            && ranges
                .iter()
                .any(|&(tid, start, end)| e.tid[i] == tid && e.ts[i] >= start && e.end(i) <= end)
    };
    operators_where(trace, top, inside).by_self_time
}

/// [`operators`] of the operators `keep` takes.
fn operators_where(trace: &Trace, top: usize, keep: impl Fn(usize) -> bool) -> Operators {
    let e = &trace.events;
    let ops: Vec<usize> = (0..e.len())
        .filter(|&i| matches!(e.kind[i], Kind::CpuOp | Kind::UserAnnotation) && keep(i))
        .collect();
    let calls = calls(trace, &ops);
    let mut by_name: FxHashMap<u32, OperatorStats> = FxHashMap::default();
    // GPU time replayed from graphs credited to each name, ns.
    let mut graph_by_name: FxHashMap<u32, i64> = FxHashMap::default();
    let mut by_shapes: FxHashMap<(u32, u32), OperatorStats> = FxHashMap::default();
    for (k, &i) in ops.iter().enumerate() {
        if calls.merged[k] {
            continue;
        }
        let (self_ns, gpu_ns) = (&calls.self_ns, &calls.gpu_ns);
        let add = |s: &mut OperatorStats| {
            s.count += 1;
            s.total_us += e.dur[i] as f64 / 1000.0;
            s.self_us += self_ns[k] as f64 / 1000.0;
            if let (Some(us), Some(gpu_ns)) = (&mut s.gpu_us, gpu_ns) {
                *us += gpu_ns[k] as f64 / 1000.0;
            }
        };
        if let Some(graph_ns) = calls.graph_ns.as_ref().filter(|g| g[k] > 0) {
            *graph_by_name.entry(e.name[i]).or_default() += graph_ns[k];
        }
        let known = gpu_ns.is_some();
        add(by_name
            .entry(e.name[i])
            .or_insert_with(|| empty(trace, e.name[i], NO_SHAPES, known)));
        if e.shapes[i] != NO_SHAPES {
            add(by_shapes
                .entry((e.name[i], e.shapes[i]))
                .or_insert_with(|| empty(trace, e.name[i], e.shapes[i], known)));
        }
    }
    let names: Vec<OperatorStats> = by_name.into_values().collect();
    let gpu = |s: &OperatorStats| s.gpu_us.unwrap_or(0.0);
    Operators {
        by_self_time: ranked(names.clone(), top, |s| s.self_us),
        by_gpu_time: ranked(
            names.into_iter().filter(|s| gpu(s) > 0.0).collect(),
            top,
            gpu,
        ),
        gpu_time_known: calls.linked_by.is_some(),
        gpu_time_linked_by: calls.linked_by,
        by_shapes: ranked(by_shapes.into_values().collect(), top, |s| s.total_us),
        graph_replays: graph_credit(trace, &calls.replays, graph_by_name, top),
    }
}

/// How the operators' GPU time counts `replays`, given the GPU time of graph work credited
/// to each operator name (ns); `None` without graph launches.
fn graph_credit(
    trace: &Trace,
    replays: &Replays,
    by_name: FxHashMap<u32, i64>,
    top: usize,
) -> Option<GraphCredit> {
    let e = &trace.events;
    let summary = replays.summary(|i| e.dur[i])?;
    let mut credited: Vec<(u32, i64)> = by_name.into_iter().collect();
    credited.sort_by(|a, b| {
        b.1.cmp(&a.1)
            .then_with(|| trace.names.get(a.0).cmp(trace.names.get(b.0)))
    });
    Some(GraphCredit {
        launches: summary.launches,
        gpu_us: summary.gpu_us,
        credited_us: credited.iter().map(|c| c.1).sum::<i64>() as f64 / 1000.0,
        credited_to: credited
            .iter()
            .take(top)
            .map(|c| trace.names.get(c.0).to_owned())
            .collect(),
    })
}

fn empty(trace: &Trace, name: u32, shapes: u32, gpu_known: bool) -> OperatorStats {
    OperatorStats {
        name: trace.names.get(name).to_owned(),
        input_shapes: (shapes != NO_SHAPES).then(|| trace.names.get(shapes).to_owned()),
        count: 0,
        total_us: 0.0,
        self_us: 0.0,
        gpu_us: gpu_known.then_some(0.0),
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

/// The operators as calls: self time and launched GPU time of each, with an operator
/// merged into its parent when it is the parent's only child and has its name.
struct Calls {
    merged: Vec<bool>,
    self_ns: Vec<i64>,
    /// `None` when the trace does not link GPU work to operators.
    gpu_ns: Option<Vec<i64>>,
    /// How it links them; `None` exactly when `gpu_ns` is.
    linked_by: Option<GpuLink>,
    /// The part of `gpu_ns` replayed from CUDA graphs; `None` when `gpu_ns` is, or
    /// without graph launches.
    graph_ns: Option<Vec<i64>>,
    /// The trace's graph launches and the work they replayed.
    replays: Replays,
}

/// The calls of `ops` (indices into the events).
fn calls(trace: &Trace, ops: &[usize]) -> Calls {
    let e = &trace.events;
    let parent = parents(trace, ops);
    let mut children = vec![0u32; ops.len()];
    for p in parent.iter().flatten() {
        children[*p] += 1;
    }
    // Parents come before their children in this order, so an owner is known when asked.
    let mut order: Vec<usize> = (0..ops.len()).collect();
    order.sort_by_key(|&k| (e.ts[ops[k]], std::cmp::Reverse(e.dur[ops[k]])));
    let mut merged = vec![false; ops.len()];
    let mut owner: Vec<usize> = (0..ops.len()).collect();
    let mut self_ns: Vec<i64> = ops.iter().map(|&i| e.dur[i]).collect();
    let launched = launched_gpu_time(trace, ops);
    let replays = Replays::of(trace);
    let replayed = launched
        .as_ref()
        .filter(|_| !replays.launches.is_empty())
        .map(|&(_, link)| launched_by(trace, ops, link, &replays.work));
    let mut gpu_ns = launched.as_ref().map(|_| vec![0i64; ops.len()]);
    let mut graph_ns = replayed.as_ref().map(|_| vec![0i64; ops.len()]);
    for &k in &order {
        if let Some(p) = parent[k] {
            if e.name[ops[p]] == e.name[ops[k]] && children[p] == 1 {
                merged[k] = true;
                owner[k] = owner[p];
            } else {
                self_ns[owner[p]] -= e.dur[ops[k]];
            }
        }
        if let (Some(gpu_ns), Some((launched, _))) = (&mut gpu_ns, &launched) {
            gpu_ns[owner[k]] += launched[k];
        }
        if let (Some(graph_ns), Some(replayed)) = (&mut graph_ns, &replayed) {
            graph_ns[owner[k]] += replayed[k];
        }
    }
    Calls {
        merged,
        self_ns: self_ns.into_iter().map(|ns| ns.max(0)).collect(),
        gpu_ns,
        linked_by: launched.map(|(_, link)| link),
        graph_ns,
        replays,
    }
}

/// The innermost operator enclosing each of `ops` on its thread.
fn parents(trace: &Trace, ops: &[usize]) -> Vec<Option<usize>> {
    let e = &trace.events;
    let mut order: Vec<usize> = (0..ops.len()).collect();
    // By thread, then start, the enclosing operator before what it encloses.
    order.sort_by_key(|&k| {
        let i = ops[k];
        (e.pid[i], e.tid[i], e.ts[i], std::cmp::Reverse(e.dur[i]))
    });
    let mut parent = vec![None; ops.len()];
    let mut stack: Vec<usize> = Vec::new();
    let mut thread = (NONE, NONE);
    for k in order {
        let i = ops[k];
        if (e.pid[i], e.tid[i]) != thread {
            thread = (e.pid[i], e.tid[i]);
            stack.clear();
        }
        while stack.last().is_some_and(|&top| e.end(ops[top]) <= e.ts[i]) {
            stack.pop();
        }
        parent[k] = stack.last().copied();
        stack.push(k);
    }
    parent
}

/// GPU time launched by each of `ops`, and how it was found: the GPU work with the
/// operator's External id; or, when every piece of GPU work carries its own correlation id
/// as External id (older Kineto, the sampled traces, AlexNet's: those numbers are not
/// operators' ids, and the operators whose ids they happen to equal, `aten::view` or
/// `aten::detach`, did not launch that work) or none of it an operator's, by enclosure.
/// `None` when neither links any GPU work to an operator: then every operator would seem
/// to have launched nothing.
fn launched_gpu_time(trace: &Trace, ops: &[usize]) -> Option<(Vec<i64>, GpuLink)> {
    let e = &trace.events;
    let work: Vec<usize> = (0..e.len()).filter(|&i| e.kind[i].is_gpu()).collect();
    if work.is_empty() {
        return Some((vec![0; ops.len()], GpuLink::ExternalId));
    }
    let external_is_correlation = work
        .iter()
        .all(|&i| e.external_id[i] == NONE || e.external_id[i] == e.correlation[i]);
    let links = [
        (!external_is_correlation).then_some(GpuLink::ExternalId),
        Some(GpuLink::Enclosure),
    ];
    links.into_iter().flatten().find_map(|link| {
        let launched = launched_by(trace, ops, link, &work);
        launched
            .iter()
            .any(|&ns| ns > 0)
            .then_some((launched, link))
    })
}

/// GPU time of `work` launched by each of `ops`, linked by `link`.
fn launched_by(trace: &Trace, ops: &[usize], link: GpuLink, work: &[usize]) -> Vec<i64> {
    match link {
        GpuLink::ExternalId => launched_by_external_id(trace, ops, work),
        GpuLink::Enclosure => launched_by_enclosure(trace, ops, work),
    }
}

/// GPU time of `work` launched by each of `ops`: the work carrying the operator's External
/// id.
fn launched_by_external_id(trace: &Trace, ops: &[usize], work: &[usize]) -> Vec<i64> {
    let e = &trace.events;
    let mut by_external: FxHashMap<i64, i64> = FxHashMap::default();
    for &i in work.iter().filter(|&&i| e.external_id[i] != NONE) {
        *by_external.entry(e.external_id[i]).or_default() += e.dur[i];
    }
    ops.iter()
        .map(|&i| match e.external_id[i] {
            NONE => 0,
            id => by_external.get(&id).copied().unwrap_or(0),
        })
        .collect()
}

/// GPU time of `work` launched by each of `ops`, credited to the innermost operator that
/// encloses, on its thread, the runtime call with the work's correlation id.
fn launched_by_enclosure(trace: &Trace, ops: &[usize], work: &[usize]) -> Vec<i64> {
    let e = &trace.events;
    let mut by_correlation: FxHashMap<i64, i64> = FxHashMap::default();
    for &i in work.iter().filter(|&&i| e.correlation[i] != NONE) {
        *by_correlation.entry(e.correlation[i]).or_default() += e.dur[i];
    }
    // (event, Some(k) for operator ops[k] / None for a launch), by thread and start; an
    // operator before a launch that starts with it, the longer operator first.
    let launches = (0..e.len()).filter(|&i| {
        matches!(e.kind[i], Kind::Runtime | Kind::Driver)
            && by_correlation.contains_key(&e.correlation[i])
    });
    let mut items: Vec<(usize, Option<usize>)> =
        ops.iter().enumerate().map(|(k, &i)| (i, Some(k))).collect();
    items.extend(launches.map(|i| (i, None)));
    items.sort_by_key(|&(i, op)| {
        (
            e.pid[i],
            e.tid[i],
            e.ts[i],
            op.is_none(),
            std::cmp::Reverse(e.dur[i]),
        )
    });
    let mut launched = vec![0i64; ops.len()];
    let mut stack: Vec<usize> = Vec::new();
    let mut thread = (NONE, NONE);
    for (i, op) in items {
        if (e.pid[i], e.tid[i]) != thread {
            thread = (e.pid[i], e.tid[i]);
            stack.clear();
        }
        while stack.last().is_some_and(|&top| e.end(ops[top]) <= e.ts[i]) {
            stack.pop();
        }
        match op {
            Some(k) => stack.push(k),
            None => {
                if let Some(&k) = stack.iter().rev().find(|&&k| e.end(ops[k]) >= e.end(i)) {
                    launched[k] += by_correlation[&e.correlation[i]];
                }
            }
        }
    }
    launched
}

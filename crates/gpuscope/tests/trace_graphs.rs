//! CUDA graph replays: the launch statistics, the step overview and the operators'
//! launched GPU time say how much GPU work graph launches replayed, and pair none of it as
//! if each kernel had its own launch. On the shared torch.compile trace with 70 real
//! `cudaGraphLaunch` calls, and on the H200 trace with each `aten::_foreach_norm`'s kernel
//! launches rewritten into one graph launch, the way Kineto records a replay: every piece
//! of the graph's work carries the graph launch's correlation id (and its operator's
//! External id). Expected figures come from the traces' JSON, read here with serde_json.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};

use gpuscope::analysis::trace::graphs::GraphReplays;
use gpuscope::analysis::trace::health::{health, HealthKind};
use gpuscope::analysis::trace::launches::launches;
use gpuscope::analysis::trace::operators::operators;
use gpuscope::analysis::trace::report::{report, RankReport};
use gpuscope::analysis::trace::scope::{scope, Clock};
use gpuscope::analysis::trace::steps::{step_overview, Category};
use gpuscope::formats::trace::read_trace;
use gpuscope::model::trace::TraceFile;
use serde_json::Value;

/// A torch.compile run on an A100 with CUDA graphs: 70 `cudaGraphLaunch` calls.
const GRAPHS: &str = "traces/rank0_nccl_negative_queue.json.gz";
/// The H200 run: no graphs, External ids that are operators'.
const H200: &str = "gpu-h200/lm_clean/profiler_traces/1795675943334.pt.trace.json.gz";

fn doc(rel: &str) -> Value {
    let file = std::fs::File::open(common::shared_data(rel)).unwrap();
    serde_json::from_reader(flate2::read::GzDecoder::new(file)).unwrap()
}

fn file_of(doc: &Value) -> (tempfile::TempDir, TraceFile) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.json");
    std::fs::write(&path, serde_json::to_string(doc).unwrap()).unwrap();
    let trace = read_trace(&path, &mut |_, _| {}).unwrap();
    (dir, TraceFile { path, trace })
}

fn shared(rel: &str) -> TraceFile {
    let path = common::shared_data(rel);
    let trace = read_trace(&path, &mut |_, _| {}).unwrap();
    TraceFile { path, trace }
}

fn one_report(file: &TraceFile) -> RankReport {
    report(std::slice::from_ref(file), Clock::Exact, usize::MAX)
        .pop()
        .unwrap()
}

/// A time of the JSON (µs) in ns: exact for whole microseconds (Unix-epoch times in µs
/// are past f64's integers once multiplied), to about 1 ns for fractional ones.
fn ns(v: &Value) -> i64 {
    v.as_i64().map_or_else(
        || (v.as_f64().unwrap() * 1000.0).round() as i64,
        |us| us * 1000,
    )
}

fn cat(e: &Value) -> &str {
    e["cat"].as_str().unwrap_or("")
}

fn correlation(e: &Value) -> Option<i64> {
    e["args"]["correlation"].as_i64()
}

fn is_gpu_work(e: &Value) -> bool {
    matches!(cat(e), "kernel" | "gpu_memcpy" | "gpu_memset")
}

/// What a trace's JSON says of its graph replays.
struct Said<'a> {
    /// Every duration event.
    events: Vec<&'a Value>,
    /// The `cudaGraphLaunch` calls.
    launches: Vec<&'a Value>,
    /// The GPU work carrying a graph launch's correlation id, by that id.
    work: BTreeMap<i64, Vec<&'a Value>>,
}

fn said(doc: &Value) -> Said<'_> {
    let events: Vec<&Value> = doc["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "X")
        .collect();
    let launches: Vec<&Value> = events
        .iter()
        .copied()
        .filter(|e| e["name"] == "cudaGraphLaunch")
        .collect();
    let ids: BTreeSet<i64> = launches.iter().filter_map(|e| correlation(e)).collect();
    let mut work: BTreeMap<i64, Vec<&Value>> = BTreeMap::new();
    for e in events.iter().copied().filter(|e| is_gpu_work(e)) {
        if let Some(c) = correlation(e).filter(|c| ids.contains(c)) {
            work.entry(c).or_default().push(e);
        }
    }
    Said {
        events,
        launches,
        work,
    }
}

impl Said<'_> {
    /// The start of the last CPU-side profiler step (the GPU views leave it out).
    fn last_step(&self) -> i64 {
        self.steps().last().unwrap().0
    }

    /// The CPU-side profiler steps, (start, end) in ns, in order.
    fn steps(&self) -> Vec<(i64, i64)> {
        let mut steps: Vec<(i64, i64)> = self
            .events
            .iter()
            .filter(|e| e["name"].as_str().unwrap().starts_with("ProfilerStep#"))
            .filter(|e| cat(e) != "gpu_user_annotation")
            .map(|e| (ns(&e["ts"]), ns(&e["ts"]) + ns(&e["dur"])))
            .collect();
        steps.sort_unstable();
        steps
    }

    /// The replays of the graph launches that start before `before` (ns), as the
    /// engine's summary would put them.
    fn replays(&self, before: i64) -> GraphReplays {
        let launched: Vec<i64> = self
            .launches
            .iter()
            .filter(|e| ns(&e["ts"]) < before)
            .filter_map(|e| correlation(e))
            .collect();
        let work: Vec<&Value> = launched
            .iter()
            .flat_map(|c| self.work.get(c).into_iter().flatten().copied())
            .collect();
        GraphReplays {
            launches: launched.len() as u64,
            work: work.len() as u64,
            gpu_us: work.iter().map(|e| ns(&e["dur"])).sum::<i64>() as f64 / 1000.0,
        }
    }

    /// The time replayed work ran in [start, end), ns: the union of its intervals.
    fn replayed_within(&self, start: i64, end: i64) -> i64 {
        let mut spans: Vec<(i64, i64)> = self
            .work
            .values()
            .flatten()
            .map(|e| {
                (
                    ns(&e["ts"]).max(start),
                    (ns(&e["ts"]) + ns(&e["dur"])).min(end),
                )
            })
            .filter(|(s, e)| s < e)
            .collect();
        spans.sort_unstable();
        let (mut total, mut reach) = (0, i64::MIN);
        for (s, e) in spans {
            total += (e - s.max(reach)).max(0);
            reach = reach.max(e);
        }
        total
    }

    /// The innermost CPU operator or range enclosing `call` on its thread.
    fn launcher(&self, call: &Value) -> Option<&str> {
        let (start, end) = (ns(&call["ts"]), ns(&call["ts"]) + ns(&call["dur"]));
        self.events
            .iter()
            .filter(|e| matches!(cat(e), "cpu_op" | "user_annotation"))
            .filter(|e| e["pid"] == call["pid"] && e["tid"] == call["tid"])
            .filter(|e| ns(&e["ts"]) <= start && ns(&e["ts"]) + ns(&e["dur"]) >= end)
            .min_by_key(|e| ns(&e["dur"]))
            .and_then(|e| e["name"].as_str())
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-6 * b.abs().max(1.0)
}

#[test]
fn graph_replays_are_reported_beside_the_launches_not_paired() {
    let doc = doc(GRAPHS);
    let s = said(&doc);
    let file = shared(GRAPHS);
    let r = one_report(&file);
    // The GPU views leave the last step out, and the graph launches in it.
    let want = s.replays(s.last_step());
    assert!(want.launches > 0 && want.launches < 70, "{want:?}");
    let got = r.graph_replays.clone().unwrap();
    assert_eq!((got.launches, got.work), (want.launches, want.work));
    assert!(close(got.gpu_us, want.gpu_us), "{got:?} {want:?}");

    // Only kernel, copy and memset launches are paired, none with replayed work.
    let t = &file.trace;
    let paired = launches(t, &scope(t, Clock::Exact));
    let graph_ids: BTreeSet<i64> = s.work.keys().copied().collect();
    assert!(paired
        .iter()
        .all(|l| !graph_ids.contains(&t.events.correlation[l.work])));
    let launch_calls = ["cudaLaunchKernel", "cudaMemcpyAsync", "cudaMemsetAsync"];
    let with_work: BTreeSet<i64> = s
        .events
        .iter()
        .filter(|e| is_gpu_work(e))
        .filter_map(|e| correlation(e))
        .collect();
    let cut = s.last_step();
    let want_paired = s
        .events
        .iter()
        .filter(|e| launch_calls.contains(&e["name"].as_str().unwrap()))
        .filter(|e| ns(&e["ts"]) < cut)
        .filter(|e| correlation(e).is_some_and(|c| with_work.contains(&c)))
        .count();
    assert_eq!(r.launches.as_ref().unwrap().count, want_paired);

    // Health counts the whole trace: 70 launches, 345 pieces of work.
    let issues = health(std::slice::from_ref(&file));
    let graphs = issues
        .iter()
        .find(|i| i.kind == HealthKind::CudaGraphs)
        .unwrap();
    let all = s.replays(i64::MAX);
    assert_eq!((graphs.count, all.work), (70, 345));
}

#[test]
fn each_step_says_how_long_graph_replays_ran_in_it() {
    let doc = doc(GRAPHS);
    let s = said(&doc);
    let overview = step_overview(&shared(GRAPHS).trace).unwrap();
    let steps = s.steps();
    assert_eq!(overview.steps.len(), steps.len());
    for (step, &(start, end)) in overview.steps.iter().zip(&steps) {
        let want = s.replayed_within(start, end) as f64 / 1000.0;
        assert!(close(step.graph_replay_us, want), "{}: {want}", step.name);
        assert!(want > 0.0, "{}", step.name);
        // Replayed work is part of the step's GPU time.
        let gpu: f64 = [
            Category::Kernel,
            Category::Memcpy,
            Category::Memset,
            Category::Communication,
        ]
        .iter()
        .map(|&c| step.breakdown_us[c as usize])
        .sum();
        assert!(step.graph_replay_us <= gpu + 1e-6, "{}", step.name);
    }
    let note = overview.graph_note().unwrap();
    assert!(
        note.contains(&format!("{:.1} ms", overview.mean.graph_replay_us / 1000.0)),
        "{note}"
    );
}

#[test]
fn operators_say_what_graph_replays_gave_to_the_operators_that_launched_them() {
    let doc = doc(GRAPHS);
    let s = said(&doc);
    let o = operators(&shared(GRAPHS).trace, usize::MAX);
    let got = o.graph_replays.unwrap();
    let all = s.replays(i64::MAX);
    assert_eq!(got.launches, all.launches);
    assert!(close(got.gpu_us, all.gpu_us));
    // Each graph's work goes to the operator enclosing its launch (this trace links GPU
    // work by enclosure: its External ids are correlation ids).
    let mut credited_ns = 0;
    let mut names = BTreeSet::new();
    for call in &s.launches {
        let Some(name) = s.launcher(call) else {
            continue;
        };
        names.insert(name.to_owned());
        let work = &s.work[&correlation(call).unwrap()];
        credited_ns += work.iter().map(|e| ns(&e["dur"])).sum::<i64>();
    }
    assert_eq!(
        names,
        BTreeSet::from(["CompiledFunction".into(), "CompiledFunctionBackward".into()])
    );
    assert_eq!(
        got.credited_to.iter().cloned().collect::<BTreeSet<_>>(),
        names
    );
    assert!(close(got.credited_us, credited_ns as f64 / 1000.0));
}

/// The H200 trace with the kernel, copy and memset launches of each `aten::_foreach_norm`
/// (found by the operator's External id, which Kineto gives its launch calls) made into
/// one graph launch: the first call renamed `cudaGraphLaunch`, the others taken out, the
/// work of all of them given its correlation id. Returns the edited document and the
/// number of graphs.
fn foreach_norm_as_graphs() -> (Value, usize) {
    let mut doc = doc(H200);
    let events = doc["traceEvents"].as_array_mut().unwrap();
    let ops: BTreeSet<i64> = events
        .iter()
        .filter(|e| e["ph"] == "X" && cat(e) == "cpu_op" && e["name"] == "aten::_foreach_norm")
        .filter_map(|e| e["args"]["External id"].as_i64())
        .collect();
    let launch_calls = ["cudaLaunchKernel", "cuLaunchKernelEx", "cudaMemsetAsync"];
    // For each operator, its launch calls in time order: (index, correlation).
    let mut groups: BTreeMap<i64, Vec<(usize, i64)>> = BTreeMap::new();
    for (i, e) in events.iter().enumerate() {
        let launch = matches!(cat(e), "cuda_runtime" | "cuda_driver")
            && launch_calls.contains(&e["name"].as_str().unwrap_or(""));
        match e["args"]["External id"]
            .as_i64()
            .filter(|x| ops.contains(x))
        {
            Some(op) if launch => groups
                .entry(op)
                .or_default()
                .push((i, correlation(e).unwrap())),
            _ => {}
        }
    }
    let mut graph_of: BTreeMap<i64, i64> = BTreeMap::new();
    let mut taken_out = BTreeSet::new();
    for calls in groups.values_mut() {
        calls.sort_by(|a, b| ns(&events[a.0]["ts"]).cmp(&ns(&events[b.0]["ts"])));
        let (first, graph) = calls[0];
        events[first]["name"] = "cudaGraphLaunch".into();
        for &(i, c) in calls.iter() {
            graph_of.insert(c, graph);
            if i != first {
                taken_out.insert(i);
            }
        }
    }
    for e in events.iter_mut() {
        if let Some(&graph) = correlation(e).and_then(|c| graph_of.get(&c)) {
            if is_gpu_work(e) {
                e["args"]["correlation"] = graph.into();
            }
        }
    }
    let mut i = 0;
    events.retain(|_| {
        i += 1;
        !taken_out.contains(&(i - 1))
    });
    (doc, groups.len())
}

#[test]
fn kernels_rewritten_into_graph_replays_leave_the_launches_and_stay_with_their_operator() {
    let (edited, graphs) = foreach_norm_as_graphs();
    assert!(graphs >= 6, "{graphs}");
    let s = said(&edited);
    assert_eq!(s.launches.len(), graphs);
    let (_dir, file) = file_of(&edited);
    let before = shared(H200);

    let issues = health(std::slice::from_ref(&file));
    let issue = issues
        .iter()
        .find(|i| i.kind == HealthKind::CudaGraphs)
        .unwrap();
    assert_eq!(issue.count, graphs as u64);

    // The launch statistics lose exactly the launches that became graph replays.
    let r = one_report(&file);
    let want = s.replays(s.last_step());
    assert!(want.work > want.launches, "{want:?}");
    let got = r.graph_replays.clone().unwrap();
    assert_eq!((got.launches, got.work), (want.launches, want.work));
    assert!((got.gpu_us - want.gpu_us).abs() < 0.001 * want.work as f64);
    let paired_before = one_report(&before).launches.unwrap().count;
    assert_eq!(
        r.launches.as_ref().unwrap().count,
        paired_before - want.work as usize
    );

    // The operator that launched the kernels is credited with the same GPU time.
    let gpu_of = |o: &gpuscope::analysis::trace::operators::Operators| {
        o.by_self_time
            .iter()
            .find(|s| s.name == "aten::_foreach_norm")
            .and_then(|s| s.gpu_us)
            .unwrap()
    };
    let o = operators(&file.trace, usize::MAX);
    assert_eq!(gpu_of(&o), gpu_of(&operators(&before.trace, usize::MAX)));
    let credit = o.graph_replays.unwrap();
    assert_eq!(credit.credited_to, ["aten::_foreach_norm"]);
    let all = s.replays(i64::MAX);
    assert!((credit.credited_us - all.gpu_us).abs() < 0.001 * all.work as f64);
    assert!((credit.gpu_us - all.gpu_us).abs() < 0.001 * all.work as f64);

    // The steps say how long the replays ran in each.
    let overview = step_overview(&file.trace).unwrap();
    for (step, (start, end)) in overview.steps.iter().zip(s.steps()) {
        let want = s.replayed_within(start, end) as f64 / 1000.0;
        assert!((step.graph_replay_us - want).abs() < 0.01, "{}", step.name);
    }
    assert!(overview.mean.graph_replay_us > 0.0);
}

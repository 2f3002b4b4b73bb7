//! The GPU time each CPU operator launched, on every shared trace: known exactly when some
//! GPU work carries an operator's External id or its launch is inside an operator on its
//! thread (found here from the whole document), and then given for every operator;
//! unknown (`None`, no table) otherwise, never 0. An operator credited with GPU time
//! encloses, on its thread, a runtime call that launched GPU work, and the two ways of
//! linking agree where both can be used.

use crate::common;

use std::collections::{HashMap, HashSet};

use gpuscope::analysis::trace::operators::{operators, GpuLink};
use gpuscope::formats::trace::read_trace;

use common::TRACES;

/// The shared trace `name`, read.
fn shared_trace(name: &str) -> gpuscope::model::trace::Trace {
    read_trace(
        &common::shared_data(&format!("traces/{name}")),
        &mut |_, _| {},
    )
    .unwrap()
}

/// Whether the trace links GPU work to operators: it has no GPU work, or some of it has
/// the External id of a CPU operator or user annotation. GPU work whose External id is
/// its own correlation id (older Kineto) carries no operator's id, whatever operator
/// happens to have the same number.
fn linked(name: &str) -> bool {
    let doc: serde_json::Value = serde_json::from_str(&common::trace_text(name)).unwrap();
    let events = doc["traceEvents"].as_array().unwrap();
    let ids = |categories: &[&str]| -> HashSet<i64> {
        events
            .iter()
            .filter(|e| e["ph"] == "X")
            .filter(|e| categories.contains(&e["cat"].as_str().unwrap_or("")))
            // Older Kineto spells it `external id` on GPU work.
            .filter_map(|e| {
                let args = &e["args"];
                let id = args["External id"]
                    .as_i64()
                    .or(args["external id"].as_i64())?;
                (Some(id) != args["correlation"].as_i64()).then_some(id)
            })
            .collect()
    };
    let gpu_categories = [
        "kernel",
        "Kernel",
        "cuda_profiler_range",
        "gpu_memcpy",
        "Memcpy",
    ];
    let gpu_categories = [&gpu_categories[..], &["gpu_memset", "Memset"]].concat();
    let has_gpu_work = events
        .iter()
        .any(|e| e["ph"] == "X" && gpu_categories.contains(&e["cat"].as_str().unwrap_or("")));
    let ops = ids(&["cpu_op", "Operator", "user_annotation"]);
    !has_gpu_work || !ids(&gpu_categories).is_disjoint(&ops)
}

#[test]
fn launched_gpu_time_is_known_exactly_when_the_trace_links_it() {
    let mut unknown = 0;
    for name in TRACES {
        let trace = shared_trace(name);
        let o = operators(&trace, usize::MAX);
        assert!(!o.by_self_time.is_empty(), "{name}");
        let enclosed = launches(name).iter().any(|(ops, _)| !ops.is_empty());
        let known = linked(name) || enclosed;
        assert_eq!(o.gpu_time_known, known, "{name}");
        assert_eq!(o.gpu_time_linked_by.is_some(), known, "{name}");
        assert!(
            o.by_self_time.iter().all(|s| s.gpu_us.is_some() == known),
            "{name}"
        );
        if !known {
            unknown += 1;
            assert!(o.by_gpu_time.is_empty(), "{name}");
        }
    }
    // cupti_profiler_counters: its kernels are CUPTI's replays, launched by no operator.
    assert!(unknown >= 1, "{unknown}");
}

/// An operator or a launch on a thread: start, end, 0 for an operator / 1 for a launch,
/// name, GPU µs launched.
type Span = (f64, f64, u8, String, f64);

/// Each runtime call whose correlation id is that of some GPU work, found on its thread:
/// the names of the operators and annotations enclosing it, outermost first, and the GPU
/// time (µs) of the work with its correlation id.
fn launches(name: &str) -> Vec<(Vec<String>, f64)> {
    let doc: serde_json::Value = serde_json::from_str(&common::trace_text(name)).unwrap();
    let events = doc["traceEvents"].as_array().unwrap();
    let cat = |e: &serde_json::Value| e["cat"].as_str().unwrap_or("").to_owned();
    let time = |v: &serde_json::Value| v.as_f64().unwrap_or(0.0);
    let gpu = [
        "kernel",
        "Kernel",
        "gpu_memcpy",
        "Memcpy",
        "gpu_memset",
        "Memset",
    ];
    let mut launched: HashMap<i64, f64> = HashMap::new();
    for e in events
        .iter()
        .filter(|e| e["ph"] == "X" && gpu.contains(&cat(e).as_str()))
    {
        if let Some(id) = e["args"]["correlation"].as_i64() {
            *launched.entry(id).or_default() += time(&e["dur"]);
        }
    }
    let thread = |e: &serde_json::Value| (e["pid"].to_string(), e["tid"].to_string());
    let mut by_thread: HashMap<_, Vec<Span>> = Default::default();
    for e in events.iter().filter(|e| e["ph"] == "X") {
        let c = cat(e);
        let (ts, dur) = (time(&e["ts"]), time(&e["dur"]));
        let (kind, gpu_us) = if ["cpu_op", "Operator", "user_annotation"].contains(&c.as_str()) {
            (0, 0.0)
        } else if let Some(&us) = ["cuda_runtime", "Runtime", "cuda_driver"]
            .contains(&c.as_str())
            .then(|| e["args"]["correlation"].as_i64())
            .flatten()
            .and_then(|id| launched.get(&id))
        {
            (1, us)
        } else {
            continue;
        };
        let name = e["name"].as_str().unwrap_or("").to_owned();
        by_thread
            .entry(thread(e))
            .or_default()
            .push((ts, ts + dur, kind, name, gpu_us));
    }
    let mut out = vec![];
    for mut list in by_thread.into_values() {
        // Operators before the launches they start with, the longest first.
        list.sort_by(|a, b| {
            (a.0, a.2)
                .partial_cmp(&(b.0, b.2))
                .unwrap()
                .then(b.1.partial_cmp(&a.1).unwrap())
        });
        let mut open: Vec<(f64, String)> = Vec::new();
        for (ts, end, kind, name, gpu_us) in list {
            open.retain(|(e, _)| *e > ts);
            if kind == 0 {
                open.push((end, name));
            } else {
                let enclosing = open.iter().filter(|(e, _)| *e >= end);
                out.push((enclosing.map(|(_, op)| op.clone()).collect(), gpu_us));
            }
        }
    }
    out
}

/// The names of the operators and annotations that enclose, on their own thread, a
/// runtime call whose correlation id is that of some GPU work: those that launched any.
fn launching_operators(name: &str) -> HashSet<String> {
    launches(name)
        .into_iter()
        .flat_map(|(ops, _)| ops)
        .collect()
}

/// GPU µs by operator name, each launch credited to the innermost operator enclosing it.
fn credited_by_enclosure(name: &str) -> HashMap<String, f64> {
    let mut by_name = HashMap::new();
    for (ops, us) in launches(name) {
        if let Some(op) = ops.last() {
            *by_name.entry(op.clone()).or_default() += us;
        }
    }
    by_name
}

/// GPU µs by operator name, as gpuscope credits them.
fn credited(name: &str) -> (Option<GpuLink>, HashMap<String, f64>) {
    let o = operators(&shared_trace(name), usize::MAX);
    let by_name = o
        .by_gpu_time
        .iter()
        .map(|s| (s.name.clone(), s.gpu_us.unwrap()))
        .collect();
    (o.gpu_time_linked_by, by_name)
}

/// `by_name` with the operators of a collective (`record_param_comms`, which Kineto
/// credits with NCCL kernels, and the `nccl:*` range enclosing their launch) as one.
fn collectives_as_one(by_name: HashMap<String, f64>) -> HashMap<String, f64> {
    let mut out = HashMap::new();
    for (op, us) in by_name {
        let key = if op == "record_param_comms" || op.starts_with("nccl:") {
            "(collective)".to_owned()
        } else {
            op
        };
        *out.entry(key).or_default() += us;
    }
    out
}

/// Where Kineto linked GPU work to operators by External id, the innermost operator
/// enclosing each launch is the one it named (but for collectives, where it names
/// `record_param_comms` and the launch is inside the `nccl:*` range); where it did not
/// (AlexNet, the sampled traces, rank0_nccl_negative_queue), gpuscope credits each operator
/// with what the launches it innermost-encloses ran.
#[test]
fn enclosure_credits_what_external_ids_credit() {
    let mut by_enclosure = 0;
    let mut by_external_id = 0;
    for name in TRACES {
        let (link, ours) = credited(name);
        let enclosed = credited_by_enclosure(name);
        match link {
            Some(GpuLink::Enclosure) => {
                by_enclosure += 1;
                assert_eq!(
                    ours.keys().collect::<HashSet<_>>(),
                    enclosed.keys().filter(|k| enclosed[*k] > 0.0).collect(),
                    "{name}"
                );
                for (op, us) in &ours {
                    assert!(
                        (us - enclosed[op]).abs() <= 1e-6 * us.max(1.0),
                        "{name}: {op}"
                    );
                }
            }
            Some(GpuLink::ExternalId) if !ours.is_empty() => {
                by_external_id += 1;
                let (ours, enclosed) = (collectives_as_one(ours), collectives_as_one(enclosed));
                for (op, us) in &ours {
                    let theirs = enclosed.get(op).copied().unwrap_or(0.0);
                    assert!((us - theirs).abs() <= 1e-6 * us.max(1.0), "{name}: {op}");
                }
            }
            _ => {}
        }
    }
    assert!(
        by_enclosure >= 4 && by_external_id >= 6,
        "{by_enclosure} {by_external_id}"
    );
}

/// AlexNet's GPU work carries its correlation ids as External ids; some equal the ids of
/// `aten::view` or `aten::detach`, which were credited with milliseconds of GPU time they
/// never launched while `aten::addmm`, which launched the GEMMs, got none. No operator may
/// be credited with GPU time without enclosing a launch.
#[test]
fn only_operators_that_launched_gpu_work_are_credited_with_it() {
    for name in TRACES {
        let trace = shared_trace(name);
        let o = operators(&trace, usize::MAX);
        let launching = launching_operators(name);
        for s in &o.by_gpu_time {
            assert!(
                s.gpu_us.unwrap_or(0.0) == 0.0 || launching.contains(&s.name),
                "{name}: {} credited with {:?} µs of GPU work but encloses no launch",
                s.name,
                s.gpu_us
            );
        }
    }
}

//! The GPU time each CPU operator launched, on every shared trace: known exactly when some
//! GPU work carries an operator's External id (found here from the whole document), and
//! then given for every operator; unknown (`None`, no table) otherwise, never 0. An
//! operator credited with GPU time encloses, on its thread, a runtime call that launched
//! GPU work.

mod common;

use std::collections::HashSet;

use gpuscope::analysis::trace::operators::operators;
use gpuscope::trace::read_trace;

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
        let known = linked(name);
        assert_eq!(o.gpu_time_known, known, "{name}");
        assert!(
            o.by_self_time.iter().all(|s| s.gpu_us.is_some() == known),
            "{name}"
        );
        if !known {
            unknown += 1;
            assert!(o.by_gpu_time.is_empty(), "{name}");
        }
    }
    // The two sampled traces, rank0_nccl_negative_queue and AlexNet: their kernels'
    // External ids are their correlation ids.
    assert!(unknown >= 4, "{unknown}");
}

/// The names of the operators and annotations that enclose, on their own thread, a
/// runtime call whose correlation id is that of some GPU work: those that launched any.
fn launching_operators(name: &str) -> HashSet<String> {
    let doc: serde_json::Value = serde_json::from_str(&common::trace_text(name)).unwrap();
    let events = doc["traceEvents"].as_array().unwrap();
    let cat = |e: &serde_json::Value| e["cat"].as_str().unwrap_or("").to_owned();
    let gpu = [
        "kernel",
        "Kernel",
        "gpu_memcpy",
        "Memcpy",
        "gpu_memset",
        "Memset",
    ];
    let launched: HashSet<i64> = events
        .iter()
        .filter(|e| e["ph"] == "X" && gpu.contains(&cat(e).as_str()))
        .filter_map(|e| e["args"]["correlation"].as_i64())
        .collect();
    let thread = |e: &serde_json::Value| (e["pid"].to_string(), e["tid"].to_string());
    let time = |v: &serde_json::Value| v.as_f64().unwrap_or(0.0);
    // Per thread: (start, end, 0 for an operator / 1 for a launch, name).
    let mut by_thread: std::collections::HashMap<_, Vec<(f64, f64, u8, String)>> =
        Default::default();
    for e in events.iter().filter(|e| e["ph"] == "X") {
        let c = cat(e);
        let (ts, dur) = (time(&e["ts"]), time(&e["dur"]));
        let kind = if ["cpu_op", "Operator", "user_annotation"].contains(&c.as_str()) {
            0
        } else if ["cuda_runtime", "Runtime", "cuda_driver"].contains(&c.as_str())
            && e["args"]["correlation"]
                .as_i64()
                .is_some_and(|id| launched.contains(&id))
        {
            1
        } else {
            continue;
        };
        let name = e["name"].as_str().unwrap_or("").to_owned();
        by_thread
            .entry(thread(e))
            .or_default()
            .push((ts, ts + dur, kind, name));
    }
    let mut launching = HashSet::new();
    for mut list in by_thread.into_values() {
        // Operators before the launches they start with, the longest first.
        list.sort_by(|a, b| {
            (a.0, a.2)
                .partial_cmp(&(b.0, b.2))
                .unwrap()
                .then(b.1.partial_cmp(&a.1).unwrap())
        });
        let mut open: Vec<(f64, String)> = Vec::new();
        for (ts, end, kind, name) in list {
            open.retain(|(e, _)| *e >= ts);
            if kind == 0 {
                open.push((end, name));
            } else {
                for (e, op) in &open {
                    if *e >= end {
                        launching.insert(op.clone());
                    }
                }
            }
        }
    }
    launching
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

//! The GPU time each CPU operator launched, on every shared trace: known exactly when some
//! GPU work carries an operator's External id (found here from the whole document), and
//! then given for every operator; unknown (`None`, no table) otherwise, never 0.

mod common;

use std::collections::HashSet;

use gpuscope::analysis::trace::operators::operators;
use gpuscope::trace::read_trace;

use common::TRACES;

/// Whether the trace links GPU work to operators: it has no GPU work, or some of it has
/// the External id of a CPU operator or user annotation.
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
                args["External id"]
                    .as_i64()
                    .or(args["external id"].as_i64())
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
        let trace = read_trace(
            &common::shared_data(&format!("traces/{name}")),
            &mut |_, _| {},
        )
        .unwrap();
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
    // The two sampled traces: their kernels' External ids are their correlation ids.
    assert!(unknown >= 2, "{unknown}");
}

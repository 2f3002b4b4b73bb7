//! The step-time overview on the shared ResNet-50 pair (data README: the CPU spends 38–42 %
//! of each step in the DataLoader with 0 workers, 0.1–2.4 % with 4): the input-pipeline
//! verdict on the first and not on the second; and the verdict on runtime calls named by
//! what the busiest of them do, against the calls' time read from the traces' JSON.

mod common;

use gpuscope::analysis::trace::steps::{step_overview, Category, VerdictKind};
use gpuscope::formats::trace::read_trace;

fn overview(name: &str) -> gpuscope::analysis::trace::steps::StepOverview {
    let trace = read_trace(
        &common::shared_data(&format!("traces/{name}")),
        &mut |_, _| {},
    )
    .unwrap();
    step_overview(&trace).unwrap()
}

#[test]
fn zero_workers_starve_the_gpu_and_four_do_not() {
    let zero = overview("resnet50_v100_memory_workers0.json.gz");
    assert_eq!(zero.steps.len(), 6);
    for s in &zero.steps {
        let share = s.dataloader_cpu_percent();
        assert!((38.0..=42.0).contains(&share), "{}: {share}", s.name);
    }
    assert_eq!(zero.verdicts[0].kind, VerdictKind::InputPipeline);

    let four = overview("resnet50_v100_memory_workers4.json.gz");
    for s in &four.steps {
        let share = s.dataloader_cpu_percent();
        assert!((0.0..=2.5).contains(&share), "{}: {share}", s.name);
    }
    assert!(four
        .verdicts
        .iter()
        .all(|v| v.kind != VerdictKind::InputPipeline));
}

#[test]
fn each_step_is_split_whole() {
    for name in [
        "resnet50_v100_memory_workers0.json.gz",
        "rank0_nccl_data.json.gz",
    ] {
        for s in overview(name).steps {
            let sum: f64 = s.breakdown_us.iter().sum();
            assert!((sum - s.duration_us).abs() < 0.01, "{name} {}", s.name);
            assert!(s.breakdown_us.iter().all(|x| *x >= 0.0));
        }
    }
}

/// The runtime call with the most time inside the `ProfilerStep#N` windows of the shared
/// trace at `rel`, read from its JSON apart from the engine: (name, percent of the steps).
fn busiest_call(rel: &str) -> (String, f64) {
    let file = std::fs::File::open(common::shared_data(rel)).unwrap();
    let doc: serde_json::Value =
        serde_json::from_reader(flate2::read::GzDecoder::new(file)).unwrap();
    let events = doc["traceEvents"].as_array().unwrap();
    let span = |e: &serde_json::Value| {
        let ts = e["ts"].as_f64().unwrap();
        (ts, ts + e["dur"].as_f64().unwrap_or(0.0))
    };
    let steps: Vec<(f64, f64)> = events
        .iter()
        .filter(|e| e["cat"] != "gpu_user_annotation")
        .filter(|e| {
            e["name"]
                .as_str()
                .unwrap_or("")
                .starts_with("ProfilerStep#")
        })
        .map(span)
        .collect();
    let mut by_name: std::collections::BTreeMap<&str, f64> = Default::default();
    for e in events {
        if !matches!(e["cat"].as_str(), Some("cuda_runtime" | "cuda_driver")) {
            continue;
        }
        let (ts, end) = span(e);
        for &(a, b) in &steps {
            *by_name.entry(e["name"].as_str().unwrap()).or_default() +=
                (end.min(b) - ts.max(a)).max(0.0);
        }
    }
    let total: f64 = steps.iter().map(|(a, b)| b - a).sum();
    let (name, us) = by_name
        .into_iter()
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .unwrap();
    (name.to_owned(), us * 100.0 / total)
}

#[test]
fn runtime_time_is_named_by_what_its_calls_do() {
    // The torch.compile NCCL run spends half of each step in runtime calls, most of it in
    // cudaMemcpyAsync copies from pageable memory: waiting, not launching (it already
    // replays CUDA graphs). The ROCm and H200 runs spend theirs launching kernels.
    for (rel, want) in [
        (
            "traces/rank0_nccl_negative_queue.json.gz",
            VerdictKind::HostWaits,
        ),
        ("traces/amd_mi250_rocm.json.gz", VerdictKind::LaunchOverhead),
        (
            "gpu-h200/lm_clean/profiler_traces/1795675943334.pt.trace.json.gz",
            VerdictKind::LaunchOverhead,
        ),
    ] {
        let trace = read_trace(&common::shared_data(rel), &mut |_, _| {}).unwrap();
        let o = step_overview(&trace).unwrap();
        let runtime: Vec<_> = o.verdicts.iter().filter(|v| v.call.is_some()).collect();
        assert_eq!(runtime.len(), 1, "{rel}: {:?}", o.verdicts);
        let (call, share) = busiest_call(rel);
        assert_eq!(runtime[0].kind, want, "{rel}");
        assert_eq!(runtime[0].call.as_deref(), Some(call.as_str()), "{rel}");
        // That call alone is most of the runtime column.
        assert!(share > runtime[0].percent / 2.0, "{rel}: {call} {share}");
    }
}

#[test]
fn the_runtime_split_adds_up_to_the_runtime_column() {
    for name in common::TRACES {
        let trace = read_trace(
            &common::shared_data(&format!("traces/{name}")),
            &mut |_, _| {},
        )
        .unwrap();
        let Some(o) = step_overview(&trace) else {
            continue;
        };
        for s in o.steps.iter().chain([&o.mean]) {
            let sum: f64 = s.runtime_us.iter().sum();
            let runtime = s.breakdown_us[Category::Runtime as usize];
            assert!(
                (sum - runtime).abs() < 1e-6,
                "{name} {}: {sum} {runtime}",
                s.name
            );
        }
    }
}

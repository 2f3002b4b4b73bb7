//! The step-time overview on the shared ResNet-50 pair (data README: the CPU spends 38–42 %
//! of each step in the DataLoader with 0 workers, 0.1–2.4 % with 4): the input-pipeline
//! verdict on the first and not on the second; and the verdict on runtime calls named by
//! what the busiest of them do, against the calls' time read from the traces' JSON.
//! Communication named by its collective, and on a CPU-only trace the gloo collectives as
//! its communication.

use crate::common;

use gpuscope::analysis::trace::classify::CollectiveKind;
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

/// The JSON of the shared trace at `rel`, read apart from the engine.
fn json(rel: &str) -> serde_json::Value {
    let file = std::fs::File::open(common::shared_data(rel)).unwrap();
    serde_json::from_reader(flate2::read::GzDecoder::new(file)).unwrap()
}

/// An event's (start, end), µs.
fn span(e: &serde_json::Value) -> (f64, f64) {
    let ts = e["ts"].as_f64().unwrap();
    (ts, ts + e["dur"].as_f64().unwrap_or(0.0))
}

/// The CPU-side `ProfilerStep#N` windows of `events`, by start.
fn profiler_steps(events: &[serde_json::Value]) -> Vec<(f64, f64)> {
    let mut steps: Vec<(f64, f64)> = events
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
    steps.sort_by(|a, b| a.0.total_cmp(&b.0));
    steps
}

/// The runtime call with the most time inside the `ProfilerStep#N` windows of the shared
/// trace at `rel`, read from its JSON apart from the engine: (name, percent of the steps).
fn busiest_call(rel: &str) -> (String, f64) {
    let doc = json(rel);
    let events = doc["traceEvents"].as_array().unwrap();
    let steps = profiler_steps(events);
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

/// Merged, sorted intervals.
fn union(mut v: Vec<(f64, f64)>) -> Vec<(f64, f64)> {
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut out: Vec<(f64, f64)> = Vec::new();
    for (a, b) in v {
        match out.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

/// Per `ProfilerStep#N` of the trace at `rel`, read from its JSON apart from the engine: the
/// µs in which a runtime or driver call ran and no kernel, copy or memset did.
fn runtime_column(rel: &str) -> Vec<f64> {
    let doc = json(rel);
    let events = doc["traceEvents"].as_array().unwrap();
    let of = |cats: &[&str]| {
        union(
            events
                .iter()
                .filter(|e| e["ph"] == "X" && cats.contains(&e["cat"].as_str().unwrap_or("")))
                .map(span)
                .collect(),
        )
    };
    // Kineto's categories, and the older ones of the V100 traces.
    let (runtime, gpu) = (
        of(&["cuda_runtime", "cuda_driver", "Runtime"]),
        of(&[
            "kernel",
            "gpu_memcpy",
            "gpu_memset",
            "Kernel",
            "Memcpy",
            "Memset",
        ]),
    );
    let steps = profiler_steps(events);
    let clip = |v: &[(f64, f64)], (a, b): (f64, f64)| -> Vec<(f64, f64)> {
        v.iter()
            .filter(|x| x.1 > a && x.0 < b)
            .map(|x| (x.0.max(a), x.1.min(b)))
            .collect()
    };
    let len = |v: &[(f64, f64)]| v.iter().map(|x| x.1 - x.0).sum::<f64>();
    steps
        .iter()
        .map(|&w| {
            let r = clip(&runtime, w);
            let both: Vec<(f64, f64)> = r.iter().flat_map(|&x| clip(&gpu, x)).collect();
            len(&r) - len(&both)
        })
        .collect()
}

/// The runtime column and its split, against the column worked out from the JSON.
#[test]
fn the_runtime_split_adds_up_to_the_runtime_column() {
    for rel in [
        "traces/rank0_nccl_negative_queue.json.gz",
        "traces/amd_mi250_rocm.json.gz",
        "traces/resnet50_v100_memory_workers0.json.gz",
        "gpu-h200/lm_clean/profiler_traces/1795675943334.pt.trace.json.gz",
    ] {
        let trace = read_trace(&common::shared_data(rel), &mut |_, _| {}).unwrap();
        let o = step_overview(&trace).unwrap();
        let want = runtime_column(rel);
        assert_eq!(o.steps.len(), want.len(), "{rel}");
        for (s, want) in o.steps.iter().zip(want) {
            let split: f64 = s.runtime_us.iter().sum();
            let column = s.breakdown_us[Category::Runtime as usize];
            assert!(
                (column - want).abs() < 0.05,
                "{rel} {}: {column} {want}",
                s.name
            );
            assert!(
                (split - want).abs() < 0.05,
                "{rel} {}: {split} {want}",
                s.name
            );
        }
    }
}

/// The `ProfilerStep#N` windows of the trace at `rel` and, per step, the µs in which an
/// event `is` picks ran, read from its JSON apart from the engine.
fn column(rel: &str, is: impl Fn(&serde_json::Value) -> bool) -> Vec<f64> {
    let doc = json(rel);
    let events = doc["traceEvents"].as_array().unwrap();
    let busy = union(
        events
            .iter()
            .filter(|e| e["ph"] == "X" && is(e))
            .map(span)
            .collect(),
    );
    profiler_steps(events)
        .iter()
        .map(|&(a, b)| {
            busy.iter()
                .map(|&(s, e)| (e.min(b) - s.max(a)).max(0.0))
                .sum()
        })
        .collect()
}

#[test]
fn communication_is_named_by_its_collective() {
    // The sampled TorchRec pair: every NCCL kernel is a SendRecv (the sharded embeddings'
    // all-to-all), 26–28 % of each step on rank 0.
    let rel = "traces/sampled_rank0.json.gz";
    let doc = json(rel);
    let nccl: std::collections::BTreeSet<&str> = doc["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["cat"] == "kernel")
        .filter_map(|e| e["name"].as_str())
        .filter(|n| n.starts_with("nccl"))
        .map(|n| n.split('(').next().unwrap())
        .collect();
    assert_eq!(
        nccl.into_iter().collect::<Vec<_>>(),
        ["ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t"]
    );
    let o = overview("sampled_rank0.json.gz");
    let v = o
        .verdicts
        .iter()
        .find(|v| v.kind == VerdictKind::Communication)
        .expect("a communication verdict");
    assert_eq!(v.collective, Some(CollectiveKind::Exchange));
    assert!(v.advice.contains("all-to-all"), "{}", v.advice);
    assert!(!v.advice.contains("DDP"), "{}", v.advice);
}

#[test]
fn without_a_gpu_the_cpus_collectives_are_the_communication() {
    // A CPU-only trainer whose gloo all-reduces run on two threads beside the step.
    let rel = "traces/cpu_only_rank34.json.gz";
    let gloo = column(rel, |e| {
        e["name"].as_str().unwrap_or("").starts_with("gloo:")
    });
    let o = overview("cpu_only_rank34.json.gz");
    assert_eq!(o.steps.len(), gloo.len());
    for (s, us) in o.steps.iter().zip(&gloo) {
        assert!(*us > 0.5 * s.duration_us, "{}: {us}", s.name);
        let comm = s.breakdown_us[Category::Communication as usize];
        assert!((comm - us).abs() < 0.01, "{}: {comm} against {us}", s.name);
    }
    let v = o
        .verdicts
        .iter()
        .find(|v| v.kind == VerdictKind::Communication)
        .expect("a communication verdict");
    assert_eq!(v.collective, Some(CollectiveKind::AllReduce));
}

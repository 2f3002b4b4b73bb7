//! Trace health on the real traces of `shared/data`: each check against what the trace's
//! own JSON says (profile_memory, record_shapes, steps, graph launches), read here with
//! serde_json's DOM, not by the engine; and the conditions no shared trace has (dropped
//! kernels, Kineto's buffer warning, skewed clocks, ranks without metadata) made by taking
//! records out of a real trace, adding a line to it, shifting its clock or linking it under
//! another name.

use crate::common;

use std::collections::BTreeSet;

use gpuscope::analysis::trace::health::{dropped_kernels, health, HealthIssue, HealthKind};
use gpuscope::analysis::trace::scope::Clock;
use gpuscope::formats::trace::{load_traces, read_trace};
use gpuscope::model::trace::{Event, Events, Kind, Trace, TraceFile};
use gpuscope::{Format, Render};

use common::TRACES;

const H200: &str = "gpu-h200/lm_clean/profiler_traces/1795675943334.pt.trace.json.gz";

fn file(rel: &str) -> TraceFile {
    let path = common::shared_data(rel);
    let trace = read_trace(&path, &mut |_, _| {}).unwrap();
    TraceFile { path, trace }
}

fn find(issues: &[HealthIssue], kind: HealthKind) -> Option<&HealthIssue> {
    issues.iter().find(|i| i.kind == kind)
}

/// What the DOM of a trace says: whether it has `[memory]` events, CPU operators, any with
/// `Input Dims`, its distinct CPU-side profiler steps, its `cudaGraphLaunch` calls.
struct Said {
    memory: bool,
    operators: u64,
    shapes: bool,
    steps: BTreeSet<String>,
    graph_launches: u64,
}

fn said(doc: &serde_json::Value) -> Said {
    let events = doc["traceEvents"].as_array().unwrap();
    let cat = |e: &serde_json::Value| e["cat"].as_str().unwrap_or("").to_owned();
    let operators: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| e["ph"] == "X" && matches!(cat(e).as_str(), "cpu_op" | "Operator"))
        .collect();
    Said {
        memory: events
            .iter()
            .any(|e| e["ph"] == "i" && e["name"] == "[memory]"),
        operators: operators.len() as u64,
        shapes: operators.iter().any(|e| e["args"]["Input Dims"].is_array()),
        steps: events
            .iter()
            .filter(|e| e["ph"] == "X" && cat(e) != "gpu_user_annotation")
            .filter_map(|e| e["name"].as_str())
            .filter(|n| n.starts_with("ProfilerStep#"))
            .map(str::to_owned)
            .collect(),
        graph_launches: events
            .iter()
            .filter(|e| e["ph"] == "X" && e["name"] == "cudaGraphLaunch")
            .count() as u64,
    }
}

#[test]
fn each_shared_trace_reports_what_its_json_says() {
    for name in TRACES {
        let doc: serde_json::Value = serde_json::from_str(&common::trace_text(name)).unwrap();
        let s = said(&doc);
        let t = file(&format!("traces/{name}"));
        let issues = health(std::slice::from_ref(&t));
        assert!(
            issues.iter().all(|i| i.rank == Some(t.trace.rank)),
            "{name}: {issues:?}"
        );
        assert_eq!(
            find(&issues, HealthKind::NoMemoryEvents).is_some(),
            !s.memory,
            "{name}"
        );
        match find(&issues, HealthKind::NoShapes) {
            Some(i) => {
                assert!(!s.shapes && s.operators > 0, "{name}");
                assert_eq!(i.count, s.operators, "{name}");
                assert!(i.detail.contains("record_shapes=True"), "{name}");
            }
            None => assert!(s.shapes || s.operators == 0, "{name}"),
        }
        match find(&issues, HealthKind::SingleStep) {
            Some(i) => {
                assert!(s.steps.len() < 2, "{name}");
                assert_eq!(i.count, s.steps.len() as u64, "{name}");
                if let Some(step) = s.steps.first() {
                    assert!(i.detail.contains(step.as_str()), "{name}: {}", i.detail);
                }
            }
            None => assert!(s.steps.len() >= 2, "{name}"),
        }
        assert_eq!(
            find(&issues, HealthKind::CudaGraphs).map(|i| i.count),
            (s.graph_launches > 0).then_some(s.graph_launches),
            "{name}"
        );
        // No shared trace lost kernels: every launch of each has its kernel (CUPTI's
        // range-profiler trace has no correlation ids to match, and is not checked).
        assert!(
            find(&issues, HealthKind::DroppedKernels).is_none(),
            "{name}: {issues:?}"
        );
    }
}

#[test]
fn the_h200_trace_and_the_resnet_pair_are_healthy() {
    // Recorded with profile_memory, record_shapes and 3 (ResNet: 6) active steps.
    for rel in [
        H200,
        "traces/resnet50_v100_memory_workers0.json.gz",
        "traces/resnet50_v100_memory_workers4.json.gz",
    ] {
        let issues = health(&[file(rel)]);
        assert_eq!(issues, [], "{rel}");
    }
}

#[test]
fn graph_launches_say_how_much_gpu_work_no_operator_launched() {
    let name = "rank0_nccl_negative_queue.json.gz";
    let doc: serde_json::Value = serde_json::from_str(&common::trace_text(name)).unwrap();
    let events = doc["traceEvents"].as_array().unwrap();
    let graphs: BTreeSet<i64> = events
        .iter()
        .filter(|e| e["name"] == "cudaGraphLaunch")
        .map(|e| e["args"]["correlation"].as_i64().unwrap())
        .collect();
    let replayed: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| {
            matches!(
                e["cat"].as_str(),
                Some("kernel" | "gpu_memcpy" | "gpu_memset")
            )
        })
        .filter(|e| {
            e["args"]["correlation"]
                .as_i64()
                .is_some_and(|c| graphs.contains(&c))
        })
        .collect();
    let us: f64 = replayed.iter().map(|e| e["dur"].as_f64().unwrap()).sum();
    let issues = health(&[file(&format!("traces/{name}"))]);
    let graph = find(&issues, HealthKind::CudaGraphs).unwrap();
    assert_eq!(graph.count, 70);
    let want = format!(
        "replayed {} kernels, copies and memsets ({:.1} ms of GPU time)",
        replayed.len(),
        us / 1000.0
    );
    assert!(graph.detail.contains(&want), "{}", graph.detail);
}

/// `trace` without the events at `drop`.
fn without(trace: &Trace, drop: &BTreeSet<usize>) -> Trace {
    let e = &trace.events;
    let mut events = Events::default();
    for i in (0..e.len()).filter(|i| !drop.contains(i)) {
        events.push(Event {
            kind: e.kind[i],
            name: e.name[i],
            ts: e.ts[i],
            dur: e.dur[i],
            pid: e.pid[i],
            tid: e.tid[i],
            stream: e.stream[i],
            correlation: e.correlation[i],
            external_id: e.external_id[i],
            bytes: e.bytes[i],
            device: e.device[i],
            shapes: e.shapes[i],
        });
    }
    Trace {
        events,
        ..trace.clone()
    }
}

/// The kernels of `trace` launched by `cudaLaunchKernel`, in the order of their launches:
/// (launch index, kernel index).
fn launched_kernels(trace: &Trace) -> Vec<(usize, usize)> {
    let e = &trace.events;
    let launch = trace.names.find("cudaLaunchKernel").unwrap();
    let mut pairs: Vec<(usize, usize)> = (0..e.len())
        .filter(|&i| e.kind[i] == Kind::Runtime && e.name[i] == launch)
        .filter_map(|call| {
            let kernel = (0..e.len())
                .find(|&k| e.kind[k] == Kind::Kernel && e.correlation[k] == e.correlation[call])?;
            Some((call, kernel))
        })
        .collect();
    pairs.sort_by_key(|&(call, _)| e.ts[call]);
    pairs
}

#[test]
fn kernels_taken_out_of_a_real_trace_are_counted_as_dropped() {
    let t = file(H200);
    assert_eq!(dropped_kernels(&t.trace), 0);
    let pairs = launched_kernels(&t.trace);
    assert!(pairs.len() > 1000, "{}", pairs.len());
    // Five kernels from the middle of the trace, as a full CUPTI buffer loses them.
    let middle: BTreeSet<usize> = pairs[500..505].iter().map(|&(_, k)| k).collect();
    let damaged = without(&t.trace, &middle);
    assert_eq!(dropped_kernels(&damaged), 5);
    let issues = health(&[TraceFile {
        path: t.path.clone(),
        trace: damaged,
    }]);
    let dropped = find(&issues, HealthKind::DroppedKernels).unwrap();
    assert_eq!((dropped.count, dropped.rank), (5, Some(0)));
    assert!(dropped
        .detail
        .starts_with("5 kernel launches have no kernel"));

    // The last kernel launched: the profiler synchronised the device before it stopped
    // (the trace's last cudaDeviceSynchronize), so it had run inside the window.
    let &(last_call, last_kernel) = pairs.last().unwrap();
    let e = &t.trace.events;
    let sync = t.trace.names.find("cudaDeviceSynchronize").unwrap();
    let syncs: Vec<usize> = (0..e.len()).filter(|&i| e.name[i] == sync).collect();
    assert_eq!(syncs.len(), 1);
    assert!(e.end(last_call) <= e.ts[syncs[0]]);
    assert_eq!(
        dropped_kernels(&without(&t.trace, &BTreeSet::from([last_kernel]))),
        1
    );
    // Without that sync, work launched near the end may still have been queued when the
    // profiler stopped (this step's queue was deep: the last launch returned before other
    // recorded work began): not counted. The middle of the trace still is.
    let last_work_start = (0..e.len())
        .filter(|&i| e.kind[i].is_gpu() && i != last_kernel)
        .map(|i| e.ts[i])
        .max()
        .unwrap();
    assert!(e.end(last_call) < last_work_start);
    assert_eq!(
        dropped_kernels(&without(&t.trace, &BTreeSet::from([last_kernel, syncs[0]]))),
        0
    );
    let mut both = middle.clone();
    both.extend([last_kernel, syncs[0]]);
    assert_eq!(dropped_kernels(&without(&t.trace, &both)), 5);
}

#[test]
fn kinetos_buffer_warning_is_reported_even_without_a_missing_kernel() {
    // A real trace with the line Kineto logs when CUPTI's buffers run out.
    let text = common::trace_text("event_sync_multi_stream.json.gz");
    let warning = "WARNING:2024-04-11 13:30:02 3727853:3727853 CuptiActivityApi.cpp:181] \
                   Exceeded max GPU buffer count (33 >= 33) - terminating tracing";
    let text = text.replacen('{', &format!("{{\"WARNING\": [\"{warning}\"], "), 1);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("warned.json");
    std::fs::write(&path, text).unwrap();
    let trace = read_trace(&path, &mut |_, _| {}).unwrap();
    // With the INFO line of record counts the trace already had.
    assert_eq!(trace.kineto_log.len(), 2);
    assert_eq!(trace.kineto_log[0], warning);
    let issues = health(&[TraceFile { path, trace }]);
    let dropped = find(&issues, HealthKind::DroppedKernels).unwrap();
    assert_eq!(dropped.count, 0);
    assert!(
        dropped
            .detail
            .contains("(\"Exceeded max GPU buffer count (33 >= 33) - terminating tracing\")"),
        "{}",
        dropped.detail
    );
    // Record counts that say CUPTI did not stop early are no such line.
    let plain = health(&[file("traces/v100_rank0_ns_resolution.json.gz")]);
    assert!(find(&plain, HealthKind::DroppedKernels).is_none());
}

fn linked(links: &[(&str, &str)]) -> (tempfile::TempDir, Vec<TraceFile>) {
    let dir = tempfile::tempdir().unwrap();
    for (link, target) in links {
        std::os::unix::fs::symlink(
            common::shared_data(&format!("traces/{target}")),
            dir.path().join(link),
        )
        .unwrap();
    }
    let traces = load_traces(dir.path(), &mut |_, _| {}).unwrap().traces;
    (dir, traces)
}

fn cross_rank(issues: &[HealthIssue]) -> Vec<&HealthIssue> {
    issues.iter().filter(|i| i.rank.is_none()).collect()
}

#[test]
fn ranks_without_metadata_are_reported_with_where_they_came_from() {
    // The ResNet-50 pair carries no distributedInfo: two runs a day apart, named as ranks.
    let (_dir, traces) = linked(&[
        ("rank0.json.gz", "resnet50_v100_memory_workers0.json.gz"),
        ("rank1.json.gz", "resnet50_v100_memory_workers4.json.gz"),
    ]);
    let issues = health(&traces);
    let meta = find(&issues, HealthKind::NoRankMetadata).unwrap();
    assert_eq!((meta.rank, meta.count), (None, 2));
    assert!(
        meta.detail
            .contains("taken from their file names (rank0.json.gz: rank 0, rank1.json.gz: rank 1)"),
        "{}",
        meta.detail
    );
    // Their six steps are ranks apart by a day: no timeline lines them up.
    let skew = find(&issues, HealthKind::ClockSkew).unwrap();
    assert_eq!((skew.rank, skew.count), (None, 6));
    assert_eq!(cross_rank(&issues).len(), 2);

    // Without ranks in the names both are rank 0: read as two cycles of one process.
    let (_dir, traces) = linked(&[
        ("a.json.gz", "resnet50_v100_memory_workers0.json.gz"),
        ("b.json.gz", "resnet50_v100_memory_workers4.json.gz"),
    ]);
    let issues = health(&traces);
    let cross = cross_rank(&issues);
    assert_eq!(cross.len(), 1, "{cross:?}");
    assert_eq!(
        (cross[0].kind, cross[0].count),
        (HealthKind::NoRankMetadata, 2)
    );
    assert!(cross[0]
        .detail
        .contains("assumed rank 0 (a.json.gz, b.json.gz)"));
    assert!(cross[0].detail.contains("successive profiler cycles"));

    // One trace alone: its rank labels nothing, so nothing is said.
    assert!(cross_rank(&health(&traces[..1])).is_empty());
}

#[test]
fn ranks_of_one_job_line_up_until_one_clock_is_shifted() {
    let (_dir, mut traces) = linked(&[
        ("sampled_rank0.json.gz", "sampled_rank0.json.gz"),
        ("sampled_rank1.json.gz", "sampled_rank1.json.gz"),
    ]);
    // Both steps start within 0.8 ms on the two ranks; each lasts about 610 ms.
    assert!(cross_rank(&health(&traces)).is_empty());
    let ms = 1_000_000;
    // 250 ms apart is within half a step; 350 ms is not.
    traces[1].trace.base_time_ns = 250 * ms;
    assert!(cross_rank(&health(&traces)).is_empty());
    traces[1].trace.base_time_ns = 350 * ms;
    let issues = health(&traces);
    let skew = find(&issues, HealthKind::ClockSkew).unwrap();
    assert_eq!(skew.count, 2);
    assert!(
        skew.detail
            .contains("2 of the 2 profiler steps on all 2 ranks"),
        "{}",
        skew.detail
    );
    // The same offset in the times themselves, undone by the time base: in line again.
    for ts in &mut traces[1].trace.events.ts {
        *ts -= 350 * ms;
    }
    assert!(cross_rank(&health(&traces)).is_empty());
}

fn rendered(traces: &[TraceFile], format: Format) -> String {
    let analysis = gpuscope::analyze_traces(traces, Clock::Exact, 5);
    let mut out = Vec::new();
    analysis.render(format, 80, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

#[test]
fn the_report_opens_with_the_health_in_text_json_and_html() {
    let healthy = rendered(&[file(H200)], Format::Text);
    assert!(
        healthy.starts_with("Trace health: nothing found"),
        "{healthy}"
    );
    let alex = [file("traces/alexnet_single_gpu.json.gz")];
    let text = rendered(&alex, Format::Text);
    let block: Vec<&str> = text.lines().take_while(|l| !l.is_empty()).collect();
    assert_eq!(block[0], "Trace health");
    for kind in ["no_memory_events", "no_shapes", "single_step"] {
        assert!(
            block
                .iter()
                .any(|l| l.starts_with(&format!("  {kind} (rank 0): "))),
            "{block:?}"
        );
    }
    assert!(block.iter().all(|l| l.chars().count() <= 80), "{block:?}");
    let doc: serde_json::Value = serde_json::from_str(&rendered(&alex, Format::Json)).unwrap();
    let words: Vec<&str> = doc["health"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["kind"].as_str().unwrap())
        .collect();
    assert_eq!(words, ["no_memory_events", "no_shapes", "single_step"]);
    assert_eq!(doc["health"][1]["count"], 359);
    assert_eq!(doc["health"][1]["rank"], 0);

    // Two traces without rank metadata both read as rank 0: the traces are counted,
    // the rank named once.
    let twice = [
        file("traces/alexnet_single_gpu.json.gz"),
        file("traces/alexnet_single_gpu.json.gz"),
    ];
    let text = rendered(&twice, Format::Text);
    assert!(
        text.contains("  no_memory_events (2 traces, rank 0): "),
        "{text}"
    );
    assert!(!text.contains("ranks 0, 0"), "{text}");

    // One trace without a profiler step, one with a single step: one kind, two messages,
    // each said for its own trace (not the first one's words for both).
    let steps = [
        file("traces/alexnet_single_gpu.json.gz"),
        file("traces/triton_example.json.gz"),
    ];
    let text = rendered(&steps, Format::Text);
    let said: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("  single_step ("))
        .collect();
    assert_eq!(said.len(), 2, "{text}");
    assert!(said[0].contains("No ProfilerStep#N"), "{text}");
    assert!(
        text.contains("One profiler step (ProfilerStep#1)"),
        "{text}"
    );

    // A file name is text from the input: the page escapes it.
    let (_dir, traces) = linked(&[
        ("rank0<b>.json.gz", "resnet50_v100_memory_workers0.json.gz"),
        ("rank1.json.gz", "resnet50_v100_memory_workers4.json.gz"),
    ]);
    let page = rendered(&traces, Format::Html);
    assert!(page.contains("<h2>Trace health</h2>"));
    assert!(page.contains("rank0&lt;b&gt;.json.gz: rank 0"), "escaped");
    assert!(!page.contains("rank0<b>"));
    let text = rendered(&traces, Format::Text);
    assert!(text.contains("  no_rank_metadata: 2 of 2 traces"), "{text}");
    assert!(
        text.contains("  clock_skew: 6 of the 6 profiler steps"),
        "{text}"
    );
}

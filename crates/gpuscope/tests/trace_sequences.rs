//! The patterns of GPU work that calls of one operator launch, on small traces written
//! for what the shared traces (checked against their JSON in the Python tests) do not
//! hold together: a matching call nested in another, or starting inside another and
//! ending after it; the same name on another thread; a call launching too few kernels;
//! work started out of launch order; a graph replay's kernels and a synchronous copy; a
//! GPU annotation of the same name (not a call); events left out of the file before the
//! marked ones, and a second `traceEvents` array; the positions the overlay marks.

use gpuscope::analysis::trace::scope::{scope, Clock};
use gpuscope::analysis::trace::sequences::sequence_table;
use gpuscope::formats::trace::read_trace;
use serde_json::json;

/// A CPU event of category `cat` on thread `tid`.
fn cpu(cat: &str, name: &str, tid: i64, ts: f64, dur: f64) -> serde_json::Value {
    json!({"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur,
           "args": {"External id": 1}})
}

/// A `cudaLaunchKernel` call on thread `tid`.
fn launch(tid: i64, ts: f64, correlation: i64) -> serde_json::Value {
    json!({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1,
           "tid": tid, "ts": ts, "dur": 2.0, "args": {"correlation": correlation}})
}

/// A kernel on stream 7.
fn kernel(name: &str, ts: f64, dur: f64, correlation: i64) -> serde_json::Value {
    json!({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur,
           "args": {"device": 0, "stream": 7, "correlation": correlation}})
}

#[test]
fn calls_are_grouped_by_the_work_they_launch() {
    let events = vec![
        // Left out by the reader: positions count it all the same.
        json!({"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "python"}}),
        // 1: thread 10, an outer linear with a nested one (part of the outer).
        cpu("cpu_op", "aten::linear", 10, 100.0, 100.0),
        cpu("cpu_op", "aten::linear", 10, 110.0, 30.0),
        launch(10, 115.0, 1),
        launch(10, 150.0, 2),
        launch(10, 160.0, 3),
        // 6: thread 10 again, the same three kernels.
        cpu("cpu_op", "aten::linear", 10, 300.0, 50.0),
        launch(10, 305.0, 4),
        launch(10, 310.0, 5),
        launch(10, 320.0, 6),
        // 10: thread 11, the same name; its kernels ran out of launch order.
        cpu("cpu_op", "aten::linear", 11, 100.0, 100.0),
        launch(11, 120.0, 7),
        launch(11, 130.0, 8),
        launch(11, 140.0, 9),
        // 14: too few kernels.
        cpu("cpu_op", "aten::linear", 11, 400.0, 20.0),
        launch(11, 405.0, 10),
        // 16: a launch on thread 10 outside every call.
        launch(10, 500.0, 11),
        kernel("gemm", 120.0, 10.0, 1),
        kernel("bias", 152.0, 5.0, 2),
        kernel("relu", 162.0, 5.0, 3),
        // 20
        kernel("gemm", 306.0, 10.0, 4),
        kernel("bias", 316.0, 5.0, 5),
        kernel("relu", 322.0, 5.0, 6),
        kernel("relu", 145.0, 1.0, 7),
        kernel("gemm", 135.0, 1.0, 8),
        // 25
        kernel("bias", 150.0, 1.0, 9),
        kernel("gemm", 410.0, 1.0, 10),
        kernel("gemm", 510.0, 1.0, 11),
    ];
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rank0.pt.trace.json");
    std::fs::write(&path, json!({ "traceEvents": events }).to_string()).unwrap();
    let trace = read_trace(&path, &mut |_, _| {}).unwrap();
    let scope = scope(&trace, Clock::Exact);
    let table = sequence_table(&trace, &scope, "linear", 3, 1);
    assert_eq!(
        table.pattern,
        ["aten::linear|gemm|bias|relu", "aten::linear|gemm|relu|bias"]
    );
    assert_eq!(table.count, [2, 1]);
    assert_eq!(table.gpu_duration, [40.0, 3.0]);
    assert_eq!(table.cpu_duration, [150.0, 100.0]);
    // The first pattern's calls, what ran inside them on their thread, and their kernels.
    let first: Vec<u32> = [1, 2, 3, 4, 5, 6, 7, 8, 9, 17, 18, 19, 20, 21, 22].into();
    assert_eq!(table.positions, [first, vec![]]);

    let one = sequence_table(&trace, &scope, "linear", 1, 0);
    assert_eq!(one.count, [2, 1, 1]);
    // Ties by pattern.
    assert_eq!(
        one.pattern[1..],
        ["aten::linear|gemm", "aten::linear|gemm|relu|bias"]
    );
    assert!(sequence_table(&trace, &scope, "conv", 1, 5)
        .pattern
        .is_empty());
}

/// A runtime call of `name` on thread 10.
fn call(name: &str, ts: f64, correlation: i64) -> serde_json::Value {
    json!({"ph": "X", "cat": "cuda_runtime", "name": name, "pid": 1, "tid": 10, "ts": ts,
           "dur": 2.0, "args": {"correlation": correlation}})
}

#[test]
fn graph_replays_copies_and_what_is_not_a_call() {
    let events = vec![
        // A graph replay starts two kernels; a synchronous copy its copy.
        cpu("cpu_op", "step", 10, 100.0, 100.0),
        call("cudaGraphLaunch", 110.0, 1),
        call("cudaMemcpy", 150.0, 2),
        kernel("a", 120.0, 5.0, 1),
        kernel("b", 126.0, 5.0, 1),
        json!({"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD", "pid": 0, "tid": 7,
               "ts": 152.0, "dur": 3.0,
               "args": {"device": 0, "stream": 7, "correlation": 2, "bytes": 64}}),
        // A match starting inside the first and ending after it is part of it.
        cpu("cpu_op", "step", 10, 190.0, 30.0),
        call("cudaLaunchKernel", 205.0, 3),
        kernel("c", 210.0, 1.0, 3),
        // A GPU annotation of the same name is not a call.
        json!({"ph": "X", "cat": "gpu_user_annotation", "name": "step", "pid": 0, "tid": 7,
               "ts": 100.0, "dur": 100.0}),
    ];
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rank0.pt.trace.json");
    std::fs::write(&path, json!({ "traceEvents": events }).to_string()).unwrap();
    let trace = read_trace(&path, &mut |_, _| {}).unwrap();
    let table = sequence_table(&trace, &scope(&trace, Clock::Exact), "step", 0, 1);
    assert_eq!(table.pattern, ["step|a|b|Memcpy HtoD"]);
    assert_eq!(table.count, [1]);
    assert_eq!(table.gpu_duration, [13.0]);
    assert_eq!(table.positions, [vec![0, 1, 2, 3, 4, 5]]);
}

#[test]
fn positions_count_across_two_event_arrays() {
    let first = vec![cpu("cpu_op", "op", 10, 1.0, 10.0), launch(10, 2.0, 1)];
    let second = vec![kernel("k", 3.0, 1.0, 1)];
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rank0.pt.trace.json");
    let text = format!(
        r#"{{"traceEvents": {}, "traceEvents": {}}}"#,
        json!(first),
        json!(second)
    );
    std::fs::write(&path, text).unwrap();
    let trace = read_trace(&path, &mut |_, _| {}).unwrap();
    assert_eq!(trace.positions, [0, 1, 2]);
    let table = sequence_table(&trace, &scope(&trace, Clock::Exact), "op", 1, 1);
    assert_eq!(table.positions, [vec![0, 1, 2]]);
}

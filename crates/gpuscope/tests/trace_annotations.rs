//! Which GPU user annotation each piece of GPU work ran under, on a small trace written
//! for the cases the shared traces (compared with HTA in the Python tests) do not hold:
//! nested ranges, a long kernel that overlaps a range a later, shorter one does not,
//! work without length at a range's start and end, a range without length, and a range
//! on another stream.

use gpuscope::analysis::trace::rows::annotated_work_table;
use gpuscope::analysis::trace::scope::{scope, Clock};
use gpuscope::formats::trace::read_trace;
use serde_json::json;

/// A `gpu_user_annotation` range on stream `tid`, as Kineto writes it (no `stream`).
fn range(name: &str, tid: i64, ts: f64, dur: f64) -> serde_json::Value {
    json!({"ph": "X", "cat": "gpu_user_annotation", "name": name, "pid": 0, "tid": tid,
           "ts": ts, "dur": dur, "args": {"External id": 1}})
}

/// A kernel on stream 7.
fn kernel(name: &str, ts: f64, dur: f64, correlation: i64) -> serde_json::Value {
    json!({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur,
           "args": {"device": 0, "stream": 7, "correlation": correlation}})
}

#[test]
fn work_gets_the_innermost_range_that_overlaps_it_on_its_stream() {
    let events = vec![
        range("outer", 7, 100.0, 1000.0),
        range("inner", 7, 200.0, 100.0),
        range("late", 7, 600.0, 50.0),
        range("empty", 7, 400.0, 0.0),
        range("other stream", 8, 100.0, 1000.0),
        // Overlaps outer, inner and late: late is the shortest.
        kernel("long", 150.0, 600.0, 1),
        // Starts after "long" and ends before inner starts: outer only.
        kernel("short", 160.0, 10.0, 2),
        // Without length, at inner's end (half-open: not inner's) and at its start.
        kernel("at inner's end", 300.0, 0.0, 3),
        kernel("at inner's start", 200.0, 0.0, 4),
        // Across the range without length, which holds nothing.
        kernel("across empty", 390.0, 20.0, 5),
        // After every range.
        kernel("after", 2000.0, 10.0, 6),
    ];
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rank0.pt.trace.json");
    std::fs::write(&path, json!({ "traceEvents": events }).to_string()).unwrap();
    let trace = read_trace(&path, &mut |_, _| {}).unwrap();
    let table = annotated_work_table(&trace, &scope(&trace, Clock::Exact), 0).unwrap();
    let got: Vec<(&str, &str)> = table
        .name
        .iter()
        .zip(&table.user_annotation)
        .map(|(n, a)| (n.as_str(), a.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            ("long", "late"),
            ("short", "outer"),
            ("at inner's end", "outer"),
            ("at inner's start", "inner"),
            ("across empty", "outer"),
            ("after", ""),
        ]
    );
    assert_eq!(table.correlation, [1, 2, 3, 4, 5, 6]);
    assert_eq!(table.category, ["kernel"; 6]);
}

#[test]
fn a_trace_without_gpu_ranges_has_no_table() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rank0.pt.trace.json");
    let events = vec![kernel("k", 10.0, 5.0, 1)];
    std::fs::write(&path, json!({ "traceEvents": events }).to_string()).unwrap();
    let trace = read_trace(&path, &mut |_, _| {}).unwrap();
    assert!(annotated_work_table(&trace, &scope(&trace, Clock::Exact), 0).is_none());
}

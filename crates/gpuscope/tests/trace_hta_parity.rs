//! Parity with Holistic Trace Analysis 0.5 on the shared real traces: the temporal and
//! kernel-type breakdowns agree with `hta_reference.json` to 0.5 % or 1 µs.

mod common;

use gpuscope::analysis::trace::kernels::type_breakdown;
use gpuscope::analysis::trace::scope::{scope, Clock};
use gpuscope::analysis::trace::temporal::temporal;
use gpuscope::trace::read_trace;

fn reference() -> serde_json::Value {
    let text = std::fs::read_to_string(common::shared_data("traces/hta_reference.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn close(ours: f64, hta: f64) -> bool {
    (ours - hta).abs() <= 1.0 || (ours - hta).abs() <= hta.abs() * 0.005
}

#[test]
fn temporal_and_kernel_type_breakdowns_match_hta() {
    let reference = reference();
    let mut failures = Vec::new();
    let mut checked = 0;
    for (name, want) in reference.as_object().unwrap() {
        let Some(rows) = want["temporal"].as_array() else {
            continue; // HTA raised on this trace; tested elsewhere.
        };
        let trace = read_trace(
            &common::shared_data(&format!("traces/{name}")),
            &mut |_, _| {},
        )
        .unwrap();
        let s = scope(&trace, Clock::HtaRounded);
        let Some(t) = temporal(&trace, &s) else {
            failures.push(format!("{name}: no GPU work found"));
            continue;
        };
        let hta = &rows[0];
        for (ours, key) in [
            (t.kernel_time_us, "kernel_time(us)"),
            (t.idle_time_us, "idle_time(us)"),
            (t.compute_time_us, "compute_time(us)"),
            (t.non_compute_time_us, "non_compute_time(us)"),
        ] {
            let theirs = hta[key].as_f64().unwrap();
            if !close(ours, theirs) {
                failures.push(format!("{name} {key}: ours {ours:.1}, HTA {theirs:.1}"));
            }
        }
        let types = type_breakdown(&trace, &s);
        for row in want["kernel_types"].as_array().unwrap() {
            let label = row["kernel_type"].as_str().unwrap();
            let theirs = row["sum"].as_f64().unwrap();
            let ours = types
                .iter()
                .find(|t| t.kernel_type == label)
                .map_or(0.0, |t| t.sum_us);
            if !close(ours, theirs) {
                failures.push(format!("{name} {label}: ours {ours:.1}, HTA {theirs:.1}"));
            }
        }
        checked += 1;
    }
    assert!(checked >= 8, "only {checked} traces with HTA figures");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Two kernels back to back, each 1.2 µs, at fractional-microsecond times. The GPU is busy
/// the whole 2.4 µs. HTA's rounding (start up, end down to whole µs) turns them into
/// [101, 101] and [102, 102]: one microsecond of "idle" and no compute at all. gpuscope's
/// default clock keeps the nanoseconds and says what happened.
#[test]
fn hta_rounding_turns_busy_time_into_idle_time() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("back_to_back.json");
    let kernel = |ts: f64| {
        format!(
            r#"{{"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": {ts},
                "dur": 1.2, "args": {{"stream": 7, "correlation": 1}}}}"#
        )
    };
    std::fs::write(
        &path,
        format!(
            r#"{{"traceEvents": [{}, {}]}}"#,
            kernel(100.4),
            kernel(101.6)
        ),
    )
    .unwrap();
    let trace = read_trace(&path, &mut |_, _| {}).unwrap();

    let exact = temporal(&trace, &scope(&trace, Clock::Exact)).unwrap();
    assert!((exact.kernel_time_us - 2.4).abs() < 1e-9);
    assert!(exact.idle_time_us.abs() < 1e-9);
    assert!((exact.compute_time_us - 2.4).abs() < 1e-9);

    let hta = temporal(&trace, &scope(&trace, Clock::HtaRounded)).unwrap();
    assert_eq!(hta.kernel_time_us, 1.0);
    assert_eq!(hta.idle_time_us, 1.0);
    assert_eq!(hta.compute_time_us, 0.0);
}

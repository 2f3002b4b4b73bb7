//! Parity with Holistic Trace Analysis 0.5 on the shared real traces: the temporal and
//! kernel-type breakdowns agree with `hta_reference.json` to 0.5 % or 1 µs.

mod common;

use gpuscope::analysis::trace::idle::idle_by_stream;
use gpuscope::analysis::trace::kernels::type_breakdown;
use gpuscope::analysis::trace::launches::{launches, Launch};
use gpuscope::analysis::trace::overlap::comm_comp_overlap_percent;
use gpuscope::analysis::trace::queue::queue_lengths;
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

fn reference_more() -> serde_json::Value {
    let text =
        std::fs::read_to_string(common::shared_data("traces/hta_reference_more.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

#[test]
fn idle_time_by_stream_and_comm_overlap_match_hta() {
    let reference = reference_more();
    let mut failures = Vec::new();
    for (name, want) in reference.as_object().unwrap() {
        let trace = read_trace(
            &common::shared_data(&format!("traces/{name}")),
            &mut |_, _| {},
        )
        .unwrap();
        let s = scope(&trace, Clock::HtaRounded);
        if let Some(rows) = want["idle_time_breakdown"].as_array() {
            let ours = idle_by_stream(&trace, &s);
            for row in rows {
                let stream = row["stream"].as_i64().unwrap();
                let Some(mine) = ours.iter().find(|x| x.stream == stream) else {
                    failures.push(format!("{name}: stream {stream} missing"));
                    continue;
                };
                let theirs = row["idle_time"].as_f64().unwrap();
                let value = match row["idle_category"].as_str().unwrap() {
                    "host_wait" => mine.host_wait_us,
                    "kernel_wait" => mine.kernel_wait_us,
                    _ => mine.other_us,
                };
                if !close(value, theirs) {
                    failures.push(format!(
                        "{name} stream {stream} {}: ours {value:.1}, HTA {theirs:.1}",
                        row["idle_category"]
                    ));
                }
            }
        }
        let hta_overlap = want["comm_comp_overlap"][0]["comp_comm_overlap_pctg"].as_f64();
        let ours = comm_comp_overlap_percent(&trace, &s);
        match (ours, hta_overlap) {
            (Some(a), Some(b)) if (a - b).abs() <= 0.01 => {}
            (None, None) => {}
            (a, b) => failures.push(format!("{name} overlap: ours {a:?}, HTA {b:?}")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// HTA pairs launches made by cudaLaunchKernel(ExC), cudaMemcpyAsync and cudaMemsetAsync
/// with their GPU work: the same pairs, the same CPU and GPU durations and the same launch
/// delay (from the end of the call, 0 when the work started before the call returned).
#[test]
fn launches_pair_as_in_hta() {
    const HTA_CALLS: [&str; 4] = [
        "cudaLaunchKernel",
        "cudaLaunchKernelExC",
        "cudaMemcpyAsync",
        "cudaMemsetAsync",
    ];
    let reference = reference_more();
    let mut failures = Vec::new();
    for (name, want) in reference.as_object().unwrap() {
        let stats = want["cuda_kernel_launch_stats"].as_array().unwrap();
        let row = |index: &str| stats.iter().find(|r| r["index"] == index).unwrap();
        let count = row("count")["cpu_duration"].as_f64().unwrap() as usize;
        let trace = read_trace(
            &common::shared_data(&format!("traces/{name}")),
            &mut |_, _| {},
        )
        .unwrap();
        let s = scope(&trace, Clock::HtaRounded);
        let ours: Vec<_> = launches(&trace, &s)
            .into_iter()
            .filter(|l| HTA_CALLS.contains(&trace.names.get(trace.events.name[l.call])))
            .collect();
        if ours.len() != count {
            failures.push(format!("{name}: {} launches, HTA {count}", ours.len()));
            continue;
        }
        if count == 0 {
            continue;
        }
        let mean = |f: &dyn Fn(&Launch) -> i64| {
            ours.iter().map(|l| f(l) as f64).sum::<f64>() / count as f64 / 1000.0
        };
        let cpu = mean(&|l| l.cpu_ns);
        let gpu = mean(&|l| l.gpu_ns);
        let delay = mean(&|l| l.delay_ns);
        let hta = |column: &str| row("mean")[column].as_f64().unwrap();
        for (what, ours, theirs) in [
            ("cpu_duration", cpu, hta("cpu_duration")),
            ("gpu_duration", gpu, hta("gpu_duration")),
            ("launch_delay", delay, hta("launch_delay")),
        ] {
            if !close(ours, theirs) {
                failures.push(format!(
                    "{name} mean {what}: ours {ours:.3}, HTA {theirs:.3}"
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn queue_lengths_match_hta() {
    let reference = reference_more();
    let mut failures = Vec::new();
    for (name, want) in reference.as_object().unwrap() {
        let Some(rows) = want["queue_length_summary"].as_array() else {
            continue;
        };
        let trace = read_trace(
            &common::shared_data(&format!("traces/{name}")),
            &mut |_, _| {},
        )
        .unwrap();
        let s = scope(&trace, Clock::HtaRounded);
        let ours = queue_lengths(&trace, &s, &launches(&trace, &s));
        for row in rows {
            let stream = row["('stream', '')"].as_i64().unwrap();
            let Some(q) = ours.iter().find(|q| q.stream == stream) else {
                failures.push(format!("{name}: stream {stream} missing"));
                continue;
            };
            let count = row["('queue_length', 'count')"].as_f64().unwrap() as usize;
            let mean = row["('queue_length', 'mean')"].as_f64().unwrap();
            let max = row["('queue_length', 'max')"].as_f64().unwrap() as i64;
            if q.count != count || (q.mean - mean).abs() > 0.01 * mean.max(1.0) || q.max != max {
                failures.push(format!(
                    "{name} stream {stream}: ours {} / {:.3} / {}, HTA {count} / {mean:.3} / {max}",
                    q.count, q.mean, q.max
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

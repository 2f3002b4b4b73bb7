//! Parity with Holistic Trace Analysis 0.5 on the shared real traces: the temporal and
//! kernel-type breakdowns agree with `hta_reference.json` to 0.5 % or 1 µs.

use crate::common;

use gpuscope::analysis::trace::idle::idle_by_stream;
use gpuscope::analysis::trace::kernels::type_breakdown;
use gpuscope::analysis::trace::launches::{launches, Launch};
use gpuscope::analysis::trace::overlap::comm_comp_overlap_percent;
use gpuscope::analysis::trace::queue::queue_lengths;
use gpuscope::analysis::trace::report::report;
use gpuscope::analysis::trace::scope::{scope, Clock};
use gpuscope::analysis::trace::temporal::temporal;
use gpuscope::formats::trace::{load_traces, read_trace};

fn reference() -> serde_json::Value {
    let text = std::fs::read_to_string(common::shared_data("traces/hta_reference.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn close(ours: f64, hta: f64) -> bool {
    (ours - hta).abs() <= 1.0 || (ours - hta).abs() <= hta.abs() * 0.005
}

/// CPU events of a trace that carry a `stream` argument, from its JSON: HTA counts
/// them as GPU work (it goes by `stream != -1` alone), gpuscope does not.
fn cpu_events_with_a_stream(name: &str) -> Vec<serde_json::Value> {
    let doc: serde_json::Value = serde_json::from_str(&common::trace_text(name)).unwrap();
    let cpu = [
        "cpu_op",
        "cuda_runtime",
        "cuda_driver",
        "user_annotation",
        "python_function",
    ];
    doc["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| cpu.contains(&e["cat"].as_str().unwrap_or("")) && e["args"]["stream"].is_i64())
        .cloned()
        .collect()
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
        if !cpu_events_with_a_stream(name).is_empty() {
            continue; // HTA counts a CPU event as GPU work: the test below.
        }
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

/// The Triton trace's launcher is a `cpu_op` with `args.stream: 0` that lasts 95.8 µs on
/// the CPU; its kernel is a 1.76 µs `kernel` event on stream 7. HTA's breakdown counts
/// the CPU op as GPU work; gpuscope's GPU time is the trace's GPU events alone, as its
/// JSON gives them.
#[test]
fn a_cpu_op_with_a_stream_argument_is_not_gpu_work() {
    let name = "triton_example.json.gz";
    let launchers = cpu_events_with_a_stream(name);
    assert_eq!(launchers.len(), 1, "{launchers:?}");
    let doc: serde_json::Value = serde_json::from_str(&common::trace_text(name)).unwrap();
    let gpu_us: f64 = doc["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| {
            ["kernel", "gpu_memcpy", "gpu_memset"].contains(&e["cat"].as_str().unwrap_or(""))
        })
        .map(|e| e["dur"].as_f64().unwrap())
        .sum();
    let trace = read_trace(
        &common::shared_data(&format!("traces/{name}")),
        &mut |_, _| {},
    )
    .unwrap();
    let t = temporal(&trace, &scope(&trace, Clock::Exact)).unwrap();
    assert!(
        (t.kernel_time_us - gpu_us).abs() < 1e-6,
        "{} vs {gpu_us}",
        t.kernel_time_us
    );
    let hta = &reference()[name]["temporal"][0]["kernel_time(us)"];
    assert!(
        hta.as_f64().unwrap() > 90.0,
        "HTA counted the launcher: {hta}"
    );
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

/// What a torch.compile trace from an H200 showed: kernels and memsets of 0.67–0.74 µs at
/// fractional-microsecond times, whose start HTA rounds up past their end rounded down.
/// On one stream, in µs: gemm 100.0–105.0, a memset 105.2–105.9 (HTA: 106–105), fill
/// 106.3–106.97 (HTA: 107–106), a memset 107.1–107.84 (HTA: 108–107), gemm 108.0–112.0.
/// HTA's union keeps the first memset's negative microsecond, which comes off the busy
/// time but not off compute: non-compute −1 µs. gpuscope keeps the other figures and
/// says 0.
#[test]
fn sub_microsecond_work_gives_no_negative_figure_under_hta_rounding() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("compiled.json");
    // Microseconds since a real trace's clock origin, printed to the nanosecond.
    let ts = |ns: i64| {
        let at = 4_818_916_991_000_000 + ns;
        format!("{}.{:03}", at / 1000, at % 1000)
    };
    let work = |cat: &str, name: &str, start_ns: i64, dur: &str| {
        format!(
            r#"{{"ph": "X", "cat": "{cat}", "name": "{name}", "pid": 0, "tid": 7,
                "ts": {}, "dur": {dur}, "args": {{"stream": 7}}}}"#,
            ts(start_ns)
        )
    };
    let events = [
        work("kernel", "gemm", 100_000, "5.0"),
        work("gpu_memset", "Memset (Device)", 105_200, "0.7"),
        work("kernel", "fill", 106_300, "0.67"),
        work("gpu_memset", "Memset (Device)", 107_100, "0.74"),
        work("kernel", "gemm", 108_000, "4.0"),
    ];
    std::fs::write(
        &path,
        format!(r#"{{"traceEvents": [{}]}}"#, events.join(", ")),
    )
    .unwrap();
    let loaded = load_traces(&path, &mut |_, _| {}).unwrap();

    // HTA's figures where they can be: span 12; busy 5 − 1 − 1 + 4 = 7 (the second memset
    // starts with the last gemm, which absorbs it) → idle 5, as HTA says; compute
    // 5 − 1 + 4 = 8; non-compute 7 − 8 = −1 → 0.
    let hta = &report(&loaded.traces, Clock::HtaRounded, 5)[0];
    let t = hta.temporal.as_ref().unwrap();
    assert_eq!(
        [t.kernel_time_us, t.idle_time_us, t.compute_time_us],
        [12.0, 5.0, 8.0]
    );
    assert!(t.non_compute_time_us == 0.0 && t.non_compute_time_us.is_sign_positive());
    assert!(t.non_compute_time_percent == 0.0 && t.non_compute_time_percent.is_sign_positive());
    assert!((t.idle_time_percent - 500.0 / 12.0).abs() < 1e-9);
    // No duration is negative: the three short ones are 0, not −1.
    for k in &hta.top_kernels {
        assert!(k.min_us >= 0.0 && k.sum_us >= 0.0, "{k:?}");
    }
    let memset = hta.top_kernels.iter().find(|k| k.name == "Memset (Device)");
    assert_eq!(memset.map(|k| (k.count, k.sum_us)), Some((2, 0.0)));
    assert_eq!(hta.notes.len(), 1, "{:?}", hta.notes);
    assert!(
        hta.notes[0].starts_with("3 events shorter than 1 µs")
            && hta.notes[0].contains("clamped at 0"),
        "{}",
        hta.notes[0]
    );

    // The exact clock, by hand: busy 5 + 0.7 + 0.67 + 0.74 + 4 = 11.11 of 12; compute
    // 5 + 0.67 + 4 = 9.67; the memsets 1.44.
    let exact = &report(&loaded.traces, Clock::Exact, 5)[0];
    let t = exact.temporal.as_ref().unwrap();
    let want = [12.0, 0.89, 9.67, 1.44];
    let got = [
        t.kernel_time_us,
        t.idle_time_us,
        t.compute_time_us,
        t.non_compute_time_us,
    ];
    for (g, w) in got.iter().zip(want) {
        assert!((g - w).abs() < 1e-9, "{got:?} vs {want:?}");
    }
    assert!((t.non_compute_time_percent - 12.0).abs() < 1e-9);
    assert!(exact.notes.is_empty(), "{:?}", exact.notes);
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

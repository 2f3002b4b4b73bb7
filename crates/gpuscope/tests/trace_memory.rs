//! The memory timeline of `[memory]` events against the events themselves, read by these
//! tests from the whole JSON document: on the H200's trace, whose events carry the
//! allocator's `Total Allocated` and `Total Reserved`, the timeline is the allocator's own
//! count (what was allocated before the trace included); on a 2021 trace without them, it
//! is the events' running sum from the start of the trace.

use crate::common;

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use gpuscope::analysis::trace::device_memory::{device_memory, DeviceMemory};
use gpuscope::formats::trace::read_trace;

/// The H200 run's trace (README of the shared data: `gpu-h200/lm_clean`).
const H200_TRACE: &str = "gpu-h200/lm_clean/profiler_traces/1795675943334.pt.trace.json.gz";

/// What a device's `[memory]` events say, in time order.
#[derive(Default)]
struct Expected {
    running: i64,
    peak_running: i64,
    first_total_less_running: Option<i64>,
    max_total_allocated: Option<i64>,
    last_total_allocated: Option<i64>,
    max_total_reserved: Option<i64>,
}

fn expected(path: &Path) -> BTreeMap<String, Expected> {
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(path).unwrap())
        .read_to_string(&mut text)
        .unwrap();
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut events: Vec<&serde_json::Value> = doc["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "i" && e["name"] == "[memory]")
        .collect();
    events.sort_by(|a, b| {
        a["ts"]
            .as_f64()
            .unwrap()
            .total_cmp(&b["ts"].as_f64().unwrap())
    });
    let mut by_device: BTreeMap<String, Expected> = BTreeMap::new();
    for e in events {
        let args = &e["args"];
        let device = args["Device Id"].as_i64().unwrap();
        let name = if device >= 0 {
            format!("cuda:{device}")
        } else {
            "cpu".to_owned()
        };
        let x = by_device.entry(name).or_default();
        x.running += args["Bytes"].as_i64().unwrap();
        x.peak_running = x.peak_running.max(x.running);
        if let Some(total) = args["Total Allocated"].as_i64() {
            x.first_total_less_running.get_or_insert(total - x.running);
            x.max_total_allocated = x.max_total_allocated.max(Some(total));
            x.last_total_allocated = Some(total);
        }
        if device >= 0 {
            if let Some(reserved) = args["Total Reserved"].as_i64() {
                x.max_total_reserved = x.max_total_reserved.max(Some(reserved));
            }
        }
    }
    by_device
}

fn timelines(path: &Path) -> BTreeMap<String, DeviceMemory> {
    device_memory(&read_trace(path, &mut |_, _| {}).unwrap())
        .into_iter()
        .map(|m| (m.device.clone(), m))
        .collect()
}

#[test]
fn with_allocator_totals_the_timeline_is_the_allocators_own_count() {
    let path = common::shared_data(H200_TRACE);
    let expected = expected(&path);
    let ours = timelines(&path);
    assert_eq!(
        ours.keys().collect::<Vec<_>>(),
        expected.keys().collect::<Vec<_>>()
    );
    let gpu = &ours["cuda:0"];
    let want = &expected["cuda:0"];
    // The model and optimizer state were allocated before the profiler started: about
    // 0.9 GiB that a count from the start of the trace does not see.
    assert!(want.first_total_less_running.unwrap() > 900 << 20);
    assert_eq!(
        gpu.allocated_before_trace_bytes,
        want.first_total_less_running
    );
    assert_eq!(Some(gpu.peak_bytes), want.max_total_allocated);
    assert_eq!(Some(gpu.end_bytes), want.last_total_allocated);
    assert_eq!(gpu.peak_reserved_bytes, want.max_total_reserved);
    assert_eq!(
        gpu.timeline.iter().map(|p| p.1).max(),
        want.max_total_allocated
    );
    // The CPU's events carry a reserved count of 0, which says nothing.
    assert_eq!(ours["cpu"].peak_reserved_bytes, None);
}

#[test]
fn without_allocator_totals_the_timeline_counts_from_the_start_of_the_trace() {
    let path = common::shared_data("traces/resnet50_v100_memory_workers0.json.gz");
    let expected = expected(&path);
    let ours = timelines(&path);
    for (device, want) in &expected {
        let m = &ours[device];
        assert_eq!(want.max_total_allocated, None);
        assert_eq!(m.allocated_before_trace_bytes, None);
        assert_eq!(m.peak_reserved_bytes, None);
        assert_eq!(m.peak_bytes, want.peak_running, "{device}");
        assert_eq!(m.end_bytes, want.running, "{device}");
    }
}

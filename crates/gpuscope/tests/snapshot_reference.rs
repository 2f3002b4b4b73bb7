//! The shared real snapshots (recorded on GPUs) against `reference.json`, whose numbers
//! came from torch's own tooling on the same files.

use std::path::{Path, PathBuf};

use gpuscope::analysis::snapshot::{snapshot_report, Options};
use gpuscope::formats::snapshot::{read_snapshot, Parts};
use serde_json::Value;

fn shared() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/snapshots")
}

fn reference() -> Value {
    let text = std::fs::read_to_string(shared().join("reference.json")).expect("reference.json");
    serde_json::from_str(&text).expect("reference.json is JSON")
}

#[test]
fn every_reference_figure_matches_exactly() {
    let reference = reference();
    let files = reference.as_object().expect("an object per snapshot");
    assert!(files.len() >= 2);
    for (name, want) in files {
        let path = shared().join(name);
        let snapshot = read_snapshot(&path, Parts::All, &mut |_, _| {}).expect("reads");
        let report = snapshot_report(&snapshot, path.clone(), &Options::default());
        let got = serde_json::to_value(&report).expect("serialises");
        let stats = &got["stats"];
        for key in [
            "segments",
            "reserved_bytes",
            "allocated_bytes",
            "active_bytes",
            "requested_bytes",
            "block_counts",
            "block_bytes",
            "devices",
        ] {
            assert_eq!(stats[key], want[key], "{name}: stats.{key}");
        }
        let trace = &got["trace"];
        assert_eq!(trace["actions"], want["trace_actions"], "{name}: actions");
        for key in [
            "trace_live_delta_peak_bytes",
            "trace_net_delta_bytes",
            "allocated_before_trace_bytes",
            "peak_allocated_bytes",
        ] {
            assert_eq!(trace[key], want[key], "{name}: trace.{key}");
        }
        let largest = &got["devices"][0]["largest_alloc"];
        assert_eq!(largest["bytes"], want["largest_alloc_bytes"], "{name}");
        assert_eq!(
            largest["top_frame"], want["largest_alloc_top_frame"],
            "{name}"
        );
        // What was alive at the peak adds up to the peak.
        assert_eq!(
            got["peak"]["bytes"], want["peak_allocated_bytes"],
            "{name}: peak sites"
        );
        // What is alive now adds up to the active bytes.
        assert_eq!(
            got["now"]["bytes"], want["active_bytes"],
            "{name}: now sites"
        );
    }
}

/// Reading a snapshot folds its trace entries and frame lists into the model as the pickle
/// is read; the whole report must be what the model built from the plain pickle gives.
#[test]
fn folding_while_reading_gives_the_report_of_the_plain_pickle() {
    let options = Options {
        frames: 8,
        ..Options::default()
    };
    for name in reference()
        .as_object()
        .expect("an object per snapshot")
        .keys()
    {
        let path = shared().join(name);
        let folded = read_snapshot(&path, Parts::All, &mut |_, _| {}).expect("reads");
        let plain = gpuscope::formats::pickle::read_path(&path).expect("a pickle");
        let plain = gpuscope::formats::snapshot::from_pickle(&plain).expect("a snapshot");
        assert_eq!(
            folded.device_traces.len(),
            plain.device_traces.len(),
            "{name}"
        );
        let report = |s| serde_json::to_value(snapshot_report(s, path.clone(), &options)).unwrap();
        assert_eq!(report(&folded), report(&plain), "{name}");
    }
}

/// `--no-trace` stops at `device_traces`: what it reports of the dump must be what the
/// whole read reports (which the test above holds to `reference.json`), and the trace's
/// parts must be empty and flagged as not read.
#[test]
fn reading_only_the_segments_gives_the_same_state_at_the_dump() {
    for name in reference()
        .as_object()
        .expect("an object per snapshot")
        .keys()
    {
        let path = shared().join(name);
        let report = |parts| {
            let snapshot = read_snapshot(&path, parts, &mut |_, _| {}).expect("reads");
            serde_json::to_value(snapshot_report(
                &snapshot,
                path.clone(),
                &Options::default(),
            ))
            .unwrap()
        };
        let (whole, dump) = (report(Parts::All), report(Parts::Segments));
        assert_eq!(whole["trace_skipped"], false, "{name}");
        assert_eq!(dump["trace_skipped"], true, "{name}");
        for key in ["stats", "fragmentation", "now"] {
            assert_eq!(dump[key], whole[key], "{name}: {key}");
        }
        assert_ne!(whole["trace"], Value::Null, "{name}");
        for key in ["trace", "peak", "stacked"] {
            assert_eq!(dump[key], Value::Null, "{name}: {key}");
        }
        for key in ["devices", "never_freed", "churn", "ooms"] {
            assert_eq!(dump[key], serde_json::json!([]), "{name}: {key}");
        }
        assert_eq!(dump["allocator_settings"], serde_json::json!({}), "{name}");
    }
}

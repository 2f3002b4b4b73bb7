//! The diagnosis of whole run directories (`gpuscope report RUN`): on the real H200 runs
//! the findings the issue names, with figures checked against the raw files (torch's OOM
//! message, the trace's idle share, gpu.jsonl's utilisation read here with serde_json);
//! held out, run directories assembled from other models' real traces.

use std::path::{Path, PathBuf};

use gpuscope::analysis::diagnosis::finding::{Finding, FindingKind, FindingSource, Severity};
use gpuscope::analysis::diagnosis::Diagnosis;
use gpuscope::model::sources::Source;
use gpuscope::render::report::json;
use gpuscope::{read_run, report_runs};

use crate::common;

fn diagnose(path: &Path) -> Diagnosis {
    let run = read_run(path, &mut |_, _| {}).unwrap();
    report_runs(vec![run]).diagnoses.remove(0)
}

fn h200(run: &str) -> Diagnosis {
    diagnose(&common::shared_data(&format!("gpu-h200/{run}")))
}

fn find(d: &Diagnosis, kind: FindingKind) -> &Finding {
    d.findings
        .iter()
        .find(|f| f.kind == kind)
        .unwrap_or_else(|| panic!("no {kind} finding in {:#?}", d.findings))
}

/// Most severe first; every source that was read says something.
fn check_ranked_and_complete(d: &Diagnosis) {
    let severities: Vec<Severity> = d.findings.iter().map(|f| f.severity).collect();
    assert!(severities.is_sorted(), "{severities:?}");
    for found in &d.sources.sources.found {
        let source = FindingSource::from(found.source);
        assert!(
            d.findings.iter().any(|f| f.source == source),
            "{source} was read but said nothing"
        );
    }
}

#[test]
fn lm_clean_the_oom_the_idle_gpu_and_nvml_beside_the_trace() {
    let d = h200("lm_clean");
    check_ranked_and_complete(&d);
    let found: Vec<Source> = d.sources.sources.found.iter().map(|f| f.source).collect();
    assert_eq!(
        found,
        [Source::Memory, Source::Trace, Source::Snapshot, Source::Gpu]
    );

    // train_lm.py --oom asks for 1 << 44 bytes; torch's message says 8.92 GiB allocated.
    let oom = find(&d, FindingKind::Oom);
    assert_eq!(
        (oom.severity, oom.source),
        (Severity::High, FindingSource::Snapshot)
    );
    assert!(oom.summary.contains("16.0 TiB"), "{}", oom.summary);
    assert!(
        oom.summary.contains("8.92 GiB allocated"),
        "{}",
        oom.summary
    );
    assert!(oom.summary.contains("activations"), "{}", oom.summary);
    // The error came after the loop: its record's time is past the last scheduled one's,
    // whose counters (no OOM) the allocator finding reads.
    let records = std::fs::read_to_string(common::shared_data(
        "gpu-h200/lm_clean/profiles/memory.jsonl",
    ))
    .unwrap();
    let last: serde_json::Value = serde_json::from_str(records.lines().last().unwrap()).unwrap();
    let report = std::fs::read_to_string(common::shared_data(
        "gpu-h200/lm_clean/snapshots/oom.20261126_065229.txt",
    ))
    .unwrap();
    let (_, record) = report.split_once("\nrecord:\n").unwrap();
    let at_error: serde_json::Value = serde_json::from_str(record).unwrap();
    assert!(at_error["time"].as_f64() > last["time"].as_f64());
    assert!(
        oom.summary.starts_with(&format!(
            "out of memory at iteration {}, after the last memory record (iteration {})",
            at_error["iteration"], last["iteration"]
        )),
        "{}",
        oom.summary
    );
    // The shared copy keeps the report's text, not its pickle: said, not fatal.
    assert!(
        oom.summary.contains("is not beside the report"),
        "{}",
        oom.summary
    );

    // The trace: the GPU idles most of each step, launch-bound, with the largest gap.
    let steps = d
        .findings
        .iter()
        .find(|f| f.source == FindingSource::Trace && f.severity == Severity::High)
        .expect("a high trace finding");
    assert!(steps.summary.contains("idle 8"), "{}", steps.summary);
    assert!(steps.summary.contains("launch-bound"), "{}", steps.summary);
    assert!(
        steps.summary.contains("largest GPU gap"),
        "{}",
        steps.summary
    );
    assert!(!steps.next.is_empty());

    // NVML's figures, read here from gpu.jsonl, beside the trace's busy share.
    let text = std::fs::read_to_string(common::shared_data("gpu-h200/lm_clean/gpu.jsonl")).unwrap();
    let max_util = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter_map(|v| v["gpus"][0]["utilization_percent"].as_f64())
        .fold(0.0, f64::max);
    let util = find(&d, FindingKind::Utilization);
    assert_eq!(util.source, FindingSource::Gpu);
    assert_eq!(util.rank, None);
    assert!(
        util.summary.contains(&format!("{max_util:.0} % at most")),
        "{max_util} vs {}",
        util.summary
    );
    // The mean is the training loop's: the samples between the first and the last memory
    // record in which the command held GPU memory (its start-up and the oom_guard check
    // that follows it, mostly at 0 %, are left out).
    let records = std::fs::read_to_string(common::shared_data(
        "gpu-h200/lm_clean/profiles/memory.jsonl",
    ))
    .unwrap();
    let times: Vec<f64> = records
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["time"]
                .as_f64()
                .unwrap()
        })
        .collect();
    let (start, end) = (times[0], times[times.len() - 1]);
    let in_loop: Vec<f64> = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| (start..=end).contains(&v["time"].as_f64().unwrap()))
        .filter(|v| v["tree"]["gpu_memory_bytes"].as_u64() != Some(0))
        .filter_map(|v| v["gpus"][0]["utilization_percent"].as_f64())
        .collect();
    let mean = in_loop.iter().sum::<f64>() / in_loop.len() as f64;
    let loop_max = in_loop.iter().copied().fold(0.0, f64::max);
    assert!(
        util.summary.contains(&format!(
            "NVML utilisation {mean:.0} % on average, {loop_max:.0} % at most, over the {} \
             samples of the training loop",
            in_loop.len()
        )),
        "{mean} over {} vs {}",
        in_loop.len(),
        util.summary
    );
    assert!(util.summary.contains("the trace's kernels kept it busy"));

    // The records' peak joined with what the snapshot says was alive at its peak.
    let peak = find(&d, FindingKind::Peak);
    assert!(peak.summary.contains("train_lm.py:"), "{}", peak.summary);
}

#[test]
fn lm_leak_nan_the_leak_and_the_nonfinite_streak_lead() {
    let d = h200("lm_leak_nan");
    check_ranked_and_complete(&d);
    let leak = find(&d, FindingKind::Leak);
    assert_eq!(leak.severity, Severity::High);
    assert!(leak.summary.contains("activations"), "{}", leak.summary);
    // train_lm.py --nan-at 70 poisons iteration 70; the run goes on to 159.
    let nan = find(&d, FindingKind::Nonfinite);
    assert_eq!(
        (nan.severity, nan.source),
        (Severity::High, FindingSource::Nonfinite)
    );
    assert!(nan.summary.contains("iterations 70–159"), "{}", nan.summary);
    // The two high findings come before everything else.
    assert!(d.findings[..2].iter().all(|f| f.severity == Severity::High));
    // Absent sources are said with what writes them.
    let absent: Vec<Source> = d.sources.sources.absent.iter().map(|a| a.source).collect();
    assert!(absent.contains(&Source::Gpu) && absent.contains(&Source::Trace));
}

#[test]
fn the_fragmented_run_is_fragmented_and_the_expandable_one_under_pressure() {
    let fragmented = h200("lm_variable_capped");
    let allocator = find(&fragmented, FindingKind::Allocator);
    assert_eq!(allocator.severity, Severity::High, "{}", allocator.summary);
    assert!(allocator.next.contains("expandable_segments"));
    let expandable = h200("lm_variable_capped_expandable");
    let allocator = find(&expandable, FindingKind::Allocator);
    assert_eq!(
        allocator.severity,
        Severity::Medium,
        "{}",
        allocator.summary
    );
}

#[test]
fn the_json_document_holds_one_diagnosis_per_run_with_the_contract_fields() {
    let runs = ["lm_clean", "lm_leak_nan"].map(|r| {
        read_run(
            &common::shared_data(&format!("gpu-h200/{r}")),
            &mut |_, _| {},
        )
        .unwrap()
    });
    let report = report_runs(runs.into());
    let mut out = Vec::new();
    json(&report, &mut out).unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(doc["schema"], "gpuscope.report/1");
    assert_eq!(doc["runs"].as_array().unwrap().len(), 2);
    let diagnoses = doc["diagnoses"].as_array().unwrap();
    assert_eq!(diagnoses.len(), 2);
    for d in diagnoses {
        assert!(d["path"].is_string());
        assert!(d["sources"]["found"].is_array() && d["sources"]["absent"].is_array());
        for f in d["findings"].as_array().unwrap() {
            for key in [
                "source", "kind", "severity", "summary", "stake", "evidence", "next",
            ] {
                assert!(f.get(key).is_some(), "{key} missing in {f}");
            }
            assert!(f["next"].is_string());
            assert!(f["rank"].is_null() || f["rank"].is_u64());
            assert!(["high", "medium", "low", "info"].contains(&f["severity"].as_str().unwrap()));
        }
    }
}

/// A run directory holding only `traces` (real files of other models, linked in).
fn run_with_traces(traces: &[&str]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let traces_dir = dir.path().join("profiler_traces");
    std::fs::create_dir(&traces_dir).unwrap();
    for t in traces {
        std::os::unix::fs::symlink(
            common::shared_data(&format!("traces/{t}")),
            traces_dir.join(t),
        )
        .unwrap();
    }
    let path = dir.path().to_path_buf();
    (dir, path)
}

#[test]
fn held_out_resnet50_with_no_dataloader_workers_is_input_bound_and_with_four_is_not() {
    let (_keep, starved) = run_with_traces(&["resnet50_v100_memory_workers0.json.gz"]);
    let d = diagnose(&starved);
    check_ranked_and_complete(&d);
    assert_eq!(d.sources.memory_ranks, 0);
    let first = &d.findings[0];
    assert_eq!(first.source, FindingSource::Trace);
    assert!(first.severity <= Severity::Medium, "{first:?}");
    assert!(first.summary.contains("data loader"), "{}", first.summary);
    assert!(first.next.contains("num_workers"), "{}", first.next);

    let (_keep, fed) = run_with_traces(&["resnet50_v100_memory_workers4.json.gz"]);
    let d = diagnose(&fed);
    assert!(
        d.findings
            .iter()
            .all(|f| !f.summary.contains("data loader")),
        "{:#?}",
        d.findings
    );
}

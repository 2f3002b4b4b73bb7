//! The report's verdicts on real H200 runs (`../shared/data/gpu-h200/`): the allocator's
//! counters decide between a cache, fragmentation and memory pressure (README, "What the
//! allocator's counters say"); an impossible request is not counted; host memory that
//! keeps growing is named (README, "Host memory on a GPU run"); no autocast advice to a
//! run whose forward was not seen without it.

use crate::common;

use std::path::{Path, PathBuf};

use common::shared_data;
use gpuscope::analysis::report::advice::AdviceKind;
use gpuscope::analysis::report::allocator_verdict::Verdict;
use gpuscope::analysis::report::{report, RunReport};
use gpuscope::formats::runlog::load::load_run;
use gpuscope::model::memory::MemoryRecord;

fn run_report(dir: &Path) -> RunReport {
    let ranks = load_run(dir, &mut |_, _| {}).unwrap();
    let mut r = report(&[(dir.to_path_buf(), ranks)]);
    assert_eq!(r.runs.len(), 1);
    r.runs.remove(0)
}

fn h200(run: &str) -> RunReport {
    run_report(&shared_data(&format!("gpu-h200/{run}")))
}

fn kinds(run: &RunReport) -> Vec<AdviceKind> {
    run.advice.iter().map(|a| a.kind).collect()
}

/// Healthy: 37–49 % of reserved memory unallocated at every record, no retry, no OOM.
#[test]
fn a_healthy_run_is_a_cache_without_advice() {
    let run = h200("lm_clean");
    let f = run.fragmentation.as_ref().unwrap();
    assert_eq!(f.verdict, Verdict::Cache);
    assert!(f.percent > 40.0, "{}", f.percent);
    assert_eq!((f.alloc_retries, f.ooms), (Some(0), Some(0)));
    assert!(f.rose_at.is_empty());
    assert!(!kinds(&run).iter().any(|k| matches!(
        k,
        AdviceKind::ExpandableSegments
            | AdviceKind::FreeMemory
            | AdviceKind::RaiseMemoryCap
            | AdviceKind::CheckAllocatorCounters
    )));
    // Trained under bf16 autocast; its records predate the autocast field: no advice.
    assert!(!kinds(&run).contains(&AdviceKind::MixedPrecision));
}

/// The 16 TiB request that `oom_guard` caught after the last record: named as impossible.
#[test]
fn the_impossible_request_is_named_and_not_counted() {
    let run = h200("lm_clean");
    assert_eq!(run.oom_events.len(), 1);
    let e = &run.oom_events[0];
    assert!(e.impossible);
    assert_eq!(e.requested_bytes, Some(1 << 44));
    assert_eq!(e.iteration, Some(159));
    assert_eq!(e.device_total_bytes, Some(150_109_880_320));
}

/// The report names its snapshot by the path it had on the GPU machine; the shared copy
/// kept the text alone, so the snapshot is named and said to be missing. Once a file of
/// that name is beside the report, it is found there whatever the path said.
#[test]
fn the_oom_snapshot_is_found_by_name_beside_its_report() {
    let named = "runs/lm_clean/snapshots/oom.20261126_065229.pickle";
    let e = &h200("lm_clean").oom_events[0];
    let snapshot = e.snapshot.as_ref().unwrap();
    assert_eq!(
        (snapshot.named.as_str(), snapshot.path.as_ref()),
        (named, None)
    );

    let (_tmp, dir) = edited_copy("lm_clean", |_| {});
    let pickle = dir.join("snapshots/oom.20261126_065229.pickle");
    std::fs::copy(
        shared_data("gpu-h200/lm_clean/snapshots/iter30.pickle"),
        &pickle,
    )
    .unwrap();
    let e = &run_report(&dir).oom_events[0];
    assert_eq!(e.snapshot.as_ref().unwrap().path.as_ref(), Some(&pickle));
}

#[test]
fn the_capped_run_is_fragmented_with_its_retries_and_ooms() {
    let run = h200("lm_variable_capped");
    let f = run.fragmentation.as_ref().unwrap();
    assert_eq!(f.verdict, Verdict::Fragmented);
    assert_eq!((f.alloc_retries, f.ooms), (Some(20), Some(18)));
    assert_eq!(f.rose_at.first().map(|r| r.iteration), Some(15));
    let sum: (u64, u64) = f
        .rose_at
        .iter()
        .fold((0, 0), |(r, o), x| (r + x.alloc_retries, o + x.ooms));
    assert_eq!(sum, (20, 18));
    assert!(f
        .reason
        .contains("20 allocation retries and 18 out-of-memory errors"));
    let advice = run
        .advice
        .iter()
        .find(|a| a.kind == AdviceKind::ExpandableSegments)
        .expect("expandable segments advised");
    assert!(advice.advice.contains("expandable_segments:True"));
}

/// Expandable segments removed every OOM; 7 retries at the cap, no split blocks. The
/// run was capped by `set_per_process_memory_fraction` (its records predate the field),
/// and the device had most of its memory free where the counters rose: the limit is the
/// process's, and the advice is to raise it, not to shrink the model.
#[test]
fn the_same_run_with_expandable_segments_is_pressure_at_its_own_cap() {
    let run = h200("lm_variable_capped_expandable");
    let f = run.fragmentation.as_ref().unwrap();
    assert_eq!(f.verdict, Verdict::Pressure);
    assert_eq!((f.alloc_retries, f.ooms), (Some(7), Some(0)));
    assert_eq!(f.split_percent_at_rises, Some(0.0));
    let text = std::fs::read_to_string(shared_data(
        "gpu-h200/lm_variable_capped_expandable/profiles/memory.jsonl",
    ))
    .unwrap();
    let records: Vec<MemoryRecord> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let rose: Vec<i64> = f.rose_at.iter().map(|r| r.iteration).collect();
    let free = records
        .iter()
        .filter(|r| rose.contains(&r.iteration))
        .filter_map(|r| r.allocator.as_ref()?.device_free_bytes)
        .min()
        .unwrap();
    assert_eq!(f.device_free_at_rises_bytes, Some(free));
    let limit = f.process_limit().expect("the process's own limit");
    let gib = free as f64 / (1u64 << 30) as f64;
    assert!(
        limit.contains(&format!("{gib:.1} GiB of the device's")),
        "{limit}"
    );
    assert!(
        f.reason.contains("the process's, not the device's"),
        "{}",
        f.reason
    );
    assert!(kinds(&run).contains(&AdviceKind::RaiseMemoryCap));
    assert!(!kinds(&run).contains(&AdviceKind::FreeMemory));
    assert!(!kinds(&run).contains(&AdviceKind::ExpandableSegments));
}

/// The same records with the device nearly full where the counters rose: the device's
/// limit, and the advice to free memory; with a recorded cap below 1, the cap is named
/// whatever the device had free.
#[test]
fn the_limit_is_the_devices_when_the_device_was_full_and_no_cap_is_recorded() {
    let (_tmp, dir) = edited_copy("lm_variable_capped_expandable", |records| {
        for r in records {
            let a = r.allocator.as_mut().unwrap();
            a.device_free_bytes = Some(1 << 30);
        }
    });
    let run = run_report(&dir);
    let f = run.fragmentation.as_ref().unwrap();
    assert_eq!(f.process_limit(), None);
    assert!(kinds(&run).contains(&AdviceKind::FreeMemory));
    let (_tmp, dir) = edited_copy("lm_variable_capped_expandable", |records| {
        for r in records {
            let a = r.allocator.as_mut().unwrap();
            (a.device_free_bytes, a.memory_fraction) = (Some(1 << 30), Some(0.25));
        }
    });
    let f = run_report(&dir).fragmentation.unwrap();
    let total = f.device_total_bytes.unwrap() as f64 / (1u64 << 30) as f64;
    let limit = f.process_limit().expect("the recorded cap");
    assert_eq!(
        limit,
        format!(
            "torch.cuda.set_per_process_memory_fraction(0.25) caps it at {:.1} GiB",
            0.25 * total
        )
    );
}

/// Every other H200 run: no retries, a cache.
#[test]
fn the_other_gpu_runs_are_caches() {
    for name in ["hf", "lightning", "lm_leak_nan"] {
        let f = h200(name).fragmentation.unwrap();
        assert_eq!(f.verdict, Verdict::Cache, "{name}");
    }
}

/// lm_clean's heap grows 200 MB until iteration 60, then stays flat; the capped runs
/// grow about 4 MB per iteration to the end (variable input lengths).
#[test]
fn host_growth_is_named_only_where_it_goes_on() {
    let clean = h200("lm_clean").host_memory.unwrap();
    assert!(!clean.growing, "{}", clean.reason);
    for name in ["lm_variable_capped", "lm_variable_capped_expandable"] {
        let run = h200(name);
        let h = run.host_memory.as_ref().unwrap();
        assert!(h.growing, "{name}: {}", h.reason);
        let per_iteration = h.slope_bytes_per_1k_iters / 1000.0;
        assert!((3.0e6..5.0e6).contains(&per_iteration), "{per_iteration}");
        assert!(kinds(&run).contains(&AdviceKind::HostMemoryGrowth));
    }
    for name in ["lightning", "lm_leak_nan"] {
        let h = h200(name).host_memory.unwrap();
        assert!(!h.growing, "{name}: {}", h.reason);
    }
}

/// A copy of `run`'s directory with `edit` applied to its records.
fn edited_copy(run: &str, edit: impl Fn(&mut Vec<MemoryRecord>)) -> (tempfile::TempDir, PathBuf) {
    let src = shared_data(&format!("gpu-h200/{run}"));
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join(run);
    std::fs::create_dir_all(dir.join("profiles")).unwrap();
    let text = std::fs::read_to_string(src.join("profiles/memory.jsonl")).unwrap();
    let mut records: Vec<MemoryRecord> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    edit(&mut records);
    let lines: Vec<String> = records
        .iter()
        .map(|r| serde_json::to_string(r).unwrap())
        .collect();
    std::fs::write(dir.join("profiles/memory.jsonl"), lines.join("\n") + "\n").unwrap();
    if src.join("snapshots").is_dir() {
        std::fs::create_dir_all(dir.join("snapshots")).unwrap();
        for e in std::fs::read_dir(src.join("snapshots")).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "txt") {
                std::fs::copy(&p, dir.join("snapshots").join(p.file_name().unwrap())).unwrap();
            }
        }
    }
    (tmp, dir)
}

/// When the profiler is still open at the OOM, `oom_guard`'s record lands in the JSONL
/// with the counters raised by the impossible request: still a cache.
#[test]
fn an_impossible_request_in_the_records_does_not_make_pressure() {
    let report_text = std::fs::read_to_string(shared_data(
        "gpu-h200/lm_clean/snapshots/oom.20261126_065229.txt",
    ))
    .unwrap();
    let (_, json) = report_text.split_once("\nrecord:\n").unwrap();
    let at_oom: MemoryRecord = serde_json::from_str(json).unwrap();
    let (_tmp, dir) = edited_copy("lm_clean", |records| {
        // The guard's record is taken after the last scheduled one.
        let last_time = records.last().unwrap().time;
        let mut r = at_oom.clone();
        r.iteration = records.last().unwrap().iteration + 1;
        r.time = r.time.max(last_time + 0.001);
        records.push(r);
    });
    let run = run_report(&dir);
    let f = run.fragmentation.unwrap();
    assert_eq!(f.verdict, Verdict::Cache, "{}", f.reason);
    assert_eq!(
        (f.alloc_retries, f.ooms, f.impossible_ooms),
        (Some(0), Some(0), 1)
    );
    // Without the caught error's report, the same rise would be memory pressure.
    std::fs::remove_dir_all(dir.join("snapshots")).unwrap();
    let f = run_report(&dir).fragmentation.unwrap();
    assert_eq!(f.verdict, Verdict::Pressure);
    assert_eq!((f.alloc_retries, f.ooms), (Some(1), Some(1)));
}

/// Records without the counters (a text log, TensorBoard tags): no verdict, the ratio's
/// level and the sentence that says why.
#[test]
fn without_counters_there_is_no_verdict() {
    let (_tmp, dir) = edited_copy("lm_variable_capped", |records| {
        for r in records {
            let a = r.allocator.as_mut().unwrap();
            a.num_alloc_retries = None;
            a.num_ooms = None;
        }
    });
    let f = run_report(&dir).fragmentation.unwrap();
    assert_eq!(f.verdict, Verdict::None);
    assert_eq!((f.alloc_retries, f.ooms), (None, None));
    assert!(f.reason.contains("cannot be told apart"), "{}", f.reason);
}

/// A record that says the forward ran without autocast gets the mixed-precision advice;
/// one under bf16 autocast does not.
#[test]
fn autocast_advice_follows_the_record() {
    for (enabled, advised) in [(false, true), (true, false)] {
        let (_tmp, dir) = edited_copy("lm_clean", |records| {
            for r in records {
                r.autocast = Some(gpuscope::model::memory::Autocast {
                    enabled,
                    dtype: enabled.then(|| "bfloat16".to_owned()),
                });
            }
        });
        let run = run_report(&dir);
        assert_eq!(
            kinds(&run).contains(&AdviceKind::MixedPrecision),
            advised,
            "autocast {enabled}"
        );
    }
}

/// Activations are most of the memory of the Lightning and Hugging Face runs, but their
/// peaks are far from the H200's 140 GiB: no checkpointing advice (README, "Checkpointing
/// advice").
#[test]
fn runs_far_from_the_devices_limit_are_not_told_to_checkpoint() {
    for name in ["lightning", "hf"] {
        let text = std::fs::read_to_string(shared_data(&format!(
            "gpu-h200/{name}/profiles/memory.jsonl"
        )))
        .unwrap();
        let records: Vec<MemoryRecord> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let last = records.last().unwrap();
        let c = &last.categories_bytes;
        let share = c.activations.unwrap() as f64 / c.total() as f64;
        assert!(share > 0.5, "{name}: activations {share}");
        let peak = records
            .iter()
            .filter_map(|r| r.allocator.as_ref())
            .map(|a| a.peak_reserved_bytes.max(a.reserved_bytes))
            .max()
            .unwrap();
        let device = last.allocator.as_ref().unwrap().device_total_bytes.unwrap();
        assert!(peak * 10 < device, "{name}: {peak} of {device}");
        assert!(
            !kinds(&h200(name)).contains(&AdviceKind::Checkpointing),
            "{name}"
        );
    }
}

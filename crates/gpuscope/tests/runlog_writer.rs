//! The run-directory writer end to end: records with and without allocator figures go to
//! the JSONL, the `tensor_profile_<ts>.log` text log and TensorBoard, and read back as written.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use gpuscope::formats::runlog::{RunWriter, RunWriterOptions};
use gpuscope::formats::tfevents::{load_log_dir, LoadOptions};
use gpuscope::model::memory::{AllocatorStats, Categories, LargeTensor, MemoryRecord, SystemStats};
use gpuscope::model::tensorboard::DataKind;

const MIB: u64 = 1 << 20;

fn record(iteration: i64, allocator: Option<AllocatorStats>) -> MemoryRecord {
    MemoryRecord {
        iteration,
        time: 1_769_600_000.0 + iteration as f64,
        rank: 0,
        device: if allocator.is_some() { "cuda:0" } else { "cpu" }.into(),
        categories_bytes: Categories {
            parameters: Some(100 * MIB),
            gradients: Some(100 * MIB),
            optimizer_state: Some(200 * MIB),
            buffers: Some(MIB),
            activations: Some(50 * MIB + iteration as u64 * MIB),
            other: None,
        },
        modules_bytes: BTreeMap::from([("encoder".into(), 300 * MIB), ("head".into(), 100 * MIB)]),
        dtypes_bytes: BTreeMap::from([("float32".into(), 400 * MIB), ("int64".into(), MIB)]),
        tensor_count: 42,
        census_bytes: 401 * MIB,
        large_tensors: vec![LargeTensor {
            bytes: 100 * MIB,
            shape: vec![1024, 25600],
            dtype: "float32".into(),
            device: "cuda:0".into(),
            name: Some("encoder.weight".into()),
            category: "parameters".into(),
        }],
        large_tensor_count: 1,
        large_tensor_bytes: 100 * MIB,
        large_threshold_bytes: 100 * MIB,
        allocator,
        system: SystemStats {
            rss_bytes: Some(2048 * MIB),
            heap_bytes: Some(512 * MIB),
            cpu_percent: Some(97.5),
            ram_percent: Some(40.0),
            ram_total_bytes: Some(64 << 30),
        },
        losses: BTreeMap::from([("rendering".into(), 0.5), ("total".into(), 0.75)]),
        sections: BTreeMap::new(),
        gradients: None,
        autocast: None,
    }
}

fn cuda_figures() -> AllocatorStats {
    AllocatorStats {
        allocated_bytes: 600 * MIB,
        reserved_bytes: 800 * MIB,
        peak_allocated_bytes: 700 * MIB,
        peak_reserved_bytes: 800 * MIB,
        inactive_split_bytes: Some(40 * MIB),
        num_alloc_retries: Some(2),
        num_ooms: Some(0),
        device_total_bytes: Some(16384 * MIB),
        device_free_bytes: Some(15000 * MIB),
        alloc_conf: Some("expandable_segments:True".into()),
        expandable_segments: Some(true),
        memory_fraction: Some(0.5),
    }
}

fn write(run: &Path, records: &[MemoryRecord], rank: Option<u32>) {
    let options = RunWriterOptions {
        rank,
        ..RunWriterOptions::default()
    };
    let mut writer = RunWriter::create(run, &options).unwrap();
    for r in records {
        writer.write(r).unwrap();
    }
    writer.close().unwrap();
}

#[test]
fn jsonl_holds_each_record_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let records = [record(0, Some(cuda_figures())), record(50, None)];
    write(dir.path(), &records, None);
    let text = fs::read_to_string(dir.path().join("profiles/memory.jsonl")).unwrap();
    let read: Vec<MemoryRecord> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(read, records);
    let cpu: serde_json::Value = serde_json::from_str(text.lines().nth(1).unwrap()).unwrap();
    assert!(
        cpu["allocator"].is_null(),
        "no allocator on CPU is null, not zeros"
    );
    assert!(cpu["categories_bytes"]["other"].is_null());
}

#[test]
fn non_finite_losses_are_spelled_out_and_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let mut r = record(0, None);
    r.losses = BTreeMap::from([
        ("a".into(), f64::NAN),
        ("b".into(), f64::INFINITY),
        ("c".into(), f64::NEG_INFINITY),
        ("d".into(), 1.5),
    ]);
    write(dir.path(), &[r], None);
    let text = fs::read_to_string(dir.path().join("profiles/memory.jsonl")).unwrap();
    assert!(
        text.contains(r#""losses":{"a":"NaN","b":"Infinity","c":"-Infinity","d":1.5}"#),
        "{text}"
    );
    let back: MemoryRecord = serde_json::from_str(text.trim()).unwrap();
    assert!(back.losses["a"].is_nan());
    assert_eq!(back.losses["c"], f64::NEG_INFINITY);
    let old: MemoryRecord = serde_json::from_str(&text.replace(r#""NaN""#, "null")).unwrap();
    assert!(old.losses["a"].is_nan());
}

#[test]
fn text_log_blocks_carry_the_analyzers_figures() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        &[record(0, Some(cuda_figures())), record(50, None)],
        None,
    );
    let log = fs::read_dir(dir.path().join("profiles"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "log"))
        .unwrap();
    let name = log.file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        name.starts_with("tensor_profile_")
            && name.len() == "tensor_profile_20260128_140205.log".len()
    );
    let text = fs::read_to_string(&log).unwrap();
    let blocks: Vec<&str> = text.split("\n\n=====").collect();
    assert_eq!(blocks.len(), 2);
    // CUDA: allocator figures and the text log's fragmentation, (800 - 600) / 800 = 25 %.
    assert!(text.contains("Allocated: 600.00 MB | Reserved: 800.00 MB | Fragmentation: 25.0%"));
    // CPU: the census stands for both, 0 % fragmentation, and the block says so.
    assert!(text.contains("Allocated: 401.00 MB | Reserved: 401.00 MB | Fragmentation: 0.0%"));
    assert!(text.contains("Iteration 50 | "));
    assert!(text.contains("  optimizer_state:   200.00 MB"));
    assert!(text.contains("    100.00 MB | shape=(1024, 25600) | dtype=float32"));
}

#[test]
fn tensorboard_gets_the_tensor_profiling_tags_and_only_measured_figures() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), &[record(0, Some(cuda_figures()))], Some(1));
    write(&dir.path().join("cpu"), &[record(0, None)], None);

    let tb = load_log_dir(
        &dir.path().join("tensorboard/rank1"),
        &LoadOptions::default(),
        &mut |_, _| {},
    )
    .unwrap();
    let value = |tag: &str| {
        tb.series
            .iter()
            .find(|s| s.tag == tag)
            .unwrap_or_else(|| panic!("no {tag}"))
            .points[0]
            .value
    };
    assert_eq!(
        value("TensorProfiling/Tensor_Category/optimizer_state_MB"),
        200.0
    );
    assert_eq!(
        value("TensorProfiling/Tensor_Category/activations_MB"),
        50.0
    );
    assert_eq!(value("TensorProfiling/Tensor_DType/int64_MB"), 1.0);
    assert_eq!(value("TensorProfiling/Large_Tensors/count"), 1.0);
    assert_eq!(value("TensorProfiling/Large_Tensors/total_MB"), 100.0);
    assert_eq!(value("TensorProfiling/Tensor_Count/total"), 42.0);
    assert_eq!(value("TensorProfiling/fragmentation_percent"), 25.0);
    assert_eq!(value("TensorProfiling/Module/encoder_MB"), 300.0);
    assert_eq!(value("Memory/reserved_MB"), 800.0);
    assert_eq!(value("Memory/inactive_split_percent"), 5.0);
    assert_eq!(value("Memory/num_alloc_retries"), 2.0);
    assert_eq!(value("System/cpu_percent"), 97.5);
    assert_eq!(value("Loss/component_rendering"), 0.5);
    assert_eq!(value("Loss/total"), 0.75);
    assert!(tb.series.iter().any(|s| s.kind == DataKind::CustomScalars));
    assert!(tb.series.iter().all(|s| !s.tag.contains("component_total")));

    let cpu = load_log_dir(
        &dir.path().join("cpu/tensorboard"),
        &LoadOptions::default(),
        &mut |_, _| {},
    )
    .unwrap();
    for absent in [
        "TensorProfiling/fragmentation_percent",
        "Memory/allocated_MB",
        "Memory/num_ooms",
    ] {
        assert!(
            cpu.series.iter().all(|s| s.tag != absent),
            "{absent} on CPU"
        );
    }
    assert!(dir.path().join("profiles/memory.rank1.jsonl").exists());
}

#[test]
fn a_restarted_run_appends_to_its_jsonl() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), &[record(0, None)], None);
    write(dir.path(), &[record(50, None)], None);
    let text = fs::read_to_string(dir.path().join("profiles/memory.jsonl")).unwrap();
    assert_eq!(text.lines().count(), 2);
}

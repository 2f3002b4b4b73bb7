//! The Nsight Systems reader and summaries on the real export in shared/data/nsys (a CUDA
//! program on an RTX 4060 Ti, Nsight Systems 2026.1), checked against reference.json,
//! whose figures were computed from the same file by SQL apart from gpuscope; then on
//! copies changed the ways nsys versions and captures differ (a table not created, a column
//! renamed, tables this capture lacks added) and on files that are not exports at all.

use crate::common;

use std::path::{Path, PathBuf};

use gpuscope::analysis::nsys::{nsys_report, KernelNames, NsysReport};
use gpuscope::formats::nsys::read_export;
use rusqlite::Connection;
use serde_json::Value;

fn export_path() -> PathBuf {
    common::shared_data("nsys/cuda_add_rtx4060ti_nsys2026.sqlite")
}

fn reference() -> Value {
    let text = std::fs::read_to_string(common::shared_data("nsys/reference.json"))
        .expect("reference.json");
    serde_json::from_str(&text).expect("reference.json is JSON")
}

fn report(path: &Path, names: KernelNames) -> NsysReport {
    nsys_report(&read_export(path).expect("reads"), names)
}

/// ns from a report's µs, exact: the export's figures are whole nanoseconds.
fn ns(us: f64) -> i64 {
    (us * 1000.0).round() as i64
}

#[test]
fn kernels_match_the_reference() {
    let reference = reference();
    let r = report(&export_path(), KernelNames::Base);
    let got = r.kernels.expect("kernels");
    let want = reference["kernels"].as_array().expect("kernels");
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(want) {
        assert_eq!(g.name, w["name"].as_str().unwrap());
        assert_eq!(g.time.count, w["instances"].as_u64().unwrap());
        assert_eq!(ns(g.time.total_us), w["total_ns"].as_i64().unwrap());
        assert_eq!(ns(g.time.min_us), w["min_ns"].as_i64().unwrap());
        assert_eq!(ns(g.time.max_us), w["max_ns"].as_i64().unwrap());
        assert_eq!(g.time.time_percent, 100.0 / want.len() as f64);
    }
    // nsys's default names kernels by their demangled signature.
    let demangled = report(&export_path(), KernelNames::Demangled);
    let k = &demangled.kernels.expect("kernels")[0];
    assert!(k.name.starts_with("add_parallel("), "{}", k.name);
    assert_eq!((k.grid, k.block), (Some([97657, 1, 1]), Some([256, 1, 1])));
}

#[test]
fn memory_operations_match_the_reference() {
    let reference = reference();
    let labels = &reference["memcpy_kind_labels"];
    let r = report(&export_path(), KernelNames::Demangled);
    let by_time = r.memory_time.expect("memory by time");
    let by_size = r.memory_size.expect("memory by size");
    let want = reference["memcpy"].as_array().expect("memcpy");
    assert_eq!(by_time.len(), want.len());
    for w in want {
        let kind = w["copyKind"].to_string();
        let label = format!("[CUDA memcpy {}]", labels[&kind].as_str().unwrap());
        let row = by_time
            .iter()
            .find(|m| m.operation == label)
            .unwrap_or_else(|| panic!("{label} missing"));
        assert_eq!(row.time.count, w["count"].as_u64().unwrap());
        assert_eq!(ns(row.time.total_us), w["total_ns"].as_i64().unwrap());
        assert_eq!(row.size.total_bytes, w["total_bytes"].as_i64().unwrap());
    }
    // By time and by size, each sorted on its own total.
    let totals: Vec<i64> = by_size.iter().map(|m| m.size.total_bytes).collect();
    assert!(totals.windows(2).all(|w| w[0] >= w[1]), "{totals:?}");
    let shares: f64 = by_time.iter().map(|m| m.time.time_percent).sum();
    assert!((shares - 100.0).abs() < 1e-9);
}

#[test]
fn cuda_api_calls_match_the_reference() {
    let reference = reference();
    let r = report(&export_path(), KernelNames::Demangled);
    let got = r.cuda_api.expect("cuda api");
    let want = reference["runtime_api"].as_array().expect("runtime_api");
    assert_eq!(got.len(), want.len());
    // Same order: the reference is sorted by total time too.
    for (g, w) in got.iter().zip(want) {
        assert_eq!(g.symbol, w["name"].as_str().unwrap());
        assert_eq!(g.time.count, w["calls"].as_u64().unwrap());
        assert_eq!(ns(g.time.total_us), w["total_ns"].as_i64().unwrap());
    }
    let malloc = got.iter().find(|a| a.symbol == "cudaMalloc_v3020").unwrap();
    assert_eq!(malloc.name, "cudaMalloc");
}

#[test]
fn metadata_and_missing_parts_are_reported() {
    let reference = reference();
    let r = report(&export_path(), KernelNames::Demangled);
    assert_eq!(
        r.nsys_version.as_deref(),
        reference["meta"]["EXPORT_PRODUCT_VERSION"].as_str()
    );
    assert_eq!(
        r.export_schema_version.as_deref(),
        reference["meta"]["EXPORT_SCHEMA_VERSION"].as_str()
    );
    assert!(r.session_start_time.is_some_and(|t| t > 1.7e9));
    // This capture traced NVTX but opened no range, and ran without memory usage.
    assert!(r.nvtx.is_none() && r.memory_usage.is_none());
    assert_eq!(
        r.unavailable["nvtx"],
        "no NVTX ranges in this capture (table NVTX_EVENTS absent: nvtx was traced, but \
         the program opened no NVTX range)"
    );
    assert_eq!(
        r.unavailable["memory_usage"],
        "no GPU memory usage events in this capture (table CUDA_GPU_MEMORY_USAGE_EVENTS \
         absent: the capture ran without --cuda-memory-usage true)"
    );
    assert_eq!(r.unavailable.len(), 2, "{:?}", r.unavailable);
}

/// A writable copy of the real export, changed by `sql`.
fn changed_copy(dir: &tempfile::TempDir, sql: &str) -> PathBuf {
    let path = dir.path().join("changed.sqlite");
    std::fs::copy(export_path(), &path).expect("copy");
    let conn = Connection::open(&path).expect("open copy");
    conn.execute_batch(sql).expect("change copy");
    path
}

#[test]
fn a_capture_without_kernels_says_so_and_reports_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let path = changed_copy(
        &dir,
        "DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL;
         DELETE FROM META_DATA_CAPTURE WHERE name = 'CAPTURE_EVENT_TYPE' AND value = 'Cuda';",
    );
    let r = report(&path, KernelNames::Demangled);
    assert!(r.kernels.is_none());
    assert_eq!(
        r.unavailable["kernels"],
        "no CUDA kernels in this capture (table CUPTI_ACTIVITY_KIND_KERNEL absent: the \
         capture did not trace cuda)"
    );
    assert!(r.memory_time.is_some() && r.cuda_api.is_some());
}

#[test]
fn a_cuda_capture_where_no_kernel_ran_says_that() {
    let dir = tempfile::tempdir().unwrap();
    let path = changed_copy(&dir, "DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL;");
    let r = report(&path, KernelNames::Demangled);
    assert!(
        r.unavailable["kernels"].contains("cuda was traced, but no kernel ran"),
        "{}",
        r.unavailable["kernels"]
    );
}

#[test]
fn an_empty_table_is_not_an_absent_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = changed_copy(&dir, "DELETE FROM CUPTI_ACTIVITY_KIND_RUNTIME;");
    let r = report(&path, KernelNames::Demangled);
    assert_eq!(
        r.unavailable["cuda_api"],
        "no CUDA API calls in this capture (table CUPTI_ACTIVITY_KIND_RUNTIME is empty)"
    );
}

#[test]
fn a_renamed_column_names_the_column_and_the_nsys_version() {
    let dir = tempfile::tempdir().unwrap();
    let path = changed_copy(
        &dir,
        "ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL RENAME COLUMN demangledName TO kernelName;",
    );
    let r = report(&path, KernelNames::Demangled);
    let why = &r.unavailable["kernels"];
    assert!(
        why.starts_with(
            "CUDA kernels unreadable: table CUPTI_ACTIVITY_KIND_KERNEL has no column \
             demangledName (written by Nsight Systems 2026.1.1.204, export schema 3.24.14;"
        ),
        "{why}"
    );
    assert!(r.memory_time.is_some() && r.cuda_api.is_some());
}

#[test]
fn a_capture_without_memory_operations_names_both_tables() {
    let dir = tempfile::tempdir().unwrap();
    let path = changed_copy(&dir, "DROP TABLE CUPTI_ACTIVITY_KIND_MEMCPY;");
    let r = report(&path, KernelNames::Demangled);
    assert_eq!(
        r.unavailable["memory_time"],
        "no GPU memory operations in this capture (tables CUPTI_ACTIVITY_KIND_MEMCPY and \
         CUPTI_ACTIVITY_KIND_MEMSET absent: cuda was traced, but no memory was copied or set)"
    );
    assert_eq!(r.unavailable["memory_size"], r.unavailable["memory_time"]);
}

#[test]
fn an_optional_column_missing_degrades_gracefully() {
    let dir = tempfile::tempdir().unwrap();
    let path = changed_copy(
        &dir,
        "ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN shortName;
         ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN gridX;",
    );
    let r = report(&path, KernelNames::Base);
    let k = &r.kernels.expect("kernels")[0];
    // Without shortName the base name falls back to the demangled one.
    assert!(k.name.starts_with("add_parallel("));
    assert_eq!(k.grid, None);
    assert_eq!(k.time.count, 4);
}

#[test]
fn nvtx_ranges_are_summed_by_name_and_style_with_their_domain() {
    let dir = tempfile::tempdir().unwrap();
    // NVTX_EVENTS as Nsight Systems 2026.1 writes it (the columns read here); 59 push/pop,
    // 60 start/end, 75 domain creation. Process 7 in the serialized thread ids.
    let path = changed_copy(
        &dir,
        "CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER \
         NOT NULL, rangeId INTEGER, category INTEGER, color INTEGER, text TEXT, globalTid \
         INTEGER, endGlobalTid INTEGER, textId INTEGER, domainId INTEGER);
         INSERT INTO StringIds VALUES (900001, 'forward');
         INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, textId, domainId) VALUES
           (100, 400, 59, NULL, 117440512, 900001, 0),
           (500, 600, 59, NULL, 117440512, 900001, 0),
           (700, 800, 60, 'load', 117440512, NULL, 0),
           (0, NULL, 75, 'train', 117440512, NULL, 3),
           (1000, 1100, 59, 'step', 117440512, NULL, 3),
           (1200, NULL, 59, 'never closed', 117440512, NULL, 0);",
    );
    let r = report(&path, KernelNames::Demangled);
    let rows = r.nvtx.expect("nvtx");
    let names: Vec<(&str, String)> = rows
        .iter()
        .map(|n| (n.range.as_str(), format!("{:?}", n.style)))
        .collect();
    assert_eq!(
        names,
        [
            ("forward", "PushPop".to_owned()),
            ("load", "StartEnd".to_owned()),
            ("train:step", "PushPop".to_owned())
        ]
    );
    let forward = &rows[0].time;
    assert_eq!((forward.count, ns(forward.total_us)), (2, 400));
    assert_eq!((ns(forward.med_us), ns(forward.min_us)), (200, 100));
    assert_eq!(forward.time_percent, 400.0 * 100.0 / 600.0);
}

#[test]
fn memory_usage_follows_allocations_per_device() {
    let dir = tempfile::tempdir().unwrap();
    // CUDA_GPU_MEMORY_USAGE_EVENTS' columns as documented for Nsight Systems; memKind 1 is
    // pinned host memory and does not count, memoryOperationType 0 allocates, 1 frees.
    let path = changed_copy(
        &dir,
        "CREATE TABLE CUDA_GPU_MEMORY_USAGE_EVENTS (start INTEGER NOT NULL, globalPid INTEGER, \
         deviceId INTEGER, contextId INTEGER, address INTEGER, pc INTEGER, bytes INTEGER, \
         memKind INTEGER, memoryOperationType INTEGER, name INTEGER, correlationId INTEGER);
         INSERT INTO CUDA_GPU_MEMORY_USAGE_EVENTS (start, deviceId, bytes, memKind, memoryOperationType) VALUES
           (1000000, 0, 400000000, 2, 0),
           (2000000, 0, 400000000, 2, 0),
           (2500000, 0, 999999999, 1, 0),
           (3000000, 0, 400000000, 2, 1),
           (4000000, 0, 400000000, 2, 1);",
    );
    let r = report(&path, KernelNames::Demangled);
    let devices = r.memory_usage.expect("memory usage");
    assert_eq!(devices.len(), 1);
    let d = &devices[0];
    assert_eq!(
        (d.peak_bytes, d.peak_at_us, d.end_bytes),
        (800_000_000, 2000.0, 0)
    );
    assert_eq!((d.allocations, d.frees), (2, 2));
    assert_eq!(d.gpu.as_deref(), Some("NVIDIA GeForce RTX 4060 Ti"));
    assert_eq!(d.gpu_memory_bytes, Some(8_585_216_000));
}

#[test]
fn extreme_figures_do_not_overflow() {
    let dir = tempfile::tempdir().unwrap();
    let (min, max) = (i64::MIN, i64::MAX);
    let path = changed_copy(
        &dir,
        &format!(
            "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = {min}, end = {max};
             UPDATE CUPTI_ACTIVITY_KIND_MEMCPY SET bytes = {max};
             CREATE TABLE CUDA_GPU_MEMORY_USAGE_EVENTS (start INTEGER NOT NULL, deviceId \
             INTEGER, bytes INTEGER, memKind INTEGER, memoryOperationType INTEGER);
             INSERT INTO CUDA_GPU_MEMORY_USAGE_EVENTS VALUES
               ({min}, 0, {min}, 2, 1), ({max}, 0, {max}, 2, 0), (0, 0, {max}, 2, 0),
               (5, 0, 1, 2, 7), (6, NULL, NULL, 2, 0);"
        ),
    );
    let r = report(&path, KernelNames::Demangled);
    let kernel = &r.kernels.expect("kernels")[0];
    assert_eq!(ns(kernel.time.total_us), max);
    assert!(r.memory_size.is_some());
    let usage = &r.memory_usage.expect("memory usage")[0];
    assert!(usage.timeline.len() <= 400);
    // The unknown operation type and the event without a size are left out.
    assert_eq!(usage.allocations + usage.frees, 3);
}

#[test]
fn wide_text_puts_grid_block_and_name_on_the_row() {
    let r = report(&export_path(), KernelNames::Demangled);
    let mut out = Vec::new();
    gpuscope::render::nsys::text(&r, 160, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    let row = text
        .lines()
        .find(|l| l.contains("add_parallel("))
        .expect("kernel row");
    assert!(row.contains("536.542"), "{row}");
    assert!(
        row.contains("97657 1 1") && row.contains("256 1 1"),
        "{row}"
    );
    assert!(text.lines().all(|l| l.chars().count() <= 160));
}

fn read_error(path: &Path) -> String {
    match read_export(path) {
        Ok(_) => panic!("{} read as an export", path.display()),
        Err(e) => e.to_string(),
    }
}

#[test]
fn files_that_are_not_exports_are_refused_with_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    let text = dir.path().join("notes.sqlite");
    std::fs::write(&text, "this is not a database at all\n").unwrap();
    assert!(read_error(&text).contains("not an SQLite database"));

    let empty = dir.path().join("empty.sqlite");
    std::fs::write(&empty, "").unwrap();
    assert!(read_error(&empty).contains("an empty file"));

    let other = dir.path().join("other.sqlite");
    Connection::open(&other)
        .unwrap()
        .execute_batch("CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1);")
        .unwrap();
    assert!(read_error(&other).contains("not an Nsight Systems export"));

    let missing = dir.path().join("missing.sqlite");
    assert!(read_error(&missing).contains("missing.sqlite"));
}

#[test]
fn truncated_exports_fail_cleanly_at_every_length() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = std::fs::read(export_path()).unwrap();
    let path = dir.path().join("cut.sqlite");
    for len in [
        10,
        16,
        100,
        4096,
        8192,
        65_536,
        bytes.len() / 2,
        bytes.len() - 1,
    ] {
        std::fs::write(&path, &bytes[..len]).unwrap();
        let e = read_error(&path);
        assert!(
            e.contains("truncated") || e.contains("not an SQLite database"),
            "{len}: {e}"
        );
    }
}

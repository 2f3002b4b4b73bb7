//! A real `tensor_profile_<ts>.log` text log (shared/data/logs), read by gpuscope: the figures its
//! analyzer's regexes find (reference.json) come out the same, in bytes.

use crate::common;

use std::fs::File;
use std::io::BufReader;

use gpuscope::formats::runlog::read::read_text_log;

#[test]
fn text_log_matches_the_reference_figures() {
    let reference: serde_json::Value =
        serde_json::from_reader(File::open(common::shared_data("logs/reference.json")).unwrap())
            .unwrap();
    let expected = &reference["tensor_profile_20260128_140205.log"];
    let file = File::open(common::shared_data(
        "logs/tensor_profile_20260128_140205.log",
    ))
    .unwrap();
    let read = read_text_log(BufReader::new(file)).unwrap();
    assert!(
        read.skipped.is_empty(),
        "{:?}",
        &read.skipped[..read.skipped.len().min(3)]
    );
    assert_eq!(
        read.records.len() as u64,
        expected["records"].as_u64().unwrap()
    );
    let mib = (1u64 << 20) as f64;
    for (which, record) in [
        ("first", &read.records[0]),
        ("last", read.records.last().unwrap()),
    ] {
        let want = &expected[which];
        let allocator = record.allocator.as_ref().unwrap();
        assert_eq!(record.iteration, want["iteration"].as_i64().unwrap());
        assert_eq!(record.tensor_count, want["tensor_count"].as_u64().unwrap());
        let close = |bytes: u64, mb: &serde_json::Value| {
            (bytes as f64 / mib - mb.as_f64().unwrap()).abs() < 0.005 + 1e-9
        };
        assert!(
            close(allocator.allocated_bytes, &want["allocated_mb"]),
            "{which}"
        );
        assert!(
            close(allocator.reserved_bytes, &want["reserved_mb"]),
            "{which}"
        );
        assert!(
            close(
                record.categories_bytes.parameters.unwrap(),
                &want["parameters_mb"]
            ),
            "{which}"
        );
        // The text log prints fragmentation to one decimal.
        let fragmentation = allocator.fragmentation_percent();
        assert!((fragmentation - want["fragmentation_percent"].as_f64().unwrap()).abs() <= 0.05);
    }
}

/// The H200 run's text log against its JSONL, both written by gpuscope's memory profiler
/// for the same records: the census read back from the text (where no census line is,
/// but the data types sum it) is the JSONL's, to the text's rounding.
#[test]
fn a_gpu_text_log_reads_back_the_census_of_its_jsonl() {
    let dir = common::shared_data("gpu-h200/lm_clean/profiles");
    let log = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("tensor_profile_")
        })
        .expect("a tensor_profile log");
    let read = read_text_log(BufReader::new(File::open(log).unwrap())).unwrap();
    let jsonl = std::fs::read_to_string(dir.join("memory.jsonl")).unwrap();
    let census: std::collections::BTreeMap<i64, (u64, usize, u64)> = jsonl
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|r| r["census_bytes"].is_u64())
        .map(|r| {
            let allocated = r["allocator"]["allocated_bytes"].as_u64().unwrap();
            let dtypes = r["dtypes_bytes"].as_object().unwrap().len();
            let census = r["census_bytes"].as_u64().unwrap();
            (
                r["iteration"].as_i64().unwrap(),
                (census, dtypes, allocated),
            )
        })
        .collect();
    assert!(read.records.len() >= 10);
    for record in &read.records {
        let (want, dtypes, allocated) = census[&record.iteration];
        // Each data type's line is rounded to 0.01 MB.
        let slack = dtypes as f64 * 0.005 * (1u64 << 20) as f64;
        let got = record.census_bytes as f64;
        assert!(
            (got - want as f64).abs() <= slack,
            "iteration {}: {got} against {want}",
            record.iteration
        );
        // What the census misses on a GPU, the activations no tensor object owns.
        assert!(
            allocated > want + (50 << 20),
            "iteration {}",
            record.iteration
        );
    }
}

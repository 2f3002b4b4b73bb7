//! A real `tensor_profile_<ts>.log` text log (shared/data/logs), read by gpuscope: the figures its
//! analyzer's regexes find (reference.json) come out the same, in bytes.

mod common;

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

//! The process-wide memory figures follow a large allocation. In a test binary of their
//! own: the heap and RSS are process-wide, so tests allocating in parallel threads of the
//! same process would blur them.

use gpuscope::formats::process::{heap_in_use, ProcessSampler};

#[test]
fn heap_and_rss_follow_a_large_allocation() {
    let mut sampler = ProcessSampler::new();
    let heap_before = heap_in_use().unwrap();
    let rss_before = sampler.sample().rss_bytes.unwrap();
    let block = vec![7u8; 64 << 20];
    let heap_during = heap_in_use().unwrap();
    let rss_during = sampler.sample().rss_bytes.unwrap();
    std::hint::black_box(&block);
    assert!(
        heap_during >= heap_before + (64 << 20),
        "{heap_before} -> {heap_during}"
    );
    assert!(
        rss_during >= rss_before + (60 << 20),
        "{rss_before} -> {rss_during}"
    );
    drop(block);
    let heap_after = heap_in_use().unwrap();
    assert!(
        heap_after <= heap_during - (64 << 20),
        "{heap_during} -> {heap_after}"
    );
}

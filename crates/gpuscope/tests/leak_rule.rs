//! The leak rule (README, "Leak verdict") on positive and negative cases: a steady leak is
//! named; a sawtooth, a one-time step at a phase change, and growth that stops (the shared
//! text log densifies until iteration 3000, then stays flat) are not.

use crate::common;

use std::fs::File;
use std::io::BufReader;

use gpuscope::analysis::report::leak::analyze;
use gpuscope::formats::runlog::read::read_text_log;
use gpuscope::model::memory::{Categories, MemoryRecord};

const MIB: u64 = 1 << 20;

fn record(iteration: i64, parameters: u64, activations: u64) -> MemoryRecord {
    MemoryRecord {
        iteration,
        time: iteration as f64,
        device: "cpu".into(),
        categories_bytes: Categories {
            parameters: Some(parameters),
            gradients: Some(parameters),
            optimizer_state: Some(2 * parameters),
            buffers: Some(0),
            activations: Some(activations),
            other: None,
        },
        tensor_count: 10,
        census_bytes: 4 * parameters,
        large_threshold_bytes: 100 * MIB,
        ..MemoryRecord::default()
    }
}

fn run(activations: impl Fn(i64) -> u64) -> Vec<MemoryRecord> {
    (0..=40)
        .map(|i| record(i * 50, 100 * MIB, activations(i * 50)))
        .collect()
}

#[test]
fn a_steady_leak_is_named() {
    // 1 MiB more activations every 50 iterations: 20 MiB per 1000.
    let a = analyze(&run(|it| 50 * MIB + (it as u64 / 50) * MIB));
    assert!(a.leak.suspected, "{:?}", a.leak);
    assert_eq!(a.leak.category.as_deref(), Some("activations"));
    let t = &a.trends["activations"];
    assert!((t.slope_bytes_per_1k_iters - 20.0 * MIB as f64).abs() < 1.0);
    assert!(a.leak.reason.contains("intermediate tensors"));
    assert!(!a.trends["parameters"].sustained);
}

#[test]
fn a_sawtooth_is_not_a_leak() {
    // allocate for 4 records, free, again: big swings, no trend.
    let a = analyze(&run(|it| 50 * MIB + ((it as u64 / 50) % 5) * 40 * MIB));
    assert!(!a.leak.suspected, "{:?}", a.leak);
}

#[test]
fn a_one_time_step_is_not_a_leak() {
    // a phase change at iteration 1000 adds 300 MiB once, then nothing more.
    let a = analyze(&run(|it| if it < 1000 { 50 * MIB } else { 350 * MIB }));
    assert!(!a.leak.suspected, "{:?}", a.leak);
}

#[test]
fn growth_that_stops_is_not_a_leak() {
    let records: Vec<_> = (0..=40)
        .map(|i| {
            let it = i * 50;
            let params = 100 * MIB + (it.min(1200) as u64) * MIB / 10;
            record(it, params, 50 * MIB)
        })
        .collect();
    let a = analyze(&records);
    assert!(!a.leak.suspected, "{:?}", a.leak);
    assert!(a.trends["parameters"].slope_bytes_per_1k_iters > 0.0);
}

#[test]
fn the_shared_text_log_densifies_then_stays_flat() {
    let file = File::open(common::shared_data(
        "logs/tensor_profile_20260128_140205.log",
    ))
    .unwrap();
    let records = read_text_log(BufReader::new(file)).unwrap().records;
    let a = analyze(&records);
    assert!(!a.leak.suspected, "{:?}", a.leak);
    let p = &a.trends["parameters"];
    assert!(
        p.slope_bytes_per_1k_iters > 0.0,
        "parameters do grow over the run"
    );
    assert!(!p.sustained, "but not to the end: {p:?}");
}

#[test]
fn too_few_records_give_no_verdict() {
    let a = analyze(&run(|_| MIB)[..5]);
    assert!(!a.leak.judged && !a.leak.suspected);
    assert!(a.leak.reason.contains("needed"), "{}", a.leak.reason);
    assert!(analyze(&run(|_| MIB)).leak.judged);
}

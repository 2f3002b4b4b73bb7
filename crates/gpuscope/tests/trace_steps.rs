//! The step-time overview on the shared ResNet-50 pair (data README: the CPU spends 38–42 %
//! of each step in the DataLoader with 0 workers, 0.1–2.4 % with 4): the input-pipeline
//! verdict on the first and not on the second.

mod common;

use gpuscope::analysis::trace::steps::{step_overview, VerdictKind};
use gpuscope::formats::trace::read_trace;

fn overview(name: &str) -> gpuscope::analysis::trace::steps::StepOverview {
    let trace = read_trace(
        &common::shared_data(&format!("traces/{name}")),
        &mut |_, _| {},
    )
    .unwrap();
    step_overview(&trace).unwrap()
}

#[test]
fn zero_workers_starve_the_gpu_and_four_do_not() {
    let zero = overview("resnet50_v100_memory_workers0.json.gz");
    assert_eq!(zero.steps.len(), 6);
    for s in &zero.steps {
        let share = s.dataloader_cpu_percent();
        assert!((38.0..=42.0).contains(&share), "{}: {share}", s.name);
    }
    assert_eq!(zero.verdicts[0].kind, VerdictKind::InputPipeline);

    let four = overview("resnet50_v100_memory_workers4.json.gz");
    for s in &four.steps {
        let share = s.dataloader_cpu_percent();
        assert!((0.0..=2.5).contains(&share), "{}: {share}", s.name);
    }
    assert!(four
        .verdicts
        .iter()
        .all(|v| v.kind != VerdictKind::InputPipeline));
}

#[test]
fn each_step_is_split_whole() {
    for name in [
        "resnet50_v100_memory_workers0.json.gz",
        "rank0_nccl_data.json.gz",
    ] {
        for s in overview(name).steps {
            let sum: f64 = s.breakdown_us.iter().sum();
            assert!((sum - s.duration_us).abs() < 0.01, "{name} {}", s.name);
            assert!(s.breakdown_us.iter().all(|x| *x >= 0.0));
        }
    }
}

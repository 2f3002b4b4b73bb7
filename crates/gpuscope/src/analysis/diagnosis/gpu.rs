//! Findings of `gpu.jsonl`, the samples `gpuscope run` took: per GPU the training used,
//! NVML's utilisation while the training held memory there, set beside the trace's busy
//! time — and when the two disagree, a finding that says so rather than picking one.

use super::evidence::{Evidence, UtilizationEvidence};
use super::finding::{Anchor, Finding, FindingKind, FindingSource, Severity, Stake};
use super::RunInputs;
use crate::model::gpu::{GpuSample, Sample};
use crate::model::units::human_bytes;

/// Mean utilisation at or below this, percent, while the training held the GPU, is medium.
pub const LOW_UTILIZATION_PERCENT: f64 = 30.0;
/// NVML's mean utilisation and the trace's busy share further apart than this many points
/// are a disagreement.
pub const DISAGREEMENT_POINTS: f64 = 25.0;
/// Samples between the first and the last memory record needed to judge the training
/// loop by them alone.
pub const MIN_LOOP_SAMPLES: usize = 3;

pub(super) fn findings(run: &RunInputs) -> Vec<Finding> {
    if run.samples.is_empty() {
        return Vec::new();
    }
    let trace_busy = trace_busy_percent(run);
    let window = training_loop(run);
    let used: Vec<Finding> = gpu_indices(run.samples)
        .into_iter()
        .filter_map(|gpu| utilization(run.samples, gpu, trace_busy, window))
        .flatten()
        .collect();
    if !used.is_empty() {
        return used;
    }
    let peak_rss = run
        .samples
        .iter()
        .filter_map(|s| s.tree.as_ref()?.rss_bytes)
        .max();
    vec![Finding {
        source: FindingSource::Gpu,
        rank: None,
        kind: FindingKind::Utilization,
        severity: Severity::Info,
        summary: format!(
            "{} samples, and the training held memory on no GPU{}",
            run.samples.len(),
            peak_rss.map_or(String::new(), |r| format!(
                "; its processes peaked at {} resident",
                human_bytes(r)
            ))
        ),
        stake: Stake::None,
        evidence: Evidence::Utilization(UtilizationEvidence {
            samples: run.samples.len(),
            gpu: 0,
            mean_percent: None,
            max_percent: None,
            peak_memory_used_bytes: None,
            memory_total_bytes: None,
            trace_busy_percent: trace_busy,
        }),
        next: String::new(),
        anchor: Anchor::Gpu,
    }]
}

/// The traces' GPU busy share of their kernel span, mean over ranks.
fn trace_busy_percent(run: &RunInputs) -> Option<f64> {
    let busy: Vec<f64> = run
        .traces?
        .ranks
        .iter()
        .filter_map(|r| Some(100.0 - r.temporal.as_ref()?.idle_time_percent))
        .collect();
    (!busy.is_empty()).then(|| busy.iter().sum::<f64>() / busy.len() as f64)
}

/// The span of the memory records over every rank, Unix seconds: the training loop, where
/// the samples of the whole command also hold start-up, evaluation and what comes after.
fn training_loop(run: &RunInputs) -> Option<(f64, f64)> {
    run.ranks
        .iter()
        .map(|r| r.summary.times)
        .filter(|[a, b]| *a > 0.0 && b > a)
        .map(|[a, b]| (a, b))
        .reduce(|(x, y), (a, b)| (x.min(a), y.max(b)))
}

fn gpu_indices(samples: &[Sample]) -> Vec<u32> {
    let mut indices: Vec<u32> = samples
        .iter()
        .flat_map(|s| s.gpus.iter().map(|g| g.index))
        .collect();
    indices.sort_unstable();
    indices.dedup();
    indices
}

/// The samples of GPU `gpu` taken while the training held memory on it: the command's
/// processes had GPU memory (`gpuscope run`'s tree, when known) and the GPU's memory in use
/// was above the least of the run; with `window`, only those taken within it.
fn held(samples: &[Sample], gpu: u32, window: Option<(f64, f64)>) -> Vec<&GpuSample> {
    let of_gpu: Vec<(&Sample, &GpuSample)> = samples
        .iter()
        .filter_map(|s| Some((s, s.gpus.iter().find(|g| g.index == gpu)?)))
        .collect();
    let Some(least) = of_gpu.iter().filter_map(|(_, g)| g.memory_used_bytes).min() else {
        return Vec::new();
    };
    of_gpu
        .into_iter()
        .filter(|(s, g)| {
            let tree_holds = s.tree.as_ref().and_then(|t| t.gpu_memory_bytes) != Some(0);
            let within = window.is_none_or(|(start, end)| (start..=end).contains(&s.time));
            tree_holds && g.memory_used_bytes > Some(least) && within
        })
        .map(|(_, g)| g)
        .collect()
}

/// The samples of GPU `gpu` within the training loop's span when there are enough of
/// them, else every sample the training held memory in; and whether they are the loop's.
fn loop_samples(
    samples: &[Sample],
    gpu: u32,
    window: Option<(f64, f64)>,
) -> (Vec<&GpuSample>, bool) {
    let inside = held(samples, gpu, window);
    if window.is_some() && inside.len() >= MIN_LOOP_SAMPLES {
        (inside, true)
    } else {
        (held(samples, gpu, None), false)
    }
}

fn mean_percent(held: &[&GpuSample]) -> Option<f64> {
    let utils: Vec<f64> = held.iter().filter_map(|g| g.utilization_percent).collect();
    (!utils.is_empty()).then(|| utils.iter().sum::<f64>() / utils.len() as f64)
}

/// GPU `gpu`'s mean utilisation over the samples the utilisation finding reads (the
/// training loop's when there are enough).
pub(super) fn held_utilization(run: &RunInputs, gpu: u32) -> Option<f64> {
    mean_percent(&loop_samples(run.samples, gpu, training_loop(run)).0)
}

/// The finding of GPU `gpu`, when the training held memory on it in some sample: the
/// command's processes had memory there (`gpuscope run`'s tree), else its memory in use
/// rose above the least of the run.
fn utilization(
    samples: &[Sample],
    gpu: u32,
    trace_busy: Option<f64>,
    window: Option<(f64, f64)>,
) -> Option<Vec<Finding>> {
    // Memory over the whole command: its peak may come before or after the loop.
    let whole = held(samples, gpu, None);
    let (held, in_loop) = loop_samples(samples, gpu, window);
    if held.is_empty() {
        return None;
    }
    let mean = mean_percent(&held);
    let max = held
        .iter()
        .filter_map(|g| g.utilization_percent)
        .reduce(f64::max);
    let peak_used = whole.iter().filter_map(|g| g.memory_used_bytes).max();
    let total = whole.iter().find_map(|g| g.memory_total_bytes);
    let name = &held[0].name;
    let severity = if mean.is_some_and(|m| m <= LOW_UTILIZATION_PERCENT) {
        Severity::Medium
    } else {
        Severity::Info
    };
    let mut summary = format!("GPU {gpu} ({name}): ");
    match (mean, max) {
        (Some(mean), Some(max)) => summary.push_str(&format!(
            "NVML utilisation {mean:.0} % on average, {max:.0} % at most, over the {} \
             samples {}",
            held.len(),
            if in_loop {
                "of the training loop (from its first memory record to its last)"
            } else {
                "the training held memory"
            }
        )),
        _ => summary.push_str("no utilisation reported (a MIG device or an old driver)"),
    }
    if let Some(busy) = trace_busy {
        summary.push_str(&format!(
            "; the trace's kernels kept it busy {busy:.0} % of their span"
        ));
    }
    if let (Some(used), Some(total)) = (peak_used, total) {
        summary.push_str(&format!(
            "; memory in use peaked at {} of {}",
            human_bytes(used),
            human_bytes(total)
        ));
    }
    let evidence = UtilizationEvidence {
        samples: held.len(),
        gpu,
        mean_percent: mean,
        max_percent: max,
        peak_memory_used_bytes: peak_used,
        memory_total_bytes: total,
        trace_busy_percent: trace_busy,
    };
    let mut out = vec![Finding {
        source: FindingSource::Gpu,
        rank: None,
        kind: FindingKind::Utilization,
        severity,
        summary,
        stake: Stake::StepTime {
            percent: mean.map_or(0.0, |m| 100.0 - m),
        },
        evidence: Evidence::Utilization(evidence),
        next: if severity == Severity::Medium && trace_busy.is_none() {
            "gpuscope.profile(...) around the training loop: a trace says what the GPU \
             waits for"
                .to_owned()
        } else {
            String::new()
        },
        anchor: Anchor::Gpu,
    }];
    if let (Some(mean), Some(busy)) = (mean, trace_busy) {
        if (mean - busy).abs() > DISAGREEMENT_POINTS {
            out.push(Finding {
                source: FindingSource::Gpu,
                rank: None,
                kind: FindingKind::Disagreement,
                severity: Severity::Low,
                summary: format!(
                    "GPU {gpu}: NVML says busy {mean:.0} % on average, the trace {busy:.0} %: \
                     NVML averages {}, the trace only its profiled steps",
                    if in_loop {
                        "every sample of the training loop (evaluation and checkpoints \
                         included)"
                    } else {
                        "every sample while the training held memory (start-up, \
                         evaluation, checkpoints included)"
                    }
                ),
                stake: Stake::None,
                evidence: Evidence::Disagreement {
                    figure: "GPU busy, percent",
                    first: ("gpu", mean),
                    second: ("trace", busy),
                    why: "different windows: the whole run against the profiled steps",
                },
                next: "profile steps from more of the run (gpuscope.profile with repeat=...)"
                    .to_owned(),
                anchor: Anchor::Gpu,
            });
        }
    }
    Some(out)
}

//! Gradient flow over a run: the global norm and each module's, early against late, with
//! a verdict where they vanish or explode; how often clipping bit; the update/weight
//! ratio when it was measured.

use serde::Serialize;

use super::trend::median;
use crate::model::memory::{Clipping, GradientStats, MemoryRecord};

/// Change of a norm between the first and the last third of the run beyond which it is
/// called vanishing (÷) or exploding (×): two orders of magnitude, more than a healthy
/// run's decay of its gradients as the loss falls.
pub const TREND_FACTOR: f64 = 100.0;

/// What a norm did over the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Within [`TREND_FACTOR`] of where it started.
    Steady,
    /// Fell by [`TREND_FACTOR`] or more.
    Vanishing,
    /// Grew by [`TREND_FACTOR`] or more.
    Exploding,
    /// NaN or infinite in the last third.
    NonFinite,
}

/// One norm over the run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NormTrend {
    /// `global`, or the module's qualified name.
    pub name: String,
    /// Median over the first third of the measurements.
    pub early: Option<f64>,
    /// Median over the last third.
    pub late: Option<f64>,
    /// late / early.
    pub change: Option<f64>,
    /// The reading.
    pub verdict: Verdict,
    /// The last measured update/weight ratio (opt-in).
    pub update_ratio: Option<f64>,
}

/// The run's gradient flow.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GradientFlow {
    /// Records that carry gradients.
    pub measurements: usize,
    /// The global norm.
    pub global: NormTrend,
    /// Per module, the ones that vanish or explode first, then by name.
    pub modules: Vec<NormTrend>,
    /// Share of the iterations with a finite global norm where clipping scaled the
    /// gradients, percent; `null` when the run did not clip or no norm was finite.
    pub clipped_percent: Option<f64>,
    /// Mean scale factor of the clipped iterations.
    pub mean_clip_factor: Option<f64>,
    /// Zero gradient elements at the last measurement, percent.
    pub zero_percent: f64,
    /// Records whose global norm was NaN or infinite.
    pub nonfinite_records: usize,
    /// The iteration of the first of them.
    pub first_nonfinite: Option<i64>,
}

/// The gradient flow of `records` (ordered by iteration); `None` when none has gradients.
pub fn gradient_flow(records: &[MemoryRecord]) -> Option<GradientFlow> {
    let stats: Vec<&GradientStats> = records
        .iter()
        .filter_map(|r| r.gradients.as_ref())
        .collect();
    let last = *stats.last()?;
    // A null norm is a non-finite one (the JSONL cannot hold NaN there).
    let global = trend(
        "global",
        stats.iter().map(|g| g.global_norm.unwrap_or(f64::NAN)),
        last.update_ratio,
    );
    let mut names: Vec<&String> = stats.iter().flat_map(|g| g.module_norms.keys()).collect();
    names.sort_unstable();
    names.dedup();
    let mut modules: Vec<NormTrend> = names
        .into_iter()
        .map(|m| {
            let values = stats
                .iter()
                .filter_map(|g| g.module_norms.get(m).map(|n| n.unwrap_or(f64::NAN)));
            let ratio = last.module_update_ratios.get(m).copied().flatten();
            trend(m, values, ratio)
        })
        .collect();
    modules.sort_by_key(|t| (t.verdict == Verdict::Steady, t.name.clone()));
    let clipping: Vec<Clipping> = stats.iter().filter_map(|g| g.clipping()).collect();
    let checked: u64 = clipping.iter().map(|c| c.checked).sum();
    let clipped: u64 = clipping.iter().map(|c| c.clipped).sum();
    let factor_sum: f64 = clipping.iter().map(|c| c.factor_sum).sum();
    let nonfinite: Vec<&&GradientStats> = stats
        .iter()
        .filter(|g| !g.global_norm.is_some_and(f64::is_finite))
        .collect();
    Some(GradientFlow {
        measurements: stats.len(),
        global,
        modules,
        clipped_percent: (checked > 0).then(|| clipped as f64 * 100.0 / checked as f64),
        mean_clip_factor: (clipped > 0).then(|| factor_sum / clipped as f64),
        zero_percent: last.zero_percent,
        nonfinite_records: nonfinite.len(),
        first_nonfinite: nonfinite.first().map(|g| g.iteration),
    })
}

fn trend(name: &str, values: impl Iterator<Item = f64>, update_ratio: Option<f64>) -> NormTrend {
    let values: Vec<f64> = values.collect();
    let third = (values.len() / 3).max(1);
    let late_all = &values[values.len().saturating_sub(third)..];
    let mut early: Vec<f64> = values[..third.min(values.len())]
        .iter()
        .copied()
        .filter(|v| v.is_finite())
        .collect();
    let mut late: Vec<f64> = late_all.iter().copied().filter(|v| v.is_finite()).collect();
    let (early, late) = (median(&mut early), median(&mut late));
    let change = match (early, late) {
        (Some(a), Some(b)) if a > 0.0 => Some(b / a),
        _ => None,
    };
    let verdict = if late_all.iter().any(|v| !v.is_finite()) {
        Verdict::NonFinite
    } else {
        match change {
            Some(c) if values.len() >= 3 && c >= TREND_FACTOR => Verdict::Exploding,
            Some(c) if values.len() >= 3 && c <= 1.0 / TREND_FACTOR => Verdict::Vanishing,
            _ => Verdict::Steady,
        }
    };
    NormTrend {
        name: name.to_owned(),
        early,
        late,
        change,
        verdict,
        update_ratio,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(iteration: i64, global: Option<f64>, head: f64, clipped: u64) -> MemoryRecord {
        MemoryRecord {
            iteration,
            gradients: Some(GradientStats {
                iteration,
                global_norm: global,
                module_norms: [
                    ("head".to_owned(), Some(head)),
                    ("body".to_owned(), Some(1.0)),
                ]
                .into(),
                clip_max_norm: Some(1.0),
                measured: 10,
                clipped,
                mean_clip_factor: (clipped > 0).then_some(0.5),
                ..GradientStats::default()
            }),
            ..MemoryRecord::default()
        }
    }

    #[test]
    fn a_module_whose_norm_falls_a_hundredfold_is_vanishing() {
        let records: Vec<_> = [1.0, 0.9, 0.1, 0.01, 0.005, 0.004]
            .iter()
            .enumerate()
            .map(|(i, &h)| record(i as i64, Some(1.0), h, 0))
            .collect();
        let flow = gradient_flow(&records).unwrap();
        assert_eq!(flow.modules[0].name, "head");
        assert_eq!(flow.modules[0].verdict, Verdict::Vanishing);
        assert_eq!(flow.modules[0].early, Some(0.95));
        assert!((flow.modules[0].late.unwrap() - 0.0045).abs() < 1e-12);
        assert_eq!(flow.modules[1].verdict, Verdict::Steady);
        assert_eq!(flow.global.verdict, Verdict::Steady);
        assert_eq!(flow.clipped_percent, Some(0.0));
        assert_eq!(flow.mean_clip_factor, None);
    }

    #[test]
    fn growth_and_non_finite_norms_are_named() {
        let records: Vec<_> = [1.0, 2.0, 500.0]
            .iter()
            .enumerate()
            .map(|(i, &h)| record(i as i64, (i < 2).then_some(h), h, 5 * u64::from(i < 2)))
            .collect();
        let flow = gradient_flow(&records).unwrap();
        assert_eq!(flow.global.verdict, Verdict::NonFinite);
        let head = flow.modules.iter().find(|m| m.name == "head").unwrap();
        assert_eq!(head.verdict, Verdict::Exploding);
        assert_eq!(flow.clipped_percent, Some(50.0));
        assert_eq!(flow.mean_clip_factor, Some(0.5));
        assert_eq!((flow.nonfinite_records, flow.first_nonfinite), (1, Some(2)));
    }

    #[test]
    fn clipping_is_a_share_of_the_iterations_with_a_finite_norm() {
        // Without `finite`, a record whose own norm was NaN is left out whole (above: 10
        // of 20, not 10 of 30); with it, its finite iterations count.
        let mut records: Vec<_> = (0..3).map(|i| record(i, Some(2.0), 2.0, 5)).collect();
        let last = records[2].gradients.as_mut().unwrap();
        (last.global_norm, last.finite) = (None, Some(6));
        let flow = gradient_flow(&records).unwrap();
        assert_eq!(flow.clipped_percent, Some(15.0 * 100.0 / 26.0));
        assert_eq!(flow.mean_clip_factor, Some(0.5));
        for g in records.iter_mut().filter_map(|r| r.gradients.as_mut()) {
            g.finite = Some(0);
        }
        let flow = gradient_flow(&records).unwrap();
        assert_eq!((flow.clipped_percent, flow.mean_clip_factor), (None, None));
        assert!(gradient_flow(&[MemoryRecord::default()]).is_none());
    }
}

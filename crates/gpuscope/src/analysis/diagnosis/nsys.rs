//! Findings of `nsys/`: what each Nsight Systems export's kernel summary shows.

use super::evidence::Evidence;
use super::finding::{Anchor, Finding, FindingKind, FindingSource, Severity, Stake};
use super::{file_name, RunInputs};

/// Kernels kept as evidence.
const TOP: usize = 5;

pub(super) fn findings(run: &RunInputs) -> Vec<Finding> {
    run.nsys
        .iter()
        .map(|report| {
            let kernels = report.kernels.as_deref().unwrap_or_default();
            let top: Vec<(String, f64, f64)> = kernels
                .iter()
                .take(TOP)
                .map(|k| (k.name.clone(), k.time.total_us, k.time.time_percent))
                .collect();
            let name = file_name(&report.path);
            let summary = match top.first() {
                Some((kernel, _, percent)) => format!(
                    "Nsight export {name}: {} kernels; {kernel} takes the most GPU time \
                     ({percent:.0} %)",
                    kernels.len()
                ),
                None => format!("Nsight export {name}: no kernels recorded"),
            };
            Finding {
                source: FindingSource::Nsys,
                rank: None,
                kind: FindingKind::Kernels,
                severity: Severity::Info,
                summary,
                stake: Stake::None,
                evidence: Evidence::Kernels {
                    export: report.path.clone(),
                    top,
                },
                next: format!("gpuscope nsys stats {}", report.path.display()),
                anchor: Anchor::Sources,
            }
        })
        .collect()
}

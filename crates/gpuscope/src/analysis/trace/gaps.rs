//! The largest gaps on the GPU timeline — times no stream had work — each with what the
//! CPU was doing meanwhile (profiling guides' "look for gaps", made concrete). The CPU events
//! listed are those covering the most of the gap, and of those covering as much the
//! innermost (shortest) first: a gap under `cudaStreamSynchronize`, `aten::item`,
//! `train_step` reads as the `.item()` it was.

use serde::Serialize;

use super::scope::Scope;
use super::temporal::busy;
use crate::model::trace::{Kind, Trace};

/// CPU events named for each gap.
const CULPRITS: usize = 3;

/// A CPU event during a gap.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Culprit {
    /// Its name.
    pub name: String,
    /// `cpu_op`, `runtime`, ...
    pub kind: String,
    /// How much of the gap it covers, µs.
    pub overlap_us: f64,
}

/// A time the GPU had no work.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Gap {
    /// Start, µs from the first GPU work.
    pub start_us: f64,
    /// Length, µs.
    pub duration_us: f64,
    /// The CPU events covering most of it, innermost first.
    pub cpu: Vec<Culprit>,
}

/// The `n` largest gaps between the GPU work in `scope`, largest first.
pub fn largest_gaps(trace: &Trace, scope: &Scope, n: usize) -> Vec<Gap> {
    let e = &trace.events;
    let busy = busy(trace, scope, None);
    let Some(origin) = busy.first().map(|b| b.0) else {
        return Vec::new();
    };
    let mut gaps: Vec<(i64, i64)> = busy.windows(2).map(|w| (w[0].1, w[1].0)).collect();
    gaps.sort_by_key(|(s, e)| std::cmp::Reverse(e - s));
    gaps.truncate(n);
    let cpu: Vec<usize> = scope
        .cpu
        .iter()
        .copied()
        .filter(|&i| {
            matches!(
                e.kind[i],
                Kind::CpuOp
                    | Kind::Runtime
                    | Kind::Driver
                    | Kind::Sync
                    | Kind::PythonFunction
                    | Kind::UserAnnotation
            ) && !trace.names.get(e.name[i]).starts_with("ProfilerStep#")
        })
        .collect();
    gaps.into_iter()
        .map(|(start, end)| {
            let mut covering: Vec<(i64, i64, usize)> = cpu
                .iter()
                .filter_map(|&i| {
                    let (s, t) = scope.interval(trace, i);
                    let overlap = t.min(end) - s.max(start);
                    (overlap > 0).then_some((overlap, t - s, i))
                })
                .collect();
            covering.sort_by_key(|&(overlap, dur, _)| (std::cmp::Reverse(overlap), dur));
            Gap {
                start_us: (start - origin) as f64 / 1000.0,
                duration_us: (end - start) as f64 / 1000.0,
                cpu: covering
                    .into_iter()
                    .take(CULPRITS)
                    .map(|(overlap, _, i)| Culprit {
                        name: trace.names.get(e.name[i]).to_owned(),
                        kind: e.kind[i].as_str().to_owned(),
                        overlap_us: overlap as f64 / 1000.0,
                    })
                    .collect(),
            }
        })
        .collect()
}

//! Timed sections over a run: how long each section takes, and which grew — per loss
//! phase when the run has phases (trainings that switch loss terms on as they go), and
//! between the first and the last third of the run.

use serde::Serialize;

use super::losses::Phase;
use crate::model::memory::MemoryRecord;

/// A section's time in one loss phase.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PhaseTime {
    /// First iteration of the phase.
    pub from: i64,
    /// Last iteration of the phase.
    pub to: i64,
    /// Milliseconds per call in it.
    pub mean_ms: f64,
}

/// One section over the run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SectionTrend {
    /// Its path (`forward/attention`).
    pub path: String,
    /// The enclosing section's path.
    pub parent: Option<String>,
    /// Calls over the run.
    pub calls: u64,
    /// Milliseconds per call over the run.
    pub mean_ms: f64,
    /// The largest 95th percentile of any record's interval.
    pub worst_p95_ms: f64,
    /// Mean share of the iteration over the records that have one, percent.
    pub share_percent: Option<f64>,
    /// Milliseconds per call in the first and the last third of its records.
    pub early_mean_ms: f64,
    /// The last third.
    pub late_mean_ms: f64,
    /// late / early − 1, percent; `null` with fewer than three records.
    pub growth_percent: Option<f64>,
    /// Per loss phase, when the run has two or more.
    pub phases: Vec<PhaseTime>,
    /// The most bytes it added on a recorded iteration.
    pub max_net_bytes: Option<i64>,
}

/// Calls and total milliseconds of `path` over `records`.
fn totals<'a>(records: impl Iterator<Item = &'a MemoryRecord>, path: &str) -> (u64, f64) {
    records
        .filter_map(|r| r.sections.get(path))
        .fold((0, 0.0), |(c, t), s| (c + s.calls, t + s.total_ms))
}

fn per_call((calls, total): (u64, f64)) -> f64 {
    if calls == 0 {
        0.0
    } else {
        total / calls as f64
    }
}

/// Records holding a section from which its first one is left out as warm-up.
pub const WARM_UP_AFTER: usize = 4;

/// Every section of `records` (ordered by iteration), largest growth first, the first
/// record holding it left out when there are [`WARM_UP_AFTER`] or more; `phases` are the
/// run's loss phases.
pub fn section_trends(records: &[MemoryRecord], phases: &[Phase]) -> Vec<SectionTrend> {
    let mut paths: Vec<&String> = records.iter().flat_map(|r| r.sections.keys()).collect();
    paths.sort_unstable();
    paths.dedup();
    let mut out: Vec<SectionTrend> = paths
        .into_iter()
        .map(|path| {
            let mut with: Vec<&MemoryRecord> = records
                .iter()
                .filter(|r| r.sections.contains_key(path))
                .collect();
            // The first record's calls include the run's first (CUDA's start, autotuning,
            // first allocations): warm-up, left out when enough records remain.
            if with.len() >= WARM_UP_AFTER {
                with.remove(0);
            }
            let third = with.len() / 3;
            let (early, late) = (
                per_call(totals(with[..third.max(1)].iter().copied(), path)),
                per_call(totals(
                    with[with.len() - third.max(1)..].iter().copied(),
                    path,
                )),
            );
            let stats: Vec<_> = with.iter().map(|r| &r.sections[path]).collect();
            let shares: Vec<f64> = stats.iter().filter_map(|s| s.share_percent).collect();
            SectionTrend {
                path: path.clone(),
                parent: stats.last().and_then(|s| s.parent.clone()),
                calls: stats.iter().map(|s| s.calls).sum(),
                mean_ms: per_call(totals(with.iter().copied(), path)),
                worst_p95_ms: stats.iter().map(|s| s.p95_ms).fold(0.0, f64::max),
                share_percent: (!shares.is_empty())
                    .then(|| shares.iter().sum::<f64>() / shares.len() as f64),
                early_mean_ms: early,
                late_mean_ms: late,
                growth_percent: (third >= 1 && early > 0.0).then(|| (late / early - 1.0) * 100.0),
                phases: if phases.len() < 2 {
                    Vec::new()
                } else {
                    phases
                        .iter()
                        .map(|p| PhaseTime {
                            from: p.from,
                            to: p.to,
                            mean_ms: per_call(totals(
                                with.iter()
                                    .copied()
                                    .filter(|r| (p.from..=p.to).contains(&r.iteration)),
                                path,
                            )),
                        })
                        .collect()
                },
                max_net_bytes: stats.iter().filter_map(|s| s.net_bytes).max(),
            }
        })
        .collect();
    out.sort_by(|a, b| {
        let g = |s: &SectionTrend| s.growth_percent.unwrap_or(f64::NEG_INFINITY);
        g(b).total_cmp(&g(a)).then_with(|| a.path.cmp(&b.path))
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::memory::SectionStats;

    fn record(iteration: i64, render_ms: f64) -> MemoryRecord {
        let s = |ms: f64| SectionStats {
            calls: 2,
            mean_ms: ms,
            total_ms: 2.0 * ms,
            p95_ms: ms,
            share_percent: Some(50.0),
            ..SectionStats::default()
        };
        MemoryRecord {
            iteration,
            sections: [
                ("render".to_owned(), s(render_ms)),
                ("loss".to_owned(), s(1.0)),
            ]
            .into_iter()
            .collect(),
            ..MemoryRecord::default()
        }
    }

    #[test]
    fn the_section_that_grew_comes_first_with_its_phases() {
        let records: Vec<_> = (0..6)
            .map(|k| record(k * 10, if k < 3 { 2.0 } else { 6.0 }))
            .collect();
        let phase = |from, to| Phase {
            from,
            to,
            records: 3,
            components: Vec::new(),
            shares_percent: Default::default(),
            finite_records: 3,
        };
        let t = section_trends(&records, &[phase(0, 20), phase(30, 50)]);
        assert_eq!(t[0].path, "render");
        assert_eq!((t[0].early_mean_ms, t[0].late_mean_ms), (2.0, 6.0));
        assert_eq!(t[0].growth_percent, Some(200.0));
        // The first record is warm-up: five of 2, 2, 6, 6, 6 ms.
        assert!((t[0].mean_ms - 4.4).abs() < 1e-9, "{}", t[0].mean_ms);
        assert_eq!(t[0].calls, 10);
        let phases: Vec<f64> = t[0].phases.iter().map(|p| p.mean_ms).collect();
        assert_eq!(phases, [2.0, 6.0]);
        assert_eq!(t[1].path, "loss");
        assert_eq!(t[1].growth_percent, Some(0.0));
        // One phase: no per-phase split.
        assert!(section_trends(&records, &[phase(0, 50)])[0]
            .phases
            .is_empty());
    }

    /// lm_clean's shape on the H200: the first call of 800 ms (CUDA's start) would make
    /// the mean and hide a doubling; left out, the growth shows, while three records
    /// keep all of theirs.
    #[test]
    fn the_first_record_is_warm_up() {
        let mut records: Vec<_> = (1..=6)
            .map(|k| record(k * 10, if k <= 2 { 12.0 } else { 24.0 }))
            .collect();
        records.insert(0, record(0, 800.0));
        let t = section_trends(&records, &[]);
        assert_eq!(t[0].path, "render");
        assert_eq!(t[0].growth_percent, Some(100.0));
        assert_eq!(t[0].worst_p95_ms, 24.0);
        let few = section_trends(&records[..3], &[]);
        let render = few.iter().find(|t| t.path == "render").unwrap();
        assert_eq!(render.worst_p95_ms, 800.0);
    }
}

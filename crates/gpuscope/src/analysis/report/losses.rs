//! Loss components over a run: the phases (which components were active from
//! which iteration), each component's share of the total per phase, and loss spikes — a
//! total far outside its recent spread — with the component that drove each one and what
//! memory did around it ("memory timeline correlation with loss spikes").

use std::collections::BTreeMap;

use serde::Serialize;

use super::trend::median;
use crate::model::memory::MemoryRecord;

/// Records before a point that make up its "recent spread".
pub const SPIKE_WINDOW: usize = 10;
/// A spike is a total above the recent median by this many median absolute deviations...
pub const SPIKE_MADS: f64 = 6.0;
/// ...and by at least this share of the median (a smooth loss has a tiny spread).
pub const SPIKE_MIN_RISE: f64 = 0.5;
/// Fewest earlier records of the same phase for a spread to compare against.
pub const SPIKE_MIN_HISTORY: usize = 5;

/// A stretch of records with the same loss components.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Phase {
    /// First iteration of the phase.
    pub from: i64,
    /// Last iteration of the phase.
    pub to: i64,
    /// Records in it.
    pub records: usize,
    /// Components active in it, by name.
    pub components: Vec<String>,
    /// Mean share of each component in the sum of the components' magnitudes, percent,
    /// over the records whose components are all finite.
    pub shares_percent: BTreeMap<String, f64>,
    /// Those records: fewer than `records` when some had a NaN or an infinity.
    pub finite_records: usize,
}

impl Phase {
    /// The shares in words, `l2 46%, lm 54%`, and over how few records when some were
    /// not finite.
    pub fn shares_text(&self) -> String {
        let shares: Vec<String> = self
            .shares_percent
            .iter()
            .map(|(c, s)| format!("{c} {s:.0}%"))
            .collect();
        let mut text = shares.join(", ");
        if self.finite_records < self.records {
            text.push_str(&format!(
                " (over {} of {} records: the rest NaN/Inf or all 0)",
                self.finite_records, self.records
            ));
        }
        text
    }
}

/// A loss spike.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Spike {
    /// Iteration of the spike.
    pub iteration: i64,
    /// The total there.
    pub total: f64,
    /// Median of the total over the records before it.
    pub recent_median: f64,
    /// The component that rose most above its own recent median.
    pub driven_by: Option<String>,
    /// Change of the census bytes from the record before.
    pub census_change_bytes: i64,
    /// Change of the allocator's allocated bytes from the record before (CUDA only).
    pub allocated_change_bytes: Option<i64>,
}

/// Phases and spikes of a run's losses.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LossAnalysis {
    /// Phases, in order.
    pub phases: Vec<Phase>,
    /// Spikes, in order.
    pub spikes: Vec<Spike>,
}

/// Phases and spikes of `records` (ordered by iteration).
pub fn analyze(records: &[MemoryRecord]) -> LossAnalysis {
    LossAnalysis {
        phases: phases(records),
        spikes: spikes(records),
    }
}

/// The names of a record's loss components (every loss but `total`), in order.
fn component_names(r: &MemoryRecord) -> impl Iterator<Item = &String> {
    r.losses.keys().filter(|k| *k != "total")
}

fn components(r: &MemoryRecord) -> Vec<String> {
    component_names(r).cloned().collect()
}

fn same_components(a: &MemoryRecord, b: &MemoryRecord) -> bool {
    component_names(a).eq(component_names(b))
}

fn phases(records: &[MemoryRecord]) -> Vec<Phase> {
    let mut out: Vec<Phase> = Vec::new();
    let mut shares = Shares::default();
    // A total alone has no shares to tell.
    for r in records
        .iter()
        .filter(|r| component_names(r).next().is_some())
    {
        let same = out
            .last()
            .is_some_and(|p| p.components.iter().eq(component_names(r)));
        if !same {
            shares.close(out.last_mut());
            out.push(Phase {
                from: r.iteration,
                to: r.iteration,
                records: 0,
                components: components(r),
                shares_percent: BTreeMap::new(),
                finite_records: 0,
            });
        }
        let phase = out.last_mut().expect("a phase is open");
        phase.to = r.iteration;
        phase.records += 1;
        shares.add(&phase.components, r);
    }
    shares.close(out.last_mut());
    out
}

/// The sums of each component's share over a phase's records, and how many records
/// they are: those whose components are all finite and not all 0 (a NaN leaves its
/// record's shares unknown).
#[derive(Default)]
struct Shares {
    sums: BTreeMap<String, f64>,
    records: usize,
}

impl Shares {
    fn add(&mut self, components: &[String], r: &MemoryRecord) {
        let values: Vec<f64> = components.iter().map(|c| r.losses[c].abs()).collect();
        let magnitude: f64 = values.iter().sum();
        if !magnitude.is_finite() || magnitude <= 0.0 {
            return;
        }
        self.records += 1;
        for (c, v) in components.iter().zip(values) {
            *self.sums.entry(c.clone()).or_default() += v / magnitude;
        }
    }

    /// Sets `phase`'s shares (means over the records counted) and starts again.
    fn close(&mut self, phase: Option<&mut Phase>) {
        if let Some(p) = phase {
            p.finite_records = self.records;
            p.shares_percent = self
                .sums
                .iter()
                .map(|(c, s)| (c.clone(), s * 100.0 / self.records as f64))
                .collect();
        }
        *self = Shares::default();
    }
}

fn total(r: &MemoryRecord) -> Option<f64> {
    r.losses.get("total").copied().filter(|v| v.is_finite())
}

fn spikes(records: &[MemoryRecord]) -> Vec<Spike> {
    let with_total: Vec<&MemoryRecord> = records.iter().filter(|r| total(r).is_some()).collect();
    let mut out = Vec::new();
    for (i, &r) in with_total.iter().enumerate() {
        // Compare within the phase: a component switching on is a step, not a spike.
        let start = i.saturating_sub(SPIKE_WINDOW);
        let recent: Vec<&MemoryRecord> = with_total[start..i]
            .iter()
            .copied()
            .filter(|p| same_components(p, r))
            .collect();
        if recent.len() < SPIKE_MIN_HISTORY {
            continue;
        }
        let value = total(r).expect("filtered");
        let mut values: Vec<f64> = recent.iter().filter_map(|r| total(r)).collect();
        let (median, mad) = median_mad(&mut values);
        let rise = (SPIKE_MADS * mad).max(SPIKE_MIN_RISE * median.abs());
        if rise <= 0.0 || value <= median + rise {
            continue;
        }
        let before = recent.last().expect("window is not empty");
        out.push(Spike {
            iteration: r.iteration,
            total: value,
            recent_median: median,
            driven_by: driver(&recent, r),
            census_change_bytes: r.census_bytes as i64 - before.census_bytes as i64,
            allocated_change_bytes: match (&r.allocator, &before.allocator) {
                (Some(a), Some(b)) => Some(a.allocated_bytes as i64 - b.allocated_bytes as i64),
                _ => None,
            },
        });
    }
    out
}

/// The component that rose most above its own recent median.
fn driver(recent: &[&MemoryRecord], r: &MemoryRecord) -> Option<String> {
    components(r)
        .into_iter()
        .filter_map(|c| {
            let mut past: Vec<f64> = recent
                .iter()
                .filter_map(|p| p.losses.get(&c).copied())
                .filter(|v| v.is_finite())
                .collect();
            let (median, _) = median_mad(&mut past);
            let rise = r.losses[&c] - median;
            rise.is_finite().then_some((c, rise))
        })
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(c, _)| c)
}

/// The median and the median absolute deviation (0 and 0 for no values).
fn median_mad(values: &mut [f64]) -> (f64, f64) {
    let Some(middle) = median(values) else {
        return (0.0, 0.0);
    };
    let mut deviations: Vec<f64> = values.iter().map(|v| (v - middle).abs()).collect();
    (middle, median(&mut deviations).unwrap_or(0.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(iteration: i64, losses: &[(&str, f64)], census: u64) -> MemoryRecord {
        let mut losses: BTreeMap<String, f64> =
            losses.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect();
        let total = losses.values().sum();
        losses.insert("total".into(), total);
        MemoryRecord {
            iteration,
            device: "cpu".into(),
            census_bytes: census,
            losses,
            ..MemoryRecord::default()
        }
    }

    /// A phased training's schedule, scaled down: rendering only until 70, + entropy and
    /// depth-normal until 90, then rendering + depth-normal + sdf.
    fn phased_run() -> Vec<MemoryRecord> {
        (0..120)
            .step_by(5)
            .map(|it| {
                let noise = 0.001 * (it % 3) as f64;
                let parts: Vec<(&str, f64)> = match it {
                    0..70 => vec![("rendering", 0.5 + noise)],
                    70..90 => vec![
                        ("rendering", 0.4 + noise),
                        ("entropy_regularization", 0.1),
                        ("depth_normal_consistency", 0.1),
                    ],
                    _ => vec![
                        ("rendering", 0.3 + noise),
                        ("depth_normal_consistency", 0.1),
                        ("sdf_estimation", 0.2),
                    ],
                };
                record(it, &parts, 1000)
            })
            .collect()
    }

    #[test]
    fn phases_follow_the_components() {
        let a = analyze(&phased_run());
        let spans: Vec<_> = a
            .phases
            .iter()
            .map(|p| (p.from, p.to, p.components.len()))
            .collect();
        assert_eq!(spans, vec![(0, 65, 1), (70, 85, 3), (90, 115, 3)]);
        let last = &a.phases[2];
        assert!(last.components.contains(&"sdf_estimation".to_owned()));
        let sdf = last.shares_percent["sdf_estimation"];
        assert!((sdf - 100.0 * 0.2 / 0.6).abs() < 0.5, "{sdf}");
        assert!(a.spikes.is_empty(), "{:?}", a.spikes);
    }

    #[test]
    fn a_spike_names_its_component_and_the_memory_change() {
        let mut run = phased_run();
        let i = run.iter().position(|r| r.iteration == 115).unwrap();
        run[i].losses.insert("sdf_estimation".into(), 5.0);
        let total = run[i]
            .losses
            .iter()
            .filter(|(k, _)| *k != "total")
            .map(|(_, v)| v)
            .sum();
        run[i].losses.insert("total".into(), total);
        run[i].census_bytes = 5000;
        let a = analyze(&run);
        assert_eq!(a.spikes.len(), 1, "{:?}", a.spikes);
        let s = &a.spikes[0];
        assert_eq!(s.iteration, 115);
        assert_eq!(s.driven_by.as_deref(), Some("sdf_estimation"));
        assert_eq!(s.census_change_bytes, 4000);
    }

    /// The README's rule on an even window: ten totals of 1 and 1.4 have the median 1.2
    /// and a median absolute deviation of 0.2, so a total is a spike above 1.2 + 6 × 0.2
    /// = 2.4 (the upper middle value, 1.4, would have put it at 3.8).
    #[test]
    fn a_spike_is_six_deviations_above_the_median_of_the_ten_before() {
        let spikes_at = |last: f64| {
            let mut run: Vec<MemoryRecord> = (0..10)
                .map(|i| record(i * 10, &[("a", if i % 2 == 0 { 1.0 } else { 1.4 })], 1000))
                .collect();
            run.push(record(100, &[("a", last)], 1000));
            analyze(&run).spikes
        };
        assert_eq!(spikes_at(2.3), vec![]);
        let above = spikes_at(2.5);
        assert_eq!(above.len(), 1, "{above:?}");
        assert_eq!(above[0].iteration, 100);
        assert!((above[0].recent_median - 1.2).abs() < 1e-12, "{above:?}");
    }

    /// lm_leak_nan's shape: a NaN component leaves its record out of the shares, which
    /// still add up to 100 %.
    #[test]
    fn shares_leave_out_records_with_a_nan() {
        let mut run: Vec<MemoryRecord> = (0..4)
            .map(|i| record(i, &[("a", 1.0), ("b", 3.0)], 0))
            .collect();
        run.push(record(4, &[("a", f64::NAN), ("b", 3.0)], 0));
        let phases = analyze(&run).phases;
        assert_eq!(phases.len(), 1);
        assert_eq!(phases[0].records, 5);
        assert_eq!(phases[0].shares_percent["a"], 25.0);
        assert_eq!(phases[0].shares_percent["b"], 75.0);
        assert!(phases[0].finite_records < phases[0].records);
        assert!(phases[0]
            .shares_text()
            .ends_with("records: the rest NaN/Inf or all 0)"));
    }
}

//! Several runs side by side: peak and end figures of each, and the categories whose end
//! figure differs from the first run's (the baseline) by more than [`DIFFER_PERCENT`] and
//! [`DIFFER_BYTES`].

use std::collections::BTreeMap;

use serde::Serialize;

use crate::model::memory::{percent, MemoryRecord};

/// Least relative difference of a category from the baseline that is reported.
pub const DIFFER_PERCENT: f64 = 10.0;
/// Least absolute difference of a category from the baseline that is reported.
pub const DIFFER_BYTES: u64 = 1 << 20;

/// The figures of one run in a comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunFigures {
    /// The run's label (its path and rank).
    pub label: String,
    /// Highest allocator peak over the run; `null` on CPU.
    pub peak_allocated_bytes: Option<u64>,
    /// Highest memory of the tensors over the run ([`MemoryRecord::tensor_bytes`]), as
    /// `gpuscope compare` reads it.
    pub peak_tensor_bytes: u64,
    /// Census at the end.
    pub end_census_bytes: u64,
    /// Categories at the end.
    pub end_categories_bytes: BTreeMap<String, u64>,
}

/// A category that differs from the baseline run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Difference {
    /// The category.
    pub category: String,
    /// The run that differs.
    pub run: String,
    /// Its bytes at the end.
    pub bytes: u64,
    /// The baseline's bytes at the end.
    pub baseline_bytes: u64,
    /// Change against the baseline, percent; `null` when the baseline had none of the
    /// category (a relative change from nothing has no value).
    pub change_percent: Option<f64>,
}

/// Runs compared with the first one.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    /// Each run's figures, the baseline first.
    pub runs: Vec<RunFigures>,
    /// Categories that differ from the baseline.
    pub differences: Vec<Difference>,
}

/// Compares labelled runs (records ordered by iteration); `None` for fewer than two.
pub fn compare(runs: &[(String, &[MemoryRecord])]) -> Option<Comparison> {
    if runs.len() < 2 {
        return None;
    }
    let figures: Vec<RunFigures> = runs
        .iter()
        .filter_map(|(label, records)| {
            let last = records.last()?;
            Some(RunFigures {
                label: label.clone(),
                peak_allocated_bytes: records
                    .iter()
                    .filter_map(|r| {
                        r.allocator
                            .as_ref()
                            .map(|a| a.peak_allocated_bytes.max(a.allocated_bytes))
                    })
                    .max(),
                peak_tensor_bytes: records
                    .iter()
                    .map(MemoryRecord::tensor_bytes)
                    .max()
                    .unwrap_or(0),
                end_census_bytes: last.census_bytes,
                end_categories_bytes: last
                    .categories_bytes
                    .measured()
                    .into_iter()
                    .map(|(n, b)| (n.to_owned(), b))
                    .collect(),
            })
        })
        .collect();
    let baseline = figures.first()?;
    let mut differences = Vec::new();
    for other in &figures[1..] {
        for (category, &bytes) in &other.end_categories_bytes {
            let base = baseline
                .end_categories_bytes
                .get(category)
                .copied()
                .unwrap_or(0);
            let diff = bytes.abs_diff(base);
            // From nothing, any growth of DIFFER_BYTES or more differs.
            let change = (base > 0).then(|| percent(diff, base));
            if diff >= DIFFER_BYTES && change.is_none_or(|c| c >= DIFFER_PERCENT) {
                differences.push(Difference {
                    category: category.clone(),
                    run: other.label.clone(),
                    bytes,
                    baseline_bytes: base,
                    change_percent: change.map(|c| if bytes >= base { c } else { -c }),
                });
            }
        }
    }
    Some(Comparison {
        runs: figures,
        differences,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::memory::Categories;

    fn record(parameters: u64, activations: u64) -> MemoryRecord {
        MemoryRecord {
            device: "cpu".into(),
            categories_bytes: Categories {
                parameters: Some(parameters),
                activations: Some(activations),
                ..Categories::default()
            },
            tensor_count: 1,
            census_bytes: parameters,
            ..MemoryRecord::default()
        }
    }

    #[test]
    fn names_the_categories_that_differ() {
        const MIB: u64 = 1 << 20;
        let a = [record(100 * MIB, 50 * MIB), record(100 * MIB, 60 * MIB)];
        let b = [record(101 * MIB, 200 * MIB)];
        let c = compare(&[("a".into(), &a[..]), ("b".into(), &b[..])]).unwrap();
        assert_eq!(c.runs[0].peak_tensor_bytes, 160 * MIB);
        assert_eq!(c.runs[1].end_census_bytes, 101 * MIB);
        assert_eq!(c.differences.len(), 1, "{:?}", c.differences);
        let d = &c.differences[0];
        assert_eq!((d.category.as_str(), d.run.as_str()), ("activations", "b"));
        assert!((d.change_percent.unwrap() - 233.33).abs() < 0.01);
        assert!(compare(&[("a".into(), &a[..])]).is_none());
    }

    /// A category the baseline did not have: 0 → 34 MB was reported as +100 %, as if the
    /// baseline had held 17 MB. A change from nothing has no percentage.
    #[test]
    fn a_category_new_against_the_baseline_has_no_percentage() {
        const MIB: u64 = 1 << 20;
        let a = [record(100 * MIB, 0)];
        let b = [record(100 * MIB, 34 * MIB)];
        let c = compare(&[("a".into(), &a[..]), ("b".into(), &b[..])]).unwrap();
        assert_eq!(c.differences.len(), 1, "{:?}", c.differences);
        let d = &c.differences[0];
        assert_eq!(
            (d.category.as_str(), d.bytes, d.baseline_bytes),
            ("activations", 34 * MIB, 0)
        );
        assert_eq!(d.change_percent, None);
    }
}

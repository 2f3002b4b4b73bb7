//! The memory figures of one rank that a comparison sets side by side: the peaks over its
//! memory records and each category's steady level.
//!
//! Peaks come from the records only: the allocator's own peak counters
//! (`peak_allocated_bytes`, `peak_reserved_bytes`, or the current figure where higher),
//! never from an out-of-memory report, whose failed request (16 TiB asked of a 140 GiB
//! device) would make any run's peak look the same and hide a regression. The steady level
//! of a category is its median over the records after the warm-up that the leak verdict
//! also leaves out ([`leak::window`]).

use std::collections::BTreeMap;

use crate::analysis::report::allocator_verdict::Fragmentation;
use crate::analysis::report::leak;
use crate::analysis::report::trend::median;
use crate::model::memory::MemoryRecord;

/// One rank's memory figures.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryFigures {
    /// Highest allocated over the records; `None` without allocator figures (CPU).
    pub peak_allocated_bytes: Option<u64>,
    /// Highest reserved over the records; `None` without allocator figures.
    pub peak_reserved_bytes: Option<u64>,
    /// Highest memory of the tensors over the records ([`MemoryRecord::tensor_bytes`]).
    pub peak_tensor_bytes: u64,
    /// Each measured category's median after warm-up.
    pub steady_categories_bytes: BTreeMap<String, u64>,
}

/// The figures of `records` (ordered by iteration); `allocator` is the allocator verdict
/// of the same records, whose peaks are the records' peaks.
pub fn memory_figures(
    records: &[MemoryRecord],
    allocator: Option<&Fragmentation>,
) -> MemoryFigures {
    let mut by_category: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for r in leak::window(records) {
        for (name, bytes) in r.categories_bytes.measured() {
            by_category.entry(name).or_default().push(bytes as f64);
        }
    }
    MemoryFigures {
        peak_allocated_bytes: allocator.map(|a| a.peak_allocated_bytes),
        peak_reserved_bytes: allocator.map(|a| a.peak_reserved_bytes),
        peak_tensor_bytes: records
            .iter()
            .map(MemoryRecord::tensor_bytes)
            .max()
            .unwrap_or(0),
        steady_categories_bytes: by_category
            .into_iter()
            .filter_map(|(name, mut values)| {
                Some((name.to_owned(), median(&mut values)?.round() as u64))
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::report::allocator_verdict::fragmentation;
    use crate::model::memory::{AllocatorStats, Categories};

    fn record(iteration: i64, activations: u64, peak: u64) -> MemoryRecord {
        MemoryRecord {
            iteration,
            census_bytes: 100 + activations,
            categories_bytes: Categories {
                parameters: Some(100),
                activations: Some(activations),
                ..Categories::default()
            },
            allocator: Some(AllocatorStats {
                allocated_bytes: 100 + activations,
                reserved_bytes: 400,
                peak_allocated_bytes: peak,
                peak_reserved_bytes: 400,
                ..AllocatorStats::default()
            }),
            ..MemoryRecord::default()
        }
    }

    #[test]
    fn peaks_are_the_records_and_levels_the_median_after_warm_up() {
        // Iteration 0 is warm-up (the first 10 % of 0..100): its 90 bytes are left out.
        let records: Vec<MemoryRecord> = [(0, 90), (20, 10), (50, 30), (100, 20)]
            .iter()
            .map(|&(it, act)| record(it, act, 150 + it as u64))
            .collect();
        let f = memory_figures(&records, fragmentation(&records, &[]).as_ref());
        assert_eq!(f.peak_allocated_bytes, Some(250));
        assert_eq!(f.peak_reserved_bytes, Some(400));
        assert_eq!(f.peak_tensor_bytes, 190);
        assert_eq!(f.steady_categories_bytes["activations"], 20);
        assert_eq!(f.steady_categories_bytes["parameters"], 100);
        assert!(!f.steady_categories_bytes.contains_key("gradients"));
        let cpu: Vec<MemoryRecord> = records
            .into_iter()
            .map(|r| MemoryRecord {
                allocator: None,
                ..r
            })
            .collect();
        let f = memory_figures(&cpu, fragmentation(&cpu, &[]).as_ref());
        assert_eq!(
            (f.peak_allocated_bytes, f.peak_reserved_bytes),
            (None, None)
        );
    }
}

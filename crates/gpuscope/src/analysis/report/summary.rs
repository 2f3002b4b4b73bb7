//! The summary `analyze_tensor_profile.py`-style analyzers print for a run, with the same facts:
//! iteration range, number of records, start → end of allocated, reserved, fragmentation
//! and tensor count, and the categories and dtypes at the end.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::model::memory::MemoryRecord;

/// The figures of one record that the summary compares between start and end.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Figures {
    /// Allocator's allocated bytes; `null` on CPU.
    pub allocated_bytes: Option<u64>,
    /// Allocator's reserved bytes; `null` on CPU.
    pub reserved_bytes: Option<u64>,
    /// The unallocated share, `(reserved − allocated) / reserved`; `null` on CPU.
    pub fragmentation_percent: Option<f64>,
    /// Unique tensor storages counted.
    pub tensor_count: u64,
    /// Bytes of the counted storages.
    pub census_bytes: u64,
    /// Bytes per measured category.
    pub categories_bytes: BTreeMap<String, u64>,
    /// Bytes per dtype.
    pub dtypes_bytes: BTreeMap<String, u64>,
    /// Tensors above the large-tensor threshold.
    pub large_tensor_count: u64,
    /// The large-tensor threshold; `null` when the input does not say (TensorBoard tags).
    pub large_threshold_bytes: Option<u64>,
}

impl Figures {
    /// The figures of `record`.
    pub fn of(record: &MemoryRecord) -> Figures {
        let a = record.allocator.as_ref();
        Figures {
            allocated_bytes: a.map(|a| a.allocated_bytes),
            reserved_bytes: a.map(|a| a.reserved_bytes),
            fragmentation_percent: a.map(|a| a.fragmentation_percent()),
            tensor_count: record.tensor_count,
            census_bytes: record.census_bytes,
            categories_bytes: record
                .categories_bytes
                .measured()
                .into_iter()
                .map(|(name, bytes)| (name.to_owned(), bytes))
                .collect(),
            dtypes_bytes: record.dtypes_bytes.clone(),
            large_tensor_count: record.large_tensor_count,
            large_threshold_bytes: (record.large_threshold_bytes > 0)
                .then_some(record.large_threshold_bytes),
        }
    }
}

/// The summary of one rank's records.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    /// Number of records.
    pub records: usize,
    /// First and last iteration.
    pub iterations: [i64; 2],
    /// Figures of the first record.
    pub start: Figures,
    /// Figures of the last record.
    pub end: Figures,
    /// The device's memory in total, from the last record that gives it (`None` on CPU).
    /// Not in `runs[]` of the JSON, which keeps its keys; the diagnosis's findings give it.
    #[serde(skip)]
    pub device_total_bytes: Option<u64>,
    /// Unix seconds of the first and the last record: the span of the training loop.
    /// Not in `runs[]` of the JSON, as above.
    #[serde(skip)]
    pub times: [f64; 2],
}

/// Summarises `records` (ordered by iteration); `None` when there are none.
pub fn summarize(records: &[MemoryRecord]) -> Option<Summary> {
    let (first, last) = (records.first()?, records.last()?);
    Some(Summary {
        records: records.len(),
        iterations: [first.iteration, last.iteration],
        start: Figures::of(first),
        end: Figures::of(last),
        device_total_bytes: records
            .iter()
            .rev()
            .find_map(|r| r.allocator.as_ref()?.device_total_bytes),
        times: [first.time, last.time],
    })
}

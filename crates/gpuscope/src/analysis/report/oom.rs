//! When the run would run out of device memory: the allocator's reserved memory (else its
//! allocated memory) carried forward along its trend until it reaches the device's total.
//! Only for a series that grows in a sustained way (the leak rule's test): projecting
//! noise or a finished step forward would cry wolf.

use serde::Serialize;

use super::leak::LeakAnalysis;
use crate::model::memory::MemoryRecord;

/// The projected out-of-memory point.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OomEstimate {
    /// The series projected: `reserved` or `allocated`.
    pub series: String,
    /// Device memory in total (`mem_get_info`).
    pub device_total_bytes: u64,
    /// The series at the last record.
    pub current_bytes: u64,
    /// Its slope, bytes per 1000 iterations.
    pub slope_bytes_per_1k_iters: f64,
    /// The iteration at which it reaches the device's total.
    pub iteration: i64,
}

/// The estimate for `records` (ordered by iteration) given their trends and the device's
/// memory in total (the summary's); `None` without it or without sustained growth.
pub fn estimate(
    records: &[MemoryRecord],
    leak: &LeakAnalysis,
    device_total_bytes: Option<u64>,
) -> Option<OomEstimate> {
    let last = records.last()?;
    let allocator = last.allocator.as_ref()?;
    let total = device_total_bytes?;
    let (series, current, trend) = [
        ("reserved", allocator.reserved_bytes),
        ("allocated", allocator.allocated_bytes),
    ]
    .into_iter()
    .find_map(|(name, current)| {
        let t = leak.trends.get(name).filter(|t| t.sustained)?;
        Some((name, current, t))
    })?;
    let per_iteration = trend.slope_bytes_per_1k_iters / 1000.0;
    let left = total.saturating_sub(current) as f64;
    Some(OomEstimate {
        series: series.to_owned(),
        device_total_bytes: total,
        current_bytes: current,
        slope_bytes_per_1k_iters: trend.slope_bytes_per_1k_iters,
        iteration: last.iteration + (left / per_iteration).ceil() as i64,
    })
}

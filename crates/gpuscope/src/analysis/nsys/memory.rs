//! GPU memory in use over time, per device, from the allocation and deallocation events of
//! a `--cuda-memory-usage true` capture: the running sum of device-side allocations (host
//! pageable and pinned memory left out), its peak, and a timeline bounded to
//! [`MAX_POINTS`] points that keeps each stretch's highest value, so the peak survives.
//!
//! A capture that starts after the program allocated (a capture range, `nsys start` on a
//! running training) sees frees of memory it never saw allocated; the running sum would
//! dip below zero. The deepest dip is the least that was allocated before the capture, and
//! every figure is raised by it (`allocated_before_capture_bytes`).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::model::nsys::{MemoryEvent, NsysExport};

/// Most points in a device's timeline.
pub const MAX_POINTS: usize = 400;

/// ENUM_CUDA_MEM_KIND ids of host memory: pageable and pinned.
const HOST_KINDS: [i64; 2] = [0, 1];

/// One device's memory over the capture.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeviceUsage {
    /// CUDA device id; `null` when the export does not record it.
    pub device: Option<i64>,
    /// The GPU's name, when the export has it.
    pub gpu: Option<String>,
    /// The GPU's memory, bytes, when the export has it.
    pub gpu_memory_bytes: Option<i64>,
    /// Allocation events.
    pub allocations: u64,
    /// Deallocation events.
    pub frees: u64,
    /// Most bytes in use at once.
    pub peak_bytes: i64,
    /// When the peak was first reached, µs since the session began.
    pub peak_at_us: f64,
    /// Bytes in use after the last event.
    pub end_bytes: i64,
    /// The least that was allocated before the capture began (frees of unseen
    /// allocations); 0 when every free matched.
    pub allocated_before_capture_bytes: i64,
    /// Bytes in use over time, at most [`MAX_POINTS`] points.
    pub timeline: Vec<UsagePoint>,
}

/// Bytes in use at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct UsagePoint {
    /// µs since the session began.
    pub at_us: f64,
    /// Bytes in use.
    pub in_use_bytes: i64,
}

/// Usage per device, devices in id order.
pub(super) fn usage(export: &NsysExport, events: &[MemoryEvent]) -> Vec<DeviceUsage> {
    let mut by_device: BTreeMap<Option<i64>, Vec<&MemoryEvent>> = BTreeMap::new();
    for e in events {
        if !e.mem_kind.is_some_and(|k| HOST_KINDS.contains(&k)) {
            by_device.entry(e.device).or_default().push(e);
        }
    }
    by_device
        .into_iter()
        .map(|(device, mut events)| {
            events.sort_by_key(|e| e.at);
            let gpu = device.and_then(|d| export.gpus.iter().find(|g| g.id == d));
            device_usage(device, gpu, &events)
        })
        .collect()
}

fn device_usage(
    device: Option<i64>,
    gpu: Option<&crate::model::nsys::Gpu>,
    events: &[&MemoryEvent],
) -> DeviceUsage {
    let mut running = 0i64;
    let mut sums = Vec::with_capacity(events.len());
    for e in events {
        let delta = if e.allocation {
            e.bytes
        } else {
            e.bytes.saturating_neg()
        };
        running = running.saturating_add(delta);
        sums.push(running);
    }
    let before = sums
        .iter()
        .copied()
        .min()
        .unwrap_or(0)
        .min(0)
        .saturating_neg();
    let (mut peak, mut peak_at) = (before, events.first().map_or(0, |e| e.at));
    for (e, s) in events.iter().zip(&sums) {
        if s.saturating_add(before) > peak {
            peak = s.saturating_add(before);
            peak_at = e.at;
        }
    }
    let allocations = events.iter().filter(|e| e.allocation).count() as u64;
    DeviceUsage {
        device,
        gpu: gpu.and_then(|g| g.name.clone()),
        gpu_memory_bytes: gpu.and_then(|g| g.total_memory_bytes),
        allocations,
        frees: events.len() as u64 - allocations,
        peak_bytes: peak,
        peak_at_us: peak_at as f64 / 1000.0,
        end_bytes: sums.last().copied().unwrap_or(0).saturating_add(before),
        allocated_before_capture_bytes: before,
        timeline: timeline(events, &sums, before),
    }
}

/// At most [`MAX_POINTS`] points: the capture's span cut into equal stretches, each giving
/// its highest value at the moment it was reached.
fn timeline(events: &[&MemoryEvent], sums: &[i64], before: i64) -> Vec<UsagePoint> {
    let (Some(first), Some(last)) = (events.first(), events.last()) else {
        return Vec::new();
    };
    let span = (last.at as f64 - first.at as f64).max(1.0);
    let mut best: Vec<Option<(i64, i64)>> = vec![None; MAX_POINTS];
    for (e, s) in events.iter().zip(sums) {
        let slot = ((e.at as f64 - first.at as f64) / span * (MAX_POINTS - 1) as f64) as usize;
        let slot = slot.min(MAX_POINTS - 1);
        let value = s.saturating_add(before);
        if best[slot].is_none_or(|(_, v)| value > v) {
            best[slot] = Some((e.at, value));
        }
    }
    best.into_iter()
        .flatten()
        .map(|(at, v)| UsagePoint {
            at_us: at as f64 / 1000.0,
            in_use_bytes: v,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(at: i64, bytes: i64, allocation: bool) -> MemoryEvent {
        MemoryEvent {
            at,
            bytes,
            allocation,
            device: Some(0),
            mem_kind: Some(2),
        }
    }

    #[test]
    fn peak_end_and_counts_follow_the_running_sum() {
        let events = [
            event(1_000, 100, true),
            event(2_000, 50, true),
            event(3_000, 100, false),
        ];
        let refs: Vec<&MemoryEvent> = events.iter().collect();
        let u = device_usage(Some(0), None, &refs);
        assert_eq!((u.peak_bytes, u.peak_at_us, u.end_bytes), (150, 2.0, 50));
        assert_eq!((u.allocations, u.frees), (2, 1));
        assert_eq!(u.allocated_before_capture_bytes, 0);
        assert_eq!(u.timeline.len(), 3);
    }

    #[test]
    fn frees_of_unseen_allocations_raise_the_baseline() {
        let events = [event(1, 30, false), event(2, 10, true)];
        let refs: Vec<&MemoryEvent> = events.iter().collect();
        let u = device_usage(Some(0), None, &refs);
        assert_eq!(u.allocated_before_capture_bytes, 30);
        assert_eq!((u.peak_bytes, u.end_bytes), (30, 10));
        assert!(u.timeline.iter().all(|p| p.in_use_bytes >= 0));
    }

    #[test]
    fn long_captures_are_bounded_and_keep_the_peak() {
        let events: Vec<MemoryEvent> = (0..10_000)
            .map(|i| event(i, if i == 5_000 { 1 << 30 } else { 1 }, i <= 5_000))
            .collect();
        let refs: Vec<&MemoryEvent> = events.iter().collect();
        let u = device_usage(Some(0), None, &refs);
        assert!(u.timeline.len() <= MAX_POINTS);
        let top = u.timeline.iter().map(|p| p.in_use_bytes).max();
        assert_eq!(top, Some(u.peak_bytes));
    }
}

//! Host memory that keeps growing on a GPU run: the slow host OOM that GPU figures never
//! show. The rule, as the README states it:
//!
//! - Only for runs with allocator figures (on CPU the tensors live in the C heap, and the
//!   activations verdict already judges it).
//! - The series is the C heap in use (`system.heap_bytes`), else the process's RSS, over
//!   the leak rule's window (after a 10 % warm-up, at least 6 records).
//! - **Growth** is judged by where it leads, not by its share of today's heap: a steady
//!   line (the leak rule's r² and still-going tests) whose slope, carried forward
//!   [`HORIZON_ITERS`] iterations, adds at least [`MIN_PROJECTED_BYTES`].
//! - With the host's RAM in the records (`system.ram_total_bytes`, and `ram_percent` for
//!   what the host uses), the report says near which iteration the growth would use up
//!   the RAM that was free at the last record.

use serde::Serialize;

use super::leak::{series_trend, window, MIN_RECORDS};
use crate::model::memory::MemoryRecord;
use crate::model::units::ByteUnit;

/// How far the growth is carried forward.
pub const HORIZON_ITERS: f64 = 100_000.0;
/// Least growth over the horizon that is worth a verdict: 1 GiB.
pub const MIN_PROJECTED_BYTES: f64 = (1u64 << 30) as f64;

/// Which host figure was judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum HostSeries {
    /// `system.heap_bytes`: the C heap in use (glibc).
    Heap,
    /// `system.rss_bytes`: the process's resident memory.
    Rss,
}

/// The host memory trend of a GPU run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HostGrowth {
    /// The series judged.
    pub series: HostSeries,
    /// Its value at the last record.
    pub current_bytes: u64,
    /// Theil–Sen slope over the window, bytes per 1000 iterations.
    pub slope_bytes_per_1k_iters: f64,
    /// r² of that line.
    pub r2: f64,
    /// Slope over the last third of the window.
    pub late_slope_bytes_per_1k_iters: Option<f64>,
    /// The slope carried forward [`HORIZON_ITERS`] iterations.
    pub projected_bytes_per_100k_iters: f64,
    /// Whether it grows by the rule above.
    pub growing: bool,
    /// Host RAM free at the last record (`ram_total_bytes` less `ram_percent` of it).
    pub ram_free_bytes: Option<u64>,
    /// Near which iteration the growth would use that up.
    pub ram_exhausted_near_iteration: Option<i64>,
    /// The verdict in words.
    pub reason: String,
}

/// The host memory trend of `records`; `None` for CPU runs, runs without host figures and
/// windows of fewer than [`MIN_RECORDS`] records.
pub fn host_growth(records: &[MemoryRecord]) -> Option<HostGrowth> {
    let last = records.last()?;
    last.allocator.as_ref()?;
    let (series, figure): (HostSeries, fn(&MemoryRecord) -> Option<u64>) =
        if last.system.heap_bytes.is_some() {
            (HostSeries::Heap, |r| r.system.heap_bytes)
        } else {
            (HostSeries::Rss, |r| r.system.rss_bytes)
        };
    let points: Vec<(f64, f64)> = window(records)
        .iter()
        .filter_map(|r| Some((r.iteration as f64, figure(r)? as f64)))
        .collect();
    if points.len() < MIN_RECORDS {
        return None;
    }
    let trend = series_trend(&points)?;
    let projected = trend.slope_bytes_per_1k_iters * HORIZON_ITERS / 1000.0;
    let growing = trend.steady() && projected >= MIN_PROJECTED_BYTES;
    let ram_free_bytes = match (last.system.ram_total_bytes, last.system.ram_percent) {
        (Some(total), Some(used)) => {
            Some((total as f64 * (1.0 - used / 100.0)).max(0.0).round() as u64)
        }
        _ => None,
    };
    let ram_exhausted_near_iteration = ram_free_bytes.filter(|_| growing).map(|free| {
        last.iteration + (free as f64 * 1000.0 / trend.slope_bytes_per_1k_iters).ceil() as i64
    });
    let name = match series {
        HostSeries::Heap => "the C heap",
        HostSeries::Rss => "the process's resident memory",
    };
    let reason = if growing {
        let until = ram_exhausted_near_iteration
            .map(|i| format!(", and would use up the host's free RAM near iteration {i}"))
            .unwrap_or_default();
        format!(
            "{name} grows {:+.1} MB per 1000 iterations, steadily (r² {:.2}) and still at the \
             end: {:.1} GiB more per 100k iterations{until}. \
             Usual causes: Python objects or autograd graphs kept across iterations (losses \
             appended without .item() or .detach()), or caches that grow with each new input \
             shape",
            ByteUnit::Mib.of_f64(trend.slope_bytes_per_1k_iters),
            trend.r2,
            projected / MIN_PROJECTED_BYTES,
        )
    } else {
        format!(
            "{name} does not grow steadily to the end ({:+.1} MB per 1000 iterations, r² {:.2})",
            ByteUnit::Mib.of_f64(trend.slope_bytes_per_1k_iters),
            trend.r2
        )
    };
    Some(HostGrowth {
        series,
        current_bytes: figure(last).unwrap_or(0),
        slope_bytes_per_1k_iters: trend.slope_bytes_per_1k_iters,
        r2: trend.r2,
        late_slope_bytes_per_1k_iters: trend.late_slope_bytes_per_1k_iters,
        projected_bytes_per_100k_iters: projected,
        growing,
        ram_free_bytes,
        ram_exhausted_near_iteration,
        reason,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::memory::{AllocatorStats, SystemStats};

    /// A GPU run's records every 10 iterations with the heap at `heap(iteration)`.
    fn gpu_run(iterations: i64, heap: impl Fn(i64) -> u64) -> Vec<MemoryRecord> {
        (0..=iterations / 10)
            .map(|i| MemoryRecord {
                iteration: i * 10,
                allocator: Some(AllocatorStats::default()),
                system: SystemStats {
                    heap_bytes: Some(heap(i * 10)),
                    ram_total_bytes: Some(64 << 30),
                    ram_percent: Some(50.0),
                    ..SystemStats::default()
                },
                ..MemoryRecord::default()
            })
            .collect()
    }

    /// The run that keeps every loss tensor: 116 KB per iteration on a 630 MB heap, 2 %
    /// over 110 iterations, with a little noise.
    #[test]
    fn slow_steady_growth_is_judged_by_where_it_leads() {
        let records = gpu_run(110, |it| {
            630_000_000 + it as u64 * 116_000 + [0, 40_000, 10_000][(it / 10) as usize % 3]
        });
        let h = host_growth(&records).unwrap();
        assert!(h.growing, "{}", h.reason);
        assert_eq!(h.series, HostSeries::Heap);
        // 32 GiB free at 116 KB per iteration: about 296k iterations on.
        let at = h.ram_exhausted_near_iteration.unwrap();
        assert!((280_000..310_000).contains(&at), "{at}");
    }

    /// 0.3 KB per iteration, steady: 30 MB per 100k iterations is no verdict.
    #[test]
    fn tiny_steady_growth_is_not() {
        let h = host_growth(&gpu_run(110, |it| 1_000_000_000 + it as u64 * 300)).unwrap();
        assert!(!h.growing, "{}", h.reason);
    }

    /// Growth that stops (a warm-up of caches) is not growth at the end.
    #[test]
    fn growth_that_stops_is_not() {
        let h = host_growth(&gpu_run(160, |it| {
            800_000_000 + it.min(60) as u64 * 3_000_000
        }))
        .unwrap();
        assert!(!h.growing, "{}", h.reason);
    }

    #[test]
    fn cpu_runs_are_left_to_the_activations_verdict() {
        let mut records = gpu_run(110, |it| it as u64 * 1_000_000);
        for r in &mut records {
            r.allocator = None;
        }
        assert_eq!(host_growth(&records), None);
    }
}

//! Whether the caching allocator's unallocated reserve is a cache or harm. The rule, as the
//! README states it:
//!
//! - `(reserved − allocated) / reserved` at the end is shown as a figure with its level
//!   (below 10 % low, 10–30 % normal, 30–40 % moderate, above 40 % high); by itself it
//!   decides nothing. Taken after `optimizer.step()`, most of it is the iteration's freed
//!   activation blocks kept for the next iteration: the cache working.
//! - The evidence is the allocator's own counters: `num_alloc_retries` (it freed its
//!   cache and asked the driver again) and `num_ooms`. They are summed over the rises
//!   between consecutive records; a rise explained by a caught out-of-memory error whose
//!   request exceeds the whole device is left out (no setting could have served it).
//! - **cache**: no rise. **fragmented**: a rise while inactive split blocks hold at least
//!   [`SPLIT_SHARE_PERCENT`] of reserved memory at the records where the counters rose
//!   (their median): free memory cut into pieces that the requests could not use.
//!   **pressure**: a rise without that: the run is at its memory limit — the process's
//!   own, below the device's, when the records say the process is capped
//!   (`memory_fraction` below 1) or when [`FREE_AT_LIMIT_PERCENT`] or more of the device
//!   was free at the records where the counters rose. **none**: the
//!   records carry no counters (CPU runs have no fragmentation at all; text logs and
//!   TensorBoard tags have the ratio only), so a cache and fragmentation cannot be told
//!   apart.

use serde::Serialize;

use super::trend::median;
use crate::model::memory::{AllocatorStats, MemoryRecord};
use crate::model::oom::OomEvent;
use crate::model::units::ByteUnit;
use crate::model::words::words;

/// Least median share of reserved memory in inactive split blocks, at the records where
/// the counters rose, that makes retries and OOMs fragmentation. With expandable segments
/// the allocator grows a segment instead of splitting one, and the share is 0; a healthy
/// run without them holds 15–25 % there after its step, harmless while nothing retries.
pub const SPLIT_SHARE_PERCENT: f64 = 5.0;

/// Least share of the device free (every process counted) at the records where the
/// counters rose that puts the run's limit below the device's: the allocator retries when
/// the driver refuses memory, which the device would not with this much free.
pub const FREE_AT_LIMIT_PERCENT: f64 = 10.0;

/// The levels of the ratio alone: below 10 % low, 10–30 % normal, 30–40 % moderate, above
/// 40 % high, as the `tensor_profile_<ts>.log` analyzers grade it.
pub const LEVELS: [(f64, Level); 3] = [
    (10.0, Level::Low),
    (30.0, Level::Normal),
    (40.0, Level::Moderate),
];

words! {
    /// The ratio's level.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Level {
        /// Below 10 %.
        Low = "low",
        /// 10–30 %.
        Normal = "normal",
        /// 30–40 %.
        Moderate = "moderate",
        /// Above 40 %.
        High = "high",
    }
}

impl Level {
    /// The level of `percent`.
    pub fn of(percent: f64) -> Level {
        LEVELS
            .iter()
            .find(|(below, _)| percent < *below)
            .map_or(Level::High, |(_, level)| *level)
    }
}

/// What the allocator's counters say.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// No retries, no OOMs: the unallocated reserve is the cache working.
    Cache,
    /// Retries or OOMs while split blocks held a significant share of reserved memory.
    Fragmented,
    /// Retries or OOMs without that: the run is at its memory limit.
    Pressure,
    /// No allocator counters in the records: cache and fragmentation look alike.
    None,
}

/// A record at which the counters rose, and by how much since the previous record.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Rise {
    /// The record's iteration.
    pub iteration: i64,
    /// Retries since the previous record.
    pub alloc_retries: u64,
    /// OOMs since the previous record.
    pub ooms: u64,
}

/// The allocator's state over a run (`null` on CPU, where there is no caching allocator).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Fragmentation {
    /// `(reserved − allocated) / reserved` at the end.
    pub percent: f64,
    /// Its level.
    pub level: Level,
    /// Reserved memory in inactive split blocks at the end, percent, when recorded.
    pub inactive_split_percent: Option<f64>,
    /// What the counters say.
    pub verdict: Verdict,
    /// Retries from the first record to the last (rises only, impossible requests left
    /// out); `null` without counters.
    pub alloc_retries: Option<u64>,
    /// OOMs likewise.
    pub ooms: Option<u64>,
    /// The records at which they rose.
    pub rose_at: Vec<Rise>,
    /// Median share of reserved memory in inactive split blocks at those records.
    pub split_percent_at_rises: Option<f64>,
    /// Caught OOMs of requests larger than the device within the records, left out above.
    pub impossible_ooms: u64,
    /// Highest allocated over the run (the records' peaks).
    pub peak_allocated_bytes: u64,
    /// Highest reserved over the run.
    pub peak_reserved_bytes: u64,
    /// Whether the run used expandable segments, from the last record; `null` unknown.
    pub expandable_segments: Option<bool>,
    /// Least device memory free (every process counted) at the records where the
    /// counters rose; `null` without rises or the figure.
    pub device_free_at_rises_bytes: Option<u64>,
    /// Device memory in total, from the last record.
    pub device_total_bytes: Option<u64>,
    /// The share of the device the process may allocate, from the last record
    /// (`set_per_process_memory_fraction`); `null` unknown.
    pub memory_fraction: Option<f64>,
    /// The verdict in words.
    pub reason: String,
}

impl Fragmentation {
    /// Under pressure, the limit in words when it is the process's own rather than the
    /// device's (the README's rule); `None` when it is the device's or cannot be told.
    pub fn process_limit(&self) -> Option<String> {
        let total = self.device_total_bytes.filter(|t| *t > 0)?;
        let gib = |bytes: f64| format!("{:.1} GiB", ByteUnit::Gib.of_f64(bytes));
        let cap = self.memory_fraction.filter(|f| *f < 1.0).map(|f| {
            format!(
                "torch.cuda.set_per_process_memory_fraction({f}) caps it at {}",
                gib(f * total as f64)
            )
        });
        // Free memory read at the records, not at the failed request, only stands in for
        // a cap the records cannot state: a recorded fraction of 1 says there is none.
        let free = self
            .device_free_at_rises_bytes
            .filter(|_| self.memory_fraction.is_none())
            .filter(|free| *free as f64 * 100.0 / total as f64 >= FREE_AT_LIMIT_PERCENT)
            .map(|free| {
                format!(
                    "{} of the device's {} were free where the counters rose",
                    gib(free as f64),
                    gib(total as f64)
                )
            });
        match (cap, free) {
            (Some(cap), Some(free)) => Some(format!("{cap}; {free}")),
            (Some(one), None) | (None, Some(one)) => Some(one),
            (None, None) => None,
        }
    }
}

/// Counters of one record, when it has both.
fn counters(a: &AllocatorStats) -> Option<(u64, u64)> {
    Some((a.num_alloc_retries?, a.num_ooms?))
}

/// The allocator's state over `records` (ordered by iteration), given the OOMs caught in
/// the run; `None` without allocator figures.
pub fn fragmentation(records: &[MemoryRecord], caught: &[OomEvent]) -> Option<Fragmentation> {
    let last = records.last()?.allocator.as_ref()?;
    let percent_now = last.fragmentation_percent();
    let with_counters: Vec<(&MemoryRecord, &AllocatorStats, (u64, u64))> = records
        .iter()
        .filter_map(|r| {
            let a = r.allocator.as_ref()?;
            Some((r, a, counters(a)?))
        })
        .collect();
    let mut rose_at = Vec::new();
    let mut shares = Vec::new();
    let mut free_at_rises: Option<u64> = None;
    let mut impossible_ooms = 0;
    for pair in with_counters.windows(2) {
        let ((before, _, (r0, o0)), (now, a, (r1, o1))) = (pair[0], pair[1]);
        let excused = caught
            .iter()
            .filter(|e| e.impossible)
            .filter(|e| e.time.is_some_and(|t| t > before.time && t <= now.time))
            .count() as u64;
        let ooms = o1.saturating_sub(o0);
        let retries = r1.saturating_sub(r0);
        impossible_ooms += excused.min(ooms);
        let (retries, ooms) = (
            retries.saturating_sub(excused),
            ooms.saturating_sub(excused),
        );
        if retries > 0 || ooms > 0 {
            rose_at.push(Rise {
                iteration: now.iteration,
                alloc_retries: retries,
                ooms,
            });
            if let Some(share) = a.inactive_split_percent() {
                shares.push(share);
            }
            if let Some(free) = a.device_free_bytes {
                free_at_rises = Some(free_at_rises.map_or(free, |f| f.min(free)));
            }
        }
    }
    let split_percent_at_rises = median(&mut shares);
    let has_counters = !with_counters.is_empty();
    let sum = |f: fn(&Rise) -> u64| has_counters.then(|| rose_at.iter().map(f).sum::<u64>());
    let (alloc_retries, ooms) = (sum(|r| r.alloc_retries), sum(|r| r.ooms));
    let verdict = match (has_counters, rose_at.is_empty(), split_percent_at_rises) {
        (false, _, _) => Verdict::None,
        (true, true, _) => Verdict::Cache,
        (true, false, Some(share)) if share >= SPLIT_SHARE_PERCENT => Verdict::Fragmented,
        (true, false, _) => Verdict::Pressure,
    };
    let peak = |f: fn(&AllocatorStats) -> u64| {
        records
            .iter()
            .filter_map(|r| r.allocator.as_ref().map(f))
            .max()
            .unwrap_or(0)
    };
    let mut f = Fragmentation {
        percent: percent_now,
        level: Level::of(percent_now),
        inactive_split_percent: last.inactive_split_percent(),
        verdict,
        alloc_retries,
        ooms,
        rose_at,
        split_percent_at_rises,
        impossible_ooms,
        peak_allocated_bytes: peak(|a| a.peak_allocated_bytes.max(a.allocated_bytes)),
        peak_reserved_bytes: peak(|a| a.peak_reserved_bytes.max(a.reserved_bytes)),
        expandable_segments: last.expandable_segments,
        device_free_at_rises_bytes: free_at_rises,
        device_total_bytes: last.device_total_bytes,
        memory_fraction: last.memory_fraction,
        reason: String::new(),
    };
    f.reason = reason(&f, records);
    Some(f)
}

fn reason(f: &Fragmentation, records: &[MemoryRecord]) -> String {
    let iterations = match (records.first(), records.last()) {
        (Some(a), Some(b)) => format!("iterations {}–{}", a.iteration, b.iteration),
        _ => String::new(),
    };
    let counted = format!(
        "{} allocation retries and {} out-of-memory errors",
        f.alloc_retries.unwrap_or(0),
        f.ooms.unwrap_or(0)
    );
    let first = f
        .rose_at
        .first()
        .map(|r| format!(", first by iteration {}", r.iteration))
        .unwrap_or_default();
    let split = f.split_percent_at_rises.unwrap_or(0.0);
    let peaks = format!(
        "peak reserved {:.1} GiB for a peak allocated of {:.1} GiB",
        ByteUnit::Gib.of(f.peak_reserved_bytes),
        ByteUnit::Gib.of(f.peak_allocated_bytes)
    );
    match f.verdict {
        Verdict::Cache => format!(
            "the allocator's counters show no retries or out-of-memory errors in the \
             records of {iterations}: the {:.1}% of \
             reserved memory not allocated is the caching allocator keeping freed blocks \
             for reuse, not fragmentation",
            f.percent
        ),
        Verdict::Fragmented => format!(
            "{counted}{first}, while inactive split blocks held {split:.1}% of reserved memory \
             where they rose (median; {SPLIT_SHARE_PERCENT}% or more is fragmentation): free \
             memory is cut into pieces the requests could not use ({peaks})"
        ),
        Verdict::Pressure => format!(
            "{counted}{first}, with inactive split blocks at {split:.1}% of reserved memory \
             where they rose (under {SPLIT_SHARE_PERCENT}%): not fragmentation, the run is at \
             its memory limit{} ({peaks})",
            f.process_limit().map_or(String::new(), |limit| format!(
                ", which is the process's, not the device's: {limit}"
            ))
        ),
        Verdict::None => format!(
            "{:.1}% of reserved memory is not allocated ({}; 10–30% normal, 30–40% moderate, \
             above 40% high); without the allocator's counters (num_alloc_retries, num_ooms) \
             a cache and fragmentation cannot be told apart",
            f.percent, f.level
        ),
    }
}

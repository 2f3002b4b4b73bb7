//! An out-of-memory error that `gpuscope.oom_guard` caught: what was asked for, what the
//! device has, and when.

use std::path::PathBuf;

use serde::Serialize;

use super::memory::Categories;

/// One caught out-of-memory error.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OomEvent {
    /// The human report it was read from (`snapshots/oom.<stamp>.txt`).
    pub report: PathBuf,
    /// The iteration of the memory record taken then; `null` without a profiler.
    pub iteration: Option<i64>,
    /// Unix seconds of that record; `null` without a profiler.
    pub time: Option<f64>,
    /// The request that failed, from torch's message (`Tried to allocate 2.00 GiB`, so
    /// to 0.01 of its unit).
    pub requested_bytes: Option<u64>,
    /// The device's memory in total, from the record, else torch's message.
    pub device_total_bytes: Option<u64>,
    /// A request larger than the whole device: no allocator setting or freed memory could
    /// have served it, so it says nothing of fragmentation or pressure.
    pub impossible: bool,
    /// The first line of torch's message.
    pub message: String,
    /// The allocator snapshot saved with the report; `null` when it names none (no CUDA,
    /// or the dump failed).
    pub snapshot: Option<OomSnapshot>,
    /// Memory at the error, from the record taken then; `null` without a profiler.
    pub at_error: Option<OomMemory>,
}

/// Memory when an out-of-memory error was caught, from the record taken then.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OomMemory {
    /// Allocated by the allocator (`null` without its figures).
    pub allocated_bytes: Option<u64>,
    /// Reserved by the allocator.
    pub reserved_bytes: Option<u64>,
    /// Memory by category.
    pub categories_bytes: Categories,
}

/// The allocator snapshot `gpuscope.oom_guard` saved with a report. The report names it by
/// the path it had when written; a run directory that was moved or copied keeps it (or
/// not) under the same file name beside the report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OomSnapshot {
    /// The path as the report names it.
    pub named: String,
    /// The file of that name beside the report; `null` when it is not there (a copy of
    /// the run that kept the text alone).
    pub path: Option<PathBuf>,
}

impl OomEvent {
    /// An event, `impossible` derived from the request and the device's total.
    pub fn new(
        report: PathBuf,
        iteration: Option<i64>,
        time: Option<f64>,
        requested_bytes: Option<u64>,
        device_total_bytes: Option<u64>,
        message: String,
        snapshot: Option<OomSnapshot>,
    ) -> Self {
        let impossible = matches!(
            (requested_bytes, device_total_bytes),
            (Some(asked), Some(total)) if asked > total
        );
        OomEvent {
            report,
            iteration,
            time,
            requested_bytes,
            device_total_bytes,
            impossible,
            message,
            snapshot,
            at_error: None,
        }
    }
}

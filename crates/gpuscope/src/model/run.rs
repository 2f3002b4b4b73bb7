//! A run directory as read for a comparison: the memory records of every rank, the
//! profiler traces and one allocator snapshot, each as its own reader gives it.

use std::path::PathBuf;

use super::memory::RankRecords;
use super::snapshot::Snapshot;
use super::trace::TraceFile;

/// What a run directory holds that `gpuscope compare` reads.
#[derive(Debug)]
pub struct RunData {
    /// The run directory.
    pub path: PathBuf,
    /// The memory records of each rank, by rank.
    pub ranks: Vec<RankRecords>,
    /// The profiler traces of `profiler_traces/`; empty without any.
    pub traces: Vec<TraceFile>,
    /// The allocator snapshot of the lowest rank taken at the latest iteration
    /// (`snapshots/[rank<R>.]iter<N>.pickle`), with its path; `None` without one.
    pub snapshot: Option<(PathBuf, Snapshot)>,
    /// `path: why` for each file of `profiler_traces/` that is not a usable trace.
    pub skipped: Vec<String>,
}

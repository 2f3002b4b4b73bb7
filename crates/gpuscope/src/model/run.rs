//! Everything read from one run directory (or one file of memory records), source by
//! source, before any analysis: what `gpuscope report` diagnoses.

use std::path::PathBuf;

use super::gpu::Sample;
use super::memory::RankRecords;
use super::nsys::NsysExport;
use super::snapshot::Snapshot;
use super::sources::{Sources, Unreadable};
use super::trace::TraceFile;

/// One run as read.
pub struct RunRead {
    /// The path given.
    pub path: PathBuf,
    /// What the directory holds; `None` for a file (a text log, an event file).
    pub sources: Option<Sources>,
    /// The memory records of each rank.
    pub ranks: Vec<RankRecords>,
    /// Its profiler traces, one per rank.
    pub traces: Vec<TraceFile>,
    /// Its allocator snapshots.
    pub snapshots: Vec<SnapshotFile>,
    /// Its GPU samples.
    pub samples: Vec<Sample>,
    /// Its Nsight exports, with their files.
    pub nsys: Vec<(PathBuf, NsysExport)>,
    /// Files of a source that could not be read.
    pub unreadable: Vec<Unreadable>,
}

/// An allocator snapshot of `snapshots/` and what its file name says.
pub struct SnapshotFile {
    /// The file.
    pub path: PathBuf,
    /// The rank and iteration of a snapshot `MemoryProfiler(snapshot_at=[N])` took
    /// (`[rank<R>.]iter<N>.pickle`); `None` for others (those saved at an out-of-memory
    /// error among them).
    pub taken_at: Option<(Option<u32>, i64)>,
    /// Its contents.
    pub snapshot: Snapshot,
}

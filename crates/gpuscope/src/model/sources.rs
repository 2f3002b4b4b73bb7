//! What a run directory holds, source by source: the files of each source that was found,
//! and for each that was not, what would have written it. The first part of a run's
//! diagnosis (`gpuscope report RUN`), so that a missing source is said, not silently
//! left out.

use std::path::PathBuf;

use serde::Serialize;

use super::words::words;

words! {
    /// A kind of file a run directory can hold (docs/run-dir.md).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
    pub enum Source {
        /// Memory records: `profiles/memory*.jsonl`, else the `tensor_profile_*.log` text
        /// logs, else the `tensorboard/` tags.
        Memory = "memory",
        /// Profiler (Kineto) traces in `profiler_traces/`.
        Trace = "trace",
        /// Allocator snapshots and out-of-memory reports in `snapshots/`.
        Snapshot = "snapshot",
        /// GPU and host samples, `gpu.jsonl`.
        Gpu = "gpu",
        /// Non-finite events and their reports in `profiles/`.
        Nonfinite = "nonfinite",
        /// Nsight Systems reports and exports in `nsys/`.
        Nsys = "nsys",
    }
}

impl Source {
    /// What writes this source into a run directory: said when it is absent.
    pub fn written_by(self) -> &'static str {
        match self {
            Source::Memory => "gpuscope.MemoryProfiler (or a framework callback) in the training",
            Source::Trace => "gpuscope.profile(...) around the training loop (torch.profiler)",
            Source::Snapshot => {
                "MemoryProfiler(snapshot_at=[N]) on CUDA, or gpuscope.oom_guard when memory \
                 runs out"
            }
            Source::Gpu => "gpuscope run -- <training command>",
            Source::Nonfinite => {
                "MemoryProfiler.check_finite(...) each iteration, which writes only when it \
                 finds NaN or Inf"
            }
            Source::Nsys => "gpuscope nsys profile -- <training command>",
        }
    }
}

/// The files of one source that a run directory holds, in name order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Found {
    /// Which source.
    pub source: Source,
    /// Its files (for memory from TensorBoard, the `tensorboard/` directory).
    pub files: Vec<PathBuf>,
}

/// A source the run directory does not hold, and what would have written it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Absent {
    /// Which source.
    pub source: Source,
    /// What writes it ([`Source::written_by`]).
    pub written_by: &'static str,
}

/// Every source of a run directory, found or absent, each once, in [`Source::ALL`] order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Sources {
    /// The sources with at least one file.
    pub found: Vec<Found>,
    /// The sources without any.
    pub absent: Vec<Absent>,
}

impl Sources {
    /// The files of `source`; empty when it is absent.
    pub fn files(&self, source: Source) -> &[PathBuf] {
        self.found
            .iter()
            .find(|f| f.source == source)
            .map_or(&[], |f| &f.files)
    }
}

/// A file of a source that could not be read, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unreadable {
    /// Its source.
    pub source: Source,
    /// The file.
    pub path: PathBuf,
    /// Why.
    pub reason: String,
}

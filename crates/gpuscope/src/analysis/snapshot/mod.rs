//! Analyses of CUDA allocator snapshots: the state at the dump, fragmentation, the
//! replayed trace (timeline, true peak, what was alive then, never-freed allocations and
//! which of them accumulate, churn, OOMs), and
//! the comparison of two snapshots.

pub mod diff;
pub mod fragmentation;
pub mod never_freed;
pub mod replay;
pub mod report;
pub mod sites;
pub mod stacked;
pub mod stats;

pub use report::{snapshot_report, Options, SnapshotReport};

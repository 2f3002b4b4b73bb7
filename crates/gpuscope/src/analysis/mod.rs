//! Analyses: pure functions from model to result structs. They never read a file or print.
//! One folder per command that has several (`report`, `trace`, `snapshot`, `nsys`); the
//! samples of `monitor` and torch's memory timeline export have one module each.

pub mod compare_runs;
pub mod diagnosis;
pub mod gpu_peaks;
pub mod memory_timeline;
pub mod nsys;
pub mod report;
pub mod snapshot;
pub mod trace;

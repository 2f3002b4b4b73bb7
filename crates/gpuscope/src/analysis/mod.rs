//! Analyses: pure functions from model to result structs. They never read a file or print.

pub mod advice;
pub mod allocator_verdict;
pub mod compare;
pub mod gpu_peaks;
pub mod gradients;
pub mod health;
pub mod host_growth;
pub mod leak;
pub mod losses;
pub mod nsys;
pub mod oom;
pub mod report;
pub mod sections;
pub mod snapshot;
pub mod spread;
pub mod summary;
pub mod timeline;
pub mod trace;
pub mod trend;

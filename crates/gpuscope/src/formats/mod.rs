//! Formats: the readers and writers of the files of GPU profiling, and the live sources of
//! figures (NVML, nvidia-smi, this process). They turn bytes into the [`crate::model`] and
//! back; they never compute a statistic.

pub mod batch_writer;
pub mod gpu;
pub mod memory_timeline;
pub mod nsys;
pub mod output;
pub mod pickle;
pub mod process;
pub mod progress;
pub mod run_dir;
pub mod runlog;
pub mod snapshot;
pub mod tfevents;
pub mod trace;

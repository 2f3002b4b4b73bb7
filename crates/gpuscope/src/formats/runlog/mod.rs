//! The files of a run directory that the in-training profiler writes: `profiles/memory.jsonl`
//! (canonical), the `tensor_profile_<ts>.log` text blocks, and the
//! TensorBoard tags of each record.

pub mod from_tensorboard;
pub mod load;
pub mod oom_report;
pub mod paths;
pub mod read;
pub mod sources;
pub mod tags;
pub mod text_block;
pub mod whole;
pub mod writer;

pub use writer::{RunWriter, RunWriterOptions};

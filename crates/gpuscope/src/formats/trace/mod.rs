//! PyTorch profiler (Kineto) Chrome traces: a streaming reader into the compact model,
//! a loader for a directory of per-rank traces, the reader of a directory of rank
//! summaries, and torch's raw memory timeline export.

pub mod load;
pub mod overlay;
pub mod read;
pub mod split;
pub mod summaries;

pub use load::{load_traces, Loaded};
pub use read::read_trace;

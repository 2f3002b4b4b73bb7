//! PyTorch profiler (Kineto) Chrome traces: a streaming reader into the compact model,
//! and a loader for a directory of per-rank traces.

pub mod load;
pub mod read;

pub use load::{load_traces, Loaded, TraceFile};
pub use read::read_trace;

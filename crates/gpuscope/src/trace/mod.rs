//! PyTorch profiler (Kineto) Chrome traces: a streaming reader into the compact model.

pub mod read;

pub use read::read_trace;

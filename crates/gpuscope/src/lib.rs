//! gpuscope's engine: readers and writers for the files of GPU profiling (formats), the
//! typed data they hold (model), pure analyses over that data, and renderers.
//!
//! The engine never prints and never sees a Python object; the CLI and the Python bindings
//! are thin doors onto it.

pub mod analysis;
pub mod batch_writer;
pub mod error;
pub mod gpu;
pub mod host;
pub mod model;
pub mod nsys;
pub mod pickle;
pub mod progress;
pub mod render;
pub mod runlog;
pub mod snapshot;
pub mod tfevents;
pub mod trace;

pub use error::{Error, Result};

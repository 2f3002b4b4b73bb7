//! gpuscope's engine: readers and writers for the files of GPU profiling (formats), the
//! typed data they hold (model), pure analyses over that data, and renderers.
//!
//! The engine never prints and never sees a Python object; the CLI and the Python bindings
//! are thin doors onto it.

pub mod analysis;
pub mod error;
pub mod formats;
pub mod model;
pub mod render;

pub use error::{Error, Result};

//! Plain typed data that the formats produce and the analyses consume. No I/O here.

pub mod gpu;
pub mod memory;
pub mod names;
pub mod snapshot;
pub mod tensorboard;
pub mod trace;

//! Plain typed data that the formats produce and the analyses consume. No I/O here.

pub mod compare;
pub mod gpu;
pub mod health;
pub mod interned;
pub mod memory;
pub mod memory_timeline;
pub mod nsys;
pub mod oom;
pub mod run;
pub mod snapshot;
pub mod sources;
pub mod spelled;
pub mod tensorboard;
pub mod trace;
pub mod units;
pub(crate) mod words;

//! Analyses of PyTorch profiler traces, each a function over the compact trace model.
//! Where Holistic Trace Analysis (HTA) answers the same question, the definitions follow
//! HTA's so the numbers can be compared; the module of each analysis says where and why
//! it departs.

pub mod clamp;
pub mod copies;
pub mod device_memory;
pub mod diff;
pub mod gaps;
pub mod idle;
pub mod intervals;
pub mod kernel_type;
pub mod kernels;
pub mod launches;
pub mod operators;
pub mod overlap;
pub mod queue;
pub mod ranks;
pub mod report;
pub mod scope;
pub mod steps;
pub mod temporal;

//! Analyses: pure functions from model to result structs. They never read a file or print.

pub mod summary;

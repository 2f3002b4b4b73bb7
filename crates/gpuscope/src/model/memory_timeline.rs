//! torch.profiler's memory timeline (`export_memory_timeline`) as exported: every event, or
//! the bytes of each category after each instant.

/// torch's categories, in the order of its `_CATEGORY_TO_INDEX`; the last is unknown.
pub const CATEGORIES: [&str; 8] = [
    "parameter",
    "optimizer_state",
    "input",
    "temporary",
    "activation",
    "gradient",
    "autograd_detail",
    "unknown",
];

/// One event of the timeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryEvent {
    /// Nanoseconds on the profiler's clock; -1 before profiling.
    pub time_ns: i64,
    /// 1 pre-existing, 2 create, 3 increment version, 4 destroy.
    pub action: u8,
    /// Bytes, negative when released.
    pub bytes: i64,
    /// Index into [`CATEGORIES`].
    pub category: u8,
}

/// A memory timeline as exported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemoryTimeline {
    /// Every event.
    Raw(Vec<MemoryEvent>),
    /// Bytes per category after each instant (µs), as torch coalesced them.
    Totals {
        /// The instants, µs.
        times_us: Vec<i64>,
        /// Bytes of each category (in [`CATEGORIES`] order) after each instant.
        bytes: Vec<Vec<i64>>,
    },
}

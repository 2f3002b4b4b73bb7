//! A CUDA caching-allocator snapshot (`torch.cuda.memory._snapshot()`): the segments the
//! allocator holds and their blocks at the moment of the dump, and per device the trace
//! of allocator events that led there. Stacks are interned: a snapshot repeats the same
//! few hundred frames across tens of thousands of events.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;

use super::interned::Names;

/// Index of a stack in [`Stacks`]; [`NO_STACK`] when none was recorded.
pub type StackId = u32;

/// The stack of an event or block that has no frames.
pub const NO_STACK: StackId = 0;

/// One frame of a stack: ids into [`Stacks::names`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Frame {
    /// The function.
    pub name: u32,
    /// The source file (`??` or empty for native code without debug info).
    pub filename: u32,
    /// The line as recorded (native frames without debug information have 0); `None`
    /// when the snapshot gives none that is a line number (torch writes 2^64 − 1 for a
    /// C++ frame it could not place).
    pub line: Option<i64>,
}

/// Interned frames and stacks (innermost frame first, as torch records them).
#[derive(Debug, Clone)]
pub struct Stacks {
    /// Function names, file names and other repeated strings.
    pub names: Names,
    frames: Vec<Frame>,
    frame_index: FxHashMap<Frame, u32>,
    /// Where each stack's frame ids start in `stack_frames`; stack k is
    /// `stack_frames[starts[k]..starts[k + 1]]`.
    starts: Vec<usize>,
    stack_frames: Vec<u32>,
    stack_index: FxHashMap<Vec<u32>, StackId>,
}

impl Default for Stacks {
    fn default() -> Self {
        let mut stack_index = FxHashMap::default();
        stack_index.insert(Vec::new(), NO_STACK);
        Stacks {
            names: Names::default(),
            frames: Vec::new(),
            frame_index: FxHashMap::default(),
            starts: vec![0, 0],
            stack_frames: Vec::new(),
            stack_index,
        }
    }
}

impl Stacks {
    /// The id of a frame, adding it when new.
    pub fn frame(&mut self, name: &str, filename: &str, line: Option<i64>) -> u32 {
        let frame = Frame {
            name: self.names.intern(name),
            filename: self.names.intern(filename),
            line,
        };
        let next = self.frames.len() as u32;
        *self.frame_index.entry(frame).or_insert_with(|| {
            self.frames.push(frame);
            next
        })
    }

    /// The id of a stack of frame ids, adding it when new.
    pub fn stack(&mut self, frames: &[u32]) -> StackId {
        if let Some(&id) = self.stack_index.get(frames) {
            return id;
        }
        let next = (self.starts.len() - 1) as StackId;
        self.stack_frames.extend_from_slice(frames);
        self.starts.push(self.stack_frames.len());
        self.stack_index.insert(frames.to_vec(), next);
        next
    }

    /// The frames of `stack`, innermost first.
    pub fn frames(&self, stack: StackId) -> impl Iterator<Item = Frame> + '_ {
        let k = stack as usize;
        self.stack_frames[self.starts[k]..self.starts[k + 1]]
            .iter()
            .map(|&f| self.frames[f as usize])
    }

    /// How many distinct stacks there are, the empty one included.
    pub fn len(&self) -> usize {
        self.starts.len() - 1
    }

    /// True when only the empty stack exists.
    pub fn is_empty(&self) -> bool {
        self.len() == 1
    }
}

/// A block's state in its segment.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum BlockState {
    /// Handed out to a tensor.
    ActiveAllocated,
    /// Freed by the program, waiting for a stream's pending work before reuse.
    ActivePendingFree,
    /// Free, cached by the allocator.
    Inactive,
    /// A state this reader does not know, as the snapshot spells it.
    Other(String),
}

impl BlockState {
    /// Parses torch's spelling.
    pub fn parse(state: &str) -> Self {
        match state {
            "active_allocated" => BlockState::ActiveAllocated,
            "active_pending_free" => BlockState::ActivePendingFree,
            "inactive" => BlockState::Inactive,
            other => BlockState::Other(other.to_owned()),
        }
    }

    /// Torch's spelling.
    pub fn as_str(&self) -> &str {
        match self {
            BlockState::ActiveAllocated => "active_allocated",
            BlockState::ActivePendingFree => "active_pending_free",
            BlockState::Inactive => "inactive",
            BlockState::Other(s) => s,
        }
    }

    /// Whether the block holds memory a tensor uses or is about to release.
    pub fn is_active(&self) -> bool {
        matches!(
            self,
            BlockState::ActiveAllocated | BlockState::ActivePendingFree
        )
    }
}

/// A block: a piece of a segment, in address order within it.
#[derive(Debug, Clone)]
pub struct Block {
    /// Device address.
    pub address: u64,
    /// Bytes the block spans (the allocator's rounded size).
    pub size: u64,
    /// Bytes the program asked for (≤ `size`); 0 for free blocks.
    pub requested_size: u64,
    /// Its state.
    pub state: BlockState,
    /// Where it was allocated, when the snapshot recorded stacks.
    pub stack: StackId,
}

/// A segment: one `cudaMalloc` (or a mapped range of an expandable segment).
#[derive(Debug, Clone)]
pub struct Segment {
    /// CUDA device index.
    pub device: u32,
    /// Device address of its start.
    pub address: u64,
    /// Bytes reserved from the driver.
    pub total_size: u64,
    /// Bytes in allocated blocks.
    pub allocated_size: u64,
    /// Bytes in active blocks (allocated or pending free).
    pub active_size: u64,
    /// Bytes the program asked for in its allocated blocks.
    pub requested_size: u64,
    /// The CUDA stream it serves (a pointer value; 0 is the default stream).
    pub stream: i64,
    /// `large` or `small` pool (allocations over 1 MiB come from the large pool).
    pub segment_type: String,
    /// Memory pool id (`(0, 0)` outside CUDA graphs and private pools).
    pub pool: (i64, i64),
    /// An expandable segment (`expandable_segments:True`).
    pub expandable: bool,
    /// Its blocks in address order.
    pub blocks: Vec<Block>,
    /// Where its first allocation came from, when recorded.
    pub stack: StackId,
}

/// What an allocator trace entry records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Action {
    /// A block handed to the program.
    Alloc,
    /// The program freed a block; it waits for its streams.
    FreeRequested,
    /// The freed block is back in the cache.
    FreeCompleted,
    /// `cudaMalloc` of a new segment.
    SegmentAlloc,
    /// `cudaFree` of a segment (cache emptied or an allocation retried).
    SegmentFree,
    /// Pages mapped into an expandable segment.
    SegmentMap,
    /// Pages unmapped from an expandable segment.
    SegmentUnmap,
    /// `_snapshot()` was called.
    Snapshot,
    /// An allocation failed: out of memory.
    Oom,
    /// Another action; its spelling is in [`Stacks::names`].
    Other(u32),
}

impl Action {
    /// Parses torch's spelling; unknown ones are interned in `names`.
    pub fn parse(action: &str, names: &mut Names) -> Self {
        match action {
            "alloc" => Action::Alloc,
            "free_requested" => Action::FreeRequested,
            "free_completed" => Action::FreeCompleted,
            "segment_alloc" => Action::SegmentAlloc,
            "segment_free" => Action::SegmentFree,
            "segment_map" => Action::SegmentMap,
            "segment_unmap" => Action::SegmentUnmap,
            "snapshot" => Action::Snapshot,
            "oom" => Action::Oom,
            other => Action::Other(names.intern(other)),
        }
    }

    /// Torch's spelling.
    pub fn as_str<'a>(&self, names: &'a Names) -> &'a str {
        match self {
            Action::Alloc => "alloc",
            Action::FreeRequested => "free_requested",
            Action::FreeCompleted => "free_completed",
            Action::SegmentAlloc => "segment_alloc",
            Action::SegmentFree => "segment_free",
            Action::SegmentMap => "segment_map",
            Action::SegmentUnmap => "segment_unmap",
            Action::Snapshot => "snapshot",
            Action::Oom => "oom",
            Action::Other(id) => names.get(*id),
        }
    }
}

/// One entry of a device's allocator trace.
#[derive(Debug, Clone, Copy)]
pub struct TraceEntry {
    /// What happened.
    pub action: Action,
    /// The block's or segment's address.
    pub addr: u64,
    /// Its size in bytes (for `oom`, the size that could not be allocated).
    pub size: u64,
    /// The stream.
    pub stream: i64,
    /// Microseconds since the Unix epoch; `None` in snapshots recorded without times.
    pub time_us: Option<i64>,
    /// For `oom`: bytes the driver reported free.
    pub device_free: Option<u64>,
    /// Where it happened.
    pub stack: StackId,
}

/// A user annotation (`torch.cuda.memory._record_memory_history` records optimizer
/// phases and `record_function` ranges as START/END pairs in newer versions).
#[derive(Debug, Clone)]
pub struct Annotation {
    /// `START` or `END`.
    pub stage: String,
    /// The range's name.
    pub name: String,
    /// Its device.
    pub device: u32,
    /// Microseconds since the Unix epoch, when recorded.
    pub time_us: Option<i64>,
}

/// A whole snapshot.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// The segments, as listed.
    pub segments: Vec<Segment>,
    /// The allocator trace of each device, by device index.
    pub device_traces: Vec<Vec<TraceEntry>>,
    /// The stacks that segments, blocks and entries refer to.
    pub stacks: Stacks,
    /// User annotations, when recorded.
    pub annotations: Vec<Annotation>,
    /// The allocator's settings as text by name, when recorded.
    pub allocator_settings: BTreeMap<String, String>,
    /// Whether only the state at the dump was read
    /// ([`Parts::Segments`](crate::formats::snapshot::Parts::Segments)): the trace, and the
    /// annotations and settings torch writes after it, are in the file but were not read.
    pub trace_skipped: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stacks_are_interned_and_read_back_in_order() {
        let mut s = Stacks::default();
        let a = s.frame("f", "x.py", Some(3));
        let b = s.frame("g", "y.py", Some(4));
        assert_eq!(s.frame("f", "x.py", Some(3)), a);
        assert_ne!(s.frame("f", "x.py", None), a);
        let ab = s.stack(&[a, b]);
        assert_eq!(s.stack(&[a, b]), ab);
        assert_ne!(s.stack(&[b, a]), ab);
        assert_eq!(s.stack(&[]), NO_STACK);
        let names: Vec<&str> = s.frames(ab).map(|f| s.names.get(f.name)).collect();
        assert_eq!(names, ["f", "g"]);
        assert_eq!(s.frames(NO_STACK).count(), 0);
        assert_eq!(s.len(), 3);
    }
}

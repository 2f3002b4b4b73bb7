//! CUDA caching-allocator snapshots (`torch.cuda.memory._dump_snapshot` pickles), read
//! with the safe pickle reader into the model.

pub mod read;

pub use read::{from_pickle, read_snapshot, read_snapshot_bytes, Parts};

//! The allocator's state at the dump: the facts `python -m torch.cuda._memory_viz stats`
//! prints (segments, reserved, allocated, free and its internal share), plus blocks by
//! state and the same sums per device, stream, pool and segment size class.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::model::snapshot::{BlockState, Segment, Snapshot};

/// Sums over a set of segments.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Sums {
    /// Segments (`cudaMalloc`s held).
    pub segments: u64,
    /// Bytes reserved from the driver.
    pub reserved_bytes: u64,
    /// Bytes in allocated blocks.
    pub allocated_bytes: u64,
    /// Bytes in active blocks (allocated or pending free).
    pub active_bytes: u64,
    /// Bytes the program asked for in its allocated blocks.
    pub requested_bytes: u64,
}

impl Sums {
    fn add(&mut self, s: &Segment) {
        self.segments += 1;
        self.reserved_bytes += s.total_size;
        self.allocated_bytes += s.allocated_size;
        self.active_bytes += s.active_size;
        self.requested_bytes += s.requested_size;
    }
}

/// [`Sums`] for the segments sharing one key.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Group {
    /// The device, stream, pool or size class.
    pub key: String,
    /// Its sums.
    #[serde(flatten)]
    pub sums: Sums,
}

/// The snapshot's state at the dump.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Stats {
    /// The sums over all segments.
    #[serde(flatten)]
    pub total: Sums,
    /// Blocks by state (`active_allocated`, `active_pending_free`, `inactive`).
    pub block_counts: BTreeMap<String, u64>,
    /// Bytes in blocks by state.
    pub block_bytes: BTreeMap<String, u64>,
    /// Reserved bytes no tensor asked for, as `_memory_viz stats` reports `total_free`:
    /// blocks not allocated plus the rounding inside allocated ones.
    pub free_bytes: u64,
    /// Of those, the bytes lost to rounding inside allocated blocks (size − requested).
    pub internal_free_bytes: u64,
    /// `internal_free_bytes` as a percentage of `free_bytes` ("% internal"); `null` when
    /// nothing is free.
    pub internal_free_percent: Option<f64>,
    /// Devices with segments or a trace.
    pub devices: Vec<u32>,
    /// Sums per device.
    pub by_device: Vec<Group>,
    /// Sums per stream (0 is the default stream).
    pub by_stream: Vec<Group>,
    /// Sums per memory pool (`0,0` is the default pool; others are CUDA graphs' and
    /// private pools).
    pub by_pool: Vec<Group>,
    /// Sums per segment size class (`large`: blocks over 1 MiB, `small`: up to 1 MiB).
    pub by_segment_type: Vec<Group>,
}

/// The stats of `snapshot`.
pub fn stats(snapshot: &Snapshot) -> Stats {
    let mut total = Sums::default();
    let mut block_counts = BTreeMap::new();
    let mut block_bytes = BTreeMap::new();
    let (mut internal, mut external) = (0, 0);
    let mut groups: [BTreeMap<String, Sums>; 4] = Default::default();
    for s in &snapshot.segments {
        total.add(s);
        let keys = [
            s.device.to_string(),
            s.stream.to_string(),
            format!("{},{}", s.pool.0, s.pool.1),
            s.segment_type.clone(),
        ];
        for (group, key) in groups.iter_mut().zip(keys) {
            group.entry(key).or_default().add(s);
        }
        for b in &s.blocks {
            *block_counts.entry(b.state.as_str().to_owned()).or_insert(0) += 1;
            *block_bytes.entry(b.state.as_str().to_owned()).or_insert(0) += b.size;
            if b.state == BlockState::ActiveAllocated {
                internal += b.size.saturating_sub(b.requested_size);
            } else {
                external += b.size;
            }
        }
    }
    let free_bytes = internal + external;
    let mut devices: Vec<u32> = snapshot.segments.iter().map(|s| s.device).collect();
    devices.extend(
        (0..snapshot.device_traces.len() as u32)
            .filter(|&d| !snapshot.device_traces[d as usize].is_empty()),
    );
    devices.sort_unstable();
    devices.dedup();
    let [by_device, by_stream, by_pool, by_segment_type] = groups.map(|g| {
        g.into_iter()
            .map(|(key, sums)| Group { key, sums })
            .collect()
    });
    Stats {
        total,
        block_counts,
        block_bytes,
        free_bytes,
        internal_free_bytes: internal,
        internal_free_percent: (free_bytes > 0)
            .then(|| internal as f64 * 100.0 / free_bytes as f64),
        devices,
        by_device,
        by_stream,
        by_pool,
        by_segment_type,
    }
}

//! Fragmentation: free memory the allocator holds but cannot hand out. A request is
//! served from one free block of the right pool (small segments for up to 1 MiB, large
//! ones above), so free bytes spread over blocks smaller than the request are of no use
//! to it — the reason a run can fail with gigabytes "reserved but unallocated".

use serde::Serialize;

use crate::model::snapshot::{BlockState, Segment, Snapshot};

/// Requests of at most this many bytes are served from small segments.
pub const SMALL_REQUEST: u64 = 1 << 20;

/// Request sizes the fit table always shows, bytes.
pub const STANDARD_REQUESTS: [u64; 4] = [1 << 20, 20 << 20, 256 << 20, 1 << 30];

/// Segments listed, most free first.
const SEGMENTS_SHOWN: usize = 10;

/// How a request of one size would fare.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RequestFit {
    /// The request, bytes.
    pub request_bytes: u64,
    /// Free bytes of its pool in blocks large enough for it.
    pub usable_free_bytes: u64,
    /// Free bytes of its pool in blocks too small for it.
    pub unusable_free_bytes: u64,
    /// Whether some free block could serve it without a new `cudaMalloc`.
    pub fits_without_cuda_malloc: bool,
}

/// A segment's free space.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SegmentFree {
    /// Device.
    pub device: u32,
    /// Start address.
    pub address: u64,
    /// `large` or `small`.
    pub segment_type: String,
    /// Its size.
    pub total_bytes: u64,
    /// Bytes in free blocks.
    pub free_bytes: u64,
    /// The largest free block.
    pub largest_free_block_bytes: u64,
    /// Free blocks (runs of adjacent free blocks count once).
    pub free_blocks: u64,
}

/// Fragmentation of a snapshot.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Fragmentation {
    /// Bytes in free (inactive) blocks.
    pub free_bytes: u64,
    /// The largest free block anywhere.
    pub largest_free_block_bytes: u64,
    /// Bytes lost to the allocator's rounding: allocated − requested.
    pub rounding_loss_bytes: u64,
    /// Free bytes outside the largest free block of their segment, as a share of free
    /// bytes, percent: 0 when each segment's free space is one block.
    pub fragmented_percent: Option<f64>,
    /// How requests of several sizes would fare.
    pub requests: Vec<RequestFit>,
    /// The segments with the most free bytes.
    pub segments: Vec<SegmentFree>,
}

/// The free blocks of a segment, adjacent ones merged.
fn free_runs(s: &Segment) -> Vec<u64> {
    let mut runs = Vec::new();
    let mut run = 0;
    for b in &s.blocks {
        if b.state == BlockState::Inactive {
            run += b.size;
        } else if run > 0 {
            runs.push(run);
            run = 0;
        }
    }
    if run > 0 {
        runs.push(run);
    }
    runs
}

fn is_small(s: &Segment) -> bool {
    s.segment_type == "small"
}

/// Fragmentation of `snapshot`, with the fit of `requests` (bytes) beside the standard
/// sizes.
pub fn fragmentation(snapshot: &Snapshot, requests: &[u64]) -> Fragmentation {
    let segments: Vec<(&Segment, Vec<u64>)> = snapshot
        .segments
        .iter()
        .map(|s| (s, free_runs(s)))
        .collect();
    let free_bytes: u64 = segments.iter().flat_map(|(_, r)| r).sum();
    let largest_each: u64 = segments.iter().filter_map(|(_, r)| r.iter().max()).sum();
    let mut sizes: Vec<u64> = STANDARD_REQUESTS.iter().chain(requests).copied().collect();
    sizes.sort_unstable();
    sizes.dedup();
    let requests = sizes
        .into_iter()
        .map(|request| {
            let small = request <= SMALL_REQUEST;
            let (mut usable, mut unusable) = (0, 0);
            for run in segments
                .iter()
                .filter(|(s, _)| is_small(s) == small)
                .flat_map(|(_, r)| r)
            {
                if *run >= request {
                    usable += run;
                } else {
                    unusable += run;
                }
            }
            RequestFit {
                request_bytes: request,
                usable_free_bytes: usable,
                unusable_free_bytes: unusable,
                fits_without_cuda_malloc: usable > 0,
            }
        })
        .collect();
    let mut listed: Vec<SegmentFree> = segments
        .iter()
        .filter(|(_, r)| !r.is_empty())
        .map(|(s, r)| SegmentFree {
            device: s.device,
            address: s.address,
            segment_type: s.segment_type.clone(),
            total_bytes: s.total_size,
            free_bytes: r.iter().sum(),
            largest_free_block_bytes: r.iter().copied().max().unwrap_or(0),
            free_blocks: r.len() as u64,
        })
        .collect();
    listed.sort_by(|a, b| {
        b.free_bytes
            .cmp(&a.free_bytes)
            .then(a.address.cmp(&b.address))
    });
    listed.truncate(SEGMENTS_SHOWN);
    let allocated: u64 = snapshot.segments.iter().map(|s| s.allocated_size).sum();
    let requested: u64 = snapshot.segments.iter().map(|s| s.requested_size).sum();
    Fragmentation {
        free_bytes,
        largest_free_block_bytes: segments
            .iter()
            .filter_map(|(_, r)| r.iter().max())
            .copied()
            .max()
            .unwrap_or(0),
        rounding_loss_bytes: allocated.saturating_sub(requested),
        fragmented_percent: (free_bytes > 0)
            .then(|| (free_bytes - largest_each) as f64 * 100.0 / free_bytes as f64),
        requests,
        segments: listed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::snapshot::{Block, NO_STACK};

    #[test]
    fn adjacent_free_blocks_make_one_run_and_requests_see_their_pool() {
        let block = |size, state| Block {
            address: 0,
            size,
            requested_size: 0,
            state,
            stack: NO_STACK,
        };
        let mib = 1u64 << 20;
        let segment = |segment_type: &str, blocks: Vec<Block>| Segment {
            device: 0,
            address: 0,
            total_size: blocks.iter().map(|b| b.size).sum(),
            allocated_size: 0,
            active_size: 0,
            requested_size: 0,
            stream: 0,
            segment_type: segment_type.into(),
            pool: (0, 0),
            expandable: false,
            blocks,
            stack: NO_STACK,
        };
        let snapshot = Snapshot {
            segments: vec![
                segment(
                    "large",
                    vec![
                        block(4 * mib, BlockState::Inactive),
                        block(6 * mib, BlockState::Inactive),
                        block(2 * mib, BlockState::ActiveAllocated),
                        block(3 * mib, BlockState::Inactive),
                    ],
                ),
                segment("small", vec![block(mib / 2, BlockState::Inactive)]),
            ],
            ..Snapshot::default()
        };
        let f = fragmentation(&snapshot, &[8 * mib]);
        assert_eq!(f.free_bytes, 13 * mib + mib / 2);
        assert_eq!(f.largest_free_block_bytes, 10 * mib);
        assert_eq!(f.segments[0].free_blocks, 2);
        let eight = f
            .requests
            .iter()
            .find(|r| r.request_bytes == 8 * mib)
            .unwrap();
        assert_eq!(
            (eight.usable_free_bytes, eight.unusable_free_bytes),
            (10 * mib, 3 * mib)
        );
        // 1 MiB requests come from the small pool only.
        let one = &f.requests[0];
        assert_eq!(one.request_bytes, mib);
        assert_eq!(
            (one.usable_free_bytes, one.unusable_free_bytes),
            (0, mib / 2)
        );
        assert!(!one.fits_without_cuda_malloc);
    }
}

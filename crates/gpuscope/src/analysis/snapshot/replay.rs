//! Replays a device's allocator trace: allocated and reserved bytes after every entry,
//! the true peak, what was alive then, what was never freed, what churned, and the state
//! before each out-of-memory event.
//!
//! The trace is a window: it starts when `_record_memory_history` was turned on, usually
//! after the model and optimizer state were allocated. What was alive before it is the
//! end state less the trace's net change (allocated at the dump − (allocs − frees)), and
//! it is added back, so the peak is the device's, not the window's.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;
use serde::Serialize;

use super::never_freed::{never_freed, NeverFreed};
use super::sites::{by_site, largest_first, SiteBytes, Sites};
use crate::model::snapshot::{Action, Snapshot, StackId, TraceEntry};

/// Site of the bytes that were alive before the trace began (no stack: history was off).
pub const BEFORE_TRACE_SITE: &str = "(allocated before the trace)";

/// Sites listed for an out-of-memory event.
const OOM_SITES: usize = 10;

/// One point of the memory timeline.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct Point {
    /// Microseconds since the Unix epoch when the trace has times, else the entry's
    /// index.
    pub x: i64,
    /// Allocated bytes (before-trace ones included).
    pub allocated_bytes: u64,
    /// Reserved bytes (before-trace ones included).
    pub reserved_bytes: u64,
}

/// An out-of-memory event and the state just before it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct OomEvent {
    /// Its index in the device's trace.
    pub index: usize,
    /// When, if the trace has times.
    pub time_us: Option<i64>,
    /// The allocation that failed, bytes.
    pub requested_bytes: u64,
    /// What the driver said was free, when recorded.
    pub device_free_bytes: Option<u64>,
    /// Where the failed allocation was made.
    pub site: String,
    /// Allocated bytes just before.
    pub allocated_bytes: u64,
    /// Reserved bytes just before.
    pub reserved_bytes: u64,
    /// What was alive just before, by site, largest first.
    pub alive_by_site: Vec<SiteBytes>,
}

/// A frame as text.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct FrameText {
    /// Function.
    pub name: String,
    /// File.
    pub filename: String,
    /// Line as recorded (0 in native frames without debug information); `null` when
    /// unknown (torch wrote 2^64 − 1).
    pub line: Option<i64>,
}

/// The largest single allocation of a trace.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LargestAlloc {
    /// Its size.
    pub bytes: u64,
    /// Its call site.
    pub site: String,
    /// The innermost frame of its stack as recorded (usually torch's unwinder).
    pub top_frame: Option<FrameText>,
    /// Its index in the trace.
    pub index: usize,
}

/// A device's trace, replayed.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct DeviceReplay {
    /// The device.
    pub device: u32,
    /// Trace entries.
    pub entries: usize,
    /// Whether entries carry `time_us`.
    pub has_time: bool,
    /// Entries by action.
    pub actions: BTreeMap<String, u64>,
    /// `cudaMalloc` calls (new segments and mapped pages): each one is slow and a sign
    /// the cache could not serve a request.
    pub cuda_malloc_calls: u64,
    /// `cudaFree` calls (segments released and pages unmapped): the cache was emptied or
    /// an allocation had to free memory to retry.
    pub cuda_free_calls: u64,
    /// Allocs − frees over the trace, bytes.
    pub trace_net_delta_bytes: i64,
    /// Highest allocs − frees reached inside the trace, bytes (≥ 0).
    pub trace_live_delta_peak_bytes: i64,
    /// Bytes alive before the trace: alive at the dump − the net change.
    pub allocated_before_trace_bytes: i64,
    /// Reserved before the trace: reserved at the dump − segments' net change.
    pub reserved_before_trace_bytes: i64,
    /// The device's peak allocated bytes: before the trace + the trace's highest delta.
    pub peak_allocated_bytes: i64,
    /// The highest reserved bytes.
    pub peak_reserved_bytes: i64,
    /// Index of the entry after which allocated bytes peaked (`null`: at the start).
    pub peak_index: Option<usize>,
    /// When, if the trace has times.
    pub peak_time_us: Option<i64>,
    /// What was alive at the peak, by site, largest first.
    pub peak_by_site: Vec<SiteBytes>,
    /// Allocations of the trace the program never freed by the dump, by site:
    /// accumulating sites first (README), then largest first. A block freed but still
    /// waiting for its streams is not one.
    pub never_freed_by_site: Vec<NeverFreed>,
    /// Allocations made and freed inside the trace, by site: the churn.
    pub churn_by_site: Vec<SiteBytes>,
    /// Out-of-memory events.
    pub ooms: Vec<OomEvent>,
    /// The largest allocation; `null` without any.
    pub largest_alloc: Option<LargestAlloc>,
    /// Allocated and reserved bytes after each entry, at most `points` of them (each
    /// point the highest of the entries it stands for).
    pub timeline: Vec<Point>,
}

/// Live allocations by address: size and stack.
pub(super) type Live = FxHashMap<u64, (u64, StackId)>;

/// How entries change allocated bytes: which free counts (`free_completed`, or
/// `free_requested` in traces that never complete one).
pub(super) struct Rules {
    pub(super) free: Action,
}

impl Rules {
    pub(super) fn of(trace: &[TraceEntry]) -> Rules {
        let completes = trace.iter().any(|e| e.action == Action::FreeCompleted);
        Rules {
            free: if completes {
                Action::FreeCompleted
            } else {
                Action::FreeRequested
            },
        }
    }

    pub(super) fn allocated_delta(&self, e: &TraceEntry) -> i64 {
        match e.action {
            Action::Alloc => e.size as i64,
            a if a == self.free => -(e.size as i64),
            _ => 0,
        }
    }
}

fn reserved_delta(e: &TraceEntry) -> i64 {
    match e.action {
        Action::SegmentAlloc | Action::SegmentMap => e.size as i64,
        Action::SegmentFree | Action::SegmentUnmap => -(e.size as i64),
        _ => 0,
    }
}

/// Applies an entry to the live set; returns the bytes of a free whose allocation came
/// before the trace.
pub(super) fn apply(live: &mut Live, rules: &Rules, e: &TraceEntry) -> u64 {
    match e.action {
        Action::Alloc => {
            live.insert(e.addr, (e.size, e.stack));
            0
        }
        a if a == rules.free => match live.remove(&e.addr) {
            Some(_) => 0,
            None => e.size,
        },
        _ => 0,
    }
}

/// What is alive by site: the live set plus what remains of the before-trace bytes.
fn alive(sites: &mut Sites, live: &Live, before_left: i64) -> Vec<SiteBytes> {
    let mut out = by_site(sites, live.values().map(|&(size, stack)| (stack, size)));
    if before_left > 0 {
        out.push(SiteBytes {
            site: BEFORE_TRACE_SITE.to_owned(),
            bytes: before_left as u64,
            count: 0,
        });
        largest_first(&mut out);
    }
    out
}

/// Replays device `device`'s trace; `sites` names the stacks, `points` bounds the
/// timeline.
pub fn replay(snapshot: &Snapshot, device: u32, sites: &mut Sites, points: usize) -> DeviceReplay {
    let trace: &[TraceEntry] = snapshot
        .device_traces
        .get(device as usize)
        .map_or(&[], Vec::as_slice);
    let rules = Rules::of(trace);
    let names = &snapshot.stacks.names;
    let (mut active_end, mut reserved_end) = (0i64, 0i64);
    for s in snapshot.segments.iter().filter(|s| s.device == device) {
        active_end += s.active_size as i64;
        reserved_end += s.total_size as i64;
    }
    let mut by_action: FxHashMap<Action, u64> = FxHashMap::default();
    let (mut delta, mut peak_delta, mut peak_index) = (0i64, 0i64, None);
    let mut reserved_delta_now = 0i64;
    let mut deltas = Vec::with_capacity(trace.len());
    for (k, e) in trace.iter().enumerate() {
        *by_action.entry(e.action).or_insert(0) += 1;
        delta += rules.allocated_delta(e);
        reserved_delta_now += reserved_delta(e);
        deltas.push((delta, reserved_delta_now));
        if delta > peak_delta {
            (peak_delta, peak_index) = (delta, Some(k));
        }
    }
    let mut actions = BTreeMap::new();
    for (action, n) in by_action {
        *actions.entry(action.as_str(names).to_owned()).or_insert(0) += n;
    }
    let before = active_end - delta;
    let reserved_before = reserved_end - reserved_delta_now;
    let count = |a: &[Action]| trace.iter().filter(|e| a.contains(&e.action)).count() as u64;

    // One pass over the live set: the peak's contents on the way, OOMs, leaks, churn.
    let mut live = Live::default();
    let mut before_freed = 0u64;
    let mut peak_by_site = if peak_index.is_none() {
        alive(sites, &live, before)
    } else {
        Vec::new()
    };
    let mut churn = Vec::new();
    let mut ooms = Vec::new();
    for (k, e) in trace.iter().enumerate() {
        if e.action == Action::Oom {
            let (d, r) = if k == 0 { (0, 0) } else { deltas[k - 1] };
            ooms.push(OomEvent {
                index: k,
                time_us: e.time_us,
                requested_bytes: e.size,
                device_free_bytes: e.device_free,
                site: sites.of(e.stack).to_owned(),
                allocated_bytes: (before + d).max(0) as u64,
                reserved_bytes: (reserved_before + r).max(0) as u64,
                alive_by_site: alive(sites, &live, before - before_freed as i64)
                    .into_iter()
                    .take(OOM_SITES)
                    .collect(),
            });
        }
        if e.action == rules.free {
            if let Some(&(size, stack)) = live.get(&e.addr) {
                churn.push((stack, size));
            }
        }
        before_freed += apply(&mut live, &rules, e);
        if peak_index == Some(k) {
            peak_by_site = alive(sites, &live, before - before_freed as i64);
        }
    }
    let never_freed_by_site = never_freed(trace, &rules, sites);
    let largest_alloc = trace
        .iter()
        .enumerate()
        .filter(|(_, e)| e.action == Action::Alloc)
        .max_by_key(|&(k, e)| (e.size, std::cmp::Reverse(k)))
        .map(|(index, e)| LargestAlloc {
            bytes: e.size,
            site: sites.of(e.stack).to_owned(),
            top_frame: snapshot.stacks.frames(e.stack).next().map(|f| FrameText {
                name: names.get(f.name).to_owned(),
                filename: names.get(f.filename).to_owned(),
                line: f.line,
            }),
            index,
        });
    let peak_reserved = deltas.iter().map(|d| d.1).max().unwrap_or(0).max(0) + reserved_before;
    DeviceReplay {
        device,
        entries: trace.len(),
        has_time: trace.iter().any(|e| e.time_us.is_some()),
        actions,
        cuda_malloc_calls: count(&[Action::SegmentAlloc, Action::SegmentMap]),
        cuda_free_calls: count(&[Action::SegmentFree, Action::SegmentUnmap]),
        trace_net_delta_bytes: delta,
        trace_live_delta_peak_bytes: peak_delta,
        allocated_before_trace_bytes: before,
        reserved_before_trace_bytes: reserved_before,
        peak_allocated_bytes: before + peak_delta,
        peak_reserved_bytes: peak_reserved,
        peak_index,
        peak_time_us: peak_index.and_then(|k| trace[k].time_us),
        peak_by_site,
        never_freed_by_site,
        churn_by_site: by_site(sites, churn),
        ooms,
        largest_alloc,
        timeline: timeline(trace, &deltas, before, reserved_before, points),
    }
}

/// At most `points` points: each the highest allocated and reserved bytes of the entries
/// it stands for, so the peak survives the thinning.
fn timeline(
    trace: &[TraceEntry],
    deltas: &[(i64, i64)],
    before: i64,
    reserved_before: i64,
    points: usize,
) -> Vec<Point> {
    if trace.is_empty() || points == 0 {
        return Vec::new();
    }
    let per = trace.len().div_ceil(points);
    let x = |k: usize| trace[k].time_us.unwrap_or(k as i64);
    (0..trace.len())
        .step_by(per)
        .map(|start| {
            let end = (start + per).min(trace.len());
            let (a, r) = deltas[start..end]
                .iter()
                .fold((i64::MIN, i64::MIN), |(a, r), &(d, rd)| {
                    (a.max(d), r.max(rd))
                });
            Point {
                x: x(start),
                allocated_bytes: (before + a).max(0) as u64,
                reserved_bytes: (reserved_before + r).max(0) as u64,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::snapshot::{Block, BlockState, Segment, Stacks, NO_STACK};

    fn entry(action: Action, addr: u64, size: u64, stack: StackId) -> TraceEntry {
        TraceEntry {
            action,
            addr,
            size,
            stream: 0,
            time_us: None,
            device_free: None,
            stack,
        }
    }

    /// One segment holding `alive` bytes at the dump, of which 100 came before the trace.
    fn snapshot(trace: Vec<TraceEntry>, stacks: Stacks, alive: u64) -> Snapshot {
        let block = |size, state| Block {
            address: 0,
            size,
            requested_size: size,
            state,
            stack: NO_STACK,
        };
        Snapshot {
            segments: vec![Segment {
                device: 0,
                address: 0,
                total_size: 1000,
                allocated_size: alive,
                active_size: alive,
                requested_size: alive,
                stream: 0,
                segment_type: "large".into(),
                pool: (0, 0),
                expandable: false,
                blocks: vec![
                    block(alive, BlockState::ActiveAllocated),
                    block(1000 - alive, BlockState::Inactive),
                ],
                stack: NO_STACK,
            }],
            device_traces: vec![trace],
            stacks,
            ..Snapshot::default()
        }
    }

    /// Stacks holding one user frame, and that frame's stack.
    fn user_stack() -> (Stacks, StackId) {
        let mut stacks = Stacks::default();
        let f = stacks.frame("step", "/home/u/train.py", Some(7));
        let user = stacks.stack(&[f]);
        (stacks, user)
    }

    fn replayed(trace: Vec<TraceEntry>, stacks: Stacks, alive: u64) -> DeviceReplay {
        let s = snapshot(trace, stacks, alive);
        let mut sites = Sites::new(&s.stacks, 1);
        replay(&s, 0, &mut sites, 10)
    }

    #[test]
    fn the_peak_counts_what_was_alive_before_the_trace() {
        let (stacks, user) = user_stack();
        // 100 bytes alive before; the trace allocates 300 and 200, frees the 300, then
        // frees 40 bytes allocated before it, and OOMs on 900.
        let trace = vec![
            entry(Action::Alloc, 1, 300, user),
            entry(Action::Alloc, 2, 200, user),
            entry(Action::FreeRequested, 1, 300, user),
            entry(Action::FreeCompleted, 1, 300, user),
            entry(Action::FreeCompleted, 9, 40, NO_STACK),
            entry(Action::Oom, 0, 900, user),
        ];
        let r = replayed(trace, stacks, 260);
        assert_eq!(r.trace_net_delta_bytes, 160);
        assert_eq!(r.allocated_before_trace_bytes, 100);
        assert_eq!(r.trace_live_delta_peak_bytes, 500);
        assert_eq!(r.peak_allocated_bytes, 600);
        assert_eq!(r.peak_index, Some(1));
        let peak: Vec<(&str, u64)> = r
            .peak_by_site
            .iter()
            .map(|s| (s.site.as_str(), s.bytes))
            .collect();
        assert_eq!(
            peak,
            [("/home/u/train.py:7 step", 500), (BEFORE_TRACE_SITE, 100)]
        );
        assert_eq!(r.never_freed_by_site[0].sums.bytes, 200);
        assert_eq!(r.churn_by_site[0].bytes, 300);
        let oom = &r.ooms[0];
        assert_eq!((oom.requested_bytes, oom.allocated_bytes), (900, 260));
        let before: Vec<(&str, u64)> = oom
            .alive_by_site
            .iter()
            .map(|s| (s.site.as_str(), s.bytes))
            .collect();
        assert_eq!(
            before,
            [("/home/u/train.py:7 step", 200), (BEFORE_TRACE_SITE, 60)]
        );
        // The timeline's highest point is the peak.
        let top = r.timeline.iter().map(|p| p.allocated_bytes).max();
        assert_eq!(top, Some(600));
    }

    #[test]
    fn a_block_freed_but_pending_is_no_leak_candidate() {
        let (stacks, user) = user_stack();
        let trace = vec![
            entry(Action::Alloc, 1, 300, user),
            entry(Action::Alloc, 2, 200, user),
            entry(Action::FreeCompleted, 2, 200, user),
            entry(Action::Alloc, 3, 50, user),
            entry(Action::FreeRequested, 1, 300, user),
            entry(Action::FreeCompleted, 99, 1, NO_STACK),
        ];
        let r = replayed(trace, stacks, 350);
        // Block 1 still counts as allocated (its free has not completed)...
        assert_eq!(r.trace_net_delta_bytes, 349);
        // ...but only block 3 was never freed by the program.
        assert_eq!(r.never_freed_by_site[0].sums.bytes, 50);
    }
}

//! Everything `gpuscope snapshot` says about one snapshot, put together from the other
//! analyses.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;

use super::fragmentation::{fragmentation, Fragmentation};
use super::never_freed::{self, NeverFreed};
use super::replay::BEFORE_TRACE_SITE;
use super::replay::{replay, DeviceReplay, OomEvent};
use super::sites::{by_site, summed, SiteBytes, Sites};
use super::stacked::{stacked_timeline, StackedTimeline};
use super::stats::{stats, Stats};
use crate::model::snapshot::{BlockState, Snapshot};

/// Sites drawn on their own in the stacked timeline.
const STACKED_SITES: usize = 8;

/// Segments drawn in the segment map.
const MAPPED_SEGMENTS: usize = 48;

/// JSON schema name of the report.
pub const SCHEMA: &str = "gpuscope.snapshot/1";

/// What the report should show.
#[derive(Debug, Clone)]
pub struct Options {
    /// User frames per call site.
    pub frames: usize,
    /// Sites per list; the rest are summed in one row.
    pub top: usize,
    /// Request sizes to test against the free blocks, besides the standard ones.
    pub requests: Vec<u64>,
    /// Points of each device's timeline.
    pub points: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            frames: 1,
            top: 15,
            requests: Vec::new(),
            points: 600,
        }
    }
}

/// The trace's figures for the device whose allocated bytes peaked highest.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TraceSummary {
    /// That device.
    pub device: u32,
    /// Entries by action, over all devices.
    pub actions: BTreeMap<String, u64>,
    /// Its peak allocated bytes, before-trace allocations included.
    pub peak_allocated_bytes: i64,
    /// Its allocations alive before the trace began.
    pub allocated_before_trace_bytes: i64,
    /// Its allocs − frees over the trace.
    pub trace_net_delta_bytes: i64,
    /// Its highest allocs − frees inside the trace.
    pub trace_live_delta_peak_bytes: i64,
    /// Its highest reserved bytes.
    pub peak_reserved_bytes: i64,
    /// `cudaMalloc` calls over all devices.
    pub cuda_malloc_calls: u64,
    /// `cudaFree` calls over all devices.
    pub cuda_free_calls: u64,
    /// When the peak was, if the trace has times.
    pub peak_time_us: Option<i64>,
}

/// What was alive at one moment, by site.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Alive {
    /// The device.
    pub device: Option<u32>,
    /// Total bytes.
    pub bytes: u64,
    /// By site, largest first.
    pub by_site: Vec<SiteBytes>,
}

/// The report.
#[derive(Debug, Clone, Serialize)]
pub struct SnapshotReport {
    /// Always [`SCHEMA`].
    pub schema: &'static str,
    /// The snapshot file.
    pub path: PathBuf,
    /// The state at the dump.
    pub stats: Stats,
    /// Free memory that cannot be used.
    pub fragmentation: Fragmentation,
    /// Whether only the state at the dump was read (`--no-trace`): `trace`, `peak`,
    /// `never_freed`, `churn`, `ooms`, `devices`, `annotations`, `allocator_settings` and
    /// `stacked` are then empty because they were not read, not because the file has none.
    pub trace_skipped: bool,
    /// The trace's figures; `null` when the snapshot has no trace.
    pub trace: Option<TraceSummary>,
    /// What was alive at the peak of the device in `trace`; `null` without a trace.
    pub peak: Option<Alive>,
    /// What is alive at the dump (allocated and pending-free blocks), by site.
    pub now: Alive,
    /// Allocations of the trace never freed by the dump, by site, over all devices:
    /// accumulating sites first (all of them, whatever `top`), then largest first.
    pub never_freed: Vec<NeverFreed>,
    /// Allocations made and freed within the trace, by site, over all devices.
    pub churn: Vec<SiteBytes>,
    /// Out-of-memory events, over all devices.
    pub ooms: Vec<OomEvent>,
    /// Each device's replayed trace.
    pub devices: Vec<DeviceReplay>,
    /// User annotations recorded (optimizer phases, `record_function` ranges).
    pub annotations: usize,
    /// The allocator's settings, when recorded.
    pub allocator_settings: BTreeMap<String, String>,
    /// The timeline of the device in `trace` by site; `null` without a trace.
    pub stacked: Option<StackedTimeline>,
    /// The largest segments' blocks, for drawing (not in the JSON).
    #[serde(skip)]
    pub segment_map: Vec<SegmentLayout>,
}

/// A segment's blocks in address order, runs of one state merged.
#[derive(Debug, Clone, PartialEq)]
pub struct SegmentLayout {
    /// Device.
    pub device: u32,
    /// Start address.
    pub address: u64,
    /// Size.
    pub total_bytes: u64,
    /// `(state, bytes)` runs.
    pub runs: Vec<(BlockState, u64)>,
}

/// The `n` largest segments' layouts, largest first.
pub fn segment_map(snapshot: &Snapshot, n: usize) -> Vec<SegmentLayout> {
    let mut segments: Vec<_> = snapshot.segments.iter().collect();
    segments.sort_by(|a, b| {
        b.total_size
            .cmp(&a.total_size)
            .then(a.address.cmp(&b.address))
    });
    segments
        .into_iter()
        .take(n)
        .map(|s| {
            let mut runs: Vec<(BlockState, u64)> = Vec::new();
            for b in &s.blocks {
                match runs.last_mut() {
                    Some((state, bytes)) if *state == b.state => *bytes += b.size,
                    _ => runs.push((b.state.clone(), b.size)),
                }
            }
            SegmentLayout {
                device: s.device,
                address: s.address,
                total_bytes: s.total_size,
                runs,
            }
        })
        .collect()
}

/// Keeps the first `top` sites and sums the rest in one row.
pub fn keep_top(mut sites: Vec<SiteBytes>, top: usize) -> Vec<SiteBytes> {
    if sites.len() > top {
        let rest = sites.split_off(top);
        sites.push(SiteBytes {
            site: format!("({} other sites)", rest.len()),
            bytes: rest.iter().map(|s| s.bytes).sum(),
            count: rest.iter().map(|s| s.count).sum(),
        });
    }
    sites
}

/// What the dump's blocks hold, by site.
pub fn alive_now(snapshot: &Snapshot, sites: &mut Sites) -> Vec<SiteBytes> {
    by_site(
        sites,
        snapshot
            .segments
            .iter()
            .flat_map(|s| &s.blocks)
            .filter(|b| b.state.is_active())
            .map(|b| (b.stack, b.size)),
    )
}

/// Analyses `snapshot`, read from `path`.
pub fn snapshot_report(snapshot: &Snapshot, path: PathBuf, options: &Options) -> SnapshotReport {
    let mut sites = Sites::new(&snapshot.stacks, options.frames);
    let stats = stats(snapshot);
    let mut devices: Vec<DeviceReplay> = stats
        .devices
        .iter()
        .filter(|&&d| {
            snapshot
                .device_traces
                .get(d as usize)
                .is_some_and(|t| !t.is_empty())
        })
        .map(|&d| replay(snapshot, d, &mut sites, options.points))
        .collect();
    let never_freed =
        never_freed::merged(devices.iter().flat_map(|d| d.never_freed_by_site.clone()));
    let churn = summed(devices.iter().flat_map(|d| d.churn_by_site.clone()));
    let ooms = devices.iter().flat_map(|d| d.ooms.clone()).collect();
    let main = devices
        .iter()
        .max_by_key(|d| (d.peak_allocated_bytes, std::cmp::Reverse(d.device)));
    let trace = main.map(|m| TraceSummary {
        device: m.device,
        actions: merged_counts(&devices),
        peak_allocated_bytes: m.peak_allocated_bytes,
        allocated_before_trace_bytes: m.allocated_before_trace_bytes,
        trace_net_delta_bytes: m.trace_net_delta_bytes,
        trace_live_delta_peak_bytes: m.trace_live_delta_peak_bytes,
        peak_reserved_bytes: m.peak_reserved_bytes,
        cuda_malloc_calls: devices.iter().map(|d| d.cuda_malloc_calls).sum(),
        cuda_free_calls: devices.iter().map(|d| d.cuda_free_calls).sum(),
        peak_time_us: m.peak_time_us,
    });
    let peak = main.map(|m| Alive {
        device: Some(m.device),
        bytes: m.peak_by_site.iter().map(|s| s.bytes).sum(),
        by_site: keep_top(m.peak_by_site.clone(), options.top),
    });
    let now_sites = alive_now(snapshot, &mut sites);
    let now = Alive {
        device: None,
        bytes: now_sites.iter().map(|s| s.bytes).sum(),
        by_site: keep_top(now_sites, options.top),
    };
    let stacked = main.map(|m| {
        let keep: Vec<String> = m
            .peak_by_site
            .iter()
            .filter(|s| s.site != BEFORE_TRACE_SITE)
            .take(STACKED_SITES)
            .map(|s| s.site.clone())
            .collect();
        stacked_timeline(
            snapshot,
            m.device,
            m.allocated_before_trace_bytes,
            m.peak_index,
            &mut sites,
            &keep,
            options.points,
        )
    });
    for d in &mut devices {
        for list in [&mut d.peak_by_site, &mut d.churn_by_site] {
            *list = keep_top(std::mem::take(list), options.top);
        }
        d.never_freed_by_site =
            never_freed::keep_top(std::mem::take(&mut d.never_freed_by_site), options.top);
    }
    SnapshotReport {
        schema: SCHEMA,
        path,
        stats,
        fragmentation: fragmentation(snapshot, &options.requests),
        trace_skipped: snapshot.trace_skipped,
        trace,
        peak,
        now,
        never_freed: never_freed::keep_top(never_freed, options.top),
        churn: keep_top(churn, options.top),
        ooms,
        devices,
        annotations: snapshot.annotations.len(),
        allocator_settings: snapshot.allocator_settings.clone(),
        stacked,
        segment_map: segment_map(snapshot, MAPPED_SEGMENTS),
    }
}

fn merged_counts(devices: &[DeviceReplay]) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for (action, n) in devices.iter().flat_map(|d| &d.actions) {
        *out.entry(action.clone()).or_insert(0) += n;
    }
    out
}

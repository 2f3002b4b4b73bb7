//! The memory timeline split by call site, for a stacked chart: at each of a bounded
//! number of moments, the bytes alive from each of the largest sites, from all the others
//! together, and from before the trace. Each moment is the highest point of the stretch
//! of entries it stands for, so the peak is always drawn.

use rustc_hash::FxHashMap;
use serde::Serialize;

use super::replay::{apply, Live, Rules, BEFORE_TRACE_SITE};
use super::sites::Sites;
use crate::model::snapshot::{Snapshot, TraceEntry};

/// Name of the series summing the sites not drawn on their own.
pub const OTHER_SITES: &str = "(other sites)";

/// One series: a site's bytes at each moment.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SiteSeries {
    /// The site.
    pub site: String,
    /// Bytes alive at each moment.
    pub bytes: Vec<u64>,
}

/// A device's timeline by site.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct StackedTimeline {
    /// Milliseconds since the first entry when the trace has times, else entry indices.
    pub x: Vec<i64>,
    /// Whether `x` is time.
    pub has_time: bool,
    /// The moment of the peak, in `x` units (`null`: the peak is before the first entry).
    pub peak_x: Option<i64>,
    /// Before-trace bytes first, then the sites in `sites` order, then the other sites.
    pub series: Vec<SiteSeries>,
}

/// Device `device`'s timeline with a series for each of `keep` (site names) and one for
/// the rest, at most `points` moments; `peak_index` is the replay's peak entry.
pub fn stacked_timeline(
    snapshot: &Snapshot,
    device: u32,
    before_trace_bytes: i64,
    peak_index: Option<usize>,
    sites: &mut Sites,
    keep: &[String],
    points: usize,
) -> StackedTimeline {
    let trace: &[TraceEntry] = snapshot
        .device_traces
        .get(device as usize)
        .map_or(&[], Vec::as_slice);
    let rules = Rules::of(trace);
    let moments = moments(trace, &rules, points);
    let column: FxHashMap<&str, usize> = keep
        .iter()
        .enumerate()
        .map(|(k, s)| (s.as_str(), k + 1))
        .collect();
    let other = keep.len() + 1;
    // The column of each site id met, so each site's name is looked up once.
    let mut by_site: Vec<Option<usize>> = Vec::new();
    let mut column_of = |sites: &mut Sites, stack| {
        let id = sites.id(stack) as usize;
        if let Some(c) = by_site.get(id).copied().flatten() {
            return c;
        }
        let c = column.get(sites.site(id as u32)).copied().unwrap_or(other);
        if id >= by_site.len() {
            by_site.resize(id + 1, None);
        }
        by_site[id] = Some(c);
        c
    };
    let mut now = vec![0i64; keep.len() + 2];
    now[0] = before_trace_bytes;
    let mut series: Vec<Vec<u64>> = vec![Vec::with_capacity(moments.len()); now.len()];
    let mut live = Live::default();
    let mut next = moments.iter().peekable();
    for (k, e) in trace.iter().enumerate() {
        let site = column_of(sites, e.stack);
        let freed = live.get(&e.addr).copied();
        let before_freed = apply(&mut live, &rules, e);
        match rules.allocated_delta(e) {
            d if d > 0 => now[site] += d,
            d if d < 0 && before_freed > 0 => now[0] -= before_freed as i64,
            d if d < 0 => {
                if let Some((size, stack)) = freed {
                    let owner = column_of(sites, stack);
                    now[owner] -= size as i64;
                }
            }
            _ => {}
        }
        if next.peek() == Some(&&k) {
            next.next();
            for (s, &v) in series.iter_mut().zip(&now) {
                s.push(v.max(0) as u64);
            }
        }
    }
    let start = trace.first().and_then(|e| e.time_us);
    let has_time = start.is_some();
    let x_of = |k: usize| match (trace[k].time_us, start) {
        (Some(t), Some(t0)) => (t - t0) / 1000,
        _ => k as i64,
    };
    let x = moments.iter().map(|&k| x_of(k)).collect();
    // Each stretch's moment is its highest entry, so the peak's entry is one of them.
    let peak_x = peak_index.filter(|k| moments.contains(k)).map(x_of);
    let names = std::iter::once(BEFORE_TRACE_SITE.to_owned())
        .chain(keep.iter().cloned())
        .chain([OTHER_SITES.to_owned()]);
    StackedTimeline {
        x,
        has_time,
        peak_x,
        series: names
            .zip(series)
            .map(|(site, bytes)| SiteSeries { site, bytes })
            .collect(),
    }
}

/// The entries to draw: in each stretch of `len / points` entries, the one after which
/// allocated bytes were highest.
fn moments(trace: &[TraceEntry], rules: &Rules, points: usize) -> Vec<usize> {
    if trace.is_empty() || points == 0 {
        return Vec::new();
    }
    let per = trace.len().div_ceil(points);
    let mut out = Vec::new();
    let mut delta = 0i64;
    let mut best = (i64::MIN, 0);
    for (k, e) in trace.iter().enumerate() {
        delta += rules.allocated_delta(e);
        if delta > best.0 {
            best = (delta, k);
        }
        if (k + 1) % per == 0 || k + 1 == trace.len() {
            out.push(best.1);
            best = (i64::MIN, 0);
        }
    }
    out
}

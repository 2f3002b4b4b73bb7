//! Allocations of the trace the program never freed, by call site, and which of those
//! sites are **accumulating**: their live bytes keep rising across the trace, as a leak's
//! do, rather than having been allocated once (optimizer state), late (the last step's
//! gradients) or a few at a time (a ring buffer). The rule is README's ("`gpuscope
//! snapshot`: how the peak and the call sites are found"); its thresholds are the
//! constants below.

use rustc_hash::FxHashMap;
use serde::Serialize;

use super::replay::Rules;
use super::sites::{SiteBytes, Sites};
use crate::model::snapshot::{Action, TraceEntry};

/// The floor must rise in at least this many of the trace's ten tenths.
const TENTHS_RISING: usize = 4;

/// The floor's first rise must come by this share of the trace...
const FIRST_RISE_BY: f64 = 1.0 / 3.0;

/// ...and its last rise from this share on.
const LAST_RISE_FROM: f64 = 0.75;

/// A site that went on allocating after its floor's last rise for this many times the
/// longest stretch between two rises (in entries) has stopped growing (a ring buffer).
const RING_STRETCHES: usize = 2;

/// Fewer bytes never freed than this are not called accumulating.
const MIN_BYTES: u64 = 1 << 20;

/// A call site's allocations never freed within the trace.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct NeverFreed {
    /// The site, its bytes and allocations never freed.
    #[serde(flatten)]
    pub sums: SiteBytes,
    /// Whether its live bytes keep rising across the trace (README's rule).
    pub accumulating: bool,
    /// When the first of these allocations was made; `null` without times.
    pub first_alloc_time_us: Option<i64>,
    /// When the last of them was made; `null` without times.
    pub last_alloc_time_us: Option<i64>,
}

/// A site's allocations over the trace, as the rule needs them.
#[derive(Default)]
struct Track {
    /// Bytes of its allocations not yet freed.
    live: u64,
    /// `(entry, live)` after each of its allocations and frees.
    history: Vec<(usize, u64)>,
    /// The entry of its last allocation.
    last_alloc: usize,
}

/// The never-freed allocations of one device's `trace` by site, accumulating sites
/// first, then largest first. An allocation is freed by its `free_requested` or by the
/// free `rules` count, whichever comes first: a block the program freed that waits for
/// its streams is no leak candidate.
pub(super) fn never_freed(
    trace: &[TraceEntry],
    rules: &Rules,
    sites: &mut Sites,
) -> Vec<NeverFreed> {
    let mut tracks: FxHashMap<u32, Track> = FxHashMap::default();
    // Live allocations by address: site, size, entry.
    let mut owner: FxHashMap<u64, (u32, u64, usize)> = FxHashMap::default();
    let release =
        |tracks: &mut FxHashMap<u32, Track>, k: usize, (site, size, _): (u32, u64, usize)| {
            let t = tracks.entry(site).or_default();
            t.live -= size;
            t.history.push((k, t.live));
        };
    for (k, e) in trace.iter().enumerate() {
        if e.action == Action::Alloc {
            let site = sites.id(e.stack);
            // An address handed out again without a free: the first is gone.
            if let Some(old) = owner.insert(e.addr, (site, e.size, k)) {
                release(&mut tracks, k, old);
            }
            let t = tracks.entry(site).or_default();
            t.live += e.size;
            t.history.push((k, t.live));
            t.last_alloc = k;
        } else if e.action == Action::FreeRequested || e.action == rules.free {
            if let Some(old) = owner.remove(&e.addr) {
                release(&mut tracks, k, old);
            }
        }
    }
    let mut kept: FxHashMap<u32, Vec<(usize, u64)>> = FxHashMap::default();
    for &(site, size, k) in owner.values() {
        kept.entry(site).or_default().push((k, size));
    }
    let clock = Clock::of(trace);
    let mut out: Vec<NeverFreed> = kept
        .into_iter()
        .map(|(site, allocs)| {
            let bytes = allocs.iter().map(|&(_, size)| size).sum();
            let time = |k: Option<usize>| k.and_then(|k| trace[k].time_us);
            NeverFreed {
                sums: SiteBytes {
                    site: sites.site(site).to_owned(),
                    bytes,
                    count: allocs.len() as u64,
                },
                accumulating: bytes >= MIN_BYTES
                    && tracks.get(&site).is_some_and(|t| accumulates(t, &clock)),
                first_alloc_time_us: time(allocs.iter().map(|a| a.0).min()),
                last_alloc_time_us: time(allocs.iter().map(|a| a.0).max()),
            }
        })
        .collect();
    accumulating_first(&mut out);
    out
}

/// Where an entry is in the trace, from 0 to 1: its share of the trace's time
/// (`time_us`), or its share of the entries in traces without times.
struct Clock<'a> {
    trace: &'a [TraceEntry],
    /// The first and last entries' times, when both are known and differ.
    span: Option<(i64, i64)>,
}

impl Clock<'_> {
    fn of(trace: &[TraceEntry]) -> Clock<'_> {
        let first = trace.first().and_then(|e| e.time_us);
        let last = trace.last().and_then(|e| e.time_us);
        Clock {
            trace,
            span: first.zip(last).filter(|(a, b)| b > a),
        }
    }

    fn at(&self, k: usize) -> f64 {
        match (self.span, self.trace[k].time_us) {
            (Some((t0, t1)), Some(t)) => ((t - t0) as f64 / (t1 - t0) as f64).clamp(0.0, 1.0),
            _ => k as f64 / (self.trace.len().max(2) - 1) as f64,
        }
    }
}

/// Rules 1–3: where the site's floor (the least it holds from an entry to the dump)
/// rises.
fn accumulates(t: &Track, clock: &Clock) -> bool {
    let mut floor = u64::MAX;
    let mut floors: Vec<(usize, u64)> = t
        .history
        .iter()
        .rev()
        .map(|&(k, live)| {
            floor = floor.min(live);
            (k, floor)
        })
        .collect();
    floors.reverse();
    let mut rises = Vec::new();
    let mut before = 0;
    for (k, floor) in floors {
        if floor > before {
            rises.push(k);
        }
        before = floor;
    }
    let (Some(&first), Some(&last)) = (rises.first(), rises.last()) else {
        return false;
    };
    let mut tenths: Vec<usize> = rises
        .iter()
        .map(|&k| ((clock.at(k) * 10.0) as usize).min(9))
        .collect();
    tenths.sort_unstable();
    tenths.dedup();
    let longest_stretch = rises.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0);
    tenths.len() >= TENTHS_RISING
        && clock.at(first) <= FIRST_RISE_BY
        && clock.at(last) >= LAST_RISE_FROM
        && t.last_alloc - last < RING_STRETCHES * longest_stretch
}

/// Accumulating sites first, then by bytes, largest first; ties by site.
fn accumulating_first(rows: &mut [NeverFreed]) {
    rows.sort_by(|a, b| {
        b.accumulating
            .cmp(&a.accumulating)
            .then(b.sums.bytes.cmp(&a.sums.bytes))
            .then_with(|| a.sums.site.cmp(&b.sums.site))
    });
}

/// The rows of several devices, one per site: sums added, accumulating if on any device,
/// the earliest first and latest last allocation.
pub fn merged(rows: impl IntoIterator<Item = NeverFreed>) -> Vec<NeverFreed> {
    let mut by_site: FxHashMap<String, NeverFreed> = FxHashMap::default();
    for r in rows {
        match by_site.get_mut(&r.sums.site) {
            Some(m) => {
                m.sums.bytes += r.sums.bytes;
                m.sums.count += r.sums.count;
                m.accumulating |= r.accumulating;
                m.first_alloc_time_us = min_some(m.first_alloc_time_us, r.first_alloc_time_us);
                m.last_alloc_time_us = m.last_alloc_time_us.max(r.last_alloc_time_us);
            }
            None => {
                by_site.insert(r.sums.site.clone(), r);
            }
        }
    }
    let mut out: Vec<NeverFreed> = by_site.into_values().collect();
    accumulating_first(&mut out);
    out
}

fn min_some(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Every accumulating site, then others up to `top` rows in all, the rest summed in one
/// row (which then holds no accumulating site).
pub fn keep_top(mut rows: Vec<NeverFreed>, top: usize) -> Vec<NeverFreed> {
    let keep = top.max(rows.iter().filter(|r| r.accumulating).count());
    if rows.len() > keep {
        let rest = rows.split_off(keep);
        let sums = super::report::keep_top(rest.iter().map(|r| r.sums.clone()).collect(), 0);
        rows.push(NeverFreed {
            sums: sums.into_iter().next().expect("one row for the rest"),
            accumulating: false,
            first_alloc_time_us: rest
                .iter()
                .map(|r| r.first_alloc_time_us)
                .fold(None, min_some),
            last_alloc_time_us: rest.iter().filter_map(|r| r.last_alloc_time_us).max(),
        });
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(site: &str, bytes: u64, accumulating: bool, times: (i64, i64)) -> NeverFreed {
        NeverFreed {
            sums: SiteBytes {
                site: site.into(),
                bytes,
                count: 1,
            },
            accumulating,
            first_alloc_time_us: Some(times.0),
            last_alloc_time_us: Some(times.1),
        }
    }

    #[test]
    fn devices_merge_by_site_and_accumulating_sites_are_never_cut() {
        let merged = merged([
            row("a", 10, false, (5, 6)),
            row("b", 1, true, (1, 9)),
            row("a", 10, true, (3, 4)),
            row("c", 100, false, (2, 2)),
            row("d", 50, false, (7, 8)),
        ]);
        let order: Vec<(&str, u64, bool)> = merged
            .iter()
            .map(|r| (r.sums.site.as_str(), r.sums.bytes, r.accumulating))
            .collect();
        assert_eq!(
            order,
            [
                ("a", 20, true),
                ("b", 1, true),
                ("c", 100, false),
                ("d", 50, false)
            ]
        );
        assert_eq!(
            (merged[0].first_alloc_time_us, merged[0].last_alloc_time_us),
            (Some(3), Some(6))
        );
        // One row asked for: both accumulating sites stay, the rest is one row.
        let kept = keep_top(merged, 1);
        let sites: Vec<&str> = kept.iter().map(|r| r.sums.site.as_str()).collect();
        assert_eq!(sites, ["a", "b", "(2 other sites)"]);
        let rest = &kept[2];
        assert_eq!((rest.sums.bytes, rest.accumulating), (150, false));
        assert_eq!(
            (rest.first_alloc_time_us, rest.last_alloc_time_us),
            (Some(2), Some(8))
        );
    }
}

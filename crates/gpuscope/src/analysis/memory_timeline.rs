//! The raw memory timeline of torch.profiler by category (parameters, optimizer state,
//! inputs, temporaries, activations, gradients, autograd detail, unknown): how much each
//! held over time, at the peak and at the end.

use serde::Serialize;

use crate::model::memory_timeline::{MemoryTimeline, CATEGORIES};

/// Points of the timeline.
const POINTS: usize = 240;

/// Bytes per category at one moment, in [`CATEGORIES`] order.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Moment {
    /// ms from the first timed event (pre-existing memory is at 0).
    pub at_ms: f64,
    /// Bytes of each category.
    pub bytes: Vec<i64>,
    /// Their sum.
    pub total: i64,
}

/// The timeline by category.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CategoryTimeline {
    /// The categories, in the order of every `bytes` list.
    pub categories: Vec<&'static str>,
    /// Events read (instants, for a coalesced export).
    pub events: usize,
    /// When the sum was highest.
    pub peak: Moment,
    /// After the last event.
    pub end: Moment,
    /// The highest bytes of each category on its own, at whatever moment: a category the
    /// program frees quickly (`temporary`) may hold nothing at the peak and at the end.
    pub max_bytes: Vec<i64>,
    /// The highest moment of each of up to 240 spans.
    pub timeline: Vec<Moment>,
}

/// The timeline by category, from either export; `None` without any event.
pub fn category_timeline(timeline: MemoryTimeline) -> Option<CategoryTimeline> {
    summarise(moments(timeline))
}

/// Every moment of the timeline, in order (see [`each_moment`]).
fn moments(timeline: MemoryTimeline) -> Vec<Moment> {
    let mut moments = Vec::new();
    each_moment(timeline, &mut |at_ms, bytes| {
        moments.push(Moment {
            at_ms,
            total: bytes.iter().fold(0i64, |sum, &b| sum.saturating_add(b)),
            bytes: bytes.to_vec(),
        });
    });
    moments
}

/// Every moment of a timeline as columns, for a table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TimelineColumns {
    /// The categories, in the order of `bytes`.
    pub categories: Vec<&'static str>,
    /// ms from the first timed event (memory that existed before profiling at 0).
    pub time_ms: Vec<f64>,
    /// For each category, its bytes at each moment.
    pub bytes: Vec<Vec<i64>>,
}

/// Every moment of the timeline as columns (see [`each_moment`]), built without a list
/// per moment: a raw export holds millions of events.
pub fn timeline_columns(timeline: MemoryTimeline) -> TimelineColumns {
    let mut columns = TimelineColumns {
        categories: CATEGORIES.to_vec(),
        time_ms: Vec::new(),
        bytes: vec![Vec::new(); CATEGORIES.len()],
    };
    each_moment(timeline, &mut |at_ms, bytes| {
        columns.time_ms.push(at_ms);
        for (column, &b) in columns.bytes.iter_mut().zip(bytes) {
            column.push(b);
        }
    });
    columns
}

/// Calls `each` with every moment of the timeline, in order: its time (ms from the first
/// timed event) and the bytes of each category then. A raw export has a moment after each
/// event (memory that existed before profiling first, at 0, then by time; a stable sort
/// keeps the order of each tensor's events at one instant), a coalesced one each row.
fn each_moment(timeline: MemoryTimeline, each: &mut dyn FnMut(f64, &[i64])) {
    match timeline {
        MemoryTimeline::Raw(mut events) => {
            events.sort_by_key(|e| e.time_ns);
            let origin = events
                .iter()
                .find(|e| e.time_ns >= 0)
                .map_or(0, |e| e.time_ns);
            let mut bytes = vec![0i64; CATEGORIES.len()];
            // Saturating: a crafted file must not overflow (a panic in a debug build).
            for e in &events {
                let held = &mut bytes[e.category as usize];
                *held = held.saturating_add(e.bytes);
                each(
                    e.time_ns.max(origin).saturating_sub(origin) as f64 / 1e6,
                    &bytes,
                );
            }
        }
        MemoryTimeline::Totals { times_us, bytes } => {
            let origin = times_us.first().copied().unwrap_or(0);
            for (t, bytes) in times_us.iter().zip(&bytes) {
                each(t.saturating_sub(origin) as f64 / 1000.0, bytes);
            }
        }
    }
}

fn summarise(moments: Vec<Moment>) -> Option<CategoryTimeline> {
    let peak = moments.iter().max_by_key(|m| m.total)?.clone();
    let end = moments.last()?.clone();
    let mut max_bytes = vec![0i64; peak.bytes.len()];
    for m in &moments {
        for (max, &b) in max_bytes.iter_mut().zip(&m.bytes) {
            *max = (*max).max(b);
        }
    }
    let per = moments.len().div_ceil(POINTS);
    let timeline = moments
        .chunks(per)
        .filter_map(|span| span.iter().max_by_key(|m| m.total).cloned())
        .collect();
    Some(CategoryTimeline {
        categories: CATEGORIES.to_vec(),
        events: moments.len(),
        peak,
        end,
        max_bytes,
        timeline,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::memory_timeline::MemoryEvent;

    fn event(time_ns: i64, bytes: i64, category: u8) -> MemoryEvent {
        MemoryEvent {
            time_ns,
            action: if bytes < 0 { 4 } else { 2 },
            bytes,
            category,
        }
    }

    #[test]
    fn the_peak_is_the_highest_sum_and_preexisting_memory_counts_from_the_start() {
        let t = category_timeline(MemoryTimeline::Raw(vec![
            event(3_000_000, -50, 4),
            event(-1, 100, 0),
            event(1_000_000, 50, 4),
            event(2_000_000, 20, 5),
        ]))
        .unwrap();
        assert_eq!(t.peak.total, 170);
        assert_eq!(t.peak.at_ms, 1.0);
        assert_eq!(t.peak.bytes[4], 50);
        assert_eq!(t.end.total, 120);
        assert_eq!(t.end.bytes[4], 0);
        assert_eq!((t.max_bytes[4], t.max_bytes[5]), (50, 20));
    }
}

//! The raw memory timeline of torch.profiler by category (parameters, optimizer state,
//! inputs, temporaries, activations, gradients, autograd detail, unknown): how much each
//! held over time, at the peak and at the end.

use serde::Serialize;

use crate::trace::memory_timeline::{MemoryEvent, CATEGORIES};

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
    /// Events read.
    pub events: usize,
    /// When the sum was highest.
    pub peak: Moment,
    /// After the last event.
    pub end: Moment,
    /// The highest moment of each of up to 240 spans.
    pub timeline: Vec<Moment>,
}

/// The timeline of `events`; `None` without any.
pub fn category_timeline(mut events: Vec<MemoryEvent>) -> Option<CategoryTimeline> {
    // Pre-existing memory (time -1) first, then by time; a stable sort keeps the order of
    // each tensor's events at one instant.
    events.sort_by_key(|e| e.time_ns);
    let origin = events
        .iter()
        .find(|e| e.time_ns >= 0)
        .map_or(0, |e| e.time_ns);
    let mut bytes = vec![0i64; CATEGORIES.len()];
    let mut moments: Vec<Moment> = Vec::with_capacity(events.len());
    for e in &events {
        bytes[e.category as usize] += e.bytes;
        moments.push(Moment {
            at_ms: (e.time_ns.max(origin) - origin) as f64 / 1e6,
            total: bytes.iter().sum(),
            bytes: bytes.clone(),
        });
    }
    let peak = moments.iter().max_by_key(|m| m.total)?.clone();
    let end = moments.last()?.clone();
    let per = moments.len().div_ceil(POINTS);
    let timeline = moments
        .chunks(per)
        .filter_map(|span| span.iter().max_by_key(|m| m.total).cloned())
        .collect();
    Some(CategoryTimeline {
        categories: CATEGORIES.to_vec(),
        events: events.len(),
        peak,
        end,
        timeline,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let t = category_timeline(vec![
            event(3_000_000, -50, 4),
            event(-1, 100, 0),
            event(1_000_000, 50, 4),
            event(2_000_000, 20, 5),
        ])
        .unwrap();
        assert_eq!(t.peak.total, 170);
        assert_eq!(t.peak.at_ms, 1.0);
        assert_eq!(t.peak.bytes[4], 50);
        assert_eq!(t.end.total, 120);
        assert_eq!(t.end.bytes[4], 0);
    }
}

//! The raw memory timeline of torch.profiler by category (parameters, optimizer state,
//! inputs, temporaries, activations, gradients, autograd detail, unknown): how much each
//! held over time, at the peak and at the end.

use serde::Serialize;

use crate::model::memory_timeline::{MemoryEvent, MemoryTimeline, CATEGORIES};

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
    match timeline {
        MemoryTimeline::Raw(events) => from_events(events),
        MemoryTimeline::Totals { times_us, bytes } => {
            let origin = times_us.first().copied().unwrap_or(0);
            let moments = times_us
                .iter()
                .zip(bytes)
                .map(|(t, bytes)| Moment {
                    at_ms: (t - origin) as f64 / 1000.0,
                    total: bytes.iter().sum(),
                    bytes,
                })
                .collect();
            summarise(moments, times_us.len())
        }
    }
}

fn from_events(mut events: Vec<MemoryEvent>) -> Option<CategoryTimeline> {
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
    summarise(moments, events.len())
}

fn summarise(moments: Vec<Moment>, events: usize) -> Option<CategoryTimeline> {
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
        events,
        peak,
        end,
        max_bytes,
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

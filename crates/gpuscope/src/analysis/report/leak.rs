//! Trends per memory category and the leak verdict. The rule, as the README states it:
//!
//! - **Window**: the records after a warm-up of the first 10 % of the iteration range.
//!   At least [`MIN_RECORDS`] records are needed, else no verdict.
//! - **Trend** of each category (and of the census and the allocator's allocated and
//!   reserved): the Theil–Sen slope over the window, in bytes per 1000 iterations, with
//!   the r² of its line.
//! - **Sustained growth** of a category, all three of: growth over the window (slope ×
//!   span) of at least [`MIN_GROWTH_BYTES`] and of [`MIN_GROWTH_SHARE`] of its level at the
//!   start of the window; a good line (r² ≥ [`MIN_R2`]; a sawtooth fits badly); and growth
//!   still going in the last third of the window (its own slope at least
//!   [`MIN_LATE_RATIO`] of the whole window's; a one-time step or growth that stops, such
//!   as densification ending, fails this).
//! - **Verdict**: a leak is suspected when a category grows in a sustained way; it names
//!   the one that grew most, with its usual reading.

use std::collections::BTreeMap;

use serde::Serialize;

use super::trend::theil_sen;
use crate::model::memory::{Categories, MemoryRecord};
use crate::model::units::ByteUnit;

/// Fewest records in the window for a verdict.
pub const MIN_RECORDS: usize = 6;
/// Share of the iteration range treated as warm-up.
pub const WARMUP_SHARE: f64 = 0.10;
/// Least growth over the window that counts, in bytes.
pub const MIN_GROWTH_BYTES: f64 = 8.0 * 1024.0 * 1024.0;
/// Least growth over the window that counts, as a share of the starting level.
pub const MIN_GROWTH_SHARE: f64 = 0.05;
/// Least r² of the line for growth to count as steady.
pub const MIN_R2: f64 = 0.7;
/// Least ratio of the last third's slope to the window's.
pub const MIN_LATE_RATIO: f64 = 0.5;

/// The trend of one series.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SeriesTrend {
    /// Theil–Sen slope, bytes per 1000 iterations.
    pub slope_bytes_per_1k_iters: f64,
    /// r² of the line (1 for a flat series).
    pub r2: f64,
    /// The series did not change over the window, so its r² of 1 is no sign of a trend.
    pub flat: bool,
    /// Slope over the last third of the window, bytes per 1000 iterations.
    pub late_slope_bytes_per_1k_iters: Option<f64>,
    /// Growth over the window, bytes.
    pub growth_bytes: f64,
    /// Whether this series grows in a sustained way (the rule above).
    pub sustained: bool,
}

/// The leak verdict.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LeakVerdict {
    /// Whether the rule could be applied (enough records after warm-up); when not,
    /// `suspected` is false and says nothing.
    pub judged: bool,
    /// Whether a leak is suspected.
    pub suspected: bool,
    /// The category that grows most in a sustained way, if any.
    pub category: Option<String>,
    /// Why, in words.
    pub reason: String,
}

/// Trends and verdict of one rank's records.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LeakAnalysis {
    /// First iteration of the window (after warm-up).
    pub window_start: Option<i64>,
    /// Trends by series name (categories, `census`, `allocated`, `reserved`).
    pub trends: BTreeMap<String, SeriesTrend>,
    /// The verdict.
    pub leak: LeakVerdict,
}

/// Applies the rule to `records` (ordered by iteration).
pub fn analyze(records: &[MemoryRecord]) -> LeakAnalysis {
    if records.is_empty() {
        return no_verdict(None, "no records".into());
    }
    let window = window(records);
    let window_start = window.first().map(|r| r.iteration);
    if window.len() < MIN_RECORDS {
        return no_verdict(
            window_start,
            format!(
                "{} records after warm-up; {MIN_RECORDS} are needed for a verdict",
                window.len()
            ),
        );
    }
    let mut series: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for r in &window {
        let x = r.iteration as f64;
        for (name, bytes) in r.categories_bytes.measured() {
            series
                .entry(name.to_owned())
                .or_default()
                .push((x, bytes as f64));
        }
        series
            .entry("census".into())
            .or_default()
            .push((x, r.census_bytes as f64));
        if let Some(a) = &r.allocator {
            for (name, bytes) in [
                ("allocated", a.allocated_bytes),
                ("reserved", a.reserved_bytes),
            ] {
                series
                    .entry(name.into())
                    .or_default()
                    .push((x, bytes as f64));
            }
        }
    }
    let trends: BTreeMap<String, SeriesTrend> = series
        .into_iter()
        .filter_map(|(name, points)| Some((name, series_trend(&points)?)))
        .collect();
    let leak = verdict(&trends);
    LeakAnalysis {
        window_start,
        trends,
        leak,
    }
}

/// The records after the warm-up (the first [`WARMUP_SHARE`] of the iteration range).
pub fn window(records: &[MemoryRecord]) -> Vec<&MemoryRecord> {
    let (Some(first), Some(last)) = (records.first(), records.last()) else {
        return Vec::new();
    };
    let span = (last.iteration - first.iteration) as f64;
    let start = first.iteration as f64 + span * WARMUP_SHARE;
    records
        .iter()
        .filter(|r| r.iteration as f64 >= start)
        .collect()
}

fn no_verdict(window_start: Option<i64>, reason: String) -> LeakAnalysis {
    LeakAnalysis {
        window_start,
        trends: BTreeMap::new(),
        leak: LeakVerdict {
            judged: false,
            suspected: false,
            category: None,
            reason,
        },
    }
}

/// The trend of `(iteration, bytes)` points, with the sustained-growth test applied.
pub fn series_trend(points: &[(f64, f64)]) -> Option<SeriesTrend> {
    let whole = theil_sen(points)?;
    let span = points.last()?.0 - points.first()?.0;
    let growth = whole.slope * span;
    let late_points = &points[points.len() * 2 / 3..];
    let late = (late_points.len() >= 3)
        .then(|| theil_sen(late_points))
        .flatten();
    let level = points.first()?.1.max(0.0);
    let mut trend = SeriesTrend {
        slope_bytes_per_1k_iters: whole.slope * 1000.0,
        r2: whole.r2,
        flat: whole.flat,
        late_slope_bytes_per_1k_iters: late.map(|l| l.slope * 1000.0),
        growth_bytes: growth,
        sustained: false,
    };
    trend.sustained =
        growth >= MIN_GROWTH_BYTES && growth >= MIN_GROWTH_SHARE * level && trend.steady();
    Some(trend)
}

impl SeriesTrend {
    /// A good line (r² ≥ [`MIN_R2`]) whose growth is still going in the last third of the
    /// window (its slope at least [`MIN_LATE_RATIO`] of the whole window's).
    pub fn steady(&self) -> bool {
        self.r2 >= MIN_R2
            && self
                .late_slope_bytes_per_1k_iters
                .is_some_and(|late| late >= MIN_LATE_RATIO * self.slope_bytes_per_1k_iters)
    }
}

fn verdict(trends: &BTreeMap<String, SeriesTrend>) -> LeakVerdict {
    let grower = Categories::NAMES
        .iter()
        .filter_map(|c| trends.get(*c).map(|t| (*c, t)))
        .filter(|(_, t)| t.sustained)
        .max_by(|a, b| a.1.growth_bytes.total_cmp(&b.1.growth_bytes));
    match grower {
        Some((category, t)) => LeakVerdict {
            judged: true,
            suspected: true,
            category: Some(category.to_owned()),
            reason: format!(
                "{category} grew {:+.1} MB per 1000 iterations, steadily (r² {:.2}) and still at \
                 the end: {}",
                ByteUnit::Mib.of_f64(t.slope_bytes_per_1k_iters),
                t.r2,
                reading(category)
            ),
        },
        None => {
            let total = trends
                .get("allocated")
                .or_else(|| trends.get("census"))
                .filter(|t| t.sustained);
            LeakVerdict {
                judged: true,
                suspected: false,
                category: None,
                reason: match total {
                    Some(t) => format!(
                        "no category grows steadily, but the total does ({:+.1} MB per 1000 \
                         iterations): memory outside the counted categories",
                        ByteUnit::Mib.of_f64(t.slope_bytes_per_1k_iters)
                    ),
                    None => "no category grows steadily to the end of the run".into(),
                },
            }
        }
    }
}

/// The usual reading of a growing category.
fn reading(category: &str) -> &'static str {
    match category {
        "parameters" => "a leak in the model, or densification that never stops",
        "activations" => {
            "intermediate tensors accumulate (outputs or losses kept with their graphs; \
             store loss.item(), not loss)"
        }
        "gradients" => "gradients are not freed (zero_grad(set_to_none=True) missing?)",
        "optimizer_state" => "optimizer state keeps growing (parameters added without pruning?)",
        _ => "tensors that are not freed",
    }
}

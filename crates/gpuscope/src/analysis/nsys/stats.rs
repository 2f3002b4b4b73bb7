//! The statistics every nsys summary row carries, over nanosecond durations or byte sizes,
//! and the grouping the summaries share: by key, largest total time first.

use std::collections::HashMap;
use std::hash::Hash;

use serde::Serialize;

/// Times of one row's instances, µs (exact to the nanosecond the export records).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DurationStats {
    /// Share of the summed total of all rows of the summary.
    pub time_percent: f64,
    /// Total time.
    pub total_us: f64,
    /// Instances (kernels), calls (API) or operations (memory).
    pub count: u64,
    /// Mean.
    pub avg_us: f64,
    /// Median.
    pub med_us: f64,
    /// Shortest.
    pub min_us: f64,
    /// Longest.
    pub max_us: f64,
    /// Sample standard deviation; 0 for one instance.
    pub stddev_us: f64,
}

/// Sizes of one row's operations, bytes (mean, median and deviation rounded to a byte).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SizeStats {
    /// Bytes moved or set in all.
    pub total_bytes: i64,
    /// Mean.
    pub avg_bytes: i64,
    /// Median.
    pub med_bytes: i64,
    /// Smallest.
    pub min_bytes: i64,
    /// Largest.
    pub max_bytes: i64,
    /// Sample standard deviation; 0 for one operation.
    pub stddev_bytes: i64,
}

/// Mean, median, min, max and sample deviation of `values`, sorted in place.
struct Moments {
    total: i64,
    mean: f64,
    median: f64,
    min: i64,
    max: i64,
    stddev: f64,
}

fn moments(values: &mut [i64]) -> Moments {
    values.sort_unstable();
    let n = values.len();
    let total: i64 = values.iter().fold(0i64, |a, v| a.saturating_add(*v));
    if n == 0 {
        return Moments {
            total,
            mean: 0.0,
            median: 0.0,
            min: 0,
            max: 0,
            stddev: 0.0,
        };
    }
    let mean = values.iter().map(|&v| v as f64).sum::<f64>() / n as f64;
    let median = if n % 2 == 1 {
        values[n / 2] as f64
    } else {
        (values[n / 2 - 1] as f64 + values[n / 2] as f64) / 2.0
    };
    let stddev = if n > 1 {
        let ss: f64 = values.iter().map(|&v| (v as f64 - mean).powi(2)).sum();
        (ss / (n - 1) as f64).sqrt()
    } else {
        0.0
    };
    Moments {
        total,
        mean,
        median,
        min: values[0],
        max: values[n - 1],
        stddev,
    }
}

/// The size statistics of `bytes`.
pub(super) fn size_stats(mut bytes: Vec<i64>) -> SizeStats {
    let m = moments(&mut bytes);
    SizeStats {
        total_bytes: m.total,
        avg_bytes: m.mean.round() as i64,
        med_bytes: m.median.round() as i64,
        min_bytes: m.min,
        max_bytes: m.max,
        stddev_bytes: m.stddev.round() as i64,
    }
}

/// `(key, duration ns)` pairs grouped by key, each group's statistics, largest total
/// first (ties by key, so the order does not depend on hashing).
pub(super) fn by_total_time<K: Hash + Eq + Ord>(
    items: impl Iterator<Item = (K, i64)>,
) -> Vec<(K, DurationStats)> {
    let mut groups: HashMap<K, Vec<i64>> = HashMap::new();
    for (key, ns) in items {
        groups.entry(key).or_default().push(ns);
    }
    let mut groups: Vec<(K, Moments, u64)> = groups
        .into_iter()
        .map(|(k, mut v)| (k, moments(&mut v), v.len() as u64))
        .collect();
    groups.sort_by(|a, b| b.1.total.cmp(&a.1.total).then_with(|| a.0.cmp(&b.0)));
    let all: i64 = groups.iter().fold(0i64, |a, g| a.saturating_add(g.1.total));
    let us = |ns: f64| ns / 1000.0;
    groups
        .into_iter()
        .map(|(k, m, count)| {
            let stats = DurationStats {
                time_percent: if all > 0 {
                    m.total as f64 * 100.0 / all as f64
                } else {
                    0.0
                },
                total_us: us(m.total as f64),
                count,
                avg_us: us(m.mean),
                med_us: us(m.median),
                min_us: us(m.min as f64),
                max_us: us(m.max as f64),
                stddev_us: us(m.stddev),
            };
            (k, stats)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_an_even_count_is_the_mean_of_the_middle_two() {
        let rows = by_total_time([("a", 4), ("a", 1), ("a", 3), ("a", 2)].into_iter());
        let s = &rows[0].1;
        assert_eq!(s.med_us, 0.0025);
        assert_eq!(s.total_us, 0.010);
        assert_eq!((s.min_us, s.max_us, s.count), (0.001, 0.004, 4));
        // Sample deviation of 1..=4: sqrt(5/3) ns.
        assert!((s.stddev_us * 1000.0 - (5.0f64 / 3.0).sqrt()).abs() < 1e-12);
    }

    #[test]
    fn rows_come_largest_total_first_and_shares_add_up() {
        let rows = by_total_time([("x", 10), ("y", 30), ("x", 20), ("z", 40)].into_iter());
        let keys: Vec<&str> = rows.iter().map(|r| r.0).collect();
        assert_eq!(keys, ["z", "x", "y"]);
        assert_eq!(rows[1].1.time_percent, 30.0);
        let total: f64 = rows.iter().map(|r| r.1.time_percent).sum();
        assert!((total - 100.0).abs() < 1e-9);
        assert_eq!(rows[2].1.stddev_us, 0.0);
    }

    #[test]
    fn sizes_round_to_whole_bytes() {
        let s = size_stats(vec![1, 2]);
        assert_eq!((s.total_bytes, s.avg_bytes, s.med_bytes), (3, 2, 2));
        assert_eq!(size_stats(Vec::new()).total_bytes, 0);
    }
}

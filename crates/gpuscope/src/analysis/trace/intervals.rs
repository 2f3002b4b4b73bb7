//! Unions of time intervals: the time a GPU is busy is the union of its streams' work.

/// A half-open interval of time, ns.
pub type Interval = (i64, i64);

/// The union of `intervals` as disjoint intervals ordered by start. Intervals that touch
/// are merged. Of intervals that start together the longest comes first, so one that
/// rounding left with its end before its start is absorbed rather than counted.
pub fn merge(mut intervals: Vec<Interval>) -> Vec<Interval> {
    // The stable sort: it finds the runs that events come in, already in order.
    intervals.sort_by_key(|&(start, end)| (start, std::cmp::Reverse(end)));
    let mut out: Vec<Interval> = Vec::with_capacity(intervals.len());
    for (start, end) in intervals {
        match out.last_mut() {
            Some(last) if start <= last.1 => last.1 = last.1.max(end),
            _ => out.push((start, end)),
        }
    }
    out
}

/// Total length of disjoint intervals.
pub fn length(merged: &[Interval]) -> i64 {
    merged.iter().map(|(s, e)| e - s).sum()
}

/// Length of the time covered by exactly the set of layers given by each bit of the mask,
/// for every mask that occurs: `layers[i]` are the disjoint intervals of layer `i`
/// (at most 8 layers).
pub fn exclusive_regions(layers: &[Vec<Interval>]) -> Vec<(u8, i64)> {
    let mut edges: Vec<(i64, i32)> = Vec::new();
    for (bit, layer) in layers.iter().enumerate() {
        let mask = 1i32 << bit;
        for &(s, e) in layer {
            edges.push((s, mask));
            edges.push((e, -mask));
        }
    }
    edges.sort_unstable_by_key(|(t, _)| *t);
    let mut totals = [0i64; 256];
    let mut running = 0i32;
    for pair in edges.windows(2) {
        running += pair[0].1;
        if running > 0 {
            totals[running as usize] += pair[1].0 - pair[0].0;
        }
    }
    totals
        .iter()
        .enumerate()
        .filter(|(mask, total)| *mask > 0 && **total > 0)
        .map(|(mask, total)| (mask as u8, *total))
        .collect()
}

/// The length of the intersection of two sets of disjoint, ordered intervals.
pub fn intersection(a: &[Interval], b: &[Interval]) -> i64 {
    let (mut i, mut j, mut total) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        let start = a[i].0.max(b[j].0);
        let end = a[i].1.min(b[j].1);
        total += (end - start).max(0);
        if a[i].1 < b[j].1 {
            i += 1;
        } else {
            j += 1;
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn touching_and_nested_intervals_merge() {
        let m = merge(vec![(5, 7), (0, 2), (2, 3), (1, 2), (10, 12), (6, 6)]);
        assert_eq!(m, vec![(0, 3), (5, 7), (10, 12)]);
        assert_eq!(length(&m), 7);
    }

    #[test]
    fn intersection_of_interval_sets() {
        let a = merge(vec![(0, 10), (20, 30)]);
        let b = merge(vec![(5, 25)]);
        assert_eq!(intersection(&a, &b), 10);
    }

    #[test]
    fn regions_are_exclusive() {
        // Layer 0 busy 0..10, layer 1 busy 5..15: 0..5 only 0, 5..10 both, 10..15 only 1.
        let r = exclusive_regions(&[vec![(0, 10)], vec![(5, 15)]]);
        assert_eq!(r, vec![(1, 5), (2, 5), (3, 5)]);
    }
}

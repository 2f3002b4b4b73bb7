//! Robust trends: the Theil–Sen slope (the median of the slopes between every pair of
//! points), which one outlier or one spike cannot tilt, with the r² of the line it gives.
//!
//! Theil–Sen is O(n²) in pairs; above [`MAX_POINTS`] points the series is thinned to that
//! many evenly spaced points first (a trend over a million records does not need them all).

/// Most points a trend is computed from.
pub const MAX_POINTS: usize = 1500;

/// A fitted line and how well it fits.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Trend {
    /// Change of y per unit of x.
    pub slope: f64,
    /// y at x = 0.
    pub intercept: f64,
    /// Coefficient of determination of the line (1 − SS_res / SS_tot); 1 for a flat,
    /// constant series, 0 when the line explains the points no better than their mean.
    /// (Theil–Sen's line is not the least-squares one, so the formula alone can go below
    /// 0, which reads as nonsense next to a trend.)
    pub r2: f64,
    /// Every y is the same: the line fits by definition, and r² says nothing of a trend.
    pub flat: bool,
}

/// The Theil–Sen line through `(x, y)` points; `None` for fewer than 2 distinct x.
pub fn theil_sen(points: &[(f64, f64)]) -> Option<Trend> {
    let points = thin(points);
    let mut slopes = Vec::with_capacity(points.len() * (points.len() - 1).max(1) / 2);
    for (i, a) in points.iter().enumerate() {
        for b in &points[i + 1..] {
            if b.0 != a.0 {
                slopes.push((b.1 - a.1) / (b.0 - a.0));
            }
        }
    }
    let slope = median(&mut slopes)?;
    let mut offsets: Vec<f64> = points.iter().map(|(x, y)| y - slope * x).collect();
    let intercept = median(&mut offsets)?;
    let mean = points.iter().map(|p| p.1).sum::<f64>() / points.len() as f64;
    let ss_tot: f64 = points.iter().map(|p| (p.1 - mean).powi(2)).sum();
    let ss_res: f64 = points
        .iter()
        .map(|(x, y)| (y - (intercept + slope * x)).powi(2))
        .sum();
    let r2 = if ss_tot == 0.0 {
        1.0
    } else {
        (1.0 - ss_res / ss_tot).max(0.0)
    };
    Some(Trend {
        slope,
        intercept,
        r2,
        flat: ss_tot == 0.0,
    })
}

fn thin(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    if points.len() <= MAX_POINTS {
        return points.to_vec();
    }
    let step = (points.len() - 1) as f64 / (MAX_POINTS - 1) as f64;
    (0..MAX_POINTS)
        .map(|i| points[(i as f64 * step).round() as usize])
        .collect()
}

/// The median, by selection (O(n)): a thinned series still has a million pairwise slopes,
/// and sorting them was a third of a report's time.
pub fn median(values: &mut [f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let (mid, odd) = (values.len() / 2, values.len() % 2 == 1);
    let (below, upper, _) = values.select_nth_unstable_by(mid, f64::total_cmp);
    let upper = *upper;
    Some(if odd {
        upper
    } else {
        let lower = below.iter().copied().max_by(f64::total_cmp)?;
        (lower + upper) / 2.0
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_is_found_exactly() {
        let points: Vec<_> = (0..20).map(|i| (i as f64, 3.0 * i as f64 + 7.0)).collect();
        let t = theil_sen(&points).unwrap();
        assert_eq!((t.slope, t.intercept, t.r2), (3.0, 7.0, 1.0));
    }

    #[test]
    fn an_outlier_does_not_tilt_it() {
        let mut points: Vec<_> = (0..21).map(|i| (i as f64, 2.0 * i as f64)).collect();
        points[20].1 = 1e9;
        let t = theil_sen(&points).unwrap();
        assert_eq!(t.slope, 2.0);
    }

    #[test]
    fn a_sawtooth_fits_badly() {
        let points: Vec<_> = (0..40)
            .map(|i| (i as f64, (i % 5) as f64 * 100.0))
            .collect();
        let t = theil_sen(&points).unwrap();
        assert!(t.r2 < 0.2, "{t:?}");
    }

    #[test]
    fn a_line_worse_than_the_mean_fits_at_zero() {
        // The median line is y = 0; the one spike puts the mean at 14.3, nearer the points
        // than the line is: 1 − SS_res / SS_tot = 1 − 10000 / 8571.
        let points: Vec<_> = (0..7)
            .map(|i| (i as f64, if i == 6 { 100.0 } else { 0.0 }))
            .collect();
        let t = theil_sen(&points).unwrap();
        assert_eq!((t.slope, t.intercept, t.r2), (0.0, 0.0, 0.0));
    }

    #[test]
    fn the_median_of_an_even_count_is_the_mean_of_the_middle_two() {
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&mut [5.0, 1.0, 3.0]), Some(3.0));
        assert_eq!(median(&mut []), None);
    }

    #[test]
    fn long_series_are_thinned_not_dropped() {
        let points: Vec<_> = (0..100_000).map(|i| (i as f64, 0.5 * i as f64)).collect();
        let t = theil_sen(&points).unwrap();
        assert!((t.slope - 0.5).abs() < 1e-12);
        assert_eq!(theil_sen(&points[..1]), None);
    }
}

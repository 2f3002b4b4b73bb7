//! Several ranks of one job side by side: each rank's step time, compute and
//! communication, and the stragglers. In synchronous data-parallel training every rank
//! waits in its collectives for the slowest, so the straggler is the rank that computes
//! longest — and communicates least, since it waits least.

use serde::{Deserialize, Serialize};

use super::clamp::non_negative;
use super::classify::KernelType;
use super::report::RankReport;
use crate::analysis::report::trend::median;

/// A rank computing this much longer than the median of the ranks is a straggler.
pub const STRAGGLER_PERCENT: f64 = 5.0;

/// One rank's figures in the comparison.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RankFigures {
    /// The rank.
    pub rank: u32,
    /// Mean profiler step, µs (`null` without steps).
    pub mean_step_us: Option<f64>,
    /// Compute time, µs.
    pub compute_us: f64,
    /// Time any communication kernel ran, µs.
    pub communication_us: f64,
    /// Idle time, µs.
    pub idle_us: f64,
}

/// A rank slower than the others.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Straggler {
    /// The rank.
    pub rank: u32,
    /// How much longer it computes than the ranks' median, percent.
    pub compute_over_median_percent: f64,
}

/// The ranks compared.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RankComparison {
    /// Every rank with GPU work, in rank order.
    pub ranks: Vec<RankFigures>,
    /// Ranks computing [`STRAGGLER_PERCENT`] or more longer than the median, slowest first.
    pub stragglers: Vec<Straggler>,
}

/// The figures of one rank's report; `None` without GPU work.
pub fn figures_of(r: &RankReport) -> Option<RankFigures> {
    let t = r.temporal.as_ref()?;
    Some(RankFigures {
        rank: r.rank,
        mean_step_us: r.steps.as_ref().map(|s| s.mean.duration_us),
        compute_us: t.compute_time_us,
        // A rank without communication sums nothing: −0.0, not 0.
        communication_us: non_negative(
            r.kernel_types
                .iter()
                .filter(|k| k.types.contains(&KernelType::Communication))
                .map(|k| k.sum_us)
                .sum(),
        ),
        idle_us: t.idle_time_us,
    })
}

/// The comparison of the ranks' `figures`: the stragglers (README, "Many ranks"); `None`
/// for fewer than two.
pub fn compare(figures: Vec<RankFigures>) -> Option<RankComparison> {
    if figures.len() < 2 {
        return None;
    }
    let compute: Vec<(u32, f64)> = figures.iter().map(|f| (f.rank, f.compute_us)).collect();
    Some(RankComparison {
        stragglers: stragglers(&compute),
        ranks: figures,
    })
}

/// The stragglers among ranks of these (rank, compute time) pairs, by the rule of the
/// README ("Many ranks"), slowest first; none for fewer than two ranks.
pub fn stragglers(compute: &[(u32, f64)]) -> Vec<Straggler> {
    let mut times: Vec<f64> = compute.iter().map(|&(_, us)| us).collect();
    let Some(median) = median(&mut times).filter(|&m| compute.len() >= 2 && m > 0.0) else {
        return Vec::new();
    };
    let mut out: Vec<Straggler> = compute
        .iter()
        .map(|&(rank, us)| Straggler {
            rank,
            compute_over_median_percent: (us - median) * 100.0 / median,
        })
        .filter(|s| s.compute_over_median_percent >= STRAGGLER_PERCENT)
        .collect();
    out.sort_by(|a, b| {
        b.compute_over_median_percent
            .total_cmp(&a.compute_over_median_percent)
    });
    out
}

#[cfg(test)]
mod tests {
    use super::stragglers;

    fn named(compute: &[(u32, f64)]) -> Vec<u32> {
        stragglers(compute).iter().map(|s| s.rank).collect()
    }

    #[test]
    fn of_two_ranks_the_slower_is_named_from_21_19_of_the_other() {
        // The median of two is their mean: 21 is 5 % over 20.
        assert_eq!(named(&[(0, 19.0), (1, 21.0)]), [1]);
        assert_eq!(named(&[(0, 19.0), (1, 20.9)]), Vec::<u32>::new());
    }

    #[test]
    fn stragglers_come_slowest_first_against_the_middle_rank() {
        assert_eq!(
            named(&[(0, 100.0), (1, 130.0), (2, 101.0), (3, 110.0), (4, 100.0)]),
            [1, 3]
        );
    }

    #[test]
    fn one_rank_or_no_compute_names_nobody() {
        assert!(named(&[(0, 50.0)]).is_empty());
        assert!(named(&[(0, 0.0), (1, 0.0), (2, 0.0)]).is_empty());
        assert!(named(&[]).is_empty());
    }
}

//! How much of the communication time computation hides: the share of the time NCCL
//! kernels run during which a computation kernel runs too (HTA's comm/comp overlap).

use super::intervals::{length, Interval};
use super::kernel_type::KernelType;
use super::scope::Scope;
use super::temporal::busy;
use crate::model::trace::Trace;

/// The overlap in percent of communication time; `None` without communication.
pub fn comm_comp_overlap_percent(trace: &Trace, scope: &Scope) -> Option<f64> {
    let comm = busy(trace, scope, Some(KernelType::Communication));
    let total = length(&comm);
    if total <= 0 {
        return None;
    }
    let comp = busy(trace, scope, Some(KernelType::Computation));
    Some(intersection(&comm, &comp) as f64 * 100.0 / total as f64)
}

/// The length of the intersection of two sets of disjoint, ordered intervals.
fn intersection(a: &[Interval], b: &[Interval]) -> i64 {
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
    use super::super::intervals::merge;
    use super::*;

    #[test]
    fn intersection_of_interval_sets() {
        let a = merge(vec![(0, 10), (20, 30)]);
        let b = merge(vec![(5, 25)]);
        assert_eq!(intersection(&a, &b), 10);
    }
}

//! How much of the communication time computation hides: the share of the time NCCL
//! kernels run during which a computation kernel runs too (HTA's comm/comp overlap).

use super::classify::KernelType;
use super::intervals::{intersection, length};
use super::scope::Scope;
use super::temporal::busy;
use crate::model::trace::Trace;

/// The overlap in percent of communication time, at most 100; `None` without
/// communication.
pub fn comm_comp_overlap_percent(trace: &Trace, scope: &Scope) -> Option<f64> {
    let comm = busy(trace, scope, Some(KernelType::Communication));
    let total = length(&comm);
    if total <= 0 {
        return None;
    }
    let comp = busy(trace, scope, Some(KernelType::Computation));
    // Under HTA's rounding a communication kernel shorter than 1 µs can end before it
    // starts and take time off the total, which the overlap (never negative) may exceed.
    Some((intersection(&comm, &comp) as f64 * 100.0 / total as f64).min(100.0))
}

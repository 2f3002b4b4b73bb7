//! Where the GPU's time goes, HTA's temporal breakdown: from the first GPU work to the end
//! of the last, the time no stream is busy (idle), busy with computation kernels
//! (compute), and busy with anything else — copies, memsets, communication — only.
//!
//! Under HTA's rounding, work shorter than 1 µs can end before it starts; a negative
//! interval left on its own in a union subtracts from it, so compute or non-compute (as
//! busy time less compute) can come out negative, as in HTA. Those figures are 0 here, and
//! then the parts may not add up to the span.

use serde::Serialize;

use super::clamp::non_negative;
use super::classify::KernelType;
use super::intervals::{length, merge, Interval};
use super::scope::Scope;
use crate::model::trace::Trace;

/// The temporal breakdown of one rank, µs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Temporal {
    /// From the start of the first GPU work to the end of the last.
    pub kernel_time_us: f64,
    /// Within that span, time no stream was busy.
    pub idle_time_us: f64,
    /// Time at least one computation kernel ran.
    pub compute_time_us: f64,
    /// Time only other GPU work (copies, memsets, communication) ran.
    pub non_compute_time_us: f64,
    /// Idle share of the span, percent.
    pub idle_time_percent: f64,
    /// Compute share of the span, percent.
    pub compute_time_percent: f64,
    /// Non-compute share of the span, percent.
    pub non_compute_time_percent: f64,
}

/// The busy intervals of the GPU events in `scope`, all or of one type.
pub fn busy(trace: &Trace, scope: &Scope, only: Option<KernelType>) -> Vec<Interval> {
    merge(
        scope
            .gpu
            .iter()
            .filter(|&&i| only.is_none_or(|t| scope.kernel_type(trace, i) == t))
            .map(|&i| scope.interval(trace, i))
            .collect(),
    )
}

/// The breakdown; `None` without GPU work.
pub fn temporal(trace: &Trace, scope: &Scope) -> Option<Temporal> {
    let all = busy(trace, scope, None);
    let span = all.last()?.1 - all.first()?.0;
    let busy_ns = length(&all);
    let compute = length(&busy(trace, scope, Some(KernelType::Computation)));
    let us = |ns: i64| non_negative(ns as f64 / 1000.0);
    let percent = |ns: i64| {
        if span > 0 {
            non_negative(ns as f64 * 100.0 / span as f64)
        } else {
            0.0
        }
    };
    Some(Temporal {
        kernel_time_us: us(span),
        idle_time_us: us(span - busy_ns),
        compute_time_us: us(compute),
        non_compute_time_us: us(busy_ns - compute),
        idle_time_percent: percent(span - busy_ns),
        compute_time_percent: percent(compute),
        non_compute_time_percent: percent(busy_ns - compute),
    })
}

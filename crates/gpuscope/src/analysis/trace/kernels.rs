//! GPU work by kind: HTA's kernel-type breakdown (time only computation ran, only
//! communication, both at once, ...) and the kernels that take the most time, with
//! count, mean, min, max and standard deviation of their durations.

use rustc_hash::FxHashMap;

use serde::Serialize;

use super::classify::KernelType;
use super::intervals::{exclusive_regions, merge};
use super::scope::Scope;
use crate::model::trace::{Kind, Trace};

/// Types in HTA's order: their bits in the overlap masks follow it.
const TYPES: [KernelType; 3] = [
    KernelType::Computation,
    KernelType::Communication,
    KernelType::Memory,
];

/// Time in which exactly one set of kernel types ran.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TypeTime {
    /// `COMPUTATION`, `COMMUNICATION overlapping MEMORY`, ... (HTA's labels).
    pub kernel_type: String,
    /// The types that ran together in this time, the label's words.
    #[serde(skip)]
    pub types: Vec<KernelType>,
    /// Time, µs.
    pub sum_us: f64,
    /// Share of the time any of the types ran, percent.
    pub percentage: f64,
}

/// The breakdown by kernel type, largest first. Synchronisation (`OTHER`) is left out, as
/// in HTA.
pub fn type_breakdown(trace: &Trace, scope: &Scope) -> Vec<TypeTime> {
    type_breakdown_of(trace, scope, &TYPES)
}

/// The breakdown over `types` alone (HTA's `include_memory_kernels=False` leaves memory
/// out: time it overlapped goes to the other type).
pub fn type_breakdown_of(trace: &Trace, scope: &Scope, types: &[KernelType]) -> Vec<TypeTime> {
    let mut layers: Vec<Vec<(i64, i64)>> = vec![Vec::new(); types.len()];
    for &i in &scope.gpu {
        let t = scope.kernel_type(trace, i);
        if let Some(layer) = types.iter().position(|x| *x == t) {
            layers[layer].push(scope.interval(trace, i));
        }
    }
    let layers: Vec<_> = layers.into_iter().map(merge).collect();
    let regions = exclusive_regions(&layers);
    let total: i64 = regions.iter().map(|(_, t)| t).sum();
    let mut out: Vec<TypeTime> = regions
        .into_iter()
        .map(|(mask, ns)| {
            let running: Vec<KernelType> = types
                .iter()
                .enumerate()
                .filter(|(bit, _)| mask & (1 << bit) != 0)
                .map(|(_, &t)| t)
                .collect();
            TypeTime {
                kernel_type: running
                    .iter()
                    .map(KernelType::as_str)
                    .collect::<Vec<_>>()
                    .join(" overlapping "),
                types: running,
                sum_us: ns as f64 / 1000.0,
                percentage: ns as f64 * 100.0 / total as f64,
            }
        })
        .collect();
    out.sort_by(|a, b| b.sum_us.total_cmp(&a.sum_us));
    out
}

/// One kernel (by name) and the statistics of its durations.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KernelStats {
    /// Its name.
    pub name: String,
    /// Its type; `null` for the `others` row, which mixes them, and for annotations.
    pub kernel_type: Option<KernelType>,
    /// How many times it ran.
    pub count: u64,
    /// Total time, µs.
    pub sum_us: f64,
    /// Mean, µs.
    pub mean_us: f64,
    /// Shortest, µs.
    pub min_us: f64,
    /// Longest, µs.
    pub max_us: f64,
    /// Sample standard deviation, µs (0 for one run).
    pub stddev_us: f64,
    /// Share of all GPU work's time, percent.
    pub percentage: f64,
}

/// The durations of `events` (indices into the trace), by name, largest total first (ties
/// by name).
fn durations_by_name(
    trace: &Trace,
    scope: &Scope,
    events: impl IntoIterator<Item = usize>,
) -> Vec<(u32, Vec<i64>)> {
    let e = &trace.events;
    let mut by_name: FxHashMap<u32, Vec<i64>> = FxHashMap::default();
    for i in events {
        by_name
            .entry(e.name[i])
            .or_default()
            .push(scope.duration(trace, i));
    }
    let mut rows: Vec<(u32, Vec<i64>)> = by_name.into_iter().collect();
    rows.sort_by(|a, b| {
        let (sa, sb): (i64, i64) = (a.1.iter().sum(), b.1.iter().sum());
        sb.cmp(&sa)
            .then_with(|| trace.names.get(a.0).cmp(trace.names.get(b.0)))
    });
    rows
}

fn total(rows: &[(u32, Vec<i64>)]) -> i64 {
    rows.iter().flat_map(|(_, d)| d).sum()
}

fn named_stats(trace: &Trace, (name, durations): &(u32, Vec<i64>), total: i64) -> KernelStats {
    let name = trace.names.get(*name);
    stats(name, Some(KernelType::of(name)), durations, total)
}

/// The `n` kernels (and copies, memsets) with the most time, largest first, then one
/// `others` row for the rest when there is a rest.
pub fn top_kernels(trace: &Trace, scope: &Scope, n: usize) -> Vec<KernelStats> {
    let rows = durations_by_name(trace, scope, scope.gpu.iter().copied());
    let total = total(&rows);
    let mut out: Vec<KernelStats> = rows
        .iter()
        .take(n)
        .map(|row| named_stats(trace, row, total))
        .collect();
    let rest: Vec<i64> = rows
        .iter()
        .skip(n)
        .flat_map(|(_, d)| d.iter().copied())
        .collect();
    if !rest.is_empty() {
        out.push(stats("others", None, &rest, total));
    }
    out
}

/// Every name of the GPU work that `keep` accepts, largest total first; shares of their
/// total.
pub fn kernel_stats(
    trace: &Trace,
    scope: &Scope,
    keep: impl Fn(usize) -> bool,
) -> Vec<KernelStats> {
    let gpu = scope.gpu.iter().copied().filter(|&i| keep(i));
    stats_by_name(trace, scope, gpu, KernelType::of)
}

/// Every name of the user annotations (`record_function` ranges) of `scope` of `kind` —
/// as the CPU ran them ([`Kind::UserAnnotation`]) or as a GPU stream did
/// ([`Kind::GpuUserAnnotation`]) — largest total first; shares of their total.
pub fn annotation_stats(trace: &Trace, scope: &Scope, kind: Kind) -> Vec<KernelStats> {
    let e = &trace.events;
    let all = scope.cpu.iter().chain(&scope.gpu).copied();
    stats_by_name(trace, scope, all.filter(|&i| e.kind[i] == kind), |_| None)
}

/// The statistics of `events` by name, largest total first, each typed by `type_of` its
/// name; shares of their total.
fn stats_by_name<T: Into<Option<KernelType>>>(
    trace: &Trace,
    scope: &Scope,
    events: impl IntoIterator<Item = usize>,
    type_of: impl Fn(&str) -> T,
) -> Vec<KernelStats> {
    let rows = durations_by_name(trace, scope, events);
    let total = total(&rows);
    rows.iter()
        .map(|(name, durations)| {
            let name = trace.names.get(*name);
            stats(name, type_of(name).into(), durations, total)
        })
        .collect()
}

fn stats(
    name: &str,
    kernel_type: Option<KernelType>,
    durations: &[i64],
    total: i64,
) -> KernelStats {
    let n = durations.len() as f64;
    let sum: i64 = durations.iter().sum();
    let mean = sum as f64 / n;
    let variance = if durations.len() > 1 {
        durations
            .iter()
            .map(|d| (*d as f64 - mean).powi(2))
            .sum::<f64>()
            / (n - 1.0)
    } else {
        0.0
    };
    let us = |ns: f64| ns / 1000.0;
    KernelStats {
        name: name.to_owned(),
        kernel_type,
        count: durations.len() as u64,
        sum_us: us(sum as f64),
        mean_us: us(mean),
        min_us: us(*durations.iter().min().unwrap_or(&0) as f64),
        max_us: us(*durations.iter().max().unwrap_or(&0) as f64),
        stddev_us: us(variance.sqrt()),
        percentage: if total > 0 {
            sum as f64 * 100.0 / total as f64
        } else {
            0.0
        },
    }
}

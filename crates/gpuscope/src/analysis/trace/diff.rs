//! Two traces compared (`gpuscope trace A --diff B`): GPU kernels and CPU operators by
//! name, those only in one of them, and those whose time changed the most.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::scope::Scope;
use crate::model::trace::{Kind, Trace};

/// Changes smaller than this, µs, are not listed as slower or faster…
pub const MIN_CHANGE_US: f64 = 10.0;
/// …nor those smaller than this share of the first trace's time, percent.
pub const MIN_CHANGE_PERCENT: f64 = 5.0;
/// Rows per list.
const ROWS: usize = 15;

/// One name's time in both traces.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Change {
    /// The kernel or operator.
    pub name: String,
    /// Runs and total time in the first trace, µs.
    pub count_a: u64,
    /// Total time in the first trace, µs.
    pub total_a_us: f64,
    /// Runs in the second trace.
    pub count_b: u64,
    /// Total time in the second trace, µs.
    pub total_b_us: f64,
    /// Second less first, µs.
    pub change_us: f64,
}

/// The differences of one kind of event.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Differences {
    /// Only in the second trace, most time first.
    pub added: Vec<Change>,
    /// Only in the first trace, most time first.
    pub removed: Vec<Change>,
    /// In both, more time in the second, most change first.
    pub slower: Vec<Change>,
    /// In both, less time in the second, most change first.
    pub faster: Vec<Change>,
    /// Total time of the kind in each trace, µs.
    pub total_a_us: f64,
    /// Total time of the kind in the second trace, µs.
    pub total_b_us: f64,
}

/// The two traces' differences.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TraceDiff {
    /// GPU kernels, copies and memsets.
    pub kernels: Differences,
    /// CPU operators (total time).
    pub operators: Differences,
}

/// How `b` differs from `a`, each over the events of its scope.
pub fn diff(a: (&Trace, &Scope), b: (&Trace, &Scope)) -> TraceDiff {
    TraceDiff {
        kernels: differences(
            &totals(a.0, &a.1.gpu, |_| true),
            &totals(b.0, &b.1.gpu, |_| true),
        ),
        operators: differences(
            &totals(a.0, &a.1.cpu, |k| k == Kind::CpuOp),
            &totals(b.0, &b.1.cpu, |k| k == Kind::CpuOp),
        ),
    }
}

/// Count and total ns by name of the events `indices` of the kinds `keep` accepts.
fn totals(
    trace: &Trace,
    indices: &[usize],
    keep: impl Fn(Kind) -> bool,
) -> BTreeMap<String, (u64, i64)> {
    let e = &trace.events;
    let mut out: BTreeMap<String, (u64, i64)> = BTreeMap::new();
    for &i in indices {
        if keep(e.kind[i]) {
            let entry = out
                .entry(trace.names.get(e.name[i]).to_owned())
                .or_default();
            entry.0 += 1;
            entry.1 += e.dur[i];
        }
    }
    out
}

fn significant(c: &Change) -> bool {
    c.change_us.abs() >= MIN_CHANGE_US
        && c.change_us.abs() >= c.total_a_us * MIN_CHANGE_PERCENT / 100.0
}

fn differences(a: &BTreeMap<String, (u64, i64)>, b: &BTreeMap<String, (u64, i64)>) -> Differences {
    let names: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    let mut changes: Vec<Change> = names
        .into_iter()
        .map(|name| {
            let (ca, ta) = a.get(name).copied().unwrap_or_default();
            let (cb, tb) = b.get(name).copied().unwrap_or_default();
            Change {
                name: name.clone(),
                count_a: ca,
                total_a_us: ta as f64 / 1000.0,
                count_b: cb,
                total_b_us: tb as f64 / 1000.0,
                change_us: (tb - ta) as f64 / 1000.0,
            }
        })
        .collect();
    changes.sort_by(|x, y| y.change_us.abs().total_cmp(&x.change_us.abs()));
    let pick = |keep: &dyn Fn(&Change) -> bool| -> Vec<Change> {
        changes
            .iter()
            .filter(|c| keep(c))
            .take(ROWS)
            .cloned()
            .collect()
    };
    let sum =
        |m: &BTreeMap<String, (u64, i64)>| m.values().map(|v| v.1).sum::<i64>() as f64 / 1000.0;
    Differences {
        added: pick(&|c| c.count_a == 0),
        removed: pick(&|c| c.count_b == 0),
        slower: pick(&|c| c.count_a > 0 && c.count_b > 0 && significant(c) && c.change_us > 0.0),
        faster: pick(&|c| c.count_a > 0 && c.count_b > 0 && significant(c) && c.change_us < 0.0),
        total_a_us: sum(a),
        total_b_us: sum(b),
    }
}

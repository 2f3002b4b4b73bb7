//! `gpuscope compare BASE NEW`: two runs side by side, rank by rank, and the `--fail-on`
//! gate over them. Every figure comes from the analysis that already computes it for one
//! run (the allocator verdict's peaks, the leak window, the profiler steps, the snapshot's
//! peak by site); this module pairs them up and judges the change ([`gate`]).

pub mod checks;
pub mod gate;
pub mod memory;
pub mod sites;
pub mod timing;

use std::collections::{BTreeMap, BTreeSet};

use self::checks::findings;
use self::memory::{memory_figures, MemoryFigures};
use self::timing::{common_source, step_times, throughput, StepTimes};
use crate::analysis::report::allocator_verdict::fragmentation;
use crate::model::compare::{
    Bytes, Check, CheckOutcome, CheckPair, Pair, RankFigures, Rule, RunComparison, Side,
};
use crate::model::memory::RankRecords;
use crate::model::run::RunRead;

/// One rank of one run, measured.
struct RankSide {
    memory: MemoryFigures,
    steps: StepTimes,
    throughput: Option<f64>,
    findings: Vec<Option<CheckOutcome>>,
}

fn measure(run: &RunRead, rank: &RankRecords) -> RankSide {
    let allocator = fragmentation(&rank.records, &rank.ooms);
    RankSide {
        memory: memory_figures(&rank.records, allocator.as_ref()),
        steps: step_times(&rank.records, &run.traces, rank.rank),
        throughput: throughput(&rank.records),
        findings: findings(rank, allocator.as_ref()),
    }
}

/// The ranks of `run` with records, measured, by rank.
fn measured(run: &RunRead) -> BTreeMap<u32, RankSide> {
    run.ranks
        .iter()
        .filter(|r| !r.records.is_empty())
        .map(|r| (r.rank, measure(run, r)))
        .collect()
}

fn side(run: &RunRead) -> Side {
    let with_records = || run.ranks.iter().filter(|r| !r.records.is_empty());
    Side {
        path: run.path.clone(),
        ranks: with_records().map(|r| r.rank).collect(),
        records: with_records().map(|r| r.records.len()).sum(),
        traces: run.traces.iter().map(|t| t.path.clone()).collect(),
        sections: with_records().any(|r| r.records.iter().any(|rec| !rec.sections.is_empty())),
        snapshot: sites::compared(run).map(|f| f.path.clone()),
    }
}

/// `base` and `new` compared, judged by `rules` (none: the comparison alone).
pub fn compare_runs(base: &RunRead, new: &RunRead, rules: &[Rule]) -> RunComparison {
    let (b, n) = (measured(base), measured(new));
    let step_source = common_source(b.values().map(|s| &s.steps), n.values().map(|s| &s.steps));
    let ranks: BTreeSet<u32> = b.keys().chain(n.keys()).copied().collect();
    let ranks: Vec<RankFigures> = ranks
        .into_iter()
        .map(|rank| {
            let (b, n) = (b.get(&rank), n.get(&rank));
            let bytes = |side: Option<&RankSide>, f: fn(&MemoryFigures) -> Option<u64>| {
                side.and_then(|s| f(&s.memory)).map(Bytes)
            };
            let memory = |f: fn(&MemoryFigures) -> Option<u64>| Pair::of(bytes(b, f), bytes(n, f));
            let categories: BTreeSet<&String> = [b, n]
                .into_iter()
                .flatten()
                .flat_map(|s| s.memory.steady_categories_bytes.keys())
                .collect();
            let step =
                |side: Option<&RankSide>| side.and_then(|s| s.steps.get(&step_source?).copied());
            RankFigures {
                rank,
                peak_allocated_bytes: memory(|m| m.peak_allocated_bytes),
                peak_reserved_bytes: memory(|m| m.peak_reserved_bytes),
                peak_tensor_bytes: memory(|m| Some(m.peak_tensor_bytes)),
                steady_categories_bytes: categories
                    .into_iter()
                    .map(|c| {
                        let of = |side: Option<&RankSide>| {
                            side.and_then(|s| s.memory.steady_categories_bytes.get(c))
                                .copied()
                                .map(Bytes)
                        };
                        (c.clone(), Pair::of(of(b), of(n)))
                    })
                    .collect(),
                step_time_us: Pair::of(step(b), step(n)),
                throughput_iterations_per_s: Pair::of(
                    b.and_then(|s| s.throughput),
                    n.and_then(|s| s.throughput),
                ),
                checks: Check::ALL
                    .iter()
                    .enumerate()
                    .map(|(i, &check)| {
                        let of = |side: Option<&RankSide>| side.and_then(|s| s.findings[i].clone());
                        CheckPair {
                            check,
                            base: of(b),
                            new: of(n),
                        }
                    })
                    .collect(),
            }
        })
        .collect();
    let (regressions, unchecked) = gate::judge(rules, &ranks, step_source);
    RunComparison {
        base: side(base),
        new: side(new),
        step_source,
        peak_sites: sites::peak_sites(sites::compared(base), sites::compared(new)),
        ranks,
        fail_on: rules.to_vec(),
        regressions,
        unchecked,
    }
}
